import copy

import pytest
import torch

from grpo_edu import functional as Fn
from grpo_edu.algorithms import (
    ALGORITHMS,
    GRPO,
    PPO,
    GRPOConfig,
    PPOConfig,
    ReinforceBaseline,
    make_algorithm,
)
from grpo_edu.algorithms.base import Batch
from grpo_edu.rollout import expand, generate


def _batch(task, policy, n_prompts=8, G=4, seed=0):
    probs = task.sample(n_prompts, seed)
    ro = generate(
        policy,
        task.encode_prompts(probs),
        group_size=G,
        max_new_tokens=task.max_answer_length,
        generator=torch.Generator().manual_seed(seed),
        tokenizer=task.tokenizer,
    )
    return ro, task.token_scores(expand(probs, G), ro.completion_ids, ro.mask)


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_every_algorithm_updates_the_policy(name, task, tiny_policy):
    ref = copy.deepcopy(tiny_policy)
    algo = make_algorithm(name, group_size=4) if name == "grpo" else make_algorithm(name)
    algo.setup(tiny_policy, ref, generator=torch.Generator().manual_seed(0))
    before = [p.detach().clone() for p in tiny_policy.parameters()]
    G = algo.config.group_size
    ro, scores = _batch(task, tiny_policy, G=G)
    scores[::2, 0] = 1.0  # make sure some rewards differ
    stats = algo.update(ro, scores)
    assert stats["updates"] == algo.config.epochs * algo.config.minibatches
    for k in ("loss", "entropy", "grad_norm", "completion_length"):
        assert k in stats and stats[k] == stats[k], k  # present and not NaN
    assert ("kl" in stats) == (algo.config.beta > 0)  # pi_ref is run (and its KL logged) only when used
    assert any(not torch.equal(a, b) for a, b in zip(before, tiny_policy.parameters()))
    for p in ref.parameters():
        assert not p.requires_grad  # the reference is frozen
    assert ("value_loss" in stats) == (algo.critic is not None) == (name in ("baseline", "ppo"))


@pytest.mark.parametrize("name", ["grpo", "ppo"])
def test_shared_prompts_change_no_number_of_an_update(name, task, tiny_policy):
    """share_prompts (the default) runs each prompt once for its G rows, in the policy's,
    the reference's and the critic's forward: one update on the same batch gives the same
    statistics and the same weights, to float rounding, as every row running its own."""
    ro, scores = _batch(task, tiny_policy, G=4)
    scores[::2, 0] = 1.0
    out = {}
    for share in (True, False):
        policy, ref = copy.deepcopy(tiny_policy), copy.deepcopy(tiny_policy)
        algo = make_algorithm(name, group_size=4, share_prompts=share)
        algo.setup(policy, ref, generator=torch.Generator().manual_seed(0))
        out[share] = algo.update(ro, scores), [p.detach().clone() for p in policy.parameters()]
    (on, w_on), (off, w_off) = out[True], out[False]
    for k in ("loss", "grad_norm", "kl", "clip_ratio") + (("value_loss",) if name == "ppo" else ()):
        assert on[k] == pytest.approx(off[k], rel=1e-4, abs=1e-6), k
    for a, b in zip(w_on, w_off, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-4)


def test_same_interface_one_line_differs(task, tiny_policy):
    """The advantage is where the rungs differ: hand-check each on one batch."""
    ro, scores = _batch(task, tiny_policy, n_prompts=2, G=4)
    scores = torch.zeros_like(ro.mask)
    last = ro.mask.sum(1).long() - 1
    R = torch.tensor([1.0, 0, 0, 0, 1, 1, 0, 0])
    scores[torch.arange(8), last] = R
    batch = Batch(ro, scores, R, ro.mask, ro.logprobs, None)
    rf = make_algorithm("reinforce")
    torch.testing.assert_close(rf.advantages(batch).advantages, R[:, None] * ro.mask)  # G_t = R (gamma 1)
    bm = ReinforceBaseline(baseline="batch_mean")
    est = bm.advantages(batch)
    torch.testing.assert_close(est.advantages, (R[:, None] - 0.375) * ro.mask)  # mean 3/8
    assert est.stats == {"baseline": 0.375} and batch.stats == {}  # returned, not written into the batch
    rm = ReinforceBaseline(baseline="running_mean", running_mean_decay=0.5)
    assert rm.advantages(batch).stats["baseline"] == 0.375  # the first batch starts the average
    batch2 = Batch(ro, scores * 0, R * 0, ro.mask, ro.logprobs, None)
    assert rm.advantages(batch2).stats["baseline"] == 0.375  # b is the average *before* this batch
    assert rm.advantages(batch2).stats["baseline"] == 0.1875  # 0.5 * 0.375 + 0.5 * 0
    g = GRPO(group_size=4)
    adv = g.advantages(batch).advantages
    # group 1: r = [1,0,0,0], mean 0.25, population std sqrt(0.1875) = 0.4330
    s1 = 0.1875**0.5
    torch.testing.assert_close(adv[:4], torch.tensor([0.75, -0.25, -0.25, -0.25]) / (s1 + 1e-4))
    torch.testing.assert_close(adv[4:], torch.tensor([0.5, 0.5, -0.5, -0.5]) / (0.5 + 1e-4))
    loo = GRPO(group_size=4, leave_one_out=True, scale_rewards="none").advantages(batch).advantages
    # RLOO: r_i - mean of the other three: 1 - 0 = 1, 0 - 1/3 = -1/3; 1 - 1/3, 0 - 2/3
    torch.testing.assert_close(loo, torch.tensor([1.0, -1 / 3, -1 / 3, -1 / 3, 2 / 3, 2 / 3, -2 / 3, -2 / 3]))


def test_each_rung_owns_its_line():
    """The loss that differs lives in the rung's own file; GRPO is PPO without the critic."""
    import inspect

    from grpo_edu.algorithms import baseline, grpo, ppo, reinforce

    assert "Fn.policy_gradient_loss" in inspect.getsource(reinforce.Reinforce.loss)
    assert "Fn.baseline_advantages" in inspect.getsource(baseline.ReinforceBaseline.advantages)
    assert "Fn.clipped_surrogate_loss" in inspect.getsource(ppo.PPO.loss)
    assert "Fn.group_advantages" in inspect.getsource(grpo.GRPO.advantages)
    assert grpo.GRPO.loss is ppo.PPO.loss and issubclass(grpo.GRPO, ppo.PPO)
    for module in (reinforce, baseline, ppo, grpo):
        assert len(inspect.getsource(module).splitlines()) <= 110, module.__name__


def test_kl_in_reward_changes_sequence_reward(task, tiny_policy):
    ref = copy.deepcopy(tiny_policy)
    with torch.no_grad():
        ref.trunk.ln_f.weight.mul_(0.5)  # make pi_ref differ from pi
    ro, scores = _batch(task, tiny_policy, G=4)
    algo = GRPO(group_size=4, kl_placement="reward", beta=0.1).setup(tiny_policy, ref)
    batch = algo.prepare(ro, scores)
    log_ratio = Fn.masked_sum(ro.logprobs - batch.ref_logp, ro.mask, dim=1)
    torch.testing.assert_close(batch.rewards, scores.sum(1) - 0.1 * log_ratio, atol=1e-5, rtol=0)
    algo2 = GRPO(group_size=4, kl_placement="loss", beta=0.1).setup(tiny_policy, ref)
    torch.testing.assert_close(algo2.prepare(ro, scores).rewards, scores.sum(1))


def test_mask_truncated_completions(task, tiny_policy):
    ro, scores = _batch(task, tiny_policy, G=4)
    ro.truncated[:3] = True
    algo = GRPO(group_size=4, mask_truncated_completions=True).setup(tiny_policy, copy.deepcopy(tiny_policy))
    batch = algo.prepare(ro, scores)
    assert batch.mask[:3].sum() == 0
    keep = ~ro.truncated
    torch.testing.assert_close(batch.mask[keep], ro.mask[keep])
    assert batch.mask[~keep].sum() == 0


def test_dynamic_sampling_keeps_informative_groups():
    g = GRPO(group_size=2)
    keep = g.informative_groups(torch.tensor([1.0, 1.0, 0.0, 1.0, 0.0, 0.0]))
    assert keep.tolist() == [False, False, True, True, False, False]


def test_non_finite_loss_is_named(task, tiny_policy):
    algo = make_algorithm("reinforce").setup(tiny_policy, None)
    ro, scores = _batch(task, tiny_policy, G=1)
    scores[0, 0] = float("nan")
    with pytest.raises(FloatingPointError, match="advantages is nan"):
        algo.update(ro, scores)


def test_update_before_setup_and_bad_shapes(task, tiny_policy):
    ro, scores = _batch(task, tiny_policy, G=1)
    with pytest.raises(RuntimeError, match="setup"):
        make_algorithm("reinforce").update(ro, scores)
    algo = make_algorithm("reinforce").setup(tiny_policy)
    with pytest.raises(ValueError, match="scores must have"):
        algo.update(ro, scores[:, :1])
    with pytest.raises(ValueError, match="multiple of group_size"):
        GRPO(group_size=3).setup(tiny_policy).update(ro.select(torch.arange(4)), scores[:4])


@pytest.mark.parametrize(
    "cls, kwargs, match",
    [
        (PPOConfig, dict(lr=0), "PPOConfig.lr"),
        (PPOConfig, dict(eps_low=1.5), "eps_low"),
        (PPOConfig, dict(lam=2), "lam"),
        (GRPOConfig, dict(group_size=1), "group_size"),
        (GRPOConfig, dict(scale_rewards="std"), "scale_rewards"),
        (GRPOConfig, dict(loss_type="mean"), "loss_type"),
        (GRPOConfig, dict(kl_placement="both"), "kl_placement"),
        (GRPOConfig, dict(kl_estimator="k4"), "kl_estimator"),
        (GRPOConfig, dict(beta=-0.1), "beta"),
        (GRPOConfig, dict(epochs=0), "epochs"),
        (GRPOConfig, dict(share_prompts="yes"), "share_prompts"),
    ],
)
def test_bad_config_values_are_named(cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cls(**kwargs)


def test_practitioner_names():
    assert GRPOConfig(loss_type="dr_grpo").loss_type == "dr_grpo"
    assert GRPOConfig(kl_placement="loss").kl_kind == "k3"
    assert GRPOConfig(kl_placement="reward").kl_kind == "k1"
    assert PPO().config.kl_placement == "reward"  # PPO for LMs: KL penalty in the reward
    with pytest.raises(ValueError, match="unknown algorithm"):
        make_algorithm("dpo")


def test_plug_reaches_the_algorithms(task, tiny_policy):
    """grpo_edu.plug swaps a functional-core function everywhere the library uses it."""
    import grpo_edu

    original = Fn.kl_penalized_rewards
    calls = []

    def spy(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    ro, scores = _batch(task, tiny_policy, G=4)
    algo = GRPO(group_size=4, kl_placement="reward", beta=0.1).setup(tiny_policy, copy.deepcopy(tiny_policy))
    with grpo_edu.plug(kl_penalized_rewards=spy):
        algo.prepare(ro, scores)
    assert calls == [1]
    assert Fn.kl_penalized_rewards is original  # restored
    with pytest.raises(ValueError, match="not functions of grpo_edu.functional"):
        with grpo_edu.plug(not_a_function=spy):
            pass
