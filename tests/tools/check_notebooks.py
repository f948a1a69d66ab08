"""`grpo-edu check-notebooks`: do the notebooks' claims hold on another learner's machine?

A learner's CPU is never ours: another vector kernel (``ATEN_CPU_CAPABILITY``) rounds
differently, every seeded run drifts, and an assert calibrated on one draw becomes a coin
flip. This runs ``pytest --nbval`` on the notebooks once per combination of a seed shift
(``GRPO_EDU_SEED_SHIFT``: every seed a notebook uses, the reference's SFT included, moves by
that much) and a CPU capability, each in a fresh process with its own reference cache, and
reports which notebooks passed. It needs the dev extra (pytest, nbval) and a checkout of
the repository (the notebooks are not part of the installed package).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

DEFAULT_RUNS = (("0", "native"), ("1", "native"), ("2", "native"), ("0", "default"), ("0", "avx2"))


def _failures(out: str) -> list[str]:
    """'notebook::Cell N: the error's last line' for every failed cell of a pytest --nbval output."""
    found = []
    for head, body in re.findall(r"_{3,} (\S+?\.ipynb::Cell \d+) _{3,}\n(.*?)(?=\n_{3,} |\n={3,} )", out, re.S):
        errors = [line.strip() for line in body.splitlines() if re.match(r"\s*\w*(Error|Exception)\b", line)]
        found.append(f"{Path(head).name}: {errors[-1] if errors else body.strip().splitlines()[-1]}"[:400])
    return found


def _one(notebooks, shift: str, capability: str, timeout: int) -> dict:
    # GRPO_EDU_LIVE: the stored runs are trained here too (grpo_edu.studies.stored_runs)
    env = dict(os.environ, GRPO_EDU_SEED_SHIFT=shift, OMP_NUM_THREADS="1", GRPO_EDU_LIVE="1")
    env.pop("ATEN_CPU_CAPABILITY", None)
    if capability != "native":
        env["ATEN_CPU_CAPABILITY"] = capability
    with tempfile.TemporaryDirectory(prefix="grpo-edu-nbcheck-") as cache:
        env["GRPO_EDU_CACHE"] = cache  # a fresh reference, trained under this capability and shift
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "pytest", "--nbval", "-q", "-p", "no:cacheprovider", "-rf", *map(str, notebooks)]
        try:
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
            out, code = r.stdout + r.stderr, r.returncode
        except subprocess.TimeoutExpired:
            out, code = f"timed out after {timeout} s", -1
    out = re.sub(r"\x1b\[[0-9;]*m", "", out)  # nbval colours its tracebacks
    failed = sorted({Path(m).name for m in re.findall(r"FAILED (\S+?\.ipynb)", out)})
    summary = next((line for line in reversed(out.splitlines()) if " passed" in line or " failed" in line), out[-200:])
    return {
        "shift": shift,
        "capability": capability,
        "exit_code": code,
        "failed_notebooks": failed,
        "failures": _failures(out),
        "summary": summary.strip("= "),
        "seconds": time.perf_counter() - t0,
        "output": out,
    }


def check_notebooks(notebooks=None, runs=DEFAULT_RUNS, jobs: int = 2, timeout: int = 3600) -> dict:
    """``pytest --nbval`` on ``notebooks`` (default: ``notebooks/*.ipynb`` under the current
    folder) for each ``(seed shift, capability)`` in ``runs``, ``jobs`` at a time."""
    notebooks = sorted(Path(p) for p in (notebooks or Path("notebooks").glob("*.ipynb")))
    if not notebooks:
        raise ValueError("no notebooks found: run from the repository root or pass their paths")
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(lambda r: _one(notebooks, r[0], r[1], timeout), runs))
    return {
        "notebooks": [p.name for p in notebooks],
        "runs": results,
        "all_passed": all(r["exit_code"] == 0 for r in results),
    }


def format_check(res: dict) -> str:
    lines = [
        f"pytest --nbval on {len(res['notebooks'])} notebooks per run ({', '.join(res['notebooks'])})",
        f"{'seed shift':>10}  {'ATEN_CPU_CAPABILITY':<20} {'result':<8} {'minutes':>7}  failed notebooks / summary",
    ]
    for r in res["runs"]:
        ok = "pass" if r["exit_code"] == 0 else "FAIL"
        detail = ", ".join(r["failed_notebooks"]) or r["summary"]
        lines.append(f"{r['shift']:>10}  {r['capability']:<20} {ok:<8} {r['seconds'] / 60:>7.1f}  {detail}")
        lines += [f"{'':>10}  {'':<20} {'':<8} {'':>7}  {f}" for f in r.get("failures", [])]
    lines.append("all runs passed" if res["all_passed"] else "some runs FAILED")
    return "\n".join(lines)
