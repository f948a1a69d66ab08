"""The objectives after DAPO in grpo_edu.functional: GSPO's sequence-level ratio, CISPO's
clipped detached weight, truncated / masked importance sampling for a sampler that is not
the trainer. Hand-computed values on 2x3 tensors, properties, exact expectations, gradcheck.

Every expected value is written as the arithmetic that produces it.
"""

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from grpo_edu.functional import (
    aggregate_loss,
    cispo_loss,
    clipped_surrogate_loss,
    gspo_loss,
    policy_gradient_loss,
    sampler_importance_weights,
    sequence_log_ratio,
)

D = torch.float64
FAST = settings(max_examples=30, deadline=None, derandomize=True, database=None)
LN2 = math.log(2.0)


def t(x, dtype=D):
    return torch.tensor(x, dtype=dtype)


def close(a, b, atol=1e-9):
    torch.testing.assert_close(torch.as_tensor(a, dtype=D), torch.as_tensor(b, dtype=D), atol=atol, rtol=0)


# The 2x3 batch of every hand computation: row 0 has 2 completion tokens, row 1 has 3.
M = t([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
LOG_RATIO = t([[LN2, 0.0, 5.0], [-LN2, -LN2, LN2]])  # log(pi/pi_old); the 5.0 is padding
LOGP = t([[-1.0, -2.0, -0.5], [-0.5, -1.0, -2.0]])
OLD = LOGP - LOG_RATIO  # rho = [[2, 1, e^5], [1/2, 1/2, 2]]
ADV = t([1.0, -1.0])


# ------------------------------------------------------------------------------ GSPO


def test_sequence_log_ratio_by_hand():
    close(sequence_log_ratio(LOGP, OLD, M), [(LN2 + 0.0) / 2, (-LN2 - LN2 + LN2) / 3])  # padding ignored
    close(sequence_log_ratio(LOGP, OLD, torch.zeros_like(M)), [0.0, 0.0])  # empty: ratio 1, not NaN


def test_gspo_loss_by_hand():
    logp = LOGP.clone().requires_grad_()
    s0, s1 = 2 ** (1 / 2), 2 ** (-1 / 3)  # geometric means of [2, 1] and [1/2, 1/2, 2]
    loss, stats = gspo_loss(logp, OLD, ADV, M, eps_low=0.3, eps_high=0.2)
    expected = [
        -min(s0 * 1, 1.2 * 1),  # A > 0, s0 = 1.414 > 1 + 0.2: clipped high
        -min(s1 * -1, max(s1, 0.7) * -1),  # A < 0, s1 = 0.794 inside [0.7, 1.2]: not clipped
    ]
    close(loss, [[expected[0]] * 3, [expected[1]] * 3])  # one value per completion, on every token
    assert loss.shape == (2, 3)
    assert stats == pytest.approx(
        {"clip_low": 0.0, "clip_high": 1 / 2, "clip_ratio": 1 / 2, "ratio_mean": (s0 + s1) / 2,
         "ratio_std": abs(s0 - s1) / 2, "advantage_abs_mean": 1.0, "advantage_abs_max": 1.0}
    )  # fmt: skip
    agg = aggregate_loss(loss, M, "sequence_mean")
    close(agg, (expected[0] + expected[1]) / 2)  # = 1/B sum_i L_i
    agg.backward()
    # row 0 clipped: no gradient; row 1: d(-s1 A)/dlogp_t = -A s1 / |y_1| = s1 / 3, times 1/B
    close(logp.grad, [[0.0, 0.0, 0.0], [s1 / 3 / 2] * 3])
    _, tight = gspo_loss(LOGP, OLD, ADV, M)  # the paper's 3e-4 / 4e-4: both completions clipped
    assert tight["clip_ratio"] == 1.0 and tight["clip_low"] == 0.5
    _, none = gspo_loss(LOGP, OLD, ADV, torch.zeros_like(M))
    assert none == {"clip_low": 0.0, "clip_high": 0.0, "clip_ratio": 0.0, "ratio_mean": 0.0, "ratio_std": 0.0,
                    "advantage_abs_mean": 1.0, "advantage_abs_max": 1.0}  # |A_i| of [B] advantages: no token needed  # fmt: skip


def test_gspo_one_token_completions_are_grpo():
    """With |y_i| = 1 the sequence ratio is the token ratio: GSPO is PPO/GRPO's clip."""
    m = t([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    g, _ = gspo_loss(LOGP, OLD, ADV, m, eps_low=0.2, eps_high=None)
    c, _ = clipped_surrogate_loss(LOGP, OLD, ADV, eps_low=0.2)
    close(g[:, 0], c[:, 0])


# ------------------------------------------------------------------------------ CISPO


def test_cispo_loss_by_hand():
    logp = LOGP.clone().requires_grad_()
    loss, stats = cispo_loss(logp, OLD, ADV, eps_high=0.5, mask=M)  # w = clip(rho, max=1.5), no lower bound
    w = [[1.5, 1.0, 1.5], [0.5, 0.5, 1.5]]
    close(
        loss,
        [[-w[0][j] * 1 * LOGP[0, j].item() for j in range(3)], [-w[1][j] * -1 * LOGP[1, j].item() for j in range(3)]],
    )
    close(loss, [[1.5, 2.0, 0.75], [-0.25, -0.5, -3.0]])
    # over the 5 masked tokens rho = 2, 1 | 1/2, 1/2, 2: two above 1.5
    assert stats == pytest.approx(
        {"clip_low": 0.0, "clip_high": 2 / 5, "clip_ratio": 2 / 5, "ratio_mean": 6 / 5,
         "ratio_std": math.sqrt((4 + 1 + 0.25 + 0.25 + 4) / 5 - (6 / 5) ** 2), "advantage_abs_mean": 1.0,
         "advantage_abs_max": 1.0}
    )  # fmt: skip
    loss.sum().backward()
    close(logp.grad, [[-1.5, -1.0, -1.5], [0.5, 0.5, 1.5]])  # -w A: the weight is a constant
    low, st_low = cispo_loss(LOGP, OLD, ADV, eps_high=0.5, eps_low=0.4, mask=M)  # weights below 0.6 raised
    close(low[1], [0.6 * -0.5, 0.6 * -1.0, 1.5 * -2.0])
    assert st_low["clip_low"] == pytest.approx(2 / 5) and st_low["clip_ratio"] == pytest.approx(4 / 5)


def test_cispo_keeps_the_gradient_ppo_drops():
    """On a token PPO clips (A > 0, rho > 1 + eps), PPO's gradient is 0, CISPO's -cap * A."""
    logp = LOGP.clone().requires_grad_()
    (g_ppo,) = torch.autograd.grad(clipped_surrogate_loss(logp, OLD, ADV, 0.5)[0][0, 0], logp)
    (g_cispo,) = torch.autograd.grad(cispo_loss(logp, OLD, ADV, eps_high=0.5)[0][0, 0], logp)
    assert g_ppo[0, 0] == 0.0 and g_cispo[0, 0] == pytest.approx(-1.5)


# ------------------------------------------------------------ sampler importance sampling

SAMPLER = OLD - LOG_RATIO  # log pi_old - log pi_sampler = LOG_RATIO: r = [[2, 1, (pad)], [1/2, 1/2, 2]]


def test_sampler_importance_weights_by_hand_all_four_modes():
    def w(mode, **kw):
        return sampler_importance_weights(OLD, SAMPLER, M, mode, **kw)[0]

    close(w("token_truncate", clip_max=1.5), [[1.5, 1.0, 1.0], [0.5, 0.5, 1.5]])  # padding: exp(0) = 1
    close(w("token_truncate", clip_max=1.5, clip_min=0.6), [[1.5, 1.0, 1.0], [0.6, 0.6, 1.5]])
    close(w("token_mask", clip_max=1.5), [[0.0, 1.0, 1.0], [0.5, 0.5, 0.0]])
    close(w("token_mask", clip_max=None, clip_min=0.6), [[2.0, 1.0, 1.0], [0.0, 0.0, 2.0]])
    # sequence: r_0 = exp(ln2 + 0) = 2, r_1 = exp(-ln2 - ln2 + ln2) = 1/2 (a sum, not a mean)
    close(w("sequence_truncate", clip_max=1.5), [[1.5] * 3, [0.5] * 3])
    close(w("sequence_mask", clip_max=1.5), [[0.0] * 3, [0.5] * 3])
    close(w("sequence_mask", clip_max=1.5, clip_min=0.6), [[0.0] * 3, [0.0] * 3])
    _, stats = sampler_importance_weights(OLD, SAMPLER, M, "token_truncate", clip_max=1.5)
    assert stats == pytest.approx(
        {
            "is_ratio_mean": (1.5 + 1.0 + 0.5 + 0.5 + 1.5) / 5,
            "is_ratio_min": 0.5,
            "is_ratio_max": 1.5,
            "is_clipped_frac": 2 / 5,
            "logp_diff_mean": 4 * LN2 / 5,
            "logp_diff_max": LN2,
        }
    )
    _, seq = sampler_importance_weights(OLD, SAMPLER, M, "sequence_mask", clip_max=1.5)
    assert seq["is_ratio_mean"] == pytest.approx(0.25) and seq["is_clipped_frac"] == pytest.approx(0.5)


def test_sampler_weights_are_constants_and_nan_gets_weight_one():
    old = OLD.clone().requires_grad_()
    w, _ = sampler_importance_weights(old, SAMPLER, M)
    assert not w.requires_grad
    nan = SAMPLER.clone()
    nan[1, 2] = float("nan")  # a token the engine could not score
    w, stats = sampler_importance_weights(OLD, nan, M, clip_max=1.5)
    assert w[1, 2] == 1.0 and math.isfinite(stats["logp_diff_mean"])


# ------------------------------------------------------------------------ properties

log_ratios = st.floats(-1.0, 1.0)
advs = st.floats(-2.0, -0.01) | st.floats(0.01, 2.0)
shapes = st.tuples(st.integers(1, 4), st.integers(1, 5))


def _mask(data, shape):
    lengths = data.draw(arrays(np.int64, shape[:1], elements=st.integers(1, shape[1])))
    return (torch.arange(shape[1])[None] < torch.from_numpy(lengths)[:, None]).to(D)


@FAST
@given(shape=shapes, eps=st.floats(0.0, 0.5), data=st.data())
def test_gspo_on_policy_is_grpo_under_sequence_mean(shape, eps, data):
    """old == new: every s_i = 1, nothing is clipped, and GSPO's loss and gradient are GRPO's
    token-level clipped surrogate aggregated by "sequence_mean"."""
    logp = torch.from_numpy(data.draw(arrays(np.float64, shape, elements=st.floats(-5, 0)))).requires_grad_()
    adv = torch.from_numpy(data.draw(arrays(np.float64, shape[:1], elements=advs)))
    mask = _mask(data, shape)
    gspo, stats = gspo_loss(logp, logp.detach(), adv, mask, eps_low=eps, eps_high=None)
    grpo, _ = clipped_surrogate_loss(logp, logp.detach(), adv, eps_low=eps)
    a, b = aggregate_loss(gspo, mask, "sequence_mean"), aggregate_loss(grpo, mask, "sequence_mean")
    close(a, b, atol=1e-12)
    close(torch.autograd.grad(a, logp)[0], torch.autograd.grad(b, logp)[0], atol=1e-12)
    assert stats["ratio_mean"] == pytest.approx(1.0) and stats["clip_ratio"] == 0.0


@FAST
@given(shape=shapes, data=st.data())
def test_gspo_off_policy_gradient_is_the_sequence_weight_times_the_mean_score(shape, data):
    """Unclipped (wide eps): grad_t L_i = -A_i s_i / |y_i| on every token of i (GRPO: -A_i rho_it / |y_i|)."""
    lr = torch.from_numpy(data.draw(arrays(np.float64, shape, elements=log_ratios)))
    adv = torch.from_numpy(data.draw(arrays(np.float64, shape[:1], elements=advs)))
    mask = _mask(data, shape)
    old = torch.full(shape, -1.0, dtype=D)
    logp = (old + lr).requires_grad_()
    loss, _ = gspo_loss(logp, old, adv, mask, eps_low=1.0, eps_high=10.0)
    (g,) = torch.autograd.grad(aggregate_loss(loss, mask, "sequence_mean"), logp)
    n = mask.sum(-1)
    s = torch.exp((lr * mask).sum(-1) / n)
    close(g, (-adv * s / n / shape[0])[:, None] * mask, atol=1e-12)


@FAST
@given(shape=shapes, eps_high=st.floats(0.05, 0.5), eps_low=st.none() | st.floats(0.05, 0.5), data=st.data())
def test_cispo_gradient_is_reinforce_times_the_weight(shape, eps_high, eps_low, data):
    """Where rho is not clipped, CISPO's gradient is rho * REINFORCE's (= PPO's unclipped one);
    where it is, cap * REINFORCE's (never 0, unlike PPO); at rho = 1 it is REINFORCE's."""
    lr = torch.from_numpy(data.draw(arrays(np.float64, shape, elements=log_ratios)))
    adv = torch.from_numpy(data.draw(arrays(np.float64, shape, elements=advs)))
    rho = lr.exp()
    lo, hi = (0.0 if eps_low is None else 1 - eps_low), 1 + eps_high
    assume(((rho - lo).abs() > 1e-9).all() and ((rho - hi).abs() > 1e-9).all())
    old = torch.full(shape, -1.0, dtype=D)
    logp = (old + lr).requires_grad_()
    (g,) = torch.autograd.grad(cispo_loss(logp, old, adv, eps_high, eps_low)[0].sum(), logp)
    (g_pg,) = torch.autograd.grad(policy_gradient_loss(logp, adv).sum(), logp)
    close(g, rho.clamp(lo, hi) * g_pg, atol=1e-12)
    inside = (rho > lo) & (rho < hi)
    (g_ppo,) = torch.autograd.grad(clipped_surrogate_loss(logp, old, adv, 1.0, 100.0)[0].sum(), logp)
    close(g[inside], g_ppo[inside], atol=1e-12)
    (g_on,) = torch.autograd.grad(cispo_loss(logp, logp.detach(), adv, eps_high, eps_low)[0].sum(), logp)
    close(g_on, g_pg, atol=1e-12)


@FAST
@given(shape=shapes, mode=st.sampled_from(["token_truncate", "sequence_truncate"]), data=st.data())
def test_truncated_is_with_infinite_cap_is_the_plain_importance_weight(shape, mode, data):
    diff = torch.from_numpy(data.draw(arrays(np.float64, shape, elements=st.floats(-2, 2))))
    mask = _mask(data, shape)
    old = torch.full(shape, -1.0, dtype=D)
    w, stats = sampler_importance_weights(old, old - diff, mask, mode, clip_max=math.inf)
    r = torch.exp(diff * mask) if mode == "token_truncate" else torch.exp((diff * mask).sum(-1, keepdim=True))
    close(w, r.expand(shape), atol=1e-12)
    assert stats["is_clipped_frac"] == 0.0
    w_mask, _ = sampler_importance_weights(old, old - diff, mask, mode.replace("truncate", "mask"), clip_max=None)
    close(w_mask, w, atol=1e-12)  # no bound: masking drops nothing either


@FAST
@given(
    shape=shapes,
    mode=st.sampled_from(["token_truncate", "token_mask", "sequence_truncate", "sequence_mask"]),
    c_max=st.floats(1.0, 3.0),
    c_min=st.none() | st.floats(0.1, 0.9),
    data=st.data(),
)
def test_sampler_weights_respect_their_bounds(shape, mode, c_max, c_min, data):
    diff = torch.from_numpy(data.draw(arrays(np.float64, shape, elements=st.floats(-2, 2))))
    mask = _mask(data, shape)
    old = torch.zeros(shape, dtype=D)
    w, _ = sampler_importance_weights(old, old - diff, mask, mode, clip_max=c_max, clip_min=c_min)
    lo = 0.0 if c_min is None else c_min
    inside = (w >= lo - 1e-12) & (w <= c_max + 1e-12)
    assert inside.all() if mode.endswith("truncate") else (inside | (w == 0)).all()


def test_sequence_is_is_exactly_unbiased_and_truncation_is_not():
    """Exact expectations over all 3^2 two-token sequences (independent tokens): with no cap,
    E_sampler[w f] = E_old[f] for the sequence weight; a cap below the largest ratio biases it."""
    p_old = t([[0.5, 0.3, 0.2], [0.6, 0.2, 0.2]])  # pi_old(token v at position t)
    p_s = t([[0.4, 0.4, 0.2], [0.5, 0.2, 0.3]])  # the sampler's
    f = t([1.0, -2.0, 0.5])  # a per-token quantity; f(y) = f[y_0] * (1 + f[y_1])
    want = got = truncated = 0.0
    for y in itertools.product(range(3), repeat=2):
        old_logp = torch.log(t([[p_old[0, y[0]], p_old[1, y[1]]]]))
        s_logp = torch.log(t([[p_s[0, y[0]], p_s[1, y[1]]]]))
        fy = f[y[0]] * (1 + f[y[1]])
        q = p_s[0, y[0]] * p_s[1, y[1]]
        want += p_old[0, y[0]] * p_old[1, y[1]] * fy
        w, _ = sampler_importance_weights(old_logp, s_logp, torch.ones(1, 2, dtype=D), "sequence_mask", clip_max=None)
        got += q * w[0, 0] * fy
        w, _ = sampler_importance_weights(
            old_logp, s_logp, torch.ones(1, 2, dtype=D), "sequence_truncate", clip_max=1.1
        )
        truncated += q * w[0, 0] * fy
    close(got, want, atol=1e-12)
    assert abs(float(truncated - want)) > 1e-2


# ------------------------------------------------------------------------- gradcheck


def test_gradcheck_in_double():
    g = torch.Generator().manual_seed(0)
    logp = (-torch.rand(2, 3, generator=g, dtype=D)).requires_grad_()
    old = logp.detach() + 0.3 * torch.randn(2, 3, generator=g, dtype=D)
    adv = t([0.7, -1.3])
    assert torch.autograd.gradcheck(lambda lp: sequence_log_ratio(lp, old, M), (logp,))
    # wide clip: differentiable everywhere here (the clip's kinks are measure zero)
    assert torch.autograd.gradcheck(lambda lp: gspo_loss(lp, old, adv, M, 1.0, 10.0)[0], (logp,))
    # CISPO's weight is a constant of the loss: hold rho fixed (old moves with logp), as the detach says
    d = old - logp.detach()
    assert torch.autograd.gradcheck(lambda lp: cispo_loss(lp, lp.detach() + d, adv, 0.1, 0.2, mask=M)[0], (logp,))


# ------------------------------------------------------------------------- bad input

BT = torch.zeros(2, 3)
BAD_INPUT = [
    (lambda: sequence_log_ratio(BT, torch.zeros(2, 4), BT), "old_logp"),
    (lambda: sequence_log_ratio(torch.zeros(3), torch.zeros(3), torch.zeros(3)), "logp"),
    (lambda: gspo_loss(BT, BT, torch.zeros(2), torch.ones(2, 4)), "mask"),
    (lambda: gspo_loss(BT, BT, torch.zeros(3), BT), "advantages"),
    (lambda: gspo_loss(BT, BT, torch.zeros(2), BT, eps_low=-1.0), "eps_low"),
    (lambda: gspo_loss(BT, BT, torch.zeros(2), BT, eps_high=float("nan")), "eps_high"),
    (lambda: cispo_loss(BT, BT, torch.zeros(2), eps_high=-0.1), "eps_high"),
    (lambda: cispo_loss(BT, BT, torch.zeros(2), eps_low=1.5), "eps_low"),
    (lambda: cispo_loss(BT, BT, torch.zeros(2), mask=torch.ones(3, 3)), "mask"),
    (lambda: sampler_importance_weights(BT, BT, BT, mode="token"), "mode"),
    (lambda: sampler_importance_weights(BT, BT, BT, clip_max=-1.0), "clip_max"),
    (lambda: sampler_importance_weights(BT, BT, BT, clip_min=2.0, clip_max=1.0), "clip_min"),
    (lambda: sampler_importance_weights(BT, BT, BT, clip_max=None), "clip_max or clip_min"),
    (lambda: sampler_importance_weights(BT, torch.zeros(2, 4), BT), "sampler_logp"),
]


@pytest.mark.parametrize("call, name", BAD_INPUT, ids=[f"{i}-{n}" for i, (_, n) in enumerate(BAD_INPUT)])
def test_bad_input_raises_value_error_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=rf"^{name} must"):
        call()


# ------------------------------------------------------------- the measurements (measure.objectives)


def test_gspo_equals_grpo_on_policy_and_differs_after_epochs(task, reference):
    from grpo_edu.measure.objectives import format_gspo_vs_grpo, gspo_vs_grpo

    r = gspo_vs_grpo(reference, task, n_prompts=8, epochs=3)
    first, last = r["rows"][0], r["rows"][-1]
    assert first["ratio_dev_token"] < 1e-5 and first["cos_gspo_grpo"] > 1 - 1e-5  # on-policy: the same gradient
    assert first["cos_token_mean"] < 1 - 1e-4  # ... up to the aggregation
    assert last["ratio_dev_token"] > 0.01 and last["cos_gspo_grpo"] < 0.99  # off-policy: a different one
    assert "cos(GSPO, GRPO)" in format_gspo_vs_grpo(r)


def test_sampler_mismatch_bias_and_its_correction(task, reference):
    from grpo_edu.measure.objectives import format_sampler_mismatch, sampler_mismatch

    r = sampler_mismatch(reference, task, n_prompts=2, floor=1e-4)
    e = r["estimators"]
    assert r["mass_trainer"] > 0.95 and r["mass_sampler"] > 0.95  # the enumeration covers the distribution
    assert 1e-4 < r["logp_diff_mean"] < 1e-1  # a real, small mismatch
    assert e["sequence, no cap"]["rel_error"] < 1e-5  # the sequence weight removes the bias exactly
    assert (
        e["no correction"]["rel_error"] > 1e-3
        and e["no correction"]["rel_error"] > 100 * e["sequence, no cap"]["rel_error"]
    )
    assert e["token, no cap"]["rel_error"] < e["no correction"]["rel_error"] / 2  # the per-token weight: most of it
    assert e["token_truncate C=2"]["clipped_frac"] == 0.0 and e["token_mask C=1.005"]["clipped_frac"] > 0
    assert "no correction" in format_sampler_mismatch(r)


# ----------------------------------------------------------- the knobs in GRPO (grpo_edu.algorithms)


def _first_token_task(task, policy, algo, steps, seed=0):
    """A reward a random tiny policy can learn: 1 when the first completion token is "7". Returns
    pi(7 | prompt) at the first position, averaged over the prompts, before and after ``steps`` updates."""
    from grpo_edu.rollout import generate
    from grpo_edu.train import update

    prompts = task.encode_prompts(task.sample(8, seed))
    target = task.tokenizer.encode("7")[0]
    g = torch.Generator().manual_seed(seed)

    def p_target():
        with torch.no_grad():
            return float(torch.softmax(policy(prompts)[:, -1], -1)[:, target].mean())

    before = p_target()
    for _ in range(steps):
        ro = generate(algo.sampling_policy(), prompts, group_size=8, max_new_tokens=2, generator=g)
        scores = torch.zeros_like(ro.mask)
        scores[:, 0] = (ro.completion_ids[:, 0] == target).float()
        stats = update(algo, ro, scores)
    return before, p_target(), stats


@pytest.mark.parametrize(
    "knobs",
    [
        {"policy_loss": "gspo"},
        {"policy_loss": "cispo", "eps_high": 4.0},
        {"sampler_dtype": "bfloat16", "vllm_importance_sampling_mode": "token_truncate"},
    ],
    ids=["gspo", "cispo", "bf16-sampler+tis"],
)
def test_each_objective_learns_on_the_tiny_setup(task, tiny_policy, knobs):
    from grpo_edu.algorithms import GRPO

    algo = GRPO(group_size=8, beta=0.0, lr=3e-3, **knobs).setup(tiny_policy, None, torch.Generator().manual_seed(0))
    before, after, stats = _first_token_task(task, tiny_policy, algo, steps=25)
    assert before < 0.15 and after > before + 0.3, (before, after)
    assert ("logp_diff_mean" in stats) == ("sampler_dtype" in knobs)


def test_a_bfloat16_sampler_is_a_real_small_mismatch_that_the_weights_correct(task, tiny_policy):
    """With sampler_dtype the rollout's log-probs are the bfloat16 copy's; prepare recomputes pi_old
    with the fp32 policy and weighs each token by pi_old / pi_sampler (here: not truncated)."""
    from grpo_edu.algorithms import GRPO
    from grpo_edu.rollout import generate, sequence_logprobs

    algo = GRPO(group_size=4, beta=0.0, sampler_dtype="bfloat16", vllm_importance_sampling_mode="token_truncate")
    algo.setup(tiny_policy, None)
    sampler = algo.sampling_policy()
    assert sampler is not tiny_policy and next(sampler.parameters()).dtype == torch.bfloat16
    assert algo.sampling_policy() is sampler  # refreshed, not rebuilt
    ro = generate(sampler, task.encode_prompts(task.sample(8, 0)), 4, 3, generator=torch.Generator().manual_seed(0))
    batch = algo.prepare(ro, torch.zeros_like(ro.mask))
    with torch.no_grad():
        trainer = sequence_logprobs(tiny_policy, ro)
    close(batch.old_logp, trainer, atol=1e-6)
    diff = (trainer - ro.logprobs)[ro.mask.bool()].abs()
    assert 1e-5 < float(diff.mean()) < 0.05  # real and small
    close(batch.is_weights * ro.mask, torch.exp(trainer - ro.logprobs) * ro.mask, atol=1e-5)
    assert batch.stats["logp_diff_mean"] == pytest.approx(float(diff.mean()), rel=1e-4)
    off = GRPO(algo.config, vllm_importance_sampling_correction=False).setup(tiny_policy, None)
    assert off.prepare(ro, torch.zeros_like(ro.mask)).is_weights is None  # measured, not applied
    plain = GRPO(group_size=4, beta=0.0).setup(tiny_policy, None)
    assert plain.sampling_policy() is tiny_policy and plain.prepare(ro, torch.zeros_like(ro.mask)).is_weights is None


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"policy_loss": "sequence"}, "policy_loss"),
        ({"policy_loss": "cispo", "loss_type": "sequence_mean"}, "loss_type"),  # CISPO is a token mean
        ({"loss_type": "gspo"}, "loss_type"),  # an objective is not an aggregation
        ({"loss_type": "dapo"}, "loss_type"),  # TRL's names are the bridge's (grpo_edu.hf), not the config's
        ({"sampler_dtype": "int8"}, "sampler_dtype"),
        ({"vllm_importance_sampling_mode": "token"}, "vllm_importance_sampling_mode"),
        ({"vllm_importance_sampling_clip_max": 0.0}, "vllm_importance_sampling_clip_max"),
        ({"vllm_importance_sampling_clip_min": -1.0}, "vllm_importance_sampling_clip_min"),
        ({"vllm_importance_sampling_clip_min": 2.0, "vllm_importance_sampling_clip_max": 1.5}, "clip_min"),
        ({"vllm_importance_sampling_mode": "token_truncate", "vllm_importance_sampling_clip_max": None}, "clip_max"),
        ({"vllm_importance_sampling_correction": "yes"}, "vllm_importance_sampling_correction"),
    ],
)
def test_bad_objective_knobs_are_named(kwargs, field):
    from grpo_edu.algorithms import GRPOConfig

    with pytest.raises(ValueError, match=rf"GRPOConfig\.\w*{field}"):
        GRPOConfig(**kwargs)


def test_the_measurements_take_a_frozen_policy(task, tiny_policy):
    """A reference comes frozen after an algorithm's setup: the measurements work on a copy."""
    import copy

    from grpo_edu.measure.objectives import gspo_vs_grpo

    frozen = copy.deepcopy(tiny_policy).requires_grad_(False)
    r = gspo_vs_grpo(frozen, task, n_prompts=2, epochs=1)
    assert r["rows"] and all(not p.requires_grad for p in frozen.parameters())  # the caller's model untouched


def test_cispo_cap_has_one_default():
    """GRPOConfig(policy_loss="cispo") without eps_high caps the weight where Fn.cispo_loss does (1 + 4 = 5),
    and calls it with no lower bound; with eps_high the cap is 1 + eps_high."""
    import inspect

    from grpo_edu import GRPOConfig
    from grpo_edu.algorithms.policy_losses import POLICY_LOSSES

    default = inspect.signature(cispo_loss).parameters["eps_high"].default
    row = POLICY_LOSSES["cispo"]
    assert row.clip(GRPOConfig(policy_loss="cispo")) == (None, default) and default == 4.0
    assert row.clip(GRPOConfig(policy_loss="cispo", eps_high=0.28)) == (None, 0.28)
    assert POLICY_LOSSES["clip"].clip(GRPOConfig(eps_high=0.28)) == (0.2, 0.28)  # control: PPO's clip keeps eps_low


def test_policy_losses_are_one_table_the_loss_reads(task, tiny_policy):
    """Each row of POLICY_LOSSES names a function of the core; GRPO.loss with policy_loss=name is that
    function's per-token loss, aggregated by loss_type (CISPO: its token mean), by hand on one batch:
    the loss equals aggregate_loss(row's function(...)) and differs between the rows."""
    import grpo_edu.functional as Fn
    from grpo_edu.algorithms import GRPO, Batch
    from grpo_edu.algorithms.policy_losses import POLICY_LOSSES
    from grpo_edu.rollout import generate, policy_logprobs

    assert set(POLICY_LOSSES) == {"clip", "gspo", "cispo", "clip_cov", "kl_cov"}
    assert all(callable(getattr(Fn, row.function)) for row in POLICY_LOSSES.values())
    ro = generate(tiny_policy, task.encode_prompts(task.sample(4, 0)), 4, 3, generator=torch.Generator().manual_seed(0))
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5] * 4)
    log_ratio = torch.full_like(ro.mask, -0.1)
    log_ratio[:, 0] = 0.4  # rho = e^0.4 then e^-0.1: PPO clips the first token, GSPO's s_i is their mean
    old = ro.logprobs - log_ratio * ro.mask
    idx = torch.arange(ro.batch_size)
    losses = {}
    for name, row in POLICY_LOSSES.items():
        cov = dict(clip_cov_ratio=1.0, clip_cov_lb=-1e9, clip_cov_ub=1e9)  # Clip-Cov: every unclipped token dropped
        algo = GRPO(group_size=4, beta=0.0, policy_loss=name, eps_low=0.2, eps_high=0.2, **cov).setup(tiny_policy, None)
        batch = Batch(ro, None, None, ro.mask, old, None, adv)
        loss, stats = algo.loss(batch, idx)
        logp, _ = policy_logprobs(tiny_policy, batch, idx)
        eps_low, eps_high = row.clip(algo.config)
        knobs = row.knobs(algo.config, algo)
        per_token, _ = getattr(Fn, row.function)(
            logp, old, adv, eps_low=eps_low, eps_high=eps_high, mask=ro.mask, **knobs
        )
        by_hand = Fn.aggregate_loss(per_token, ro.mask, row.aggregation or "token_mean")
        assert float(loss.detach()) == pytest.approx(float(by_hand.detach()), rel=1e-6), name
        assert {"ratio_mean", "ratio_std", "advantage_abs_mean"} <= set(stats), name
        assert ("clip_ratio" in stats) == (name != "kl_cov"), name  # KL-Cov has no clip
        losses[name] = float(loss.detach())
    assert len({round(v, 6) for v in losses.values()}) == 5, losses  # five objectives, five numbers
