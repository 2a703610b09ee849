#!/usr/bin/env python3
"""Writes python_tour.ipynb from python_tour.py (the percent format: `# %%` code cells, `# %% [markdown]`
markdown cells), without outputs. Run after editing the .py; a test checks the two agree.
    python3 docs/examples/notebook_from_py.py"""

import json
import pathlib
import sys


def cells(py_text: str) -> list:
    out, kind, lines = [], None, []

    def flush():
        if kind is None:
            return
        body = lines[:]
        while body and not body[-1].strip():
            body.pop()
        if kind == "markdown":
            body = [l[2:] if l.startswith("# ") else l.lstrip("#") for l in body]
        src = [l + "\n" for l in body]
        if src:
            src[-1] = src[-1].rstrip("\n")
        cell = {"cell_type": kind, "metadata": {}, "source": src}
        if kind == "code":
            cell.update({"execution_count": None, "outputs": []})
        out.append(cell)

    for line in py_text.splitlines():
        if line.startswith("# %%"):
            flush()
            kind, lines = ("markdown" if "[markdown]" in line else "code"), []
        elif kind is not None:
            lines.append(line)
    flush()
    return out


def notebook(py_text: str) -> dict:
    return {"cells": cells(py_text), "metadata": {"kernelspec": {"display_name": "Python 3 (Debian)", "language": "python",
                                                                  "name": "python3"},
                                                   "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


if __name__ == "__main__":
    here = pathlib.Path(__file__).parent
    nb = notebook((here / "python_tour.py").read_text())
    (here / "python_tour.ipynb").write_text(json.dumps(nb, indent=1) + "\n")
    sys.stderr.write(f"wrote {here / 'python_tour.ipynb'} ({len(nb['cells'])} cells)\n")
