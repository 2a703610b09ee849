#!/usr/bin/env python3
"""Runs Calculon (calculon-ai/calculon, Apache-2.0) on the rows of the at-scale validation suite
and writes scenarios/validation/at_scale_calculon.csv, so that its predictions can be read
beside racksim's on the same rows.

Standard library only. Run it with a Python that can import Calculon (Calculon itself needs
numpy, pandas and psutil; on Debian: apt-get install python3-numpy python3-pandas python3-psutil,
then use /usr/bin/python3):

    /usr/bin/python3 scripts/calculon_side_by_side.py --calculon /tmp/calculon

Nothing of Calculon is copied here. The script writes its own application and execution JSON
files from the row table below, reads Calculon's shipped H100 system file and applies the
changes listed in SYSTEM_CHANGES (none at present; SYSTEM_CHECKS asserts the fields this
comparison relies on), and runs Calculon's own command line (`bin/calculon llm ...`) on them.
Every choice is explained in docs/calculon_side_by_side.md. Measured figures and their FLOP
conventions come from shared/reference/at_scale_measurements.md.
"""

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(REPO, 'scenarios', 'validation', 'at_scale_calculon.csv')

# --------------------------------------------------------------------------------------------
# System: Calculon's shipped H100 description, checked and (if ever needed) changed field by
# field. The shipped file already has 8 GPUs per NVLink domain (450 GB/s per direction,
# hardware_specs.md A3) and 50 GB/s per GPU between nodes (400 Gb/s ConnectX-7, A4), so it is
# used unchanged.
SYSTEM_FILE = os.path.join('systems', 'h100_80g_nvl8.json')
SYSTEM_CHECKS = [  # (path into the JSON, expected value)
    (('networks', 0, 'size'), 8),
    (('networks', 0, 'bandwidth'), 450),
    (('networks', 1, 'bandwidth'), 50),
    (('mem1', 'GiB'), 80),
    (('matrix', 'float16', 'tflops'), 1000),
]
SYSTEM_CHANGES = []  # (path, new value, reason); empty: the shipped file is used as it is
# The shipped file lists float16 and float8 only. BF16 runs use datatype "float16": same 2-byte
# element and, on H100, the same dense Tensor Core peak (989.4 TFLOP/s, hardware_specs.md A1).
DATATYPE = 'float16'
SYSTEM_NETS = {'tp': 0, 'pp': 1, 'dp': 1}  # tier 0 = NVLink (8 GPUs), tier 1 = scale-out

# --------------------------------------------------------------------------------------------
# Rows. Megatron-LM README weak-scaling table (at_scale_measurements.md §1a): GPT, MHA,
# FFN 4h, seq 4096, vocab 131,072, BF16, distributed optimizer, overlapped grad reduce /
# param gather / TP comm. Columns: row, heads, hidden, layers, TP, PP, DP, GBS (sequences),
# published TFLOP/s/GPU.
MLM_ROWS = [
    ('mlm-gpt-1.7b-48xh100', 16, 2048, 24, 1, 1, 48, 192, 408.8),
    ('mlm-gpt-7.1b-96xh100', 32, 4096, 30, 2, 1, 48, 192, 465.9),
    ('mlm-gpt-16b-192xh100', 48, 6144, 32, 4, 1, 48, 192, 489.1),
    ('mlm-gpt-32b-384xh100', 56, 7168, 48, 8, 1, 48, 192, 459.6),
    ('mlm-gpt-70b-768xh100', 64, 8192, 84, 8, 2, 48, 384, 419.7),
    ('mlm-gpt-119b-1536xh100', 80, 10240, 92, 8, 4, 48, 768, 420.5),
    ('mlm-gpt-177b-2304xh100', 96, 12288, 96, 8, 6, 48, 1152, 432.8),
    ('mlm-gpt-314b-3072xh100', 128, 16384, 96, 8, 8, 48, 1536, 474.4),
    ('mlm-gpt-462b-6144xh100', 144, 18432, 112, 8, 16, 48, 3072, 459.9),
]
MLM_SEQ = 4096
MLM_VOCAB = 131072

# Llama 3 405B (at_scale_measurements.md §3, paper Table 4): 126 layers, d 16,384, FFN 53,248
# (SwiGLU), 128 heads, 8 KV heads, vocab 128,256, BF16, 16M tokens per batch.
# Columns: row, GPUs, TP, CP, PP, DP, seq, published TFLOP/s/GPU.
LLAMA = dict(layers=126, hidden=16384, ffn=53248, heads=128, kv_heads=8, vocab=128256)
LLAMA_ROWS = [
    ('llama3-405b-8192xh100', 8192, 8, 1, 16, 64, 8192, 430.0),
    ('llama3-405b-16384xh100', 16384, 8, 1, 16, 128, 8192, 400.0),
    ('llama3-405b-16384xh100-cp16', 16384, 8, 16, 16, 8, 131072, 380.0),
]
LLAMA_TOKENS_PER_BATCH = 16 * 1024 * 1024  # "16M"; 2,048 sequences of 8,192 or 128 of 131,072

# MoE rows: Calculon has no expert layers (its block is attention + one dense MLP), so none of
# these can be expressed. measured: tokens/s/GPU where at_scale_measurements.md gives a step
# time or a derived figure, else None.
MOE_ROWS = [
    ('mixtral-8x22b-128xh100', 128, 'TP2 PP8 VPP7 EP8 MBS1 GBS256 seq4096', None,
     '~445 TFLOP/s/GPU (Megatron-MoE-ModelZoo, §1b); no step time is given and the FLOP '
     'counter version is not pinned, so no tokens/s/GPU is derived'),
    ('qwen3-235b-a22b-256xh100', 256, 'TP2 PP8 VPP4 EP32 MBS1 GBS2048 seq4096 (DeepEP, 1F1B A2A '
     'overlap)', 2048 * 4096 / (17.6 * 256),
     'step 17.6 s, 276 TFLOP/s/GPU (ModelZoo qwen3 readme, §1b); tokens/s/GPU = 2048*4096/(17.6*256)'),
    ('deepseek-v3-2048xh800', 2048, 'PP16 (DualPipe) EP64 ZeRO-1 DP, no TP, FP8', 1543.0,
     'run average from 180K H800-GPU-hours per trillion tokens (§4 [derived]); H800, not H100'),
]

# --------------------------------------------------------------------------------------------
# FLOPs per token used to turn a published TFLOP/s/GPU into tokens/s/GPU.


def megatron_2024_flops_per_token(L, h, heads, kv_heads, ffn, vocab, seq, gated=1.0, topk=1):
    """Megatron's num_floating_point_operations at f2e5db40, divided by B*s: full (non-causal)
    attention, fwd+bwd = 3x fwd, no recompute FLOPs (at_scale_measurements.md §1a)."""
    q_ratio = 1.0  # query projection size / hidden
    return 12 * L * h * h * ((1 + kv_heads / heads + seq / h) * q_ratio
                             + (ffn / h) * topk * gated + vocab / (2 * L * h))


def llama_matmul_params():
    """Matmul parameters of Llama 3 405B: attention (Q, O: h*h; K, V: h*kv*128), SwiGLU MLP
    (3*h*ffn) and the output projection (V*h); the input embedding is a lookup, not a matmul."""
    h, d_head = LLAMA['hidden'], LLAMA['hidden'] // LLAMA['heads']
    attn = 2 * h * h + 2 * h * LLAMA['kv_heads'] * d_head
    mlp = 3 * h * LLAMA['ffn']
    return LLAMA['layers'] * (attn + mlp) + LLAMA['vocab'] * h


def llama_flops_per_token(seq, causal):
    """6*N_matmul + attention scores: 6*L*s*h per token with the causal mask (half of the
    12*L*s*h of full s^2 attention)."""
    attn = (6 if causal else 12) * LLAMA['layers'] * seq * LLAMA['hidden']
    return 6 * llama_matmul_params() + attn


# --------------------------------------------------------------------------------------------
# Calculon inputs.

RECOMPUTE_LADDER = ['none', 'attn_only', 'full']  # first one whose memory fits is taken


def mlm_app(heads, hidden, layers):
    return {'hidden': hidden, 'feedforward': 4 * hidden, 'seq_size': MLM_SEQ,
            'attn_heads': heads, 'attn_size': hidden // heads, 'num_blocks': layers}


def llama_app(seq):
    # SwiGLU (three h x ffn matrices) is written as a two-matrix MLP of width 1.5*ffn = 79,872:
    # same matmul FLOPs and weights, and with fused_activation false the same stored MLP
    # activations (2 x 1.5*ffn = 3*ffn per token, as gate, up and their product).
    return {'hidden': LLAMA['hidden'], 'feedforward': 3 * LLAMA['ffn'] // 2, 'seq_size': seq,
            'attn_heads': LLAMA['heads'], 'attn_size': LLAMA['hidden'] // LLAMA['heads'],
            'num_blocks': LLAMA['layers']}


def execution(gpus, tp, pp, dp, gbs, recompute, interleave, *, attention, tp_overlap,
              ag_redo):
    sp = tp > 1
    return {
        'num_procs': gpus, 'tensor_par': tp, 'pipeline_par': pp, 'data_par': dp,
        'tensor_par_net': SYSTEM_NETS['tp'], 'pipeline_par_net': SYSTEM_NETS['pp'],
        'data_par_net': SYSTEM_NETS['dp'],
        'batch_size': gbs, 'microbatch_size': 1, 'datatype': DATATYPE,
        'fused_activation': False, 'attention_type': attention,
        'activation_recompute': recompute, 'pipeline_interleaving': interleave,
        'optimizer_sharding': dp > 1,
        'tensor_par_comm_type': 'rs_ag' if sp else 'ar',
        'tensor_par_overlap': tp_overlap if tp > 1 else 'none',
        'seq_par_ag_redo': bool(ag_redo and sp and recompute != 'full'),
        'data_par_overlap': dp > 1,
        'weight_offload': False, 'activations_offload': False, 'optimizer_offload': False,
        'training': True,
    }


# --------------------------------------------------------------------------------------------
# Running Calculon.


def get_path(obj, path):
    for key in path:
        obj = obj[key]
    return obj


def set_path(obj, path, value):
    for key in path[:-1]:
        obj = obj[key]
    obj[path[-1]] = value


def system_json(calculon_dir):
    with open(os.path.join(calculon_dir, SYSTEM_FILE)) as fd:
        sys_cfg = json.load(fd)
    for path, want in SYSTEM_CHECKS:
        got = get_path(sys_cfg, path)
        if got != want:
            raise SystemExit(f'{SYSTEM_FILE}: {path} is {got}, this comparison assumes {want}')
    for path, value, _reason in SYSTEM_CHANGES:
        set_path(sys_cfg, path, value)
    return sys_cfg


def write_json(path, obj):
    with open(path, 'w') as fd:
        json.dump(obj, fd, indent=2)
        fd.write('\n')


def run_calculon(calculon_dir, workdir, tag, app, exe, sys_path):
    """Returns (stats dict or None, message)."""
    app_path = os.path.join(workdir, f'{tag}.app.json')
    exe_path = os.path.join(workdir, f'{tag}.exe.json')
    out_path = os.path.join(workdir, f'{tag}.stats.json')
    write_json(app_path, app)
    write_json(exe_path, exe)
    cmd = [sys.executable, os.path.join(calculon_dir, 'bin', 'calculon'), '-v', 'WARNING',
           'llm', app_path, exe_path, sys_path, out_path]
    env = dict(os.environ, PYTHONPATH=calculon_dir)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode == 0 and os.path.exists(out_path):
        with open(out_path) as fd:
            return json.load(fd), ''
    msg = (proc.stdout + proc.stderr).strip().splitlines()
    return None, (msg[-1] if msg else f'exit {proc.returncode}')


def mem_needed(msg):
    m = re.search(r'Mem tier1 needs ([0-9.]+ \S+)', msg)
    return m.group(1) if m else msg


def run_ladder(calculon_dir, workdir, tag, app, make_exe, sys_path):
    """Tries recompute none -> attn_only -> full; returns (recompute, stats, refusals)."""
    refusals = []
    for rc in RECOMPUTE_LADDER:
        stats, msg = run_calculon(calculon_dir, workdir, f'{tag}.{rc}', app, make_exe(rc),
                                  sys_path)
        if stats is not None:
            return rc, stats, refusals
        refusals.append(f'{rc}: {mem_needed(msg)}')
    return None, None, refusals


def blocks_per_stage(layers, pp):
    return -(-layers // pp)


# --------------------------------------------------------------------------------------------


def fmt(x, nd=1):
    return '' if x is None else f'{x:.{nd}f}'


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--calculon', required=True, help='Calculon checkout (has bin/calculon)')
    ap.add_argument('--out', default=DEFAULT_OUT, help='CSV to write')
    ap.add_argument('--inputs', help='keep the generated Calculon inputs/outputs in this folder')
    args = ap.parse_args()

    calculon_dir = os.path.abspath(args.calculon)
    probe = subprocess.run([sys.executable, os.path.join(calculon_dir, 'bin', 'calculon'), '-h'],
                           capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=calculon_dir))
    if probe.returncode != 0:
        raise SystemExit(f'{sys.executable} cannot run Calculon from {calculon_dir} (it needs '
                         'numpy, pandas, psutil):\n' + probe.stderr.strip().splitlines()[-1])
    workdir = args.inputs or tempfile.mkdtemp(prefix='calculon_side_by_side.')
    os.makedirs(workdir, exist_ok=True)
    sys_path = os.path.join(workdir, 'h100_system.json')
    write_json(sys_path, system_json(calculon_dir))

    rows = []

    def emit(row, gpus, layout, measured, step, tps, mem, notes):
        err = None if (tps is None or measured is None) else 100.0 * (tps - measured) / measured
        rows.append({
            'row': row, 'gpus': gpus, 'layout': layout,
            'measured_tokens_per_s_per_gpu': fmt(measured),
            'calculon_step_time_s': fmt(step, 3),
            'calculon_tokens_per_s_per_gpu': fmt(tps),
            'calculon_error': '' if err is None else f'{err:+.1f}%',
            'calculon_mem_GB': fmt(mem, 1),
            'notes': '; '.join(n for n in notes if n),
        })

    def predict(tag, app, make_exe, gpus, gbs, seq):
        rc, st, refused = run_ladder(calculon_dir, workdir, tag, app, make_exe, sys_path)
        if st is None:
            return None
        return {
            'recompute': rc, 'refused': refused,
            'step': st['total_time'],
            'tps': st['sample_rate'] * seq / gpus,
            'mem_gib': st['proc_mem_tier1_cap_req'] / 2**30,
            'eff': st['total_efficiency'], 'bubble': st['bubble_time'],
            'dp_exposed': st['dp_comm_exposed_time'], 'dp_link': st['dp_comm_link_time'],
        }

    def dp_flag(p):
        # Calculon accumulates running block totals into its recompute memory time (llm.py,
        # _compute_block_stats), which can make its DP overlap window negative; flag the rows
        # where the exposed DP time it reports exceeds the DP time on the link.
        if p['dp_exposed'] > p['dp_link'] * 1.001:
            return (f'DP exposed {p["dp_exposed"]:.2f} s > DP link time {p["dp_link"]:.2f} s '
                    '(Calculon overlap-window artefact, see docs)')
        return ''

    def prediction_notes(p):
        return [f'recompute={p["recompute"]}' +
                (f' (memory refused {", ".join(p["refused"])})' if p['refused'] else ''),
                f'fits in 80 GiB ({p["mem_gib"]:.1f} GiB, blocks only)',
                f'Calculon total_efficiency {100 * p["eff"]:.1f}% of its own block FLOPs',
                f'bubble {p["bubble"]:.2f} s', dp_flag(p)]

    def sensitivity(label, q):
        flag = dp_flag(q)
        return (f'sensitivity {label}: {q["tps"]:.1f} tokens/s/GPU, step {q["step"]:.3f} s, '
                f'recompute={q["recompute"]}' + (f', {flag}' if flag else ''))

    # ---- Megatron-LM weak scaling
    for (name, heads, hidden, layers, tp, pp, dp, gbs, tflops) in MLM_ROWS:
        gpus = tp * pp * dp
        layout = f'TP{tp} PP{pp} DP{dp} MBS1 GBS{gbs} seq{MLM_SEQ}'
        fpt = megatron_2024_flops_per_token(layers, hidden, heads, heads, 4 * hidden, MLM_VOCAB,
                                            MLM_SEQ)
        measured = tflops * 1e12 / fpt
        logit_share = (MLM_VOCAB / (2 * layers * hidden)) / (fpt / (12 * layers * hidden**2))
        app = mlm_app(heads, hidden, layers)

        def make_exe(v):
            return lambda rc: execution(gpus, tp, pp, dp, gbs, rc, v, attention='multihead',
                                        tp_overlap='ring', ag_redo=True)

        p = predict(name, app, make_exe(1), gpus, gbs, MLM_SEQ)
        notes = [f'measured {tflops} TFLOP/s/GPU / {fpt / 1e9:.2f} GFLOP/token (Megatron 2024 '
                 'counter, non-causal)']
        notes += prediction_notes(p) if p else ['no recompute setting fits in Calculon']
        notes.append(f'Calculon omits the logit layer ({100 * logit_share:.1f}% of counted FLOPs)'
                     ' and embeddings')
        bps = blocks_per_stage(layers, pp)
        if pp > 2 and bps > 1:
            q = predict(name + '.vmax', app, make_exe(bps), gpus, gbs, MLM_SEQ)
            if q:
                notes.append(sensitivity(f'interleave v={bps}', q))
        elif pp == 2:
            notes.append('no interleaving sensitivity: Megatron does not interleave PP=2')
        emit(name, gpus, layout, measured, p and p['step'], p and p['tps'],
             p and p['mem_gib'], notes)

    # ---- Llama 3 405B
    for (name, gpus, tp, cp, pp, dp, seq, tflops) in LLAMA_ROWS:
        gbs = LLAMA_TOKENS_PER_BATCH // seq
        layout = (f'TP{tp} CP{cp} PP{pp} DP{dp} (FSDP) MBS1 GBS{gbs} seq{seq}' if cp > 1 else
                  f'TP{tp} PP{pp} DP{dp} (FSDP) MBS1 GBS{gbs} seq{seq}')
        f_causal = llama_flops_per_token(seq, True)
        f_full = llama_flops_per_token(seq, False)
        f_6n = 6 * llama_matmul_params()
        measured = tflops * 1e12 / f_causal
        lo, hi = tflops * 1e12 / f_full, tflops * 1e12 / f_6n
        notes = [f'measured {tflops} TFLOP/s/GPU / {f_causal / 1e12:.3f} TFLOP/token '
                 f'(6N+6Lsh, causal); non-causal 6N+12Lsh gives {lo:.1f}, 6N alone {hi:.1f}']
        if cp > 1:
            notes.append('not expressible: Calculon has no context parallelism (num_procs must '
                         'equal TP*PP*DP)')
            emit(name, gpus, layout, measured, None, None, None, notes)
            continue
        app = llama_app(seq)

        def make_exe(v, tp_overlap='none'):
            return lambda rc: execution(gpus, tp, pp, dp, gbs, rc, v, attention='multiquery',
                                        tp_overlap=tp_overlap, ag_redo=False)

        p = predict(name, app, make_exe(1), gpus, gbs, seq)
        if p:
            tps = p['tps']
            notes.append(f'error vs non-causal {100 * (tps - lo) / lo:+.1f}%, vs 6N '
                         f'{100 * (tps - hi) / hi:+.1f}%')
            notes += prediction_notes(p)
        else:
            notes.append('no recompute setting fits in Calculon')
        notes.append('GQA-8 at TP8 written as multiquery (one KV head per TP rank); SwiGLU as '
                     'a 1.5*ffn GeLU MLP; FSDP as optimizer sharding (weights not sharded)')
        bps = blocks_per_stage(LLAMA['layers'], pp)
        q = predict(name + '.vmax', app, make_exe(bps), gpus, gbs, seq)
        if q:
            notes.append(sensitivity(f'interleave v={bps}', q))
        q = predict(name + '.ring', app, make_exe(1, 'ring'), gpus, gbs, seq)
        if q:
            notes.append(sensitivity('TP overlap ring (as the Megatron rows)', q))
        emit(name, gpus, layout, measured, p and p['step'], p and p['tps'],
             p and p['mem_gib'], notes)

    # ---- MoE
    for (name, gpus, layout, measured, note) in MOE_ROWS:
        emit(name, gpus, layout, measured, None, None, None,
             [note, 'not expressible: Calculon models dense transformer blocks only (no '
              'experts, routing or all-to-all)'])

    cols = ['row', 'gpus', 'layout', 'measured_tokens_per_s_per_gpu', 'calculon_step_time_s',
            'calculon_tokens_per_s_per_gpu', 'calculon_error', 'calculon_mem_GB', 'notes']
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, 'w', newline='') as fd:
        w = csv.DictWriter(fd, fieldnames=cols, lineterminator='\n')
        w.writeheader()
        w.writerows(rows)
    print(f'{"row":34s} {"gpus":>6s} {"measured":>9s} {"calculon":>9s} {"error":>8s} '
          f'{"step_s":>8s} {"mem":>6s}')
    for r in rows:
        print(f'{r["row"]:34s} {r["gpus"]:>6d} {r["measured_tokens_per_s_per_gpu"]:>9s} '
              f'{r["calculon_tokens_per_s_per_gpu"]:>9s} {r["calculon_error"]:>8s} '
              f'{r["calculon_step_time_s"]:>8s} {r["calculon_mem_GB"]:>6s}')
    print(f'wrote {args.out}; Calculon inputs in {workdir}')


if __name__ == '__main__':
    main()
