"""The tree is linted and formatted: `ruff check` and `ruff format --check` pass on the
library, the environments, the tests, the course, the notebooks (ruff reads .ipynb) and the README's code blocks."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PATHS = ["grpo_edu", "envs", "tests", "course", "notebooks", "conftest.py", "README.md"]  # ruff formats its code blocks


def _ruff(*args):
    exe = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(exe).exists() and not shutil.which(exe):
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    return subprocess.run([exe, *args, *PATHS], cwd=ROOT, capture_output=True, text=True)


def test_ruff_check():
    r = _ruff("check")
    assert r.returncode == 0, r.stdout + r.stderr


def test_ruff_format():
    r = _ruff("format", "--check")
    assert r.returncode == 0, r.stdout + r.stderr
