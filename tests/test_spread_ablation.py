"""The spread-world ablation (issue 45): each arm switches one thing; the verdicts, the score-norm
prediction and the stored result (tests/data/spread_ablation), whose first numbers the study reproduces."""

from dataclasses import asdict

import pytest
import torch

from grpo_edu import functional as Fn
from grpo_edu.studies import spread_ablation as sa


def _config(name: str) -> dict:
    return asdict(sa.make_arm(name).config)


@pytest.mark.parametrize("name", [n for n in sa.ARMS if n not in sa.RUNGS])
def test_each_arm_switches_exactly_what_it_names(name):
    base, switch = sa.ARMS[name]
    a, b = _config(name), _config(base)
    assert {k for k in a if a[k] != b[k]} == set(switch)  # the switch, and nothing else, took effect
    assert sa.root(name) == sa.root(base) and sa.root(name) in ("PPO", "GRPO")


def test_the_rungs_differ_from_reinforce_in_more_than_one_thing():
    """The control: PPO and GRPO against REINFORCE switch several things at once (why the arms exist)."""
    r = _config("REINFORCE")
    for rung in ("PPO", "GRPO"):
        c = _config(rung)
        assert len({k for k in r if k in c and r[k] != c[k]} | (set(c) - set(r))) > 3
    assert all(_config(n)["lr"] == r["lr"] for n in sa.RUNGS)  # the learning rate is no confound: no arm


def test_no_clip_never_binds_and_the_default_clip_does():
    torch.manual_seed(0)
    logp, old = torch.randn(64, 4), torch.randn(64, 4)  # ratios from about e^-5 to e^5
    adv = torch.randn(64, 4)
    loss, stats = Fn.clipped_surrogate_loss(logp, old, adv, sa.NO_CLIP["eps_low"], sa.NO_CLIP["eps_high"])
    assert torch.allclose(loss, -torch.exp(logp - old) * adv) and stats["clip_ratio"] == 0.0
    _, default = Fn.clipped_surrogate_loss(logp, old, adv)  # control: eps 0.2 clips many of these tokens
    assert default["clip_ratio"] > 0.3


def test_table_reads_each_arm_against_its_base_by_hand():
    def runs(*accs):
        return [{"accuracy": a, "easy": 1.0, "hard": a, "kl_end": 1.0, "samples_to_target": None} for a in accs]

    res = {
        "REINFORCE": runs(0.99, 0.99, 0.99),
        "GRPO": runs(0.70, 0.75, 0.80),  # gap to REINFORCE: 0.29, 0.24, 0.19 (mean 0.24)
        "GRPO, beta 0": runs(0.90, 0.93, 0.95),  # +0.20, +0.18, +0.15: holds
        "GRPO, no clip": runs(0.69, 0.75, 0.81),  # -0.01, 0, +0.01: depends
        "GRPO, one update": runs(0.60, 0.70, 0.80),  # -0.10, -0.05, 0: fails here
        "GRPO, beta 0, one update": runs(0.93, 0.93, 0.95),  # from "GRPO, beta 0": +0.03, 0, 0: depends
    }
    rows = {r["arm"]: r for r in sa.table(res)}
    assert rows["GRPO, beta 0"]["verdict"] == "holds"
    assert rows["GRPO, beta 0"]["closes"] == pytest.approx(((0.20 + 0.18 + 0.15) / 3) / 0.24)
    assert rows["GRPO, no clip"]["verdict"] == "depends"
    assert rows["GRPO, one update"]["verdict"] == "fails here"
    follow = rows["GRPO, beta 0, one update"]
    assert follow["base"] == "GRPO, beta 0" and follow["diff"] == pytest.approx([0.03, 0.0, 0.0])
    assert rows["GRPO"]["verdict"] == "" and rows["GRPO"]["diff"] is None


def test_predicted_ratio_by_hand():
    # two right answers (|s|^2 = 1), two wrong ones (|s|^2 = 10); V = 0.5 for all
    R, v, s2 = [1.0, 1.0, 0.0, 0.0], [0.5] * 4, [1.0, 1.0, 10.0, 10.0]
    ratio, share = sa.predicted_ratio(R, v, s2)
    # numerator: 2 * 0.25 * 1 + 2 * 0.25 * 10 = 5.5; REINFORCE's: 2 * 1 * 1 = 2
    assert ratio == pytest.approx(5.5 / 2) and share == pytest.approx(5.0 / 5.5)
    # control: the same baseline where wrong answers are no longer: below REINFORCE's variance
    assert sa.predicted_ratio(R, v, [1.0, 1.0, 1.0, 1.0])[0] == pytest.approx(1.0 / 2)
    with pytest.raises(ValueError):
        sa.predicted_ratio([0.0, 0.0], [0.1, 0.1], [1.0, 1.0])  # no right answer: REINFORCE's variance is 0


def test_bad_input_is_a_value_error():
    with pytest.raises(ValueError, match="worlds"):
        sa.run_spread_ablation("cpu", seeds=1, worlds=("moon",), tiny=True)
    with pytest.raises(ValueError, match="unknown arm"):
        sa.make_arm("GRPO, beta 7")


def test_tiny_run_gives_a_row_per_arm_and_its_base():
    res = sa.run_spread_ablation("cpu", seeds=1, worlds=("spread",), arms=["GRPO, beta 0"], tiny=True, progress=False)
    runs = res["worlds"]["spread"]["runs"]
    assert list(runs) == ["GRPO", "GRPO, beta 0"]
    base, arm = runs["GRPO"][0], runs["GRPO, beta 0"][0]
    assert len(base["reward"]) == sa.SIZES["tiny"]["steps"] and base["evals"][-1][1] == 2 * 32
    assert all(k is not None for k in base["kl"]) and all(k is None for k in arm["kl"])  # beta 0: no KL term
    assert 0.0 <= arm["easy"] <= 1.0 and 0.0 <= arm["hard"] <= 1.0 and arm["kl_end"] > 0.0
