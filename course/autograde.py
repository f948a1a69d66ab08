"""What the four autograders share: load a submission, compare it with the library,
train with it plugged in.

Every check fails with a message that says what was expected and what came back.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import sys
from contextlib import nullcontext
from pathlib import Path

import torch

SUBMISSION_ENV = "GRPO_EDU_SUBMISSION"  # the file an autograder grades (default: the starter)
_counter = itertools.count()


def load_module(path):
    """Import the Python file ``path`` as a fresh module (re-read on every call)."""
    path = Path(path).expanduser().resolve()
    if not path.is_file():
        raise FileNotFoundError(f"submission {path} does not exist (set ${SUBMISSION_ENV} to a .py file)")
    name = f"_grpo_edu_submission_{next(_counter)}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look modules up by name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


# ------------------------------------------------------------------------- comparisons


def fmt(x) -> str:
    """A tensor as a short readable string: its values when small, else shape and stats."""
    if not isinstance(x, torch.Tensor):
        return repr(x)
    t = x.detach().cpu()
    if t.numel() <= 24:
        vals = t.double().tolist() if t.is_floating_point() else t.tolist()
        rounded = _round(vals)
        return f"tensor({rounded}, shape={list(t.shape)})"
    tf = t.double()
    return f"tensor(shape={list(t.shape)}, min={tf.min():.4g}, max={tf.max():.4g}, mean={tf.mean():.4g})"


def _round(v):
    if isinstance(v, list):
        return [_round(u) for u in v]
    return round(v, 5) if isinstance(v, float) else v


def check_close(got, expected, what: str, rtol: float = 1e-5, atol: float = 1e-6, equal_nan: bool = False) -> None:
    """``got`` must be a tensor of ``expected``'s shape with close values (NaN only where
    expected is NaN and ``equal_nan``). Compared in float64: any float dtype is accepted."""
    assert isinstance(got, torch.Tensor), (
        f"{what}: expected a torch.Tensor of shape {list(expected.shape)}, got {type(got).__name__}: {got!r}"
    )
    assert tuple(got.shape) == tuple(expected.shape), (
        f"{what}: expected shape {list(expected.shape)}, got shape {list(got.shape)}"
    )
    g, e = got.detach().double().cpu(), expected.detach().double().cpu()
    torch.testing.assert_close(
        g, e, rtol=rtol, atol=atol, equal_nan=equal_nan,
        msg=lambda m: f"{what}:\n  expected {fmt(e)}\n  got      {fmt(g)}\n  ({m.splitlines()[0]}; "
        + " ".join(m.splitlines()[1:3]) + ")",
    )  # fmt: skip


def check_float(got, expected: float, what: str, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """``got`` is a number (python float or 0-dim tensor) close to ``expected``."""
    if isinstance(got, torch.Tensor):
        assert got.numel() == 1, f"{what}: expected a number, got a tensor of shape {list(got.shape)}"
        got = got.item()
    assert isinstance(got, (int, float)), f"{what}: expected a number, got {type(got).__name__}: {got!r}"
    assert math.isclose(got, expected, rel_tol=rtol, abs_tol=atol), f"{what}: expected {expected:.6g}, got {got:.6g}"


def grad_of(scalar_fn, *inputs: torch.Tensor) -> list[torch.Tensor | None]:
    """d scalar_fn(*inputs) / d input for each input (None where no gradient flows).

    ``scalar_fn`` gets fresh leaf copies that require grad; a non-scalar output is summed.
    """
    leaves = [x.detach().clone().requires_grad_(True) for x in inputs]
    out = scalar_fn(*leaves)
    if isinstance(out, tuple):
        out = out[0]
    assert isinstance(out, torch.Tensor), f"expected a tensor output, got {type(out).__name__}"
    if not out.requires_grad:
        return [None for _ in leaves]
    out.sum().backward()
    return [x.grad for x in leaves]


def check_no_grad(got_grad, name: str, what: str) -> None:
    """The gradient into ``name`` must be absent or zero: it is a constant (detached)."""
    assert got_grad is None or not bool(got_grad.abs().gt(0).any()), (
        f"{what}: {name} must be treated as a constant (detach it), but a gradient flowed into it: {fmt(got_grad)}"
    )


# -------------------------------------------------------------------------- training


def train_with(algorithm, *, task, reference, preset, steps, sequences_per_step, seed=0,
               eval_every=10, plugs=None):  # fmt: skip
    """``grpo_edu.train`` with the functional-core pieces ``plugs`` swapped in (if any)."""
    from grpo_edu import plug, train

    with plug(**plugs) if plugs else nullcontext():
        return train(algorithm, task=task, reference=reference, preset=preset, steps=steps,
                     sequences_per_step=sequences_per_step, seed=seed, eval_every=eval_every,
                     progress=False)  # fmt: skip


# The reproduction check's tolerance on continuous metrics, as a fraction of the metric's
# largest |value| over the library's run (a loss that crosses zero has no relative error of
# its own). MEASURED with `python -m tests.test_graders_kernels 1e-6 1e-3` (AVX-512, shift 0):
# multiplying every output of the reference solutions' functions by 1 + 1e-6 * N(0, 1), ten
# times float32 rounding, left the sampled rewards identical and moved no metric by more than
# 2.5e-4 of its scale (hw3's loss); with 1e-3 noise hw2's and hw3's rewards diverged, hw1's and
# hw4's moved a metric by up to 0.0099 of its scale. Reported on another AVX-512 CPU: hw3's
# loss at step 5 off by 9.2e-5 from -0.004111, at most 2.2% of a scale >= 0.0042. 5e-2 passes
# that and sits 200x above the measured rounding; a wrong formula changes the sampled rewards
# (tests/test_graders_kernels.py plants one per homework).
REPRODUCE_RTOL = 5e-2
REPRODUCE_ATOL = 1e-7  # for a metric that is 0 throughout the library's run


def check_same_history(student, library, what: str, rtol: float = REPRODUCE_RTOL, atol: float = REPRODUCE_ATOL) -> None:
    """The student's run reproduces the library's for the steps the library ran.

    Same seed, same machine: what the run samples and greedily decodes must be identical
    (the mean sampled reward at every step, the held-out accuracy at every evaluation both
    runs made); every other metric (losses, norms, clip fractions, ...) within ``rtol`` of
    that metric's largest |value| over the library's run (or ``atol`` if it is 0 throughout):
    the student may add in another order, and a loss near zero is a difference of nearly
    equal terms, so its own relative error means nothing. ``student`` may be longer: only
    the library's steps are compared.
    """
    n = len(library.steps)
    assert len(student.steps) >= n, f"{what}: expected at least {n} steps, got {len(student.steps)}"
    scale = {}
    for lib in library.steps:
        for key, lv in lib.items():
            if isinstance(lv, (int, float)) and not math.isnan(lv):
                scale[key] = max(scale.get(key, 0.0), abs(lv))
    for mine, lib in zip(student.steps[:n], library.steps, strict=True):
        step = lib["step"]
        assert mine["reward"] == lib["reward"], (
            f"{what}: at step {step} the mean sampled reward should be the library's "
            f"{lib['reward']:.6f} (same seed), got {mine['reward']:.6f}. The rollouts diverged: an "
            f"earlier update differed."
        )
        for key, lv in lib.items():
            if key in ("seconds", "step", "samples") or not isinstance(lv, (int, float)):
                continue
            sv = mine.get(key)
            assert sv is not None, f"{what}: step {step} is missing the metric {key!r}"
            tol = max(rtol * scale.get(key, 0.0), atol)
            ok = (math.isnan(lv) and math.isnan(sv)) or (not math.isnan(sv) and abs(sv - lv) <= tol)
            assert ok, (
                f"{what}: at step {step} the metric {key!r} should be the library's {lv:.6g}, got {sv:.6g} "
                f"(allowed: +-{tol:.3g}, {rtol:g} of its largest |value| over the library's run)"
            )
    student_evals = {e["step"]: e["accuracy"] for e in student.evals}
    for e in library.evals:
        if e["step"] in student_evals:
            assert student_evals[e["step"]] == e["accuracy"], (
                f"{what}: held-out accuracy at step {e['step']} should be the library's "
                f"{e['accuracy']:.3f}, got {student_evals[e['step']]:.3f}"
            )


def check_improves(history, window: int, margin: float, what: str) -> tuple[float, float]:
    """Mean sampled reward of the last ``window`` steps >= first ``window`` + ``margin``."""
    r = [s["reward"] for s in history.steps]
    assert len(r) >= 2 * window, f"{what}: expected at least {2 * window} steps, got {len(r)}"
    first, last = sum(r[:window]) / window, sum(r[-window:]) / window
    assert last >= first + margin, (
        f"{what}: the mean sampled reward should rise by at least {margin:.3f} from the first "
        f"{window} steps to the last {window}; it went {first:.3f} -> {last:.3f}"
    )
    return first, last


def training_tests(algorithm, plugs, probe, what: str, docs: tuple[str, str], *, steps: int, window: int,
                   margin: float, sequences: int, reproduce_steps: int, finite: str = "loss"):  # fmt: skip
    """The two graded training tests every homework ends with, on the arithmetic task:

        reproduces: the algorithm with the student's functions plugged in (``plugs(submission)``)
                    repeats the library's run for ``reproduce_steps`` steps (same seed);
        improves:   over ``steps`` steps its mean sampled reward rises by ``margin`` from the
                    first ``window`` steps to the last, and ``finite`` stays finite.

    ``algorithm()`` makes a fresh algorithm; ``probe(submission)`` calls the student's
    functions once (an unimplemented one fails here); ``docs`` are the two tests' one-line
    descriptions, as the grader prints them. The student's run is trained once per grading
    session (``memo``). Returns ``(test_reproduces, test_improves)``: assign them to names
    that start with ``test_`` in the autograder module.
    """
    import pytest

    def student_run(submission, memo, task, reference, preset, n=steps):
        probe(submission)
        if "student" not in memo or len(memo["student"].steps) < n:
            memo["student"] = train_with(algorithm(), task=task, reference=reference, preset=preset, steps=n,
                                         sequences_per_step=sequences, plugs=plugs(submission))  # fmt: skip
        return memo["student"]

    @pytest.mark.graded(points=2)
    def test_reproduces(submission, memo, task, reference, preset, request):
        # the whole run when test_improves will use it too, else (``-k "not improves"``) its first steps
        improves_selected = any(getattr(item, "function", None) is test_improves for item in request.session.items)
        student = student_run(
            submission, memo, task, reference, preset, steps if improves_selected else reproduce_steps
        )
        library = train_with(algorithm(), task=task, reference=reference, preset=preset, steps=reproduce_steps,
                             sequences_per_step=sequences)  # fmt: skip
        check_same_history(student, library, f"{what} with your functions")

    @pytest.mark.graded(points=2)
    def test_improves(submission, memo, task, reference, preset):
        student = student_run(submission, memo, task, reference, preset)
        check_improves(student, window, margin, f"{what} with your functions ({steps} steps)")
        name = "value loss" if finite == "value_loss" else "training loss"
        assert all(math.isfinite(s[finite]) for s in student.steps), f"the {name} became NaN or inf"

    test_reproduces.__doc__, test_improves.__doc__ = docs
    return test_reproduces, test_improves


# -- inputs shared by the autograders --------------------------------------------------
def randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def random_mask(B, T, seed=0):
    """Rows of random lengths 1..T (one row of each extreme), ones first then zeros."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    lengths[0], lengths[-1] = 1, T
    return (torch.arange(T)[None, :] < lengths[:, None]).float()
