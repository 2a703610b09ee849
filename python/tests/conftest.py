"""Shared fixtures: the repository root, the racksim binary, and running the CLI for comparison."""

import json
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def root() -> pathlib.Path:
    return ROOT


@pytest.fixture(scope="session")
def racksim_binary() -> str:
    b = os.environ.get("RACKSIM_BINARY", str(ROOT / "build" / "sim" / "cli" / "racksim"))
    if not pathlib.Path(b).exists():
        pytest.fail(f"racksim binary not found at {b} (build it, or set RACKSIM_BINARY)", pytrace=False)
    return b


@pytest.fixture(scope="session")
def cli_json(racksim_binary):
    """Runs the racksim executable and parses its --json output (for Python == CLI checks)."""

    def run(*args: str):
        p = subprocess.run([racksim_binary, *args], cwd=ROOT, capture_output=True, text=True, check=False)
        assert p.returncode in (0, 4), p.stderr
        return json.loads(p.stdout)

    return run


@pytest.fixture(scope="session")
def cli_text(racksim_binary):
    def run(*args: str):
        p = subprocess.run([racksim_binary, *args], cwd=ROOT, capture_output=True, text=True, check=False)
        return p.returncode, p.stdout, p.stderr

    return run


@pytest.fixture(autouse=True)
def _in_root(monkeypatch):
    monkeypatch.chdir(ROOT)
