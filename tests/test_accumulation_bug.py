"""The silent bug of gradient accumulation (`grpo_edu.demos.accumulation_bug`) leaves its signature, and a
healthy run does not.

Short seeded runs of their own (homework 5's graded set and notebook 11 hold silent_bugs.py's bugs only): one
GRPO step of 128 completions, one optimizer update (the module's `ONE_UPDATE`), from the cached cpu reference
of the "spread" world, seeds 0 to 2; three runs each from the same reference and seed: healthy (one batch per
update), bugged (4 micro-batches, each one's token mean averaged with weight 1/4) and right (4 micro-batches,
the library's weights). The rule reads the step-1 grad_norm against the healthy run's (the same first batch).
Measured over seeds 0-5, its log10 relative difference: bugged -0.82 to -2.76 (mean -1.69, sd 0.68: the bound,
-4, 3.4 sd below); right: -inf (equal) at four seeds, -6.97 and -7.18 at two (float32 rounding). With the
default 2 x 2 updates per step the right accumulation's logged mean drifts to -2.57 at seed 0 (Adam's later
updates), hence one update.
"""

import pytest

from grpo_edu import get_preset, make_task, reference_policy, setup_torch
from grpo_edu.demos import silent_bugs
from grpo_edu.demos.accumulation_bug import (
    ACCUMULATION,
    BUG,
    BUGS,
    ONE_UPDATE,
    SIGNATURES,
    MicroBatchTokenMean,
    make_bugged,
    run_bugged,
)

SEEDS = (0, 1, 2)


@pytest.fixture(scope="module")
def runs():
    preset = get_preset("cpu", world="spread")
    setup_torch(preset)
    reference = reference_policy(preset, progress=False)
    task = make_task(preset)
    out = {}
    for s in SEEDS:
        kw = dict(task=task, seed=preset.seed + s, steps=1, sequences_per_step=128, eval_every=1)
        out[s] = {
            "healthy": run_bugged("healthy", reference, preset, **kw),
            "bugged": run_bugged(BUG.name, reference, preset, **kw),
            "right": run_bugged("healthy", reference, preset, gradient_accumulation_steps=ACCUMULATION, **kw),
        }
    return out


def test_the_bug_is_one_of_the_labs_kind():
    assert set(BUGS) == set(SIGNATURES) == {BUG.name} and BUG.name not in silent_bugs.BUGS
    assert isinstance(BUG, silent_bugs.Bug) and BUG.description and BUG.report and BUG.signature and BUG.injection
    assert all(isinstance(s, silent_bugs.Signature) for s in SIGNATURES[BUG.name])
    algo = make_bugged(BUG.name, group_size=4)
    assert type(algo) is MicroBatchTokenMean and algo.config.gradient_accumulation_steps == ACCUMULATION
    assert algo.config.group_size == 4 and type(make_bugged("healthy")) is silent_bugs.GRPO


def test_the_bug_shows_its_rule_and_a_healthy_run_does_not(runs):
    (sig,) = SIGNATURES[BUG.name]
    for s, r in runs.items():
        assert r["bugged"].config["bug"] == BUG.name and r["healthy"].config["bug"] == "healthy"
        assert sig.shows(r["bugged"], r["healthy"]), (s, sig.rule(), sig.of(r["bugged"], r["healthy"]))
        # control: the library's accumulation (4 micro-batches, weighted by tokens) matches the healthy run
        assert not sig.shows(r["right"], r["healthy"]), (s, sig.of(r["right"], r["healthy"]))
        assert not sig.shows(r["healthy"], r["healthy"])
        assert r["right"].steps[0]["updates"] == r["healthy"].steps[0]["updates"] == 1  # ONE_UPDATE
        assert {k: r["healthy"].config[k] for k in ONE_UPDATE} == ONE_UPDATE
