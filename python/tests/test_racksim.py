"""The Python package against the CLI's contract (DESIGN.md "Python"): each function returns the
content of the matching `--json` output; scenarios as path, dict, or path + set=; errors raise
racksim.InputError with the CLI's message."""

import io
import json
import math
import pathlib
import threading

import pandas as pd
import pytest

import racksim

QUICK = "scenarios/quickstart.yaml"
REPORT_KEYS = {
    "racksim_version", "scenario", "step_time_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu", "mfu",
    "peak_memory_bytes", "memory_capacity_bytes", "fits", "memory_breakdown_bytes", "breakdown_s", "warnings",
}


@pytest.fixture(scope="module")
def quick():
    return racksim.run(QUICK)


# ---------------------------------------------------------------- run

def test_run_returns_the_report_fields(quick):
    assert REPORT_KEYS <= set(quick)
    assert quick["step_time_s"] > 0 and 0 < quick["mfu"] < 1
    assert quick["fits"] is True
    assert isinstance(quick["warnings"], list)


def test_run_equals_cli_json(quick, cli_json):
    assert quick == cli_json("run", QUICK, "--json")


def test_run_path_like(quick, root):
    assert racksim.run(root / QUICK) == quick


def test_run_set_overrides_equal_cli(cli_json):
    r = racksim.run(QUICK, set={"training.recompute": "selective", "training.parallelism.tp": 2})
    assert r == cli_json("run", QUICK, "--json", "--set", "training.recompute=selective",
                         "--set", "training.parallelism.tp=2")
    assert r["scenario"]["training"]["parallelism"]["tp"] == 2


def test_set_as_list_of_strings():
    a = racksim.run(QUICK, set=["training.recompute=selective"])
    b = racksim.run(QUICK, set={"training.recompute": "selective"})
    assert a == b


def test_set_booleans_and_quantities():
    on = racksim.run(QUICK, set={"training.cuda_graphs": True})
    off = racksim.run(QUICK, set={"training.cuda_graphs": False})
    assert on["scenario"]["training"]["cuda_graphs"] is True
    assert off["scenario"]["training"]["cuda_graphs"] is False
    assert on["step_time_s"] <= off["step_time_s"]
    big = racksim.run(QUICK, set={"system.overrides": {"hbm_capacity": "1000 GB"}})
    assert big["memory_capacity_bytes"] > 900e9


def test_recompute_trades_time_for_memory():
    full = racksim.run(QUICK, set={"training.recompute": "full"})
    none = racksim.run(QUICK, set={"training.recompute": "none"})
    assert none["step_time_s"] < full["step_time_s"]
    assert none["peak_memory_bytes"] > full["peak_memory_bytes"]
    assert full["breakdown_s"]["recompute"] > 0 == none["breakdown_s"]["recompute"]


def _quick_dict():
    return {
        "name": "quickstart as a dict",
        "system": {"preset": "h200-sxm", "gpus": 8},
        "model": {"preset": "llama3-8b"},
        "training": {
            "seq_len": 8192, "global_batch": 128, "micro_batch": 1, "precision": "bf16",
            "parallelism": {"tp": 1, "pp": 1, "cp": 1, "dp": "auto"},
            "optimizer_sharding": "zero1", "recompute": "full", "attention": "flash",
            "cuda_graphs": False, "nvls": True,
        },
    }


def test_run_dict_matches_the_file(quick):
    r = racksim.run(_quick_dict())
    for k in ("step_time_s", "peak_memory_bytes", "tokens_per_s_per_gpu", "mfu", "breakdown_s"):
        assert r[k] == quick[k], k
    assert r["scenario"]["name"] == "quickstart as a dict"


def test_run_dict_with_set():
    r = racksim.run(_quick_dict(), set={"system.gpus": 16})
    assert r["scenario"]["system"]["gpus"] == 16


def test_inline_model_dict():
    d = _quick_dict()
    d["model"] = {"layers": 4, "hidden": 1024, "ffn_hidden": 4096, "heads": 8, "kv_heads": 8, "vocab": 32000}
    d["training"]["global_batch"] = 8
    r = racksim.run(d)
    assert r["fits"] and r["step_time_s"] < 1


def test_the_reports_scenario_reruns(quick):
    """Every report embeds the resolved scenario; as a dict (less the report-only system.resolved
    and model.name) it reruns to the same numbers: every default made explicit is accepted."""
    sc = json.loads(json.dumps(quick["scenario"]))
    sc["system"].pop("resolved")
    sc["model"].pop("name")
    again = racksim.run(sc)
    assert again["step_time_s"] == quick["step_time_s"]
    assert again["peak_memory_bytes"] == quick["peak_memory_bytes"]


# ---------------------------------------------------------------- errors

def test_unknown_key_in_dict_raises_with_suggestion():
    d = _quick_dict()
    d["training"]["paralelism"] = d["training"].pop("parallelism")
    with pytest.raises(racksim.InputError) as e:
        racksim.run(d)
    msg = str(e.value)
    assert "<scenario dict>" in msg and "paralelism" in msg and "did you mean 'parallelism'" in msg


def test_input_error_is_a_value_error():
    assert issubclass(racksim.InputError, ValueError)


def test_unknown_set_key_raises():
    with pytest.raises(racksim.InputError, match="tpp"):
        racksim.run(QUICK, set={"training.parallelism.tpp": 2})


def test_missing_file_raises():
    with pytest.raises(racksim.InputError, match="no_such.yaml"):
        racksim.run("no_such.yaml")


def test_wrong_type_raises_type_error():
    with pytest.raises(TypeError):
        racksim.run(42)


def test_does_not_fit_is_a_result_not_an_error():
    r = racksim.run(QUICK, set={"training.recompute": "none", "training.micro_batch": 8, "training.global_batch": 128})
    assert r["fits"] is False and r["peak_memory_bytes"] > r["memory_capacity_bytes"]


# ---------------------------------------------------------------- compare

def test_compare_equals_cli(cli_json):
    c = racksim.compare(QUICK, QUICK, set={"training.cuda_graphs": True})
    assert c == cli_json("compare", QUICK, QUICK, "--json", "--set", "training.cuda_graphs=true")


def test_compare_one_sided_overrides_equal_cli(cli_json):
    c = racksim.compare(QUICK, QUICK, variant_set={"training.recompute": "selective"})
    assert c == cli_json("compare", QUICK, QUICK, "--json", "--variant-set", "training.recompute=selective")
    assert c["speedup"] > 1  # the variant alone recomputes less
    # --set applies to both sides first; a one-sided override of the same key wins on its side
    both = racksim.compare(QUICK, QUICK, set={"training.recompute": "selective"},
                           base_set={"training.recompute": "full"})
    assert both["speedup"] == pytest.approx(c["speedup"])


def test_compare_says_which_sides_errors_they_are():
    # As the CLI: a side's errors end by naming the side (a review's finding, 2026-12-07).
    with pytest.raises(racksim.InputError, match="compare: the errors above are the variant scenario's"):
        racksim.compare(QUICK, QUICK, variant_set={"training.parallelism.tp": 3})


def test_compare_speedup_definition():
    c = racksim.compare(QUICK, _quick_dict() | {"training": _quick_dict()["training"] | {"recompute": "selective"}})
    assert set(c) == {"base", "variant", "speedup"}
    assert c["speedup"] == pytest.approx(c["variant"]["tokens_per_s_per_gpu"] / c["base"]["tokens_per_s_per_gpu"])
    assert c["speedup"] > 1  # selective recompute does less work than full


# ---------------------------------------------------------------- sweep

SWEEP = "scenarios/sweeps/quickstart-tp-recompute.yaml"


def test_sweep_is_a_dataframe_equal_to_cli_csv(racksim_binary, cli_text):
    df = racksim.sweep(SWEEP, jobs=2)
    code, out, _ = cli_text("sweep", SWEEP)
    assert code == 0
    cli = pd.read_csv(io.StringIO(out))
    for text in ("error", "warnings", "calibration"):
        cli[text] = cli[text].fillna("").astype(str)
    assert list(df.columns) == list(cli.columns)
    pd.testing.assert_frame_equal(df, cli)
    assert len(df) == 15  # 5 tp x 3 recompute


def test_sweep_invalid_points_are_rows():
    df = racksim.sweep(SWEEP)
    bad = df[df["training.parallelism.tp"] == 3]
    assert len(bad) == 3 and all("tp" in e for e in bad["error"])
    good = df[df["error"] == ""]
    assert good["step_time_s"].notna().all() and (good["step_time_s"] > 0).all()


def test_sweep_from_base_and_vary_and_shard():
    df = racksim.sweep(base=QUICK, vary={"training.recompute": ["none", "full"], "system.gpus": [8, 16]})
    assert len(df) == 4 and set(df["system.gpus"]) == {8, 16}
    half = racksim.sweep(base=QUICK, vary={"training.recompute": ["none", "full"], "system.gpus": [8, 16]}, shard="1/2")
    assert len(half) == 2
    pd.testing.assert_frame_equal(half.reset_index(drop=True), df.iloc[[1, 3]].reset_index(drop=True))


def test_sweep_writes_csv(tmp_path):
    out = tmp_path / "points.csv"
    df = racksim.sweep(base=QUICK, vary={"training.recompute": ["none", "full"]}, out=str(out))
    assert out.read_text().splitlines()[0].startswith("point,training.recompute,")
    assert list(df["point"]) == [0, 1]
    assert len(df) == 2


def test_none_is_not_given():
    # None leaves the key out (its default), in a scenario dict and in set=; a YAML key with no value is an error.
    base = racksim.run(QUICK)
    scenario = base["scenario"]
    assert "overlap_grad_reduce" not in scenario["training"] or scenario["training"]["overlap_grad_reduce"] is not None
    scenario["training"].pop("overlap_grad_reduce", None)
    with_none = json.loads(json.dumps(scenario))
    with_none["training"]["overlap_grad_reduce"] = None
    assert racksim.run(with_none, set={"training.recompute": None})["step_time_s"] == racksim.run(scenario)["step_time_s"]
    with pytest.raises(racksim.InputError, match="training.recompute"):
        racksim.run(QUICK, set=["training.recompute=~"])


def test_sweep_bad_key_raises():
    with pytest.raises(racksim.InputError, match="recompte"):
        racksim.sweep(base=QUICK, vary={"training.recompte": ["none"]})


def test_sweep_and_set_of_the_wrong_shape_say_so():
    # (a review found Python's own TypeError/AttributeError here: 'int' object is not iterable)
    with pytest.raises(racksim.InputError, match=r"vary.training.parallelism.tp: expected a list of values, got 2"):
        racksim.sweep(base=QUICK, vary={"training.parallelism.tp": 2})
    with pytest.raises(racksim.InputError, match="vary: expected a mapping of KEY.PATH to lists of values, got list"):
        racksim.sweep(base=QUICK, vary=[("training.parallelism.tp", [1])])
    with pytest.raises(TypeError, match="set= takes a dict"):
        racksim.run(QUICK, set=5)


# ---------------------------------------------------------------- replay

HLO = "calibration/data/h200-2026-11-29/m1_full.hlo.txt.gz"


def test_replay_equals_cli(cli_json):
    r = racksim.replay(HLO, system="h200-sxm", set={"system.calibration": "h200"})
    assert r == cli_json("replay", HLO, "--system", "h200-sxm", "--set", "system.calibration=h200", "--json")
    assert r["hlo"]["kernels"] > 0 and r["step_time_s"] > 0


def test_replay_missing_module_raises():
    with pytest.raises(racksim.InputError):
        racksim.replay("no_such.hlo", system="h200-sxm")


# ---------------------------------------------------------------- validate

def test_validate_rows_and_exit_code(quick):
    suite = {"cases": [
        {"name": "self", "scenario": QUICK, "measured": {"step_time_s": quick["step_time_s"]}, "tolerance": 0.01},
        {"name": "off", "scenario": QUICK, "measured": {"step_time_s": quick["step_time_s"] * 2}, "tolerance": 0.01},
    ]}
    rows = racksim.validate(suite)
    assert [r["case"] for r in rows] == ["self", "off"]
    assert rows[0]["pass"] is True and rows[1]["pass"] is False
    assert rows.exit_code == 4 and not rows.passed


def test_validate_file_equals_cli(cli_json, root, tmp_path, quick):
    suite = tmp_path / "suite.yaml"
    suite.write_text(json.dumps({"cases": [{"name": "q", "scenario": str(root / QUICK),
                                            "measured": {"fits": True}}]}))
    rows = racksim.validate(str(suite))
    assert list(rows) == cli_json("validate", str(suite), "--json")
    assert rows.passed


def test_validate_invalid_suite_raises():
    with pytest.raises(racksim.InputError, match="cases"):
        racksim.validate({"casez": []})


# ---------------------------------------------------------------- collective

def test_collective_equals_cli(cli_json):
    c = racksim.collective("h200-sxm", 8, "all_reduce", "1GiB")
    assert c == cli_json("collective", "--system", "h200-sxm", "--gpus", "8", "--op", "all_reduce", "--bytes", "1GiB",
                         "--json")
    assert set(c) >= {"op", "gpus", "bytes", "algorithm", "time_s", "algbw_GBps", "busbw_GBps"}
    assert c["busbw_GBps"] == pytest.approx(c["algbw_GBps"] * 2 * 7 / 8)


def test_collective_stride_equals_cli(cli_json):
    c = racksim.collective("h100-sxm", 128, "all_gather", "16MiB", stride=8)
    assert c == cli_json("collective", "--system", "h100-sxm", "--gpus", "128", "--stride", "8", "--op", "all_gather",
                         "--bytes", "16MiB", "--json")
    assert c["algorithm"] == "pat"  # one rank per node: NCCL's PAT at this size


def test_collective_int_bytes():
    assert racksim.collective("h200-sxm", 8, bytes=1 << 30) == racksim.collective("h200-sxm", 8, bytes="1GiB")


def test_collective_sweep_rows():
    rows = racksim.collective("h200-sxm", 8, "all_gather", min_bytes=1024, max_bytes="1M", factor=4)
    assert [r["size"] for r in rows] == [1024, 4096, 16384, 65536, 262144, 1048576]
    for r in rows:
        assert r["count"] * 8 * 4 == r["size"]  # all_gather: per-rank float count
        assert r["busbw_GBps"] == pytest.approx(r["algbw_GBps"] * 7 / 8)
    assert rows[-1]["algbw_GBps"] > rows[0]["algbw_GBps"]


def test_nccl_tests_table_is_parsable():
    table = racksim.nccl_tests_table("h200-sxm", 8, "all_reduce", min_bytes=8, max_bytes="8M", factor=2)
    assert "# Collective test starting: all_reduce_perf" in table
    data = [l.split() for l in table.splitlines() if l and not l.startswith("#")]
    assert len(data) == 21 and data[0][:5] == ["8", "2", "float", "sum", "-1"]


def test_collective_bad_op_raises():
    with pytest.raises(racksim.InputError, match="all_reduce"):
        racksim.collective("h200-sxm", 8, "allreduce", "1GiB")


# ---------------------------------------------------------------- files, CLI, threads, logs

def test_trace_and_html_report_are_written(tmp_path):
    trace, html = tmp_path / "step.json", tmp_path / "step.html"
    racksim.run(QUICK, trace=str(trace), report=str(html))
    t = json.loads(trace.read_text())
    assert t["traceEvents"] and any(e.get("ph") == "X" for e in t["traceEvents"])
    assert html.read_text().lstrip().lower().startswith("<!doctype html")


def test_outputs_may_not_name_a_file_the_scenario_reads(tmp_path):
    # As the CLI refuses it (a review's finding, 2026-12-07): the module had overwritten the model file with the trace.
    model = tmp_path / "m.yaml"
    model.write_text(pathlib.Path("workloads/models/llama3-8b.yaml").read_text())
    scen = tmp_path / "s.yaml"
    scen.write_text("name: s\nsystem: {preset: h200-sxm, gpus: 8}\nmodel: {preset: m.yaml}\n"
                    "training: {seq_len: 8192, global_batch: 128, micro_batch: 1, precision: bf16, "
                    "parallelism: {tp: 1, pp: 1, cp: 1, dp: auto}}\n")
    before = model.read_text()
    with pytest.raises(racksim.InputError, match="is a file the scenario reads"):
        racksim.run(str(scen), trace=str(model))
    with pytest.raises(racksim.InputError, match="is the scenario"):
        racksim.run(str(scen), report=str(scen))
    assert model.read_text() == before


def test_cli_in_process():
    code, out, err = racksim.cli("--version")
    assert code == 0 and out.strip() == f"racksim {racksim.__version__}"
    code, out, err = racksim.cli("run", "no_such.yaml")
    assert code == 1 and "no_such.yaml" in err


def test_threads_give_identical_results(quick):
    results = [None] * 4

    def work(i):
        results[i] = racksim.run(QUICK)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert all(r == quick for r in results)


def test_log_level_info_names_preset_and_calibration(capfd):
    racksim.set_log_level("info")
    try:
        racksim.run(QUICK, set={"system.calibration": "h200"})
    finally:
        racksim.set_log_level("warn")
    err = capfd.readouterr().err
    assert "system preset h200-sxm" in err
    assert "calibration h200" in err and "same device" in err
    racksim.run(QUICK)
    assert capfd.readouterr().err == ""  # quiet at the default level


def test_bad_log_level():
    with pytest.raises(ValueError):
        racksim.set_log_level("loud")


# ---------------------------------------------------------------- importers and the notebook

def test_models_import_then_run_a_scenario_on_it(tmp_path):
    out = tmp_path / "qwen3-30b-a3b.yaml"
    code, text, err = racksim.cli("models", "import", "tests/data/hf/qwen3-30b-a3b.json", "--out", str(out))
    assert code == 0, err
    assert "30.53B parameters" in text
    r = racksim.run(QUICK, set={"model": {"preset": str(out)}, "training.parallelism.ep": 8})
    assert r["scenario"]["model"]["moe"]["experts"] == 128
    assert r["step_time_s"] > 0


def test_import_megatron_error_exit_code():
    code, out, err = racksim.cli("import", "megatron", "tests/data/megatron/train_mixtral_8x7b_distributed.sh")
    assert code == 1 and "--vocab-size" in err


def test_the_notebook_example_runs(capsys):
    import runpy
    runpy.run_path("docs/examples/python_tour.py", run_name="__main__")
    out = capsys.readouterr().out
    assert "step " in out and "FSDP over ZeRO-1" in out and "Qwen3-8B:" in out


def test_the_ipynb_matches_the_py(root):
    import importlib.util
    spec = importlib.util.spec_from_file_location("nb", root / "docs/examples/notebook_from_py.py")
    nb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nb)
    want = nb.notebook((root / "docs/examples/python_tour.py").read_text())
    got = json.loads((root / "docs/examples/python_tour.ipynb").read_text())
    assert got == want, "run docs/examples/notebook_from_py.py after editing python_tour.py"


def test_arguments_the_cli_range_checks_raise_input_error():
    module = "tests/fuzz/hlo_corpus/loop_gemm.hlo"
    for gpus in (0, -1, 2**40, 1.5):
        with pytest.raises(racksim.InputError):
            racksim.replay(module, system="h200-sxm", gpus=gpus)
    with pytest.raises(racksim.InputError):
        racksim.replay(module, system=None)
    with pytest.raises(racksim.InputError):
        racksim.collective("h200-sxm", 8, min_bytes=8, max_bytes="1M", factor=0)
    with pytest.raises(racksim.InputError):
        racksim.collective("h200-sxm", 2**40, bytes="1GiB")
    with pytest.raises(racksim.InputError):
        racksim.sweep(base=QUICK, vary={"training.recompute": "full"})
    with pytest.raises(racksim.InputError):
        racksim.sweep(base=QUICK, vary={"training.recompute": ["full"]}, jobs=-1)
