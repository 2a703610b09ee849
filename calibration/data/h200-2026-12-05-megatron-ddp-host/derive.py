#!/usr/bin/env python3
"""Derives the presets' launch.megatron_ddp_* figures from the four runs megatron_ddp_hook_cost_run*.jsonl.

Each figure is the median over the runs:
  megatron_ddp_grad_hook      the gradient hook's body with Transformer Engine's flag set (no main_grad add: a GEMM
                              weight whose gradient TE accumulated into main_grad), the mean over the dense and the MoE
                              block's calls of a run, plus what autograd's call of a Python hook on a gradient
                              accumulator costs (dispatch A/B; noisy, 0.04-2.5 us per call)
  megatron_ddp_grad_hook_add  the same with the main_grad add (the flag unset: a norm's or the router's weight, whose
                              gradient TE or torch returns in param.grad), the `_add` rows
  megatron_ddp_module_prehook the pre-hook body's time per forward fitted as a x calls + b x parameters walked over
                              the dense and the MoE block (two equations, two unknowns; TE-flag rows: the flag does not
                              touch the forward), a, plus the module call's path with a pre-hook (dispatch A/B)
  megatron_ddp_param_prehook  b
The MoE rows with the main_grad add have a pre-hook body 2-3x the TE-flag rows' in every run (25.9-31.0 against
9.4-13.1 us per call) where the dense rows do not; not explained here, and not what the rows run (TE sets the flag).
Usage: python3 derive.py
"""
import glob, json, os, statistics

here = os.path.dirname(os.path.abspath(__file__))
runs = []
for path in sorted(glob.glob(os.path.join(here, "megatron_ddp_hook_cost_run*.jsonl"))):
    recs = [json.loads(l) for l in open(path) if l.strip()]
    inner = {r["name"]: r for r in recs if r.get("kind") == "inner" and "error" not in r}
    disp = {r["what"]: r["us_per_call"] for r in recs if r.get("kind") == "dispatch"}
    dense, moe = inner["dense_llama_tiny"], inner["moe16_top8_tiny"]
    calls = dense["bwd_hook_calls"] + moe["bwd_hook_calls"]
    grad_body = (dense["bwd_hook_inner_us"] * dense["bwd_hook_calls"] + moe["bwd_hook_inner_us"] * moe["bwd_hook_calls"]) / calls
    dense_add, moe_add = inner["dense_llama_tiny_add"], inner["moe16_top8_tiny_add"]
    grad_add = (dense_add["bwd_hook_inner_us"] * dense_add["bwd_hook_calls"] +
                moe_add["bwd_hook_inner_us"] * moe_add["bwd_hook_calls"]) / (dense_add["bwd_hook_calls"] + moe_add["bwd_hook_calls"])
    eq = []
    for r in (dense, moe):
        forwards = 5 * r["microbatches"]  # five timed steps
        eq.append((r["fwd_prehook_calls"] / forwards, r["params"], r["fwd_prehook_inner_us"] * r["fwd_prehook_calls"] / forwards))
    (c1, p1, t1), (c2, p2, t2) = eq
    det = c1 * p2 - c2 * p1
    a, b = (t1 * p2 - t2 * p1) / det, (c1 * t2 - c2 * t1) / det
    runs.append(dict(run=os.path.basename(path), grad_body=grad_body, grad_add=grad_add, grad_dispatch=disp["grad_accumulator_hook"],
                     pre_dispatch=disp["module_forward_pre_hook"], a=a, b=b,
                     dense_pre=dense["fwd_prehook_inner_us"], moe_pre=moe["fwd_prehook_inner_us"],
                     moe_pre_add=inner["moe16_top8_tiny_add"]["fwd_prehook_inner_us"], calls=(c1, c2), params=(p1, p2)))

print("run                                grad body  with add  grad disp  pre body/call dense  moe  (moe, add)  pre disp   fit a    fit b")
for r in runs:
    print(f"{r['run']:34s} {r['grad_body']:9.2f} {r['grad_add']:9.2f} {r['grad_dispatch']:10.2f} {r['dense_pre']:19.2f} {r['moe_pre']:5.2f} "
          f"{r['moe_pre_add']:10.2f} {r['pre_dispatch']:10.2f} {r['a']:7.2f} {r['b']:7.2f}")
print(f"per forward: dense {runs[0]['calls'][0]:.0f} pre-hook calls, {runs[0]['params'][0]} parameters; "
      f"MoE {runs[0]['calls'][1]:.0f} calls, {runs[0]['params'][1]} parameters")
med = lambda k: statistics.median(r[k] for r in runs)
print(f"=> megatron_ddp_grad_hook: {med('grad_body') + med('grad_dispatch'):.1f} us per parameter and backward")
print(f"=> megatron_ddp_grad_hook_add: {med('grad_add') + med('grad_dispatch'):.1f} us per parameter and backward")
print(f"=> megatron_ddp_module_prehook: {med('a') + med('pre_dispatch'):.1f} us per module called")
print(f"=> megatron_ddp_param_prehook: {med('b'):.1f} us per parameter walked")
