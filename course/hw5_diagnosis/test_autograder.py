"""Autograder of homework 5 (diagnose a silent bug).

    python -m course.grade hw5 path/to/student_hw5.py

Part A: ``diagnose`` is called on held-out runs it was not developed on (other RL seeds and
other SFT references than the notebook's and the practice set's), stored as metric-only
histories in ``data/runs.json`` (``python -m course.hw5_diagnosis.make_data`` wrote them):
one graded test per run, the same number of runs per class, so the fraction of Part A's
points is the fraction of runs named right, and a constant answer scores 1 / (number of
classes), chance. Part B: the two fixed functions are compared with grpo_edu.functional on
hand-made and random inputs.
"""

import copy

import pytest
import torch

import grpo_edu.functional as Fn
from course.autograde import check_close, check_float, check_no_grad, grad_of, randn, random_mask
from course.hw5_diagnosis.make_data import known_names, load_runs, run_id
from grpo_edu.train import History

DATA = load_runs()  # {"meta": {...}, "runs": [{"label", "reference", "seed", "history"}, ...]}
RUNS = DATA["runs"]
NAMES = known_names()  # "healthy" and every bug the library can inject (graded or not)

# ------------------------------------------------------------ Part A: the diagnosis


@pytest.mark.graded(points=1)
@pytest.mark.parametrize("index", range(len(RUNS)), ids=[run_id(r) for r in RUNS])
def test_diagnose_held_out_run(submission, index):
    """diagnose: a held-out run, named right"""
    run = RUNS[index]
    history = History.from_dict(copy.deepcopy(run["history"]))  # a fresh copy: diagnose may not alter the data
    answer = submission.diagnose(history)
    if not (isinstance(answer, str) and answer in NAMES):  # one line (an assert would add pytest's explanation)
        raise AssertionError(f"diagnose returned {answer!r}, not a known name: answer one of {', '.join(NAMES)}")
    label = run["label"]
    if answer != label:
        raise AssertionError(
            f"diagnose named this run {answer!r}; it is {label!r} ({run['reference']}, RL seed {run['seed']}). "
            f"{label}'s signature: {DATA['meta']['signatures'].get(label, 'none (a healthy run)')}"
        )


# ------------------------------------------------------------ Part B: (1) group advantages

STAT_KEYS = ("clip_low", "clip_high", "clip_ratio", "ratio_mean")


def _check_group_stats(got, expected, what):
    assert isinstance(got, dict), f"{what}: the second output should be a dict of statistics, got {type(got).__name__}"
    for k in ("mean", "std", "frac_zero_std"):
        assert k in got, f"{what}: the statistics dict misses {k!r} (expected keys mean, std, frac_zero_std)"
    check_close(got["mean"], expected["mean"], f"{what}: stats['mean'] (one per prompt, in prompt order)")
    check_close(got["std"], expected["std"], f"{what}: stats['std'] (one per prompt, in prompt order)")
    check_float(got["frac_zero_std"], expected["frac_zero_std"], f"{what}: stats['frac_zero_std']")


@pytest.mark.graded(points=2)
def test_group_advantages_by_hand(submission):
    """group_advantages: three prompts of four samples, by hand"""
    r = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    what = "group_advantages([1,0,0,0 | 1,1,0,0 | 1,1,1,1], G=4, eps=0)"
    adv, stats = submission.group_advantages(r, 4, scale="group", eps=0.0)
    check_close(stats["mean"], torch.tensor([0.25, 0.5, 1.0]),
                f"{what}: stats['mean'], one per prompt: rows 0-3 answer prompt 0, rows 4-7 prompt 1, "
                "rows 8-11 prompt 2 (is each group the G consecutive rows of one prompt?)")  # fmt: skip
    s1 = (0.25 * 0.75) ** 0.5  # std (1/G) of [1, 0, 0, 0]
    expected = [0.75 / s1, -0.25 / s1, -0.25 / s1, -0.25 / s1, 1.0, 1.0, -1.0, -1.0, 0.0, 0.0, 0.0, 0.0]
    check_close(adv, torch.tensor(expected), f"{what}: the advantages (the all-equal group gets 0)")
    _check_group_stats(stats, {"mean": torch.tensor([0.25, 0.5, 1.0]), "std": torch.tensor([s1, 0.5, 0.0]),
                               "frac_zero_std": 1 / 3}, what)  # fmt: skip


@pytest.mark.graded(points=1)
@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_group_advantages_matches_library(submission, scale):
    """group_advantages: random 0/1 and real rewards, every option, as grpo_edu.functional"""
    g = torch.Generator().manual_seed(1)
    binary = (torch.rand(32, generator=g) < 0.3).float()
    binary[:8] = 1.0  # two all-equal groups of 4
    for rewards, kind in ((binary, "0/1"), (randn(32, seed=2), "real-valued")):
        for G in (4, 8):
            for unbiased in (False, True):
                for loo in (False, True):
                    what = (f"group_advantages({kind} rewards [32], G={G}, scale={scale!r}, unbiased={unbiased}, "
                            f"leave_one_out={loo})")  # fmt: skip
                    adv, stats = submission.group_advantages(rewards, G, scale, 1e-4, unbiased, loo)
                    lib_adv, lib_stats = Fn.group_advantages(rewards, G, scale, 1e-4, unbiased, loo)
                    _check_group_stats(stats, lib_stats, what)
                    check_close(adv, lib_adv, what + ": the advantages")


@pytest.mark.graded(points=1)
def test_group_advantages_edge_cases(submission):
    """group_advantages: integer rewards, G = 1, all-equal rewards with eps = 0"""
    ints = torch.tensor([1, 0, 1, 1])
    adv, _ = submission.group_advantages(ints, 2)
    check_close(adv, Fn.group_advantages(ints, 2)[0],
                "group_advantages(integer rewards [1,0 | 1,1], G=2): prompt 0 has one right answer of two, "
                "prompt 1 two (A = [1, -1, 0, 0] up to eps)")  # fmt: skip
    adv, stats = submission.group_advantages(torch.tensor([1.0, 0.0, 1.0]), 1)
    check_close(adv, torch.zeros(3), "group_advantages(G=1): a group of one has no baseline but itself -> 0")
    check_float(stats["frac_zero_std"], 1.0, "group_advantages(G=1): stats['frac_zero_std']")
    adv, _ = submission.group_advantages(torch.tensor([0.3, 0.3, 0.3, 0.3]), 4, eps=0.0)
    check_close(adv, torch.zeros(4), "group_advantages([0.3]*4, G=4, eps=0): equal rewards give 0, not NaN")


# ------------------------------------------------------------ Part B: (2) clipped surrogate


def _check_clip_stats(got, expected, what):
    assert isinstance(got, dict), f"{what}: the second output should be a dict of statistics, got {type(got).__name__}"
    missing = [k for k in STAT_KEYS if k not in got]
    assert not missing, f"{what}: the statistics dict misses {missing} (expected keys {list(STAT_KEYS)})"
    for k in STAT_KEYS:
        check_float(got[k], expected[k], f"{what}: stats[{k!r}]")


@pytest.mark.graded(points=2)
def test_clipped_surrogate_by_hand(submission):
    """clipped_surrogate_loss: rho in {0.5, 0.9, 1, 1.1, 1.5} with A = +1 and A = -1"""
    rho = torch.tensor([0.5, 0.9, 1.0, 1.1, 1.5])
    logp, old = rho.log().repeat(2, 1), torch.zeros(2, 5)
    loss, stats = submission.clipped_surrogate_loss(logp, old, torch.tensor([1.0, -1.0]), eps_low=0.2)
    expected = torch.tensor([[-0.5, -0.9, -1.0, -1.1, -1.2],  # A > 0: -min(rho, clip(rho)): capped at 1.2 above
                             [0.8, 0.9, 1.0, 1.1, 1.5]])  # A < 0: max(rho, clip(rho)): floored at 0.8 below  # fmt: skip
    check_close(loss, expected,
                "clipped_surrogate_loss(rho=[0.5, 0.9, 1, 1.1, 1.5], A=[+1, -1], eps=0.2): the pessimistic bound "
                "-min(rho A, clip(rho) A) is the LARGER loss: a gain past the clip range earns nothing, a loss "
                "counts in full")  # fmt: skip
    _check_clip_stats(stats, {"clip_low": 0.1, "clip_high": 0.1, "clip_ratio": 0.2, "ratio_mean": 1.0},
                      "the same example (one token clipped low with A < 0, one high with A > 0, of 10)")  # fmt: skip


@pytest.mark.graded(points=1)
@pytest.mark.parametrize(
    "eps_low,eps_high", [(0.2, None), (0.2, 0.28), (0.1, 0.4)],
    ids=["eps=0.2", "eps_low=0.2,eps_high=0.28", "eps_low=0.1,eps_high=0.4"],
)  # fmt: skip
def test_clipped_surrogate_matches_library(submission, eps_low, eps_high):
    """clipped_surrogate_loss: random ratios and advantages, masked statistics, as grpo_edu"""
    logp, old = -randn(6, 5, seed=7).abs(), -randn(6, 5, seed=8).abs()
    old = logp + 0.4 * (old - logp)  # ratios between ~0.5 and ~2: many tokens outside the clip range
    m = random_mask(6, 5, seed=10)
    for adv in (randn(6, seed=9), randn(6, 5, seed=9)):
        what = f"clipped_surrogate_loss(random, eps_low={eps_low}, eps_high={eps_high}, advantages {list(adv.shape)})"
        loss, stats = submission.clipped_surrogate_loss(logp, old, adv, eps_low, eps_high, mask=m)
        lib_loss, lib_stats = Fn.clipped_surrogate_loss(logp, old, adv, eps_low, eps_high, mask=m)
        check_close(loss, lib_loss, what)
        _check_clip_stats(stats, lib_stats, what + " with a mask")


@pytest.mark.graded(points=2)
def test_clipped_surrogate_gradient(submission):
    """clipped_surrogate_loss: gradient 0 on clipped tokens, -A at rho = 1, none into old_logp or A"""
    logp, adv = -randn(6, 5, seed=11).abs(), randn(6, 5, seed=12)
    old = logp + 0.5 * randn(6, 5, seed=13)
    g_logp, g_old, g_adv = grad_of(lambda a, b, c: submission.clipped_surrogate_loss(a, b, c, 0.2, 0.3)[0],
                                   logp, old, adv)  # fmt: skip
    (e_logp,) = grad_of(lambda a: Fn.clipped_surrogate_loss(a, old, adv, 0.2, 0.3)[0], logp)
    assert g_logp is not None, "clipped_surrogate_loss: no gradient flowed into logp"
    check_close(g_logp, e_logp, "clipped_surrogate_loss: d loss / d logp (0 exactly where the update has gone "
                "past the clip range in the advantage's direction; -rho A elsewhere)")  # fmt: skip
    check_no_grad(g_old, "old_logp", "clipped_surrogate_loss")
    check_no_grad(g_adv, "advantages", "clipped_surrogate_loss")
    (g_at_1,) = grad_of(lambda a: submission.clipped_surrogate_loss(a, logp, adv)[0], logp)
    check_close(g_at_1, -adv, "clipped_surrogate_loss: d loss / d logp at rho = 1 (logp == old_logp): -A")
