"""A silent bug of gradient accumulation, in the silent-bug lab's terms (`grpo_edu.demos.silent_bugs`).

With ``gradient_accumulation_steps`` k > 1 an optimizer step sums the gradients of k micro-batches. The
library weighs each micro-batch's loss by its share of the step's normaliser (``Algorithm.micro_batches``:
tokens for a token mean), which gives the one-batch gradient (tests/test_loss_scale.py). The bug takes each
micro-batch's token mean and averages them with weight 1/k: a token of a micro-batch of n_j tokens then
weighs 1/(k n_j) instead of 1/N, more in a micro-batch of short completions. Nothing crashes and nothing in a
run's curves says so; what shows it is the check practitioners run on a trainer: the same first batch with
k micro-batches and with one must give the same loss and gradient norm (to float rounding). Trainers fixed
this bug in 2024-2026 (the Hugging Face Trainer's accumulation fix of late 2024; TRL's "dapo" normaliser).

The bug is a `Bug` (its words) with a rule on numbers (`SIGNATURES`, a `Signature`), run like the lab's
(`run_bugged`: grpo_edu.train on the bugged GRPO). It sits in a module of its own, not in
``silent_bugs.BUGS``: homework 5's graded runs are stored with a hash of silent_bugs.py and every rule of its
``SIGNATURES`` (tests/test_hw5_data.py), and notebook 11 tabulates that module's bugs; it joins them when
that data is next made.

    from grpo_edu.demos.accumulation_bug import BUG, SIGNATURES, run_bugged
    bugged = run_bugged(BUG.name, reference, preset, steps=2)     # a History, config["bug"] names it
    healthy = run_bugged("healthy", reference, preset, steps=2)   # plain GRPO, one batch per update
    SIGNATURES[BUG.name][0].shows(bugged, healthy)                # True; the right accumulation: False
"""

from __future__ import annotations

import numpy as np

from ..algorithms import GRPO
from ..train import History, train
from . import silent_bugs
from .silent_bugs import Bug, Signature

__all__ = ["ACCUMULATION", "BUG", "BUGS", "MicroBatchTokenMean", "ONE_UPDATE", "SIGNATURES", "make_bugged",
           "run_bugged"]  # fmt: skip

ACCUMULATION = 4  # micro-batches per optimizer step of the bugged run (its healthy twin: one)
ONE_UPDATE = {"epochs": 1, "minibatches": 1}
"""This module's runs (healthy and bugged) take one optimizer update per batch unless ``config`` says otherwise:
step 1's logged grad_norm is then the first update's, on the same batch and parameters in both runs. (With the
default 2 x 2 updates it is a mean over four, and Adam's later updates move even the right accumulation's
off the healthy run's by 0.3% at seed 0 of tests/test_accumulation_bug.py's runs.)"""


class MicroBatchTokenMean(GRPO):
    """GRPO whose accumulation averages its micro-batches' losses with weight 1/k (the bug)."""

    def micro_batches(self, batch, idx):
        parts = super().micro_batches(batch, idx)
        return [(rows, 1.0 / len(parts)) for rows, _ in parts]


BUG = Bug(
    "micro_batch_token_mean",
    "under gradient accumulation, the token mean taken per micro-batch and the micro-batches' losses averaged "
    "(1/k each), instead of one token mean over the optimizer step's tokens",
    "the Hugging Face Trainer's gradient accumulation loss fix (late 2024) and TRL / verl / OpenRLHF threads on "
    "loss normalisation across micro-batches and steps_per_generation (TRL's 'dapo' normaliser)",
    "with one optimizer update per batch, the first step's grad_norm (the same first batch as the run without "
    "accumulation) differs from that run's by far more than float rounding: by 0.2% to 15% (relative difference "
    "above 1e-4), where the library's accumulation matches it exactly or to 1e-7",
    f"GRPO with gradient_accumulation_steps={ACCUMULATION} whose micro_batches weighs each micro-batch 1/k, not "
    "by its share of the step's tokens",
    config={"gradient_accumulation_steps": ACCUMULATION},
)
BUGS = {BUG.name: BUG}


def _log10_gap(h, ok, key="grad_norm"):  # log10 |x_1 / healthy x_1 - 1| at step 1; -inf where they agree exactly
    with np.errstate(divide="ignore"):
        return float(np.log10(abs(h.series(key)[0] / ok.series(key)[0] - 1.0)))


SIGNATURES: dict[str, tuple[Signature, ...]] = {
    BUG.name: (
        Signature("log10 of the step-1 grad_norm's relative difference to the healthy run's", _log10_gap, ">", -4.0),
    )  # fmt: skip
}


def _ours(bug) -> bool:
    return bug is BUG or bug == BUG.name


def make_bugged(bug, **config) -> GRPO:
    """The GRPO a run trains: this bug's (``BUG.name``; its config on top of ``config``), else the lab's
    (`grpo_edu.demos.silent_bugs.make_bugged`: ``"healthy"`` or one of its bugs)."""
    return MicroBatchTokenMean(**{**config, **BUG.config}) if _ours(bug) else silent_bugs.make_bugged(bug, **config)


def run_bugged(bug, reference, preset, task=None, seed: int = 0, steps: int = 30, sequences_per_step: int = 256,
               eval_every: int = 10, progress: bool = False, **config) -> History:  # fmt: skip
    """GRPO from ``reference`` with ``bug`` in: this module's or ``"healthy"``, with `ONE_UPDATE` under ``config``,
    or one of the lab's (then `grpo_edu.demos.silent_bugs.run_bugged` itself, ``config`` as given); the lab's
    default budget; ``config["bug"]`` names it."""
    budget = dict(task=task, seed=seed, steps=steps, sequences_per_step=sequences_per_step, eval_every=eval_every,
                  progress=progress)  # fmt: skip
    if bug in (None, "healthy"):
        return silent_bugs.run_bugged("healthy", reference, preset, **budget, **{**ONE_UPDATE, **config})
    if not _ours(bug):
        return silent_bugs.run_bugged(bug, reference, preset, **budget, **config)
    config = {**ONE_UPDATE, **config}
    if task is None:
        from ..warmstart.presets import make_task

        budget["task"] = make_task(preset)
    h = train(make_bugged(bug, **config), reference=reference, preset=preset, name=BUG.name, **budget)
    h.config["bug"] = BUG.name
    return h
