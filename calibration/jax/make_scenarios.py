#!/usr/bin/env python3
"""Writes one racksim scenario per measured JAX training step (the reference rows in
tests/data/reference/h200/jax_training_steps.jsonl, a copy of the shared reference's, and ours in calibration/data/h200-2026-11-29/
jax_steps.jsonl) and the suite scenarios/validation/h200.yaml over them; likewise the steps measured on an H100
(calibration/data/h100-2026-12-05-jax-steps) into scenarios/validation/h100/ and h100.yaml, with each step's HLO replay.

    python3 calibration/jax/make_scenarios.py

The mapping is mechanical: the model fields come from the row, JAX's remat policy maps to
racksim's recompute policy, XLA's attention ("xla" = scores materialized, "cudnn" = a flash
kernel) to training.attention, and every step runs JAX's conventions (fp32 parameters; buffer
donation only where the row says `donate`)."""
import json, os, sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def source(origin, cite):
    """A measured-steps file: its origin, its path, and the repository path each scenario cites (the path's own)."""
    return (origin, os.path.join(ROOT, *cite.split("/")), cite)


SOURCES = [
    source("reference", "tests/data/reference/h200/jax_training_steps.jsonl"),
    source("ours", "calibration/data/h200-2026-11-29/jax_steps.jsonl"),
    source("ours", "calibration/data/h200-2026-11-29-runtime/jax_steps.jsonl"),
    source("ours", "calibration/data/h200-2026-11-29-gqa/jax_steps.jsonl"),
    source("ours", "calibration/data/h200-2026-11-29-extra/jax_steps.jsonl"),
    source("ours", "calibration/data/h200-2026-12-04-llama7b/jax_steps.jsonl"),
    # The same layer with one parameter array per layer (and, first, the stacked batch-2 step again: a repeat of a row
    # above, skipped here, kept in the data as a check of its reproducibility).
    source("ours", "calibration/data/h200-2026-12-07-llama7b-per-layer/jax_steps.jsonl"),
]
POLICY = {
    "none": "none",
    "full": "full",
    "dots": "save_dots",
    # minimal_flash as train_step.py runs it: the attention output is named, but jax.nn.dot_product_attention's
    # residuals (its softmax statistics) are not, so XLA recomputes the flash forward in the backward as under
    # `dots` (the compiled l7b16_* steps run it twice). Transformer Engine names its residuals "context" too,
    # which is why MaxText's minimal_flash with TE attention is racksim's save list with `attn`.
    "dots_flash": "save_dots",
    "offload": "{save: [], offload: [qkv, attn, attn_out, mlp_gate, mlp_up, mlp_out]}",
    # MaxText's save_dot_except_mlpwi as racksim import maxtext writes it (the mlpwo output is never read by the
    # backward, so XLA drops it; the layer's output is the next layer's saved input).
    "save_dot_except_mlpwi": "{save: [qkv, attn_out]}",
}
# The same steps measured on the lent H100 (80 GB): the Hopper the at-scale JAX rows ran on, at the H200's
# calibration carried by docs/calibration.md's transfer rule. Its suite holds the HLO replays too.
SOURCES_H100 = [
    source("ours", "calibration/data/h100-2026-12-05-jax-steps/jax_steps.jsonl"),
    source("ours", "calibration/data/h100-2026-12-06-jax-fp8/jax_steps.jsonl"),
    source("ours", "calibration/data/h100-2026-12-07-llama7b-per-layer/jax_steps.jsonl"),
]
# (folder and suite name, preset, the GPU in words, sources, whether the suite replays each row's HLO too)
TARGETS = [
    ("h200", "h200-sxm", "H200", SOURCES, False),
    ("h100", "h100-sxm", "H100", SOURCES_H100, True),
]


# An FP8 row (train_step.py's fp8: flax's direct FP8 dot, MaxText's fp8_gpu, as XLA lowers it).
FP8_LINES = ("fp8                  # flax Fp8DirectDotGeneralOp (MaxText fp8_gpu) on every layer matmul\n"
             "  fp8_casts: xla                 # its casts and transposes as XLA lowers it")


def scenario(row, origin, cite, label, preset, gpu):
    attention = "flash" if row.get("attention", "xla") == "cudnn" else "materialized"
    return f"""# Measured JAX training step `{row['name']}` ({origin} row of {cite}): JAX {row.get('jax', '0.11.2')} on one
# {gpu}; {row['step_s_median']:.4f} s median step, {row['peak_bytes_in_use']} B peak_bytes_in_use.
# Written by calibration/jax/make_scenarios.py from the row; do not edit by hand.
name: {label} {origin} {row['name']}
system:
  preset: {preset}
  gpus: 1
  calibration: h200
model:
  layers: {row['L']}
  hidden: {row['D']}
  ffn_hidden: {row['F']}
  heads: {row['H']}
  kv_heads: {row.get('KV', row['H'])}
  vocab: {row['V']}
  ffn: swiglu
  tied_embeddings: false
training:
  seq_len: {row['S']}
  global_batch: {row['B']}
  micro_batch: {row['B']}
  precision: {FP8_LINES if row.get('fp8') else 'bf16'}
  parallelism: {{tp: 1, pp: 1, cp: 1, dp: 1}}
  optimizer_sharding: none
  recompute: {POLICY[row['policy']]}
  attention: {attention}
  framework: jax
  donate_state: {'true' if row.get('donate', False) else 'false'}
  scan_layers: {'true' if row.get('scan', True) else 'false'}
  cuda_graphs: true
""" + ("" if row.get("scan", True) else
       "  stacked_layer_params: false    # one array per layer (train_step.py per_layer)\n" if row.get("per_layer") else
       "  stacked_layer_params: true     # train_step.py loops over one stacked tree (p['layers'][w][i])\n") + ("  fused_qkv: false               # three q/k/v projections (train_step.py --split-qkv)\n" if row.get("split_qkv") else "") + (f"  xla_client_mem_fraction: {row['xla_python_client_mem_fraction']}   # the run's XLA_PYTHON_CLIENT_MEM_FRACTION\n"
       if row.get("xla_python_client_mem_fraction") else "")


def write_target(label, preset, gpu, sources, with_replays):
    out = os.path.join(ROOT, "scenarios", "validation", label)
    os.makedirs(out, exist_ok=True)
    cases = []
    written = set()
    for origin, path, cite in sources:
        for line in open(path):
            row = json.loads(line)
            if "error" in row or "step_s_median" not in row:
                continue
            measured = f"{{step_time_s: {row['step_s_median']:.6g}, peak_memory_bytes: {row['peak_bytes_in_use']}}}"
            fname = f"{origin}-{row['name']}.yaml"
            if fname in written:  # a repeated measurement of a row already in the suite
                continue
            written.add(fname)
            with open(os.path.join(out, fname), "w") as f:
                f.write(scenario(row, origin, cite, label, preset, gpu))
            cases.append(f"""  - name: "{origin} {row['name']}"
    scenario: {label}/{fname}
    measured: {measured}
    tolerance: 0.10""")
            if with_replays:
                hlo = os.path.join(os.path.dirname(cite), row["hlo_file"])
                cases.append(f"""  - name: "{origin} {row['name']} (HLO replay)"
    replay: ../../{hlo}
    system: {preset}
    set: {{system.calibration: h200}}
    gpus: 1
    measured: {measured}
    tolerance: 0.10""")
    if with_replays:
        header = (f"# Scenario-level predictions of the measured JAX training steps on the {gpu}, calibrated, and the\n"
                  "# replay of each step's optimized HLO. Generated by calibration/jax/make_scenarios.py.\n")
    else:
        header = (f"# Scenario-level predictions of the measured JAX training steps on the {gpu}, calibrated.\n"
                  "# Generated by calibration/jax/make_scenarios.py. The HLO-level replay of the same steps is\n"
                  "# scenarios/validation/hlo.yaml.\n")
    with open(os.path.join(ROOT, "scenarios", "validation", f"{label}.yaml"), "w") as f:
        f.write(header + "cases:\n" + "\n".join(cases) + "\n")
    print(f"{label}: {len(cases)} cases")


def main():
    for target in TARGETS:
        write_target(*target)


if __name__ == "__main__":
    sys.exit(main())
