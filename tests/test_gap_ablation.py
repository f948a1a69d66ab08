"""The PPO-GRPO gap ablation (issue 32): each arm switches one thing, and the batch-mean arm's gae is the batch mean."""

import math

import pytest
import torch

from grpo_edu import functional as Fn
from grpo_edu.algorithms import GRPOConfig
from grpo_edu.studies import gap_ablation as ga


def _diff(a: dict, b: dict) -> set:
    return {k for k in set(a) | set(b) if a.get(k, "-") != b.get(k, "-")}


@pytest.mark.parametrize("name", [n for n in ga.ARMS if n not in ga.BASES])
def test_each_arm_switches_exactly_the_one_field_it_names(name):
    base, switch = ga.ARMS[name]
    spec, base_spec = ga.arm_spec(name), ga.arm_spec(base)
    assert len(switch) == 1
    assert _diff(spec, base_spec) == set(switch)  # one switch, and it took effect
    assert spec["sequences_per_step"] == base_spec["sequences_per_step"]  # the same completions budget


def test_the_bases_differ_in_more_than_one_field():
    """The control: the comparison itself (PPO against GRPO) switches several things at once."""
    assert len(_diff(ga.arm_spec("PPO"), ga.arm_spec("GRPO"))) > 1


def test_config_differences_list_every_trained_difference():
    d = ga.config_differences()
    for shared in ("lr", "eps_low", "eps_high", "beta", "loss_type", "epochs", "minibatches", "max_grad_norm"):
        assert shared not in d  # the reuse and the optimiser are the same: no arm needed
    assert d["group_size"] == (1, 8) and d["kl_placement"] == ("reward", "loss")
    assert d["whiten_advantages"] == (True, "-") and d["scale_rewards"] == ("-", "group")


def test_batch_mean_gae_ignores_the_critic():
    torch.manual_seed(0)
    rewards = torch.zeros(4, 3)
    rewards[:, -1] = torch.tensor([1.0, 0.0, 1.0, 1.0])
    mask = torch.ones(4, 3)
    values = torch.rand(4, 3)
    adv, ret = ga.batch_mean_gae(rewards, values, mask)
    assert torch.allclose(adv, (rewards.sum(1, keepdim=True) - 0.75).expand(4, 3))
    assert torch.allclose(ret, Fn.gae(rewards, values, mask)[1])  # the critic's target is unchanged (lam = 1)
    assert not torch.allclose(adv, Fn.gae(rewards, values, mask)[0])  # control: the critic's GAE differs
    arm = ga.make_arm("PPO, batch-mean baseline (critic off)")  # and the arm's PPO calls it in place of gae
    assert arm.fn.gae is ga.batch_mean_gae and ga.make_arm("PPO").fn is Fn  # control: PPO's own gae


def test_tiny_run_gives_a_row_per_arm(reference):
    arms = ["PPO, batch-mean baseline (critic off)", "GRPO, 256 x 2"]
    res = ga.run_gap_ablation("cpu", seeds=1, tiny=True, arms=arms, reference=reference, progress=False)
    assert [r["arm"] for r in res["table"]] == ["PPO", arms[0], "GRPO", arms[1]]
    for rows in res["runs"].values():
        assert rows[0]["samples"] == ga.SIZES["tiny"]["steps"] * ga.SIZES["tiny"]["sequences_per_step"]
        assert 0.0 <= rows[0]["accuracy"] <= 1.0
    assert res["sequences_per_step"] == ga.SIZES["tiny"]["sequences_per_step"]
    assert ga.SIZES["full"]["sequences_per_step"] is None  # the full run's batch is the preset's
    assert all(not math.isnan(r["mean"]) for r in res["table"])
    assert "closes" in ga.format_table(res)
    again = ga.run_gap_ablation("cpu", seeds=1, tiny=True, arms=arms[1:], reference=reference, progress=False,
                                previous=res)  # fmt: skip
    assert again["runs"] == {n: res["runs"][n] for n in ("PPO", "GRPO", arms[1])}  # reused, not rerun


def test_a_follow_up_arm_is_read_against_its_chain():
    name = "PPO, 64 x 8, batch-mean baseline"
    assert ga.root(name) == "PPO"
    assert ga.switches(name) == {"group_size": GRPOConfig().group_size, "advantage_baseline": "batch_mean"}
