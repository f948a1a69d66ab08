"""Notebook 06 without the [trl] extra is one visible skipped test with its reason, not a silent absence.

Each test runs pytest in a fresh process on a copy of notebooks/conftest.py beside a stand-in notebook
06 (two code cells); the missing extra is simulated by `sys.modules["trl"] = None`, which makes the
import fail and `importlib.util.find_spec("trl")` answer None, without uninstalling anything."""

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
RUN = "import sys; {stub}import pytest; sys.exit(pytest.main(sys.argv[1:]))"


def _notebook(path: Path) -> None:
    cells = [
        {"cell_type": "code", "execution_count": i + 1, "metadata": {}, "outputs": [], "source": f"x = {i}"}
        for i in range(2)
    ]
    meta = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    path.write_text(json.dumps({"cells": cells, "metadata": meta, "nbformat": 4, "nbformat_minor": 5}))


def _pytest(tmp_path: Path, *args: str, without: str | None = None) -> subprocess.CompletedProcess:
    shutil.copy(NOTEBOOKS / "conftest.py", tmp_path / "conftest.py")
    _notebook(tmp_path / "06_graduate_to_trl.ipynb")
    stub = f"sys.modules[{without!r}] = None; " if without else ""
    cmd = [sys.executable, "-c", RUN.format(stub=stub), "-p", "no:cacheprovider", "--nbval", "-rs", *args, "."]
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "package",
    [
        "trl",  # with or without the extra: the reason names trl
        pytest.param(  # without trl the reason names trl, whatever else is missing
            "transformers",
            marks=pytest.mark.skipif(
                importlib.util.find_spec("trl") is None, reason='needs the [trl] extra (pip install -e ".[trl]")'
            ),
        ),
    ],
)
def test_missing_extra_is_one_skip_with_its_reason(tmp_path, package):
    r = _pytest(tmp_path, without=package)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "1 skipped" in out and "passed" not in out, out
    assert "needs the optional [trl] extra" in out and repr(package) in out, out  # the reason, in the -rs summary
    assert "06_graduate_to_trl.ipynb" in out, out


def test_missing_extra_is_listed_at_collection(tmp_path):
    r = _pytest(tmp_path, "--collect-only", "-q", without="trl")
    assert "06_graduate_to_trl.ipynb::notebook" in r.stdout and "1 test collected" in r.stdout, r.stdout + r.stderr


@pytest.mark.skipif(importlib.util.find_spec("trl") is None, reason='needs the [trl] extra (pip install -e ".[trl]")')
def test_with_the_extra_nbval_collects_every_cell(tmp_path):
    r = _pytest(tmp_path, "--collect-only", "-q")
    assert "2 tests collected" in r.stdout and "::Cell 1" in r.stdout, r.stdout + r.stderr
