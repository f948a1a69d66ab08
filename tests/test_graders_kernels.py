"""The graders on every CPU kernel a learner may have, and what they accept and reject.

A learner's CPU is not ours: another vector kernel (``ATEN_CPU_CAPABILITY`` default, avx2, or
the machine's native one) rounds differently. Here:

- each reference solution (course/solutions/) scores full marks on every graded test but the
  long "improves" runs, in a subprocess per kernel, default and avx2 (tests/test_course.py
  grades them in full on the native kernel; the full graders on each kernel were run by hand:
  course/site/testing.md);
- a solution whose every output carries 1e-6 relative noise (another summation order, ten
  times float32 rounding) still passes the reproduction checks;
- a planted mistake in each homework fails its grader, with a message naming the function,
  and also fails the reproduction check (the rollouts diverge);
- ``check_same_history`` on hand-made histories: a loss near zero is compared on its scale.

The noise measurement behind ``course.autograde.REPRODUCE_RTOL``:

    python -m tests.test_graders_kernels 1e-6 1e-3   # largest metric change / its scale, per homework
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from course.autograde import REPRODUCE_RTOL, check_same_history
from course.grade import COURSE, HOMEWORKS, grade

ROOT = COURSE.parent
SOLUTIONS = {hw: COURSE / "solutions" / f"{hw}.py" for hw in HOMEWORKS}
KERNELS = ("default", "avx2")  # native: tests/test_course.py grades every solution in full on it
NOT_IMPROVES = ["-k", "not improves"]  # the 40-60 step "reward rises" runs: see the docstring


def _kernel_env(kernel: str) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("ATEN_CPU_CAPABILITY", None)
    if kernel != "native":
        env["ATEN_CPU_CAPABILITY"] = kernel
    return env


GRADE_ALL = textwrap.dedent(
    """
    import json, sys, torch
    from course.grade import grade
    out = {"capability": torch.backends.cpu.get_cpu_capability(), "reports": {}}
    for hw, path in json.loads(sys.argv[1]).items():
        r = grade(hw, path, pytest_args=["-k", "not improves"])
        out["reports"][hw] = {"all_passed": r.all_passed, "exit": r.pytest_exit_code, "n": len(r.results),
                              "collected": r.collected, "summary": r.summary()}
    print("RESULT " + json.dumps(out))
    """
)


@pytest.mark.parametrize("kernel", KERNELS)
def test_every_solution_passes_its_grader_on_the_kernel(kernel):
    paths = json.dumps({hw: str(p) for hw, p in SOLUTIONS.items()})
    r = subprocess.run([sys.executable, "-c", GRADE_ALL, paths], env=_kernel_env(kernel), cwd=ROOT,
                       capture_output=True, text=True, timeout=900)  # fmt: skip
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    assert r.returncode == 0 and lines, f"the grading subprocess failed (exit {r.returncode}):\n{r.stderr[-3000:]}"
    out = json.loads(lines[-1][len("RESULT ") :])
    if kernel != "native" and out["capability"].lower() != kernel:
        pytest.skip(f"this CPU cannot run the {kernel} kernel (torch ran {out['capability']})")
    for hw, rep in out["reports"].items():
        assert rep["n"] and rep["n"] == rep["collected"], f"{hw} on {out['capability']}:\n{rep['summary']}"
        assert rep["all_passed"] and rep["exit"] == 0, f"{hw} on {out['capability']}:\n{rep['summary']}"


# ---------------------------------------------------------------- rounding noise passes

NOISY = """
import torch
from course.autograde import load_module

_solution = load_module({path!r})
__all__ = _solution.__all__
_g = torch.Generator().manual_seed({seed})


def _noisy(f, eps={eps!r}):
    def p(x):
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            return x * (1 + eps * torch.randn(x.shape, generator=_g, dtype=x.dtype))
        return x

    def g(*args, **kwargs):
        out = f(*args, **kwargs)
        return tuple(p(o) for o in out) if isinstance(out, tuple) else p(out)

    g.__doc__ = f.__doc__
    return g


for _name in __all__:
    globals()[_name] = _noisy(getattr(_solution, _name))
"""


def noisy_solution(hw: str, folder: Path, eps: float, seed: int = 0) -> Path:
    """A copy of ``hw``'s solution whose every tensor output is multiplied by 1 + eps N(0, 1)."""
    path = folder / f"noisy_{hw}.py"
    path.write_text(NOISY.format(path=str(SOLUTIONS[hw]), seed=seed, eps=eps))
    return path


@pytest.mark.parametrize("hw", list(HOMEWORKS))
def test_rounding_noise_passes_the_reproduction_check(hw, tmp_path):
    # hw5 trains nothing: its comparisons (Part B's, with check_close's tolerances) are all graded here
    selection = [] if hw == "hw5" else ["-k", "reproduces or maze"]
    report = grade(hw, noisy_solution(hw, tmp_path, 1e-6), pytest_args=selection)
    assert report.results and report.all_passed, report.summary()


# ------------------------------------------------------------- planted mistakes fail

# hw -> (the solution's line, the mistake, a function the failure message must name)
MISTAKES = {
    "hw1": ("return -(weight * logp)", "return weight * logp", "policy_gradient_loss"),  # sign flip
    "hw2": ("(returns.detach() - b)", "(b - returns.detach())", "baseline_advantages"),  # sign flip
    "hw3": ("delta = (r + gamma * v_next - v) * m", "delta = (r + v_next - v) * m", "gae"),  # missing discount
    "hw4": ("centered = groups - mean", "centered = mean - groups", "group_advantages"),  # sign flip
    "hw5": (
        "rho.clamp(1.0 - eps_low, 1.0 + eps_high)",
        "rho.clamp(1.0 - eps_high, 1.0 + eps_low)",
        "clipped_surrogate_loss",
    ),  # the asymmetric clip range swapped
}
PLANTED_IN_TRAINING = {"hw1", "hw2", "hw4"}  # hw3's PPO trains with gamma = 1: no discount to miss there


def planted(hw: str, folder: Path) -> Path:
    line, wrong, _ = MISTAKES[hw]
    source = SOLUTIONS[hw].read_text()
    assert source.count(line) == 1, f"{hw}'s solution no longer has the line {line!r}"
    path = folder / f"wrong_{hw}.py"
    path.write_text(source.replace(line, wrong))
    return path


@pytest.mark.parametrize("hw", list(HOMEWORKS))
def test_a_planted_mistake_fails_the_grader(hw, tmp_path):
    name = MISTAKES[hw][2]
    report = grade(hw, planted(hw, tmp_path), pytest_args=NOT_IMPROVES)
    wrong = [r for r in report.results if r.verdict == "wrong"]
    assert wrong and report.pytest_exit_code == 1, report.summary()
    assert not [r for r in report.results if r.verdict in ("crashed", "error")], report.summary()
    assert any(name in r.message for r in wrong), f"no failure names {name}:\n{report.summary()}"
    reproduction = [r for r in report.results if "reproduces" in r.description]
    if hw in PLANTED_IN_TRAINING:
        assert reproduction and all(r.verdict == "wrong" for r in reproduction), report.summary()
    # the control, the unplanted solution passing every graded test: tests/test_course.py


# ----------------------------------------------------- check_same_history by hand


class _H:
    def __init__(self, steps, evals=()):
        self.steps = [{"step": i + 1, **s} for i, s in enumerate(steps)]
        self.evals = list(evals)


LIB = _H([{"reward": 0.25, "loss": 0.0066}, {"reward": 0.5, "loss": -0.0041}, {"reward": 0.5, "loss": 0.0001}],
         [{"step": 0, "accuracy": 0.5}])  # fmt: skip


def test_a_loss_near_zero_is_compared_on_its_scale():
    # the loss crosses zero: its largest |value| (0.0066) sets the scale of the comparison
    ok = _H([{"reward": 0.25, "loss": 0.0066}, {"reward": 0.5, "loss": -0.0041 - 0.5 * REPRODUCE_RTOL * 0.0066},
             {"reward": 0.5, "loss": 0.0001 * 1.5}])  # fmt: skip
    check_same_history(ok, LIB, "near zero")  # within rtol of the scale, though 50% off at the 0.0001 step
    bad = _H([{"reward": 0.25, "loss": 0.0066}, {"reward": 0.5, "loss": -0.0041 - 2 * REPRODUCE_RTOL * 0.0066},
              {"reward": 0.5, "loss": 0.0001}])  # fmt: skip
    with pytest.raises(AssertionError, match=r"step 2 the metric 'loss' should be the library's -0.0041"):
        check_same_history(bad, LIB, "control")


def test_sampled_rewards_and_accuracies_must_be_identical():
    check_same_history(_H([dict(s) for s in LIB.steps], LIB.evals), LIB, "identical")
    other = _H([{"reward": 0.25, "loss": 0.0066}, {"reward": 0.5 + 1e-12, "loss": -0.0041}, {"reward": 0.5, "loss": 0}])
    with pytest.raises(AssertionError, match="mean sampled reward should be the library's"):
        check_same_history(other, LIB, "reward")
    acc = _H([dict(s) for s in LIB.steps], [{"step": 0, "accuracy": 0.502}])
    with pytest.raises(AssertionError, match="held-out accuracy at step 0"):
        check_same_history(acc, LIB, "accuracy")
    nan = _H([{"reward": 0.25, "loss": math.nan}, *LIB.steps[1:]])
    with pytest.raises(AssertionError, match="'loss'"):
        check_same_history(nan, LIB, "nan")


# ------------------------------------------------------------------ the measurement


def _measure(eps_values, homeworks=tuple(hw for hw in HOMEWORKS if hw != "hw5")):  # hw5 trains nothing
    """Largest |student - library| / (the metric's largest |value|) over each reproduction run,
    for the solutions with 1 + eps N(0, 1) noise on every output; and whether rewards matched."""
    import importlib
    import tempfile

    import torch

    from course.autograde import load_module, train_with
    from grpo_edu import get_preset, make_task, reference_policy

    torch.set_num_threads(1)
    preset = get_preset("cpu")
    task = make_task(preset)
    reference = reference_policy(preset, task=task, progress=False)
    with tempfile.TemporaryDirectory() as tmp:
        for hw in homeworks:
            grader = importlib.import_module(f"course.{HOMEWORKS[hw][0]}.test_autograder")
            (rep,) = [getattr(grader, a) for a in dir(grader) if a.endswith("reproduces_library")]
            cells = dict(zip(rep.__code__.co_freevars, (c.cell_contents for c in rep.__closure__), strict=True))
            run = cells["student_run"]
            plugs = dict(zip(run.__code__.co_freevars, (c.cell_contents for c in run.__closure__), strict=True))
            plugs = plugs["plugs"]
            n, seqs, algorithm = cells["reproduce_steps"], cells["sequences"], cells["algorithm"]
            kw = dict(task=task, reference=reference, preset=preset, steps=n, sequences_per_step=seqs)
            library = train_with(algorithm(), **kw)
            for eps in eps_values:
                sub = load_module(noisy_solution(hw, Path(tmp), eps))
                student = train_with(algorithm(), **kw, plugs=plugs(sub))
                worst, key = 0.0, ""
                for k, v in library.steps[0].items():
                    if k in ("seconds", "step", "samples") or not isinstance(v, (int, float)):
                        continue
                    lib, mine = [s[k] for s in library.steps], [s[k] for s in student.steps]
                    scale = max((abs(x) for x in lib if not math.isnan(x)), default=0.0) or 1.0
                    d = max((abs(a - b) for a, b in zip(mine, lib) if not (math.isnan(a) and math.isnan(b))),
                            default=0.0)  # fmt: skip
                    if d / scale >= worst:
                        worst, key = d / scale, k
                same = [s["reward"] for s in student.steps] == [s["reward"] for s in library.steps]
                print(f"{hw} eps={eps:g} on {torch.backends.cpu.get_cpu_capability()}: sampled rewards "
                      f"{'identical' if same else 'DIFFER'}; largest change {worst:.2g} of its scale ({key})",
                      flush=True)  # fmt: skip


if __name__ == "__main__":
    _measure([float(a) for a in sys.argv[1:]] or [1e-6])
