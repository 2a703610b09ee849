# %% [markdown]
# # racksim from Python: a tour
#
# A notebook in the "percent" format (Jupyter, VS Code and `jupytext` open it as cells; plain
# `python3 docs/examples/python_tour.py` runs it top to bottom, as CI does). Each call returns
# what the matching `racksim ... --json` prints. Set-up: `scripts/quickstart.sh` once (it builds
# the module and points Debian's python3 at it), then `/usr/bin/python3` or Jupyter on it.

# %%
import racksim

racksim.__version__

# %% [markdown]
# ## One step of a scenario
# The shipped quickstart: Llama 3 8B on one 8-GPU H200 node, ZeRO-1, full recompute.

# %%
r = racksim.run("scenarios/quickstart.yaml")
print(f"step {r['step_time_s']:.3f} s, {r['tokens_per_s_per_gpu']:.0f} tokens/s/GPU, MFU {r['mfu']:.1%}, "
      f"{r['peak_memory_bytes'] / 1e9:.1f} of {r['memory_capacity_bytes'] / 1e9:.0f} GB")
r["breakdown_s"]

# %% [markdown]
# ## What-ifs: overrides, a dict scenario, a comparison
# `set=` takes the CLI's `--set KEY.PATH=VALUE` as a dict. The measured H200 calibration changes
# the GEMM and attention efficiencies (`racksim.set_log_level("info")` shows what it applied).

# %%
calibrated = racksim.run("scenarios/quickstart.yaml", set={"system.calibration": "h200"})
selective = racksim.run("scenarios/quickstart.yaml", set={"system.calibration": "h200", "training.recompute": "selective"})
print(f"calibrated: MFU {calibrated['mfu']:.1%}; selective recompute: MFU {selective['mfu']:.1%}, "
      f"{selective['peak_memory_bytes'] / 1e9:.1f} GB")

# %%
scenario = {
    "name": "Llama 3 70B on 64 GB200",
    "system": {"preset": "gb200-nvl72", "gpus": 64},
    "model": {"preset": "llama3-70b"},
    "training": {"seq_len": 8192, "global_batch": 256, "micro_batch": 1, "precision": "bf16",
                 "parallelism": {"tp": 4, "pp": 1, "dp": "auto"}, "optimizer_sharding": "zero1",
                 "recompute": "selective", "cuda_graphs": True},
}
c = racksim.compare(scenario, scenario | {"training": scenario["training"] | {"optimizer_sharding": "fsdp"}})
print(f"FSDP over ZeRO-1: {c['speedup']:.3f}x tokens/s per GPU")

# %% [markdown]
# ## A sweep as a DataFrame
# Tensor parallelism against recompute; invalid points (tp 3 does not divide the heads) are rows
# with `error` set, not exceptions.

# %%
df = racksim.sweep("scenarios/sweeps/quickstart-tp-recompute.yaml")
ok = df[df["error"] == ""]
ok.pivot(index="training.parallelism.tp", columns="training.recompute", values="tokens_per_s_per_gpu").round(0)

# %% [markdown]
# ## Collectives, nccl-tests style

# %%
rows = racksim.collective("h200-sxm", 8, "all_reduce", min_bytes="1M", max_bytes="1G", factor=4)
[(r["size"], round(r["busbw_GBps"], 1)) for r in rows]

# %% [markdown]
# ## A model from its Hugging Face config, then a scenario around it
# `racksim models import` writes a model file; a scenario names it by path.

# %%
import pathlib, tempfile

tmp = pathlib.Path(tempfile.mkdtemp())
code, out, err = racksim.cli("models", "import", "tests/data/hf/qwen3-8b.json", "--out", str(tmp / "qwen3-8b.yaml"))
print(out, err)
q = racksim.run("scenarios/quickstart.yaml", set={"model": {"preset": str(tmp / "qwen3-8b.yaml")}})
print(f"Qwen3-8B: {q['step_time_s']:.3f} s per step, MFU {q['mfu']:.1%}")
