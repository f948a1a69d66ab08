"""Policy lag and the corrections for it: the functions of the core (grpo_edu.functional.off_policy) on
hand-computed values and as properties, the ring of weights (GRPOConfig.policy_lag), the knob's checks,
the identity with no lag (every correction is plain GRPO when the learner samples) and a lagged run that
learns where the same run with the update switched off does not."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_edu import functional as Fn
from grpo_edu.algorithms import GRPO, GRPOConfig
from grpo_edu.algorithms.off_policy import CORRECTIONS, LaggedSampler, m2po_objective
from grpo_edu.algorithms.policy_losses import POLICY_LOSSES

LOG = math.log


def _pair(ratios, behav=-1.0):
    """(prox_logp, behav_logp, mask) [1, T] with pi_prox / pi_behav = ratios on every token."""
    b = torch.full((1, len(ratios)), behav)
    return b + torch.tensor([[LOG(r) for r in ratios]]), b, torch.ones(1, len(ratios))


# ------------------------------------------------------------------ hand-computed values


def test_decoupled_weight_is_the_ratio_dropped_above_the_cap():
    prox, behav, mask = _pair([2.0, 0.5, 8.0, 5.0])
    mask[0, 3] = 0.0  # padding: its weight is not counted
    w, stats = Fn.decoupled_weights(prox, behav, mask, cap=5.0)
    torch.testing.assert_close(w[0, :3], torch.tensor([2.0, 0.5, 0.0]))  # 8 > 5: dropped (AReaL), not truncated
    assert stats["dropped_frac"] == pytest.approx(1 / 3)
    w, stats = Fn.decoupled_weights(prox, behav, mask, cap=None)  # untruncated: the plain ratio
    torch.testing.assert_close(w[0, :3], torch.tensor([2.0, 0.5, 8.0]))
    assert stats["dropped_frac"] == 0.0


def test_icepop_keeps_the_ratio_only_inside_alpha_beta():
    prox, behav, mask = _pair([0.25, 1.0, 4.0, 6.0, 0.5, 5.0])
    w, stats = Fn.icepop_weights(prox, behav, mask)  # the paper's [0.5, 5]: both ends kept
    torch.testing.assert_close(w[0], torch.tensor([0.0, 1.0, 4.0, 0.0, 0.5, 5.0]))
    assert stats["dropped_frac"] == pytest.approx(2 / 6)
    with pytest.raises(ValueError, match="alpha must be < beta"):
        Fn.icepop_weights(prox, behav, mask, alpha=2.0, beta=2.0)


def test_truncated_is_is_the_sampler_weight_of_objectives_py():
    """'tis' is no new function: CORRECTIONS calls sampler_importance_weights token_truncate at TRL's C = 3;
    the other rows call the core's functions with their defaults (the papers' bounds)."""
    prox, behav, mask = _pair([4.0, 0.5, 3.0, 6.0])
    w, stats = CORRECTIONS["tis"].weights(Fn, prox, behav, mask)
    torch.testing.assert_close(w[0], torch.tensor([3.0, 0.5, 3.0, 3.0]))  # min(r, 3): truncated, none dropped
    assert stats["is_clipped_frac"] == pytest.approx(2 / 4)
    w, _ = CORRECTIONS["decoupled"].weights(Fn, prox, behav, mask)
    torch.testing.assert_close(w[0], torch.tensor([4.0, 0.5, 3.0, 0.0]))  # AReaL's cap 5
    w, _ = CORRECTIONS["icepop"].weights(Fn, prox, behav, mask)
    torch.testing.assert_close(w[0], torch.tensor([4.0, 0.5, 3.0, 0.0]))  # IcePop's [0.5, 5]


def test_m2po_drops_the_largest_squares_until_the_mean_is_under_the_threshold():
    # d^2 = .01, .25, .04, 0: M2 = .3/4 = .075 > .04; drop .25: (.01+.04+0)/3 = .01667 <= .04: stop
    d = torch.tensor([[0.1, -0.5, 0.2, 0.0, 3.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0, 0.0]])  # the 3.0 is padding: never counted
    keep, stats = Fn.m2po_mask(d, mask, threshold=0.04)
    torch.testing.assert_close(keep, torch.tensor([[1.0, 0.0, 1.0, 1.0, 0.0]]))
    assert stats["dropped_frac"] == 0.25
    assert stats["m2"] == pytest.approx(0.075) and stats["m2_kept"] == pytest.approx(0.05 / 3)
    keep, stats = Fn.m2po_mask(d, mask, threshold=0.1)  # already under: nothing dropped
    assert keep.sum() == 4 and stats["dropped_frac"] == 0.0
    keep, stats = Fn.m2po_mask(torch.full((1, 3), 0.5), torch.ones(1, 3), threshold=0.04)  # even one is too far
    assert keep.sum() == 0 and stats["dropped_frac"] == 1.0 and stats["m2_kept"] == 0.0


def _batch(old_logp, advantages):
    from types import SimpleNamespace

    return SimpleNamespace(old_logp=old_logp, advantages=advantages)


def test_m2po_objective_is_the_unclipped_ratio_times_the_mask():
    logp = torch.tensor([[LOG(1.5), LOG(0.5), LOG(1.1)]], requires_grad=True)
    behav, adv, mask = torch.zeros(1, 3), torch.tensor([2.0]), torch.ones(1, 3)
    loss, stats = m2po_objective(Fn, POLICY_LOSSES["clip"], logp, _batch(behav, adv), torch.arange(1), mask)
    # d^2 = .164, .480, .0091: M2 = .218; drop .480: .0866; drop .164: .0091 <= .04. Kept: the 1.1 token only
    torch.testing.assert_close(loss.detach(), torch.tensor([[0.0, 0.0, -2.2]]))  # -rho A with no eps clip
    assert stats["m2po_dropped_frac"] == pytest.approx(2 / 3) and stats["clip_ratio"] == 0.0
    loss.sum().backward()
    torch.testing.assert_close(logp.grad, torch.tensor([[0.0, 0.0, -2.2]]))  # d(-rho A)/dlogp = -rho A


# ------------------------------------------------------------------ properties

_logps = st.lists(st.floats(-4.0, 0.0), min_size=2, max_size=12)


@settings(max_examples=60, deadline=None)
@given(prox=_logps, behav=_logps, cap=st.floats(1.01, 10.0))
def test_masks_only_drop_and_weights_stay_in_range(prox, behav, cap):
    n = min(len(prox), len(behav))
    p, b, m = torch.tensor([prox[:n]]), torch.tensor([behav[:n]]), torch.ones(1, n)
    r = torch.exp(p - b)
    for w, _ in (Fn.decoupled_weights(p, b, m, cap=cap), Fn.icepop_weights(p, b, m, alpha=1 / cap, beta=cap)):
        assert bool(((w == 0) | torch.isclose(w, r)).all())  # each token: its ratio, or dropped
        assert float(w.max()) <= cap * (1 + 1e-6)
    w, _ = Fn.icepop_weights(p, b, m, alpha=1 / cap, beta=cap)
    assert bool(((w == 0) | (w >= 1 / cap * (1 - 1e-6))).all())


@settings(max_examples=60, deadline=None)
@given(d=st.lists(st.floats(-2.0, 2.0), min_size=1, max_size=16), tau=st.floats(0.0, 0.5))
def test_m2po_keeps_the_most_tokens_whose_second_moment_fits(d, tau):
    x = torch.tensor([d], dtype=torch.float64)
    keep, stats = Fn.m2po_mask(x, torch.ones_like(x), threshold=tau)
    kept, dropped = x[keep.bool()].square(), x[~keep.bool()].square()
    if kept.numel():
        assert float(kept.mean()) <= tau + 1e-12  # the constraint holds on what is kept
    if dropped.numel() and kept.numel():
        assert float(dropped.min()) >= float(kept.max())  # only the largest squares are dropped
    if dropped.numel():  # one fewer drop would break it: the smallest dropped square put back exceeds tau
        back = torch.cat([kept, dropped.min().reshape(1)])
        assert float(back.mean()) > tau
    assert stats["dropped_frac"] == pytest.approx(dropped.numel() / x.numel())


@settings(max_examples=40, deadline=None)
@given(logp=_logps, adv=st.floats(-2.0, 2.0))
def test_with_no_lag_every_correction_is_the_plain_clip(logp, adv):
    """The sampler is the learner: pi_behav = pi_prox = pi_theta. Every weight is exactly 1, nothing is
    dropped, and each correction's loss and gradient are PPO's clipped surrogate's."""
    x = torch.tensor([logp])
    m, a = torch.ones_like(x), torch.tensor([adv])
    lp = x.clone().requires_grad_(True)
    ref, _ = Fn.clipped_surrogate_loss(lp, x, a, mask=m)
    (g_ref,) = torch.autograd.grad(ref.sum(), lp)
    for name, row in CORRECTIONS.items():
        lp = x.clone().requires_grad_(True)
        if name == "m2po":
            loss, _ = m2po_objective(Fn, POLICY_LOSSES["clip"], lp, _batch(x, a), torch.arange(1), m)
        else:
            loss, _ = Fn.clipped_surrogate_loss(lp, x, a, mask=m)
            if row.weights is not None:
                w, stats = row.weights(Fn, x, x, m)
                assert bool((w == 1).all()) and stats.get("dropped_frac", 0.0) == 0.0, name
                loss = loss * w
        (g,) = torch.autograd.grad(loss.sum(), lp)
        torch.testing.assert_close(loss.detach(), ref.detach(), msg=name)
        torch.testing.assert_close(g, g_ref, msg=name)


# ------------------------------------------------------------------ the ring of weights


def test_the_lagged_sampler_holds_the_weights_k_updates_ago():
    torch.manual_seed(0)
    net = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    lagged, history = LaggedSampler(net, opt, lag=3), [net.weight.detach().clone()]
    assert lagged.sampler() is not net and lagged.staleness == 0
    for u in range(6):
        opt.zero_grad()
        net(torch.randn(4, 3)).pow(2).sum().backward()
        opt.step()
        history.append(net.weight.detach().clone())
        assert lagged.staleness == min(u + 1, 3)
        torch.testing.assert_close(lagged.sampler().weight, history[max(0, u + 1 - 3)], rtol=0, atol=0)
    assert not any(p.requires_grad for p in lagged.sampler().parameters())
    with pytest.raises(ValueError, match="lag must be >= 1"):
        LaggedSampler(net, opt, lag=0)


def _rollout(task, policy, seed=0):
    from grpo_edu.rollout import generate

    prompts = task.encode_prompts(task.sample(8, seed))
    return generate(policy, prompts, group_size=4, max_new_tokens=3, generator=torch.Generator().manual_seed(seed))


def test_a_lagged_rollout_trains_against_the_log_probs_its_correction_names(task, tiny_policy):
    from grpo_edu.rollout import sequence_logprobs
    from grpo_edu.train import update

    algo = GRPO(group_size=4, beta=0.0, policy_lag=2, off_policy_correction="decoupled", epochs=1, minibatches=1)
    algo.setup(tiny_policy, None, torch.Generator().manual_seed(0))
    for _ in range(2):  # two updates: the sampler is now the starting weights, 2 behind
        ro = _rollout(task, algo.sampling_policy())
        update(algo, ro, torch.rand(ro.mask.shape, generator=torch.Generator().manual_seed(1)).round())
    ro = _rollout(task, algo.sampling_policy(), seed=1)
    batch = algo.prepare(ro, torch.zeros_like(ro.mask))
    with torch.no_grad():
        prox = sequence_logprobs(tiny_policy, ro)
    m = ro.mask.bool()
    assert batch.stats["staleness"] == 2.0
    torch.testing.assert_close(batch.old_logp[m], prox[m])  # the clip is against the learner now
    assert float((prox - ro.logprobs)[m].abs().max()) > 1e-3  # and the sampler really is behind
    w = torch.exp(prox - ro.logprobs)
    torch.testing.assert_close(batch.is_weights[m], torch.where(w > 5, 0.0, w)[m])
    clip = GRPO(algo.config, off_policy_correction="ppo_clip").setup(tiny_policy, None)
    assert clip.prepare(ro, torch.zeros_like(ro.mask)).old_logp is ro.logprobs  # the clip against the sampler


@pytest.mark.parametrize("correction", sorted(CORRECTIONS))
def test_with_no_lag_the_update_is_plain_grpos_exactly(task, tiny_policy, correction):
    """policy_lag=0: the rollout's log-probs are the learner's, every weight is exactly 1, so the update
    is the default's bit for bit (m2po opens the clip: the same with one optimizer update per rollout)."""
    import copy

    from grpo_edu.train import update

    one = {"epochs": 1, "minibatches": 1} if correction == "m2po" else {}
    out = []
    for knobs in ({}, {"off_policy_correction": correction}):
        policy = copy.deepcopy(tiny_policy)
        algo = GRPO(group_size=4, beta=0.0, **one, **knobs).setup(policy, None, torch.Generator().manual_seed(0))
        ro = _rollout(task, algo.sampling_policy())
        assert algo.sampling_policy() is policy
        update(algo, ro, torch.rand(ro.mask.shape, generator=torch.Generator().manual_seed(1)).round())
        out.append(torch.cat([p.detach().flatten() for p in policy.parameters()]))
    assert torch.equal(out[0], out[1]), correction


# ------------------------------------------------------------------ a lagged run that learns


@pytest.mark.parametrize("correction", ["decoupled", "m2po"])
def test_a_run_four_updates_behind_learns_and_the_same_run_without_updates_does_not(task, tiny_policy, correction):
    """Lag 4 = one whole step behind (2 epochs x 2 minibatches): the learner still moves pi(7) from under
    0.15 by more than 0.3 in 25 steps. Control: the same run with lr 1e-9 (the update off) fails it."""
    import copy

    from tests.test_objectives import _first_token_task

    gains = {}
    for lr in (3e-3, 1e-9):
        policy = copy.deepcopy(tiny_policy)
        algo = GRPO(group_size=8, beta=0.0, lr=lr, policy_lag=4, off_policy_correction=correction)
        algo.setup(policy, None, torch.Generator().manual_seed(0))
        before, after, stats = _first_token_task(task, policy, algo, steps=25)
        gains[lr] = after - before
        assert before < 0.15 and stats["staleness"] == 4.0
        assert ("off_policy_dropped_frac" in stats) == (correction == "decoupled")  # the share each drops, logged
        assert ("m2po_dropped_frac" in stats) == (correction == "m2po")
    assert gains[3e-3] > 0.3 and not gains[1e-9] > 0.3, gains


# ------------------------------------------------------------------ the knobs


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"policy_lag": -1}, "policy_lag"),
        ({"policy_lag": 1.5}, "policy_lag"),
        ({"policy_lag": True}, "policy_lag"),
        ({"off_policy_correction": "areal"}, "off_policy_correction"),
        ({"off_policy_correction": "m2po", "policy_loss": "gspo"}, "off_policy_correction"),
        ({"policy_lag": 2, "sampler_dtype": "bfloat16"}, "policy_lag"),
    ],
)
def test_a_bad_lag_knob_is_one_line_naming_it(kwargs, field):
    with pytest.raises(ValueError, match=rf"GRPOConfig\.{field}") as e:
        GRPOConfig(**kwargs)
    assert "\n" not in str(e.value)


def test_the_knobs_are_off_by_default_and_named_in_the_knob_map():
    from grpo_edu.hf import KNOB_MAP

    c = GRPOConfig()
    assert (c.policy_lag, c.off_policy_correction) == (0, "none")
    rows = {ours: trl for ours, trl, _ in KNOB_MAP}
    assert "max_staleness" in rows["policy_lag"]
    assert rows["off_policy_correction"] == "vllm_importance_sampling_mode"
