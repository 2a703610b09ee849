"""racksim from Python: the CLI's commands as functions that return what ``--json`` prints.

    import racksim
    r = racksim.run("scenarios/quickstart.yaml", set={"training.recompute": "selective"})
    r["step_time_s"], r["mfu"], r["fits"]

A scenario is a path (str or os.PathLike), a dict with the scenario file's structure, or either
plus ``set={KEY.PATH: VALUE}`` overrides (``--set``). Paths inside a dict resolve against the
working directory. Invalid input raises ``racksim.InputError`` (a ValueError) whose message is the
CLI's: every problem with file:line:column and key path. Logs (warnings, what was applied) go to
stderr; ``racksim.set_log_level("info")`` shows the preset, calibration and transfer rule used.

Functions: run, compare, sweep (a pandas DataFrame), replay, validate, collective,
nccl_tests_table, cli (any command in-process). See docs/python.md.
"""

from __future__ import annotations

import io
import json
import os
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

from . import _racksim
from ._racksim import InputError

__all__ = [
    "run", "compare", "sweep", "replay", "validate", "collective", "nccl_tests_table", "cli",
    "set_log_level", "InputError", "ValidationRows", "__version__",
]

__version__ = _racksim.version()

Scenario = Union[str, "os.PathLike[str]", Mapping[str, Any]]
Overrides = Optional[Union[Mapping[str, Any], Sequence[str]]]


def _set_args(overrides: Overrides) -> list[str]:
    """``set=`` as the CLI's ``--set KEY.PATH=VALUE`` strings (VALUE in YAML/JSON syntax)."""
    if overrides is None:
        return []
    if isinstance(overrides, Mapping):
        out = []
        for key, value in overrides.items():
            if value is None:
                continue  # not given (as a None in a scenario dict)
            if isinstance(value, str):
                text = value  # "selective", "4.8 TB/s", "[a, b]": YAML text, as on the command line
            else:
                text = json.dumps(value)  # 8 -> 8, True -> true, {"a": 1} -> {"a": 1}
            out.append(f"{key}={text}")
        return out
    if isinstance(overrides, (str, bytes)) or not isinstance(overrides, Iterable):
        raise TypeError("set= takes a dict {KEY.PATH: VALUE} or a list of 'KEY.PATH=VALUE' strings, "
                        f"got {type(overrides).__name__}")
    return [str(s) for s in overrides]


def _without_none(obj: Any) -> Any:
    """A dict's keys whose value is None left out, at every level: None is Python's "not given" (the YAML loader refuses
    a key with no value, which the key's default is not)."""
    if isinstance(obj, Mapping):
        return {k: _without_none(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, (list, tuple)):
        return [_without_none(v) for v in obj]
    return obj


def _source(obj: Any, what: str) -> "_racksim.Source":
    """A file path, or a dict written as JSON text (JSON is YAML) for the strict YAML loader."""
    if isinstance(obj, Mapping):
        return _racksim.Source(text=json.dumps(_without_none(obj), indent=1), label=f"<{what} dict>")
    if isinstance(obj, (str, os.PathLike)):
        return _racksim.Source(path=os.fspath(obj))
    raise TypeError(f"{what}: expected a path or a dict, got {type(obj).__name__}")


def _count(name: str, value: Any, lo: int = 1, hi: int = 1 << 20) -> int:
    """An integer argument the CLI range-checks (--gpus, --jobs), checked the same way: InputError, not a TypeError
    from the binding or a silent default."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InputError(f"{name}: expected an integer from {lo} to {hi}, got {value!r}")
    return value


def _path(p: Optional[Union[str, "os.PathLike[str]"]]) -> str:
    return "" if p is None else os.fspath(p)


def run(scenario: Scenario, *, set: Overrides = None, trace: Optional[str] = None,
        report: Optional[str] = None) -> dict:
    """Simulate one training step: the report of ``racksim run --json`` as a dict.

    trace: write a Chrome/Perfetto trace there; report: write the HTML report there.
    """
    return json.loads(_racksim.run(_source(scenario, "scenario"), _set_args(set), _path(trace), _path(report)))


def compare(base: Scenario, variant: Scenario, *, set: Overrides = None, base_set: Overrides = None,
            variant_set: Overrides = None, report: Optional[str] = None) -> dict:
    """``racksim compare --json``: {"base": report, "variant": report, "speedup": float}.

    set: overrides of both sides; base_set / variant_set: of one side, after ``set`` (``--base-set``,
    ``--variant-set``), so one scenario compares with itself changed: ``compare(s, s, variant_set={...})``.
    """
    return json.loads(_racksim.compare(_source(base, "base"), _source(variant, "variant"), _set_args(set),
                                       _set_args(base_set), _set_args(variant_set), _path(report)))


def sweep(sweep: Union[str, "os.PathLike[str]", Mapping[str, Any], None] = None, *,
          base: Optional[Union[str, "os.PathLike[str]"]] = None, vary: Optional[Mapping[str, Iterable[Any]]] = None,
          jobs: Optional[int] = None, shard: Optional[str] = None, out: Optional[str] = None,
          report: Optional[str] = None):
    """Every point of a sweep as a pandas DataFrame (the rows of ``racksim sweep``'s CSV).

    Either a sweep file / dict ``{"base": SCENARIO_PATH, "vary": {KEY.PATH: [values]}}``, or
    ``base=`` and ``vary=``. jobs: threads (default: all cores); shard: "K/N"; out: also write the
    CSV there; report: write the HTML report there. Invalid points are rows with ``error`` set.
    """
    import pandas as pd

    if sweep is None:
        if base is None or vary is None:
            raise TypeError("sweep: give a sweep file or dict, or base= and vary=")
    elif base is not None or vary is not None:
        raise TypeError("sweep: give a sweep file or dict, or base= and vary=, not both")
    # (checked before vary's values are listed: an int or a list of pairs had raised Python's own TypeError)
    if isinstance(vary, Mapping):
        for key, values in vary.items():
            if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
                raise InputError(f"vary.{key}: expected a list of values, got {values!r}")
    elif vary is not None:
        raise InputError(f"vary: expected a mapping of KEY.PATH to lists of values, got {type(vary).__name__}")
    if sweep is None:
        sweep = {"base": os.fspath(base), "vary": {k: list(v) for k, v in vary.items()}}
    jobs = 0 if jobs is None else _count("jobs", jobs, 1, 4096)
    csv = _racksim.sweep(_source(sweep, "sweep"), jobs, shard or "", _path(out), _path(report))
    df = pd.read_csv(io.StringIO(csv))
    for text in ("error", "warnings", "calibration"):  # text columns: empty is "", not NaN (an all-empty column would read as numbers)
        if text in df.columns:
            df[text] = df[text].fillna("").astype(str)
    return df


def replay(module: Union[str, "os.PathLike[str]"], *, system: str, gpus: Optional[int] = None,
           set: Overrides = None, trace: Optional[str] = None) -> dict:
    """Replay a compiled XLA HLO module (text, optionally .gz): ``racksim replay --json``."""
    if not isinstance(system, str):
        raise InputError(f"system: expected a preset name, got {system!r}")
    gpus = 0 if gpus is None else _count("gpus", gpus)
    return json.loads(_racksim.replay(os.fspath(module), system, gpus, _set_args(set), _path(trace)))


class ValidationRows(list):
    """The rows of ``racksim validate --json`` (a list of dicts), plus ``exit_code`` (0 all pass,
    4 a check outside its tolerance, 1 a case could not run) and ``passed``."""

    exit_code: int = 0

    @property
    def passed(self) -> bool:
        return self.exit_code == 0


def validate(suite: Union[str, "os.PathLike[str]", Mapping[str, Any]], *, jobs: Optional[int] = None) -> ValidationRows:
    """Run a validation suite: its check rows (case, field, predicted, measured, error, pass)."""
    text, code = _racksim.validate(_source(suite, "suite"), 0 if jobs is None else _count("jobs", jobs, 1, 4096))
    rows = ValidationRows(json.loads(text))
    rows.exit_code = code
    return rows


def _size(v: Union[str, int, float, None]) -> str:
    return "" if v is None else (str(int(v)) if isinstance(v, (int, float)) else str(v))


def collective(system: str, gpus: int, op: str = "all_reduce", bytes: Union[str, int, None] = None, *,
               algo: str = "auto", min_bytes: Union[str, int, None] = None, max_bytes: Union[str, int, None] = None,
               factor: Optional[float] = None, step_bytes: Union[str, int, None] = None, stride: int = 1):
    """One collective (``bytes=``, e.g. "1GiB"; an int means bytes): ``racksim collective --json``.

    ``stride``: the members' distance in the job's ranks (``--stride``; a tp-8 job's data-parallel group: 8).

    With ``min_bytes``/``max_bytes`` (and ``factor`` or ``step_bytes``, nccl-tests' -b -e -f -i):
    the list of rows of the nccl-tests-shaped sweep (size, count, type, time_us, algbw, busbw, ...).
    """
    gpus = _count("gpus", gpus)
    if factor is not None and not factor > 1:
        raise InputError(f"factor: the sizes' growth factor must be greater than 1, got {factor!r}")
    if min_bytes is not None or max_bytes is not None:
        if bytes is not None:
            raise TypeError("collective: give bytes=, or min_bytes=/max_bytes=, not both")
        lo = _size(min_bytes if min_bytes is not None else max_bytes)
        hi = _size(max_bytes if max_bytes is not None else min_bytes)
        rows, _ = _racksim.collective_sweep(system, int(gpus), op, lo, hi, float(factor or 0), _size(step_bytes), algo,
                                            int(stride))
        return json.loads(rows)
    if bytes is None:
        raise TypeError("collective: give bytes= (e.g. '1GiB'), or min_bytes=/max_bytes=")
    size = f"{int(bytes)} B" if isinstance(bytes, int) else str(bytes)
    return json.loads(_racksim.collective(system, int(gpus), op, size, algo, int(stride)))


def nccl_tests_table(system: str, gpus: int, op: str = "all_reduce", *, min_bytes: Union[str, int] = 8,
                     max_bytes: Union[str, int] = "8G", factor: Optional[float] = 2, step_bytes=None,
                     algo: str = "auto") -> str:
    """The nccl-tests-shaped table ``racksim collective -b -e -f`` prints (``racksim calibrate fit`` reads it)."""
    _, table = _racksim.collective_sweep(system, int(gpus), op, _size(min_bytes), _size(max_bytes),
                                         float(factor or 0), _size(step_bytes), algo)
    return table


def cli(*args: str) -> tuple[int, str, str]:
    """Run any ``racksim`` command in-process: (exit code, stdout, stderr)."""
    return _racksim.main([str(a) for a in args])


def set_log_level(level: str) -> None:
    """Where racksim's logs go is stderr; level: "warn" (default), "info", "debug", "error", "off"."""
    if level not in ("warn", "warning", "info", "debug", "error", "quiet", "off"):
        raise ValueError(f"unknown log level {level!r}: warn | info | debug | error | off")
    _racksim.set_log_level(level)
