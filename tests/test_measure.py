"""Tests of grpo_edu.measure: statistics on hand numbers, memory against known
allocations and hand-counted parameters, passes per step counted by hand.

Every expected value is written as the arithmetic that produces it.
"""

import math

import numpy as np
import pytest
import torch

from envs import ArithmeticTask
from grpo_edu import get_preset
from grpo_edu import measure as D
from grpo_edu.model import ModelConfig, TinyGPT, ValueModel
from grpo_edu.rollout import sample_batch, sequence_logprobs

TINY = ModelConfig(vocab_size=17, d_model=16, n_layers=1, n_heads=2, max_seq_len=12)


class OddFirstTokenTask(ArithmeticTask):
    """The 2-digit task with a dense, learnable-by-chance reward: R = 1 when the first
    answer token has an odd id. A random policy gets R = 1 about half the time, so the
    gradient estimates of a random tiny policy are not all zero."""

    def token_scores(self, problems, completion_ids, mask, kind="outcome"):
        scores = torch.zeros(completion_ids.shape)
        last = mask.sum(1).long() - 1
        scores[torch.arange(len(problems)), last] = (completion_ids[:, 0] % 2).float()
        return scores


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return TinyGPT(TINY).eval(), OddFirstTokenTask(eval_size=50)


# ------------------------------------------------------------------- pure statistics


def test_variance_stats_by_hand():
    # g1 = (1, 0), g2 = (0, 1), g3 = (1, 1): g_bar = (2/3, 2/3)
    # deviations (1/3, -2/3), (-2/3, 1/3), (1/3, 1/3): squares 5/9 + 5/9 + 2/9 = 4/3
    s = D.variance_stats(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
    assert s["total_variance"] == pytest.approx((4 / 3) / 2)  # / (K - 1)
    assert s["mean_sq_norm"] == pytest.approx(8 / 9)
    assert s["relative_variance"] == pytest.approx((2 / 3) / (8 / 9))  # = 3/4
    assert s["relative_variance_corrected"] == pytest.approx((2 / 3) / (8 / 9 - (2 / 3) / 3))  # = 1
    # leave-one-out means: (1/2, 1), (1, 1/2), (1/2, 1/2)
    # cos((1,0), (1/2,1)) = (1/2) / sqrt(5/4) = 1/sqrt(5), the same for g2, and 1 for g3
    assert s["mean_cosine"] == pytest.approx((2 / math.sqrt(5) + 1) / 3)


def test_variance_stats_edge_cases():
    same = D.variance_stats(torch.ones(4, 3))  # no noise at all
    assert same["total_variance"] == 0 and same["relative_variance"] == 0
    assert same["mean_cosine"] == pytest.approx(1.0)
    opposite = D.variance_stats(torch.tensor([[1.0, 0.0], [-1.0, 0.0]]))  # mean 0: no signal
    assert opposite["relative_variance"] == math.inf
    assert opposite["relative_variance_corrected"] == math.inf
    with pytest.raises(ValueError, match="K >= 2"):
        D.variance_stats(torch.ones(1, 3))


def test_optimal_baseline_by_hand():
    # b* = (1*1 + 0*4 + 0*3 + 1*2) / (1 + 4 + 3 + 2) = 3/10
    assert D.optimal_baseline([1.0, 0.0, 0.0, 1.0], [1.0, 4.0, 3.0, 2.0]) == pytest.approx(0.3)
    # equal score norms: b* is the mean reward
    assert D.optimal_baseline([1.0, 0.0, 0.0, 1.0], [2.0] * 4) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        D.optimal_baseline([1.0, 0.0], [1.0])


def test_gae_at_lambda_one_is_the_critic_baseline():
    from grpo_edu.rollout import Rollout

    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    scores = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    values = torch.tensor([[0.3, 0.5, 0.9], [0.2, 0.1, 0.0]])
    ro = Rollout(
        torch.zeros(2, 1, dtype=torch.long),
        torch.zeros(2, 3, dtype=torch.long),
        mask,
        torch.zeros(2, 3),
        torch.arange(2),
        torch.zeros(2, dtype=torch.bool),
        ["", ""],
    )
    critic = D.estimator_advantages("critic", ro, scores, values=values)
    # A_t = G_t - V(s_t): row 0 has G = 1 at every token, row 1 has G = 0
    assert torch.allclose(critic, torch.tensor([[0.7, 0.5, 0.1], [-0.2, -0.1, 0.0]]))
    assert torch.allclose(D.estimator_advantages("gae", ro, scores, values=values), critic)


# ------------------------------------------------------------------- gradient variance


def test_gradient_variance_tiny_policy(tiny):
    policy, task = tiny
    critic = ValueModel.from_policy(policy)
    out = D.gradient_variance(
        policy, task, n_batches=4, prompts_per_batch=4, group_size=4, critic=critic, seed=0, progress=False
    )
    keys = {
        "total_variance",
        "mean_sq_norm",
        "relative_variance",
        "relative_variance_corrected",
        "mean_cosine",
        "cosine_to_raw",
    }
    assert set(out) == set(D.ESTIMATORS) | {"_meta"}
    for e in D.ESTIMATORS:
        assert set(out[e]) == keys
        assert all(math.isfinite(out[e][k]) for k in keys - {"relative_variance_corrected"})
    # group_norm divides the group-centred reward by std <= 1/2 (0/1 rewards): larger scale
    assert out["group_norm"]["mean_sq_norm"] > out["group_mean"]["mean_sq_norm"]
    assert out["group_norm"]["total_variance"] > out["group_mean"]["total_variance"]
    assert out["raw"]["cosine_to_raw"] == pytest.approx(1.0)
    assert out["gae"]["total_variance"] == pytest.approx(out["critic"]["total_variance"], rel=1e-4)
    meta = out["_meta"]
    assert 0.2 < meta["reward_mean"] < 0.8 and 0 <= meta["b_star"] <= 1
    assert meta["sequences_per_batch"] == 16 and meta["group_size"] == 4

    distinct = D.gradient_variance(
        policy,
        task,
        estimators=("raw", "group_norm"),
        n_batches=2,
        prompts_per_batch=4,
        group_size=4,
        layout="distinct",
        progress=False,
    )
    assert set(distinct) == {"raw", "_meta"} and distinct["_meta"]["skipped"] == ["group_norm"]
    assert distinct["_meta"]["prompts_per_batch"] == 16 and distinct["_meta"]["group_size"] == 1
    with pytest.raises(ValueError):
        D.gradient_variance(policy, task, estimators=("nope",), progress=False)


def test_score_norms_and_critic_fit(tiny):
    policy, task = tiny
    s = D.score_norms(policy, task, n=16, seed=0)
    assert s["b_star"] == pytest.approx(D.optimal_baseline(s["rewards"], s["score_norm2"]))
    assert math.isfinite(s["score_norm2_correct"]) and math.isfinite(s["score_norm2_wrong"])
    # one per-sample norm, recomputed directly: |grad log pi(y_0)|^2
    ro, _, _ = sample_batch(policy, task, 16, 1, *D.rngs(0, "cpu"))
    policy.zero_grad()
    sequence_logprobs(policy, ro.select(torch.tensor([0]))).sum().backward()
    direct = sum(float((p.grad.double() ** 2).sum()) for p in policy.parameters())
    policy.zero_grad()
    assert s["score_norm2"][0] == pytest.approx(direct, rel=1e-5)

    critic, info = D.fit_critic(policy, task, steps=3, batch=32, progress=False)
    assert isinstance(critic, ValueModel) and math.isfinite(info["explained_variance"])


# ------------------------------------------------------------------- memory


def test_peak_memory_sees_a_known_allocation():
    keep = []
    peaks, method = D.peak_memory(
        lambda: keep.append(torch.ones(1_000_000)),  # 4 MB, kept
        lambda: torch.ones(2_000_000).sum(),
    )  # 8 MB, freed
    assert "profiler" in method
    assert peaks[0] == pytest.approx(4e6, rel=0.01)
    assert peaks[1] == pytest.approx(4e6 + 8e6, rel=0.01)  # the kept 4 MB plus the 8 MB


def test_step_memory_breakdown_by_hand_and_ppo_above_grpo():
    # parameters of TINY (d=16, V=17, ctx=12, 1 layer, MLP 4d = 64, untied head without bias):
    emb = 17 * 16 + 12 * 16  # token + position embeddings
    block = 2 * (2 * 16) + (16 * 48 + 48) + (16 * 16 + 16) + (16 * 64 + 64) + (64 * 16 + 16)  # 2 LN, qkv, proj, MLP
    trunk = emb + block + 2 * 16  # + final LayerNorm = 3776
    P = trunk + 17 * 16  # + output head = 4048
    P_critic = trunk + 16 + 1  # the critic: the trunk and a scalar head
    grpo = D.step_memory("grpo", TINY, batch_size=32)
    ppo = D.step_memory("ppo", TINY, batch_size=32)
    b = grpo["breakdown"]
    assert (b["policy_params"], b["policy_grads"], b["optimizer_state"]) == (4 * P, 4 * P, 8 * P)
    assert b["reference_params"] == 4 * P and b["critic_params"] == 0
    b = ppo["breakdown"]
    assert (b["critic_params"], b["critic_grads"], b["critic_optimizer_state"]) == (
        4 * P_critic,
        4 * P_critic,
        8 * P_critic,
    )
    assert grpo["analytic_total"] == 20 * P + grpo["breakdown"]["activations"]
    assert ppo["analytic_total"] == 20 * P + 16 * P_critic + ppo["breakdown"]["activations"]
    assert ppo["measured_peak_step"] >= grpo["measured_peak_step"] > grpo["persistent"] >= 20 * P - 4 * P
    assert ppo["measured_peak_with_rollout"] >= ppo["measured_peak_step"]
    reinforce = D.step_memory("reinforce", TINY, batch_size=32, include_rollout=False)
    assert reinforce["breakdown"]["reference_params"] == 0 and reinforce["measured_peak_with_rollout"] is None
    rows = D.memory_sweep(model_configs=[TINY], batch_sizes=[32], progress=False)
    assert rows[0]["params"] == P and rows[0]["ratio_analytic"] > 1


def test_shared_prompts_cut_grpo_activations():
    """G = 8 rows per prompt: the 7 prompt tokens run once per group instead of 8 times, so
    the saved activations of a minibatch shrink (measured 0.45x with 4-token answers)."""
    cfg = ModelConfig(vocab_size=17, d_model=32, n_layers=2, n_heads=2, max_seq_len=12)
    on = D.step_memory("grpo", cfg, batch_size=128, include_rollout=False)
    off = D.step_memory("grpo", cfg, batch_size=128, include_rollout=False, share_prompts=False)
    assert on["breakdown"]["activations"] < 0.7 * off["breakdown"]["activations"], (on, off)
    assert on["measured_peak_step"] < off["measured_peak_step"]
    ppo = D.step_memory("ppo", cfg, batch_size=128, include_rollout=False, share_prompts=False)
    # one prompt per row either way: the same graph but for PPO's per-token advantages ([b, T] instead of [b])
    assert ppo["breakdown"]["activations"] == pytest.approx(off["breakdown"]["activations"], rel=1e-3)


# ------------------------------------------------------------------- passes per step


@pytest.mark.parametrize(
    "name, updates, expected",
    [
        # REINFORCE: 1 update; one policy forward + backward, nothing else
        ("reinforce", 1, dict(policy_forward=1, policy_backward=1)),
        # critic baseline: V(s_t) for the advantages (1 forward), then a critic regression step
        ("baseline", 1, dict(policy_forward=1, policy_backward=1, critic_forward=1 + 1, critic_backward=1)),
        # PPO: 2 epochs x 2 minibatches = 4 updates; ref and critic once in prepare, critic per update
        (
            "ppo",
            4,
            dict(policy_forward=4, policy_backward=4, reference_forward=1, critic_forward=1 + 4, critic_backward=4),
        ),
        # GRPO: 4 updates, the reference once per step, no critic; pi_old comes from the rollout
        ("grpo", 4, dict(policy_forward=4, policy_backward=4, reference_forward=1)),
    ],
)
def test_step_cost_counts(name, updates, expected):
    preset = get_preset("cpu", model=TINY, sequences_per_step=32)  # GRPO: 4 prompts x 8
    c = D.step_cost(name, preset=preset, n_steps=1)
    assert c["updates_per_step"] == updates and c["sequences_per_step"] == 32
    full = {k: expected.get(k, 0) for k in c["passes_per_step"]}
    assert c["passes_per_step"] == full
    assert c["passes_per_update"]["policy_forward"] == 1
    assert 1 <= c["generation_forwards_per_step"] <= 4  # one per decoded token, at most 3 digits + EOS
    assert c["seconds_per_step"] == pytest.approx(c["generation_seconds"] + c["update_seconds"])


def test_step_cost_times_grpo_with_every_row_its_own_prompt():
    preset = get_preset("cpu", model=TINY, sequences_per_step=32)
    shared, own = (D.step_cost("grpo", preset=preset, n_steps=1, share_prompts=s) for s in (True, False))
    assert (shared["share_prompts"], own["share_prompts"]) == (True, False)
    assert own["passes_per_step"] == shared["passes_per_step"]  # the same passes: one policy forward per update
    assert own["sequences_per_step"] == 32 and np.isfinite(own["update_seconds"])


def test_step_cost_runs_the_reference_only_when_it_is_used():
    preset = get_preset("cpu", model=TINY, sequences_per_step=32)
    c = D.step_cost("reinforce", preset=preset, n_steps=1, with_reference=True)
    assert c["passes_per_step"]["reference_forward"] == 0  # beta = 0: pi_ref is attached but never run
    c = D.step_cost("reinforce", preset=preset, n_steps=1)
    assert c["passes_per_step"]["reference_forward"] == 0
    assert np.isfinite(c["update_seconds"])


def test_group_estimators_by_hand():
    from grpo_edu.rollout import Rollout

    mask = torch.ones(4, 1)
    scores = torch.tensor([[1.0], [0.0], [0.0], [0.0]])  # one group of 4: R = 1, 0, 0, 0
    ro = Rollout(torch.zeros(4, 1, dtype=torch.long), torch.zeros(4, 1, dtype=torch.long), mask, torch.zeros(4, 1),
                 torch.zeros(4, dtype=torch.long), torch.zeros(4, dtype=torch.bool), [""] * 4, group_size=4)  # fmt: skip
    mean = D.estimator_advantages("group_mean", ro, scores, group_size=4)
    loo = D.estimator_advantages("group_loo", ro, scores, group_size=4)
    assert torch.allclose(mean, torch.tensor([0.75, -0.25, -0.25, -0.25]))  # R - mean: (G-1)/G of RLOO
    assert torch.allclose(loo, torch.tensor([1.0, -1 / 3, -1 / 3, -1 / 3]))  # R - mean of the other three
    assert torch.allclose(loo, mean * 4 / 3)
