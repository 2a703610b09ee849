#!/usr/bin/env python3
"""Derive the `measured:` values of scenarios/validation/at_scale.yaml from the published figures.

Standard library only. Run it to print, for every row, the published figure, its source, the
FLOP-counting convention of that source (with the formula and its inputs), and the derived
tokens/s per GPU or step time that the suite compares against:

    python3 scenarios/validation/at_scale/derive_measured.py

A published TFLOP/s per GPU is a *counted* quantity: tokens/s/GPU = TFLOP/s x 1e12 / F, where F
is the FLOPs per token that the source's own counter assigns. F is therefore computed here with
the counter that produced the figure (not racksim's), and the counter is cited per row. Where a
source publishes step time or sequences/s, that is used directly (convention-free).

All published figures and layouts are from /work/shared/reference/at_scale_measurements.md
(sections cited per row); the counters are quoted from the repositories named in each function.
"""

# ----------------------------------------------------------------------------------------------
# FLOP counters, each as the source's code computes it (per token, training = fwd + bwd).
# ----------------------------------------------------------------------------------------------


def megatron_2024(L, h, a, g, kv_channels, ffn, V, s, topk=1, swiglu=False):
    """Megatron-LM `num_floating_point_operations` at f2e5db40 (2024-07-15, the commit that added
    the weak-scaling table; megatron/training/training.py lines 73-107):
      12 B s L h^2 [ (1 + g/a + s/h) (q/h) + (ffn/h) k gated + V / (2 L h) ]
    full (non-causal) s^2 attention, fwd+bwd = 3 x fwd, no recompute FLOPs. Per token (B s = 1)."""
    q_over_h = kv_channels * a / h
    gated = 1.5 if swiglu else 1.0
    return 12 * L * h * h * ((1 + g / a + s / h) * q_over_h + (ffn / h) * topk * gated + V / (2 * L * h))


def megatron_2025(L, h, a, g, kv_channels, V, s, dense_layers, dense_ffn, moe_layers, moe_ffn, topk,
                  shared_ffn=0, swiglu=True):
    """Megatron-LM `num_floating_point_operations`, transformer path, after 8873b55d (2025-03-06,
    'Fixes in number of floating-point operation estimates for MoE and attention layer'); quoted
    from NVIDIA/Megatron-LM@1e057005 (2025-05-24) megatron/training/training.py lines 283-383
    (same result for these models at main HEAD d98e8a64):
      expansion = 12
      attn  = 12 L h^2 (1 + g/a + s/(2h)) (q/h)          causal: half of s^2 attention
      mlp   = 12 L h (ffn_dense*gated*dense/L + ffn_moe*k*gated*moe/L + shared*gated*moe/L)
      logit = 6 h V
    Per token; only the top-k routed experts are counted."""
    q_over_h = kv_channels * a / h
    gated = 1.5 if swiglu else 1.0
    attn = 12 * L * h * h * (1 + g / a + s / h / 2) * q_over_h
    mlp = 12 * h * (dense_ffn * gated * dense_layers + moe_ffn * topk * gated * moe_layers
                    + shared_ffn * gated * moe_layers)
    logit = 6 * h * V
    return attn + mlp + logit


def megatron_2025_mla(L, h, a, V, s, q_lora, kv_lora, qk_head, qk_rope, v_head, dense_layers,
                      dense_ffn, moe_layers, moe_ffn, topk, shared_ffn, mtp_layers=0):
    """Same counter, multi-latent-attention branch (NVIDIA/Megatron-LM@1e057005 training.py lines
    296-351): per layer 6 x [ q_lora (h + a (qk+rope) + 1) + kv_lora (h + a (qk+v) + 1)
    + h rope + a v h + s a (qk+rope)/2 + s a v/2 ], plus the MLP/expert and logit terms above."""
    attn = 6 * L * (q_lora * (h + a * (qk_head + qk_rope) + 1)
                    + kv_lora * (h + a * (qk_head + v_head) + 1)
                    + h * qk_rope + a * v_head * h
                    + s * a * (qk_head + qk_rope) / 2 + s * a * v_head / 2)
    mlp = 12 * h * (dense_ffn * 1.5 * dense_layers + moe_ffn * topk * 1.5 * moe_layers
                    + shared_ffn * 1.5 * moe_layers)
    mtp = 6 * mtp_layers * (3 * h + 2 * h * h)
    logit = 6 * h * V * (mtp_layers + 1)
    return attn + mlp + mtp + logit


def palm_appendix_b(n_matmul, L, q_width, s, causal=False):
    """PaLM (arXiv 2204.02311) Appendix B model FLOPs: 6 N + 12 L H Q T per token (non-causal
    attention). N = parameters that take part in matmuls (the input-embedding lookup is not a
    matmul). `causal=True` gives the variant with the attention term halved."""
    return 6 * n_matmul + (6 if causal else 12) * L * q_width * s


def maxtext_2024_04(n_params, L, heads, head_dim, s):
    """MaxText `calculate_tflops_training_per_device` at AI-Hypercomputer/maxtext@efb6d9e4
    (2024-04-09, the commit that added the A3 Llama2-7B README; MaxText/maxtext_utils.py lines
    94-108): 6 N s B + causal attention, where noncausal = 12 heads L head_dim s^2 B and causal =
    noncausal / 2. N = all parameters of the pytree (both embedding tables). Per token.
    (The non-causal matmul-only counter replaced it on 2024-05-08, 353fb837; the causal halving
    returned on 2025-07-18, a4c01726 / PR #1988.)"""
    return 6 * n_params + 6 * heads * L * head_dim * s


# ----------------------------------------------------------------------------------------------
# Model constants (cited in workloads/models/*.yaml).
# ----------------------------------------------------------------------------------------------

def llama3_405b_matmul_params():
    L, h, ffn, heads, kv, hd, V = 126, 16384, 53248, 128, 8, 128, 128256
    per_layer = h * heads * hd + 2 * h * kv * hd + heads * hd * h + 3 * h * ffn
    return L * per_layer + V * h  # + output projection; input embedding is a lookup


def llama2_7b_all_params():
    L, h, ffn, V = 32, 4096, 11008, 32000
    per_layer = 4 * h * h + 3 * h * ffn + 2 * h
    return L * per_layer + 2 * V * h + h


def deepseek_v3_gb200_flops_per_token():
    """Megatron's counter (MLA branch) for DeepSeek-V3 at seq 4096, no MTP: the GB200 rows and the
    optimization ladder (ladder/ladder.py)."""
    return megatron_2025_mla(L=61, h=7168, a=128, V=129280, s=4096, q_lora=1536, kv_lora=512, qk_head=128,
                             qk_rope=64, v_head=128, dense_layers=3, dense_ffn=18432, moe_layers=58, moe_ffn=2048,
                             topk=8, shared_ffn=2048)


ROWS = []


def row(name, published, source, convention, formula, inputs, field, value, note=""):
    ROWS.append(dict(name=name, published=published, source=source, convention=convention,
                     formula=formula, inputs=inputs, field=field, value=value, note=note))


def derive():
    # --- Megatron-LM README weak-scaling table (at_scale_measurements.md sec. 1a) -------------
    table = [  # name, heads, hidden, layers, GPUs, GBS, TFLOP/s/GPU
        ("1.7B", 16, 2048, 24, 48, 192, 408.8), ("7.1B", 32, 4096, 30, 96, 192, 465.9),
        ("16B", 48, 6144, 32, 192, 192, 489.1), ("32B", 56, 7168, 48, 384, 192, 459.6),
        ("70B", 64, 8192, 84, 768, 384, 419.7), ("119B", 80, 10240, 92, 1536, 768, 420.5),
        ("177B", 96, 12288, 96, 2304, 1152, 432.8), ("314B", 128, 16384, 96, 3072, 1536, 474.4),
        ("462B", 144, 18432, 112, 6144, 3072, 459.9)]
    V, s = 131072, 4096
    for name, a, h, L, gpus, gbs, tf in table:
        F = megatron_2024(L, h, a, a, h // a, 4 * h, V, s)
        tps = tf * 1e12 / F
        row(f"megatron-gpt-{name.lower()}", f"{tf} TFLOP/s/GPU", "Megatron-LM README model table (f2e5db40), sec. 1a",
            "Megatron counter at f2e5db40 (non-causal attention)",
            "12 L h^2 [(1 + g/a + s/h)(q/h) + 4 + V/(2 L h)]",
            dict(L=L, h=h, a=a, g=a, s=s, V=V, F_per_token=F),
            "tokens_per_s_per_gpu", tps,
            f"step {gbs * s / (gpus * tps):.3f} s at GBS {gbs} on {gpus} GPUs")

    # --- Llama 3 405B, Table 4 (sec. 3) ------------------------------------------------------
    n_mm = llama3_405b_matmul_params()
    for name, gpus, s, tf in (("llama3-405b-8k-8192gpu", 8192, 8192, 430.0),
                              ("llama3-405b-8k-16384gpu", 16384, 8192, 400.0),
                              ("llama3-405b-131k-cp16-16384gpu", 16384, 131072, 380.0)):
        F = palm_appendix_b(n_mm, 126, 128 * 128, s)
        Fc = palm_appendix_b(n_mm, 126, 128 * 128, s, causal=True)
        tps = tf * 1e12 / F
        row(name, f"{tf} TFLOP/s/GPU", "Llama 3 paper (arXiv 2407.21783) Table 4, sec. 3",
            "not stated by the paper; PaLM App. B (6N + 12 L H Q T, non-causal) chosen",
            "6 N_matmul + 12 L (heads x head_dim) s", dict(N_matmul=n_mm, L=126, q_width=16384, s=s, F_per_token=F),
            "tokens_per_s_per_gpu", tps,
            f"causal-attention variant would give {tf * 1e12 / Fc:.1f} tokens/s/GPU ({(tf * 1e12 / Fc) / tps - 1:+.1%}); "
            f"16M-token batch -> step {16 * 2**20 / (gpus * tps):.2f} s")

    # --- Mixtral 8x22B on 128 H100 (sec. 1b, ModelZoo) ----------------------------------------
    F = megatron_2025(L=56, h=6144, a=48, g=8, kv_channels=128, V=32000, s=4096, dense_layers=0,
                      dense_ffn=16384, moe_layers=56, moe_ffn=16384, topk=2)
    row("mixtral-8x22b-128xh100", "~445 TFLOP/s/GPU (dropless, BF16)",
        "yanring/Megatron-MoE-ModelZoo@e8650517 best_practice/mixtral/run_mixtral_8x22B.sh comment, sec. 1b",
        "Megatron counter after 8873b55d (causal, top-k experts); the figure dates from 2025-07..12",
        "12 L h^2 (1 + g/a + s/2h)(q/h) + 12 L h ffn k 1.5 + 6 h V",
        dict(L=56, h=6144, a=48, g=8, q_over_h=1.0, ffn=16384, k=2, V_padded=32000, s=4096, F_per_token=F),
        "tokens_per_s_per_gpu", 445e12 / F, f"step {256 * 4096 / (128 * 445e12 / F):.2f} s at GBS 256")

    # --- Qwen3-235B-A22B on 256 H100: published step times (sec. 1b) -------------------------
    Fq = megatron_2025(L=94, h=4096, a=64, g=4, kv_channels=128, V=151936, s=4096, dense_layers=0,
                       dense_ffn=12288, moe_layers=94, moe_ffn=1536, topk=8)
    for name, step, tf in (("qwen3-235b-h100-ep8-fsdp", 17.6, 276), ("qwen3-235b-h100-tp4-pp8-ep8", 29.0, 167),
                           ("qwen3-235b-h100-tp2-pp8-ep32", 19.7, 245), ("qwen3-235b-h100-tp2-pp8-ep32-a2aoverlap", 17.6, 276),
                           ("qwen3-235b-h100-tp2-pp32-ep8-a2a", 24.2, 200)):
        implied = 2048 * 4096 * Fq / (256 * step) / 1e12
        row(name, f"step {step} s ({tf} TFLOP/s/GPU)", "ModelZoo best_practice/qwen3/readme.md H100 table, sec. 1b",
            "convention-free: published step time", "step_time_s as published",
            dict(GBS=2048, s=4096, GPUs=256), "step_time_s", step,
            f"= {2048 * 4096 / (256 * step):.1f} tokens/s/GPU; the 2025 counter would report {implied:.0f} TFLOP/s "
            f"(published {tf}: consistency check of the counter)")

    # --- Qwen3-235B-A22B on 256 H100, the script comment "H100 config, 320 TFLOPS" (sec. 1b) ----
    # ModelZoo@1ed4179f best_practice/qwen3/run_h100_235b.sh (2026-03-09). Megatron-LM main@932b7674 (2026-03-07; the counter
    # is unchanged through the script's commit) counts this model with the same formula as @1e057005 (no MTP, no latent experts, no linear
    # attention; padded vocabulary 151,936, a multiple of 1187 x tp 2).
    row("qwen3-235b-h100-tp2-pp8-ep32-a2aoverlap-graphs", "320 TFLOP/s/GPU",
        "ModelZoo best_practice/qwen3/run_h100_235b.sh comment, sec. 1b",
        "Megatron counter after 8873b55d (causal, top-k experts), unchanged at main@932b7674",
        "12 L h^2 (1 + g/a + s/2h)(q/h) + 12 L h ffn_moe k 1.5 + 6 h V",
        dict(L=94, h=4096, s=4096, GBS=2048, GPUs=256, F_per_token=Fq), "step_time_s",
        2048 * 4096 * Fq / (256 * 320e12), f"= {320e12 / Fq:.1f} tokens/s/GPU")

    # --- Mixtral 8x22B, forced balance and blockwise FP8 (same script) -----------------------
    for name, tf, what in (("mixtral-8x22b-128xh100-forcebal", 465e12, "~465 TFLOP/s/GPU (forced load balance, BF16)"),
                           ("mixtral-8x22b-128xh100-fp8", 560e12, "~560 TFLOP/s/GPU (blockwise FP8, forced balance)"),
                           ("mixtral-8x22b-128xh100-tokendrop", 470e12, "~470 TFLOP/s/GPU (token drop: capacity 1.0, padded, BF16)")):
        row(name, what, "ModelZoo best_practice/mixtral/run_mixtral_8x22B.sh comments, sec. 1b",
            "Megatron counter after 8873b55d (causal, top-k experts)", "as mixtral-8x22b-128xh100",
            dict(F_per_token=F), "tokens_per_s_per_gpu", tf / F)

    # --- Qwen3-235B-A22B long context on 256 H100, forced balance (sec. 1b) -------------------
    for seq, tp, cp, tf in ((16384, 4, 1, 295), (32768, 4, 2, 335), (65536, 4, 4, 368), (131072, 4, 8, 389)):
        Fl = megatron_2025(L=94, h=4096, a=64, g=4, kv_channels=128, V=151936, s=seq, dense_layers=0,
                           dense_ffn=12288, moe_layers=94, moe_ffn=1536, topk=8)
        tps = tf * 1e12 / Fl
        row(f"qwen3-235b-h100-{seq // 1024}k-cp{cp}", f"{tf} TFLOP/s/GPU (forced balance)",
            "ModelZoo best_practice/qwen3/readme.md, H100 Long Context table, sec. 1b",
            "Megatron counter after 8873b55d (causal, top-k experts)",
            "12 L h^2 (1 + g/a + s/2h)(q/h) + 12 L h ffn_moe k 1.5 + 6 h V",
            dict(L=94, h=4096, s=seq, F_per_token=Fl), "tokens_per_s_per_gpu", tps,
            f"step {256 * seq / (256 * tps):.2f} s at GBS 256 on 256 GPUs")

    # --- Qwen3-235B-A22B on 256 GB200, BF16 (sec. 1b) -----------------------------------------
    row("qwen3-235b-gb200-bf16", "750 TFLOP/s/GPU", "ModelZoo best_practice/qwen3/readme.md GB200 table, sec. 1b",
        "Megatron counter after 8873b55d (causal, top-k experts)",
        "12 L h^2 (1 + g/a + s/2h)(q/h) + 12 L h ffn_moe k 1.5 + 6 h V",
        dict(L=94, h=4096, a=64, g=4, q_over_h=2.0, ffn_moe=1536, k=8, V_padded=151936, s=4096, F_per_token=Fq),
        "tokens_per_s_per_gpu", 750e12 / Fq, f"step {8192 * 4096 / (256 * 750e12 / Fq):.2f} s at GBS 8192")

    # --- Qwen3-235B-A22B on 256 GB200, MXFP8 with activation offloading (sec. 1b) -----------------
    row("qwen3-235b-gb200-mxfp8-offload", "919 TFLOP/s/GPU", "ModelZoo best_practice/qwen3/readme.md GB200 table (MXFP8), sec. 1b",
        "Megatron counter after 8873b55d (causal, top-k experts)", "as qwen3-235b-gb200-bf16",
        dict(F_per_token=Fq), "tokens_per_s_per_gpu", 919e12 / Fq, f"step {3072 * 4096 / (256 * 919e12 / Fq):.2f} s at GBS 3072")

    # --- Qwen3-235B-A22B on 64 GB300, MXFP8 (sec. 1b) ----------------------------------------
    row("qwen3-235b-gb300-mxfp8", "1055 TFLOP/s/GPU", "ModelZoo best_practice/qwen3/readme.md GB300 table, sec. 1b",
        "Megatron counter after 8873b55d (causal, top-k experts)", "as qwen3-235b-gb200-bf16",
        dict(F_per_token=Fq), "tokens_per_s_per_gpu", 1055e12 / Fq, f"step {8192 * 4096 / (64 * 1055e12 / Fq):.2f} s at GBS 8192")

    # --- Qwen3-235B-A22B long context on 128 GB200, MXFP8 (sec. 1b) ---------------------------
    Fg = megatron_2025(L=94, h=4096, a=64, g=4, kv_channels=128, V=151936, s=131072, dense_layers=0,
                       dense_ffn=12288, moe_layers=94, moe_ffn=1536, topk=8)
    row("qwen3-235b-gb200-128k-mxfp8", "1150 TFLOP/s/GPU", "ModelZoo best_practice/qwen3/readme.md GB200 table (long context), sec. 1b",
        "Megatron counter after 8873b55d (causal, top-k experts)", "as qwen3-235b-h100-128k-cp8",
        dict(L=94, h=4096, s=131072, F_per_token=Fg), "tokens_per_s_per_gpu", 1150e12 / Fg,
        f"step {1024 * 131072 / (128 * 1150e12 / Fg):.2f} s at GBS 1024 on 128 GPUs")

    # --- DeepSeek-V3 on 256 GB200 (sec. 1b, Megatron-LM discussion doc) ------------------------
    Fd = deepseek_v3_gb200_flops_per_token()
    for name, tf in (("deepseek-v3-gb200-baseline-a2a", 494.46), ("deepseek-v3-gb200-final-hybridep", 970.01)):
        row(name, f"{tf} TFLOP/s/GPU", "NVIDIA/Megatron-LM@79e8592b docs/discussions/deepseek-v3-gb200-optimization, sec. 3 table",
            "Megatron counter, MLA branch (causal core attention, top-k experts, no MTP: the launch script has no --mtp-num-layers)",
            "MLA attention + 12 h (18432*1.5*3 + (2048*8 + 2048)*1.5*58) + 6 h V",
            dict(L=61, h=7168, heads=128, q_lora=1536, kv_lora=512, qk=128, rope=64, v=128, V_padded=129280, s=4096,
                 F_per_token=Fd),
            "tokens_per_s_per_gpu", tf * 1e12 / Fd, f"step {2048 * 4096 / (256 * tf * 1e12 / Fd):.2f} s at GBS 2048")

    # --- DeepSeek-V3 on 2,048 H800 (sec. 4) ----------------------------------------------------
    tps = 1e12 / (180_000 * 3600)
    row("deepseek-v3-2048xh800", "180K H800-GPU-hours per trillion tokens", "DeepSeek-V3 report (arXiv 2412.19437) sec. 1 / Table 1; README",
        "convention-free (GPU-hours)", "1e12 tokens / (180,000 GPU-h x 3,600 s)", dict(gpu_hours_per_T=180000),
        "tokens_per_s_per_gpu", tps,
        "RUN AVERAGE incl. failures, restarts, batch ramp, evaluation: steady-state throughput is somewhat higher; "
        f"at batch 15,360 x 4,096 this is a step of {15360 * 4096 / (2048 * tps):.1f} s")

    # --- MaxText Llama2-7B on one A3 VM, 8 H100 (sec. 5) ---------------------------------------
    n_all = llama2_7b_all_params()
    Fm = maxtext_2024_04(n_all, 32, 32, 128, 4096)
    row("maxtext-llama2-7b-8xh100", "492 TFLOP/s/chip", "AI-Hypercomputer/maxtext@efb6d9e4 MaxText/configs/a3/llama_2_7b/README.md, sec. 5",
        "MaxText counter at efb6d9e4 (6 N_all + CAUSAL attention; at_scale_measurements.md sec. 5 says non-causal, "
        "but the counter in the repository at the README's commit halves the attention term)",
        "6 N_all + 6 heads L head_dim s", dict(N_all=n_all, L=32, heads=32, head_dim=128, s=4096, F_per_token=Fm),
        "tokens_per_s_per_gpu", 492e12 / Fm,
        f"step {32 * 4096 / (8 * 492e12 / Fm):.3f} s at per-device batch 4 (GBS 32); "
        f"a non-causal counter would give {492e12 / (Fm + 6 * 32 * 32 * 128 * 4096):.0f} tokens/s/GPU")

    # --- MaxText Llama2-7B on 2, 4, 8, 16 A3 VMs (sec. 5): same README, same counter ------------
    # dcn_data_parallelism = #VMs, ici_fsdp 8 (hybrid sharding); per-device batch 4, so GBS = 4 x GPUs.
    for vms, tf in ((2, 422), (4, 407), (8, 409), (16, 375)):
        gpus = 8 * vms
        row(f"maxtext-llama2-7b-{gpus}xh100", f"{tf} TFLOP/s/chip",
            f"AI-Hypercomputer/maxtext@efb6d9e4 MaxText/configs/a3/llama_2_7b/README.md ({vms}vm.sh), sec. 5",
            "MaxText counter at efb6d9e4 (6 N_all + causal attention), as the 1-VM row",
            "6 N_all + 6 heads L head_dim s", dict(N_all=n_all, L=32, heads=32, head_dim=128, s=4096, F_per_token=Fm),
            "tokens_per_s_per_gpu", tf * 1e12 / Fm,
            f"step {4 * gpus * 4096 / (gpus * tf * 1e12 / Fm):.3f} s at per-device batch 4 (GBS {4 * gpus}) on {gpus} GPUs")

    # --- JAX-Toolbox MaxText Llama2-7B on 8 H100 (sec. 5): published step time ---------------
    row("jaxtoolbox-maxtext-llama2-7b-8xh100", "step 0.721 s (22.19 sequences/s)",
        "NVIDIA/JAX-Toolbox@bcbbfa57 docs/frameworks/maxtext/README.md (Configs), sec. 5",
        "convention-free: published step time", "step_time_s as published", dict(GBS=16, s=4096, GPUs=8),
        "step_time_s", 0.721, f"= {16 * 4096 / (8 * 0.721):.0f} tokens/s/GPU")

    # --- Pax GPT-175B on 256 H100, FSDP256, TE BF16 (sec. 5) ------------------------------------
    row("pax-gpt175b-256xh100", "51.00 sequences/s", "NVIDIA/JAX-Toolbox@28603900 rosetta/rosetta/projects/pax/README.md H100 results, sec. 5",
        "convention-free: sequences/s", "step = GBS / (sequences/s); tokens/s/GPU = seq/s x 2048 / 256",
        dict(GBS=1536, s=2048, GPUs=256, seq_per_s=51.0), "step_time_s", 1536 / 51.0,
        f"= {51.0 * 2048 / 256:.1f} tokens/s/GPU")

    row("pax-gpt175b-256xh100-fp8", "84.45 sequences/s", "NVIDIA/JAX-Toolbox@28603900 rosetta/rosetta/projects/pax/README.md H100 results (TE FP8), sec. 5",
        "convention-free: sequences/s", "step = GBS / (sequences/s)",
        dict(GBS=1536, s=2048, GPUs=256, seq_per_s=84.45), "step_time_s", 1536 / 84.45,
        f"= {84.45 * 2048 / 256:.1f} tokens/s/GPU")

    # --- Pax GPT-5B on 256 H100, FSDP256, TE BF16 / FP8, and GPT-126M on 64 H100, DP64 (sec. 5) -------------
    for name, seq_s, what in (("pax-gpt5b-256xh100", 1657.24, "TE BF16"), ("pax-gpt5b-256xh100-fp8", 2374.66, "TE FP8")):
        row(name, f"{seq_s} sequences/s", f"NVIDIA/JAX-Toolbox@28603900 rosetta/rosetta/projects/pax/README.md H100 results ({what}), sec. 5",
            "convention-free: sequences/s", "step = GBS / (sequences/s); tokens/s/GPU = seq/s x 2048 / 256",
            dict(GBS=2048, s=2048, GPUs=256, seq_per_s=seq_s), "step_time_s", 2048 / seq_s,
            f"= {seq_s * 2048 / 256:.1f} tokens/s/GPU")
    row("pax-gpt126m-64xh100", "4709.12 sequences/s", "NVIDIA/JAX-Toolbox@28603900 rosetta/rosetta/projects/pax/README.md H100 results (TE BF16), sec. 5",
        "convention-free: sequences/s", "step = GBS / (sequences/s); tokens/s/GPU = seq/s x 2048 / 64",
        dict(GBS=256, s=2048, GPUs=64, seq_per_s=4709.12), "step_time_s", 256 / 4709.12,
        f"= {4709.12 * 2048 / 64:.1f} tokens/s/GPU")


def main():
    derive()
    for r in ROWS:
        print(f"== {r['name']}")
        print(f"   published : {r['published']}  [{r['source']}]")
        print(f"   convention: {r['convention']}")
        print(f"   formula   : {r['formula']}")
        print("   inputs    : " + ", ".join(f"{k}={v:,.6g}" if isinstance(v, float) else f"{k}={v:,}" if isinstance(v, int) else f"{k}={v}"
                                          for k, v in r["inputs"].items()))
        print(f"   measured  : {r['field']} = {r['value']:.6g}")
        if r["note"]:
            print(f"   note      : {r['note']}")


if __name__ == "__main__":
    main()
