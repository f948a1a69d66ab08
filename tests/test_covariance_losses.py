"""Clip-Cov and KL-Cov (Cui et al. 2025) as GRPO's ``policy_loss``: the per-token losses and their gradients by
hand on a 2 x 3 batch, the knobs' range checks, a step of each through GRPO, the covariance GRPO logs, and the
entropy probe and the prediction score of -Cov against the measured entropy change."""

import math

import pytest
import torch

from grpo_edu import ModelConfig, TinyGPT, get_preset, make_algorithm, train
from grpo_edu import functional as Fn
from grpo_edu.algorithms import GRPOConfig
from grpo_edu.measure.entropy_mechanism import EntropyProbe, entropy_prediction, rollout_entropy
from grpo_edu.studies.regimes.common import task_of

D = torch.float64
# log pi = 0, -2, -4, -2 on the 4 masked tokens (mean -2), A = 3, -1, -1, -1 (mean 0): c = 6, 0, 2, 0
LOGP = torch.tensor([[0.0, -2.0, -9.0], [-4.0, -2.0, -9.0]], dtype=D)
ADV_T = torch.tensor([[3.0, -1.0, 7.0], [-1.0, -1.0, 7.0]], dtype=D)
MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]], dtype=D)


def _grad(fn, logp, *args, **kw):
    x = logp.clone().requires_grad_(True)
    loss, stats = fn(x, *args, **kw)
    (loss * MASK).sum().backward()
    return loss.detach(), x.grad, stats


def test_clip_cov_drops_the_one_token_in_the_band_by_hand():
    # rho = 1 everywhere (old = logp): no clip binds; the band (1, 5) holds only c = 2 (row 1, token 0); k = 1
    loss, grad, stats = _grad(Fn.clip_cov_loss, LOGP, LOGP, ADV_T, mask=MASK, clip_cov_ratio=0.25)
    assert loss[MASK.bool()].tolist() == [-3.0, 1.0, 0.0, 1.0]  # -A rho, the chosen token's 0
    assert grad[MASK.bool()].tolist() == [-3.0, 1.0, 0.0, 1.0]  # d(-rho A)/d logp = -A; none on the chosen
    assert stats["cov_frac"] == 0.25 and stats["clip_ratio"] == 0.0
    # control: a band holding no token changes nothing (PPO's clipped surrogate, value and gradient)
    ref_loss, ref_grad, _ = _grad(Fn.clipped_surrogate_loss, LOGP, LOGP, ADV_T, mask=MASK)
    loss, grad, stats = _grad(Fn.clip_cov_loss, LOGP, LOGP, ADV_T, mask=MASK, clip_cov_lb=2.5)
    assert torch.equal(loss * MASK, ref_loss * MASK) and torch.equal(grad * MASK, ref_grad * MASK)
    assert stats["cov_frac"] == 0.0


def test_clip_cov_skips_a_token_the_ratio_already_clips():
    # row 1 token 0: rho = 0.5 < 1 - 0.2 with A = -1 < 0: PPO's clip binds (loss -min(-0.5, -0.8) = 0.8, no
    # gradient), so it is not eligible, and the band holds nothing else: nothing is dropped
    old = LOGP.clone()
    old[1, 0] = LOGP[1, 0] + math.log(2.0)
    loss, grad, stats = _grad(Fn.clip_cov_loss, LOGP, old, ADV_T, mask=MASK, clip_cov_ratio=0.25)
    assert loss[1, 0].item() == pytest.approx(0.8) and grad[1, 0].item() == 0.0
    assert stats["cov_frac"] == 0.0 and stats["clip_low"] == 0.25


def test_kl_cov_penalises_the_top_token_and_clips_nothing_by_hand():
    # token (0, 0) has the largest c (6): log rho = 0.1 there, kappa = 2 -> L = -3 e^0.1 + 2 * 0.1,
    # dL/dlogp = -3 e^0.1 + 2 sign(0.1); token (0, 1): rho = 2 with A = -1 -> -rho A = 2 (no clip: PPO's
    # clip would give -min(-2, -1.2) = 2 too, so the unclipped case is token (1, 1) with A = -1, rho = 0.5)
    old = LOGP.clone()
    old[0, 0] = LOGP[0, 0] - 0.1
    old[1, 1] = LOGP[1, 1] + math.log(2.0)  # rho = 0.5, A = -1: PPO clips at 0.8 (loss 0.8, no gradient)
    loss, grad, stats = _grad(Fn.kl_cov_loss, LOGP, old, ADV_T, mask=MASK, kl_cov_ratio=0.25, ppo_kl_coef=2.0)
    e = math.exp(0.1)
    assert loss[0, 0].item() == pytest.approx(-3 * e + 0.2) and grad[0, 0].item() == pytest.approx(-3 * e + 2)
    assert loss[1, 1].item() == pytest.approx(0.5) and grad[1, 1].item() == pytest.approx(0.5)  # unclipped
    assert loss[0, 1].item() == pytest.approx(1.0) and grad[0, 1].item() == pytest.approx(1.0)  # not chosen: -rho A
    assert stats["cov_frac"] == 0.25 and stats["ppo_kl_abs"] == pytest.approx((0.1 + math.log(2)) / 4)
    # at rho = 1 (a batch's first update) |log rho| has no gradient: KL-Cov is then the plain -rho A
    _, grad, _ = _grad(Fn.kl_cov_loss, LOGP, LOGP, ADV_T, mask=MASK, kl_cov_ratio=0.25, ppo_kl_coef=2.0)
    assert grad[MASK.bool()].tolist() == [-3.0, 1.0, 1.0, 1.0]


def test_advantages_per_completion_broadcast_and_bad_input():
    a = torch.tensor([3.0, -1.0], dtype=D)
    assert torch.equal(Fn.covariance_terms(LOGP, a, MASK), Fn.covariance_terms(LOGP, a[:, None].expand(2, 3), MASK))
    with pytest.raises(ValueError, match="no ratio clip"):
        Fn.kl_cov_loss(LOGP, LOGP, ADV_T, eps_low=0.2, mask=MASK)
    with pytest.raises(ValueError, match="clip_cov_ratio"):
        Fn.clip_cov_loss(LOGP, LOGP, ADV_T, mask=MASK, clip_cov_ratio=-1.0)
    with pytest.raises(ValueError, match="ppo_kl_coef"):
        Fn.kl_cov_loss(LOGP, LOGP, ADV_T, mask=MASK, ppo_kl_coef=-1.0)


@pytest.mark.parametrize(
    "knobs, match",
    [
        ({"policy_loss": "clipcov"}, "policy_loss"),
        ({"clip_cov_ratio": 0.0}, "clip_cov_ratio"),
        ({"kl_cov_ratio": 1.5}, "kl_cov_ratio"),
        ({"clip_cov_lb": 5.0, "clip_cov_ub": 1.0}, "clip_cov_lb must be < clip_cov_ub"),
        ({"ppo_kl_coef": -0.1}, "ppo_kl_coef"),
    ],
)
def test_the_knobs_refuse_bad_values(knobs, match):
    with pytest.raises(ValueError, match=match):
        GRPOConfig(**knobs)


def _tiny():
    torch.manual_seed(0)
    return TinyGPT(ModelConfig(d_model=16, n_layers=1, n_heads=2, max_seq_len=12))


def _run(steps=2, **knobs):
    preset = get_preset("cpu", sequences_per_step=32)
    ref = _tiny()
    probe = EntropyProbe(ref)
    algo = make_algorithm("grpo", beta=0.0, group_size=4, reward_signal="random", **knobs)  # A != 0 untrained
    h = train(algo, task_of(preset), ref, preset=preset, steps=steps, seed=0, progress=False, callback=probe)
    return h, probe, ref


def test_each_knob_reaches_the_loss_and_the_covariance_is_logged():
    # Clip-Cov dropping every token (ratio 1, a band holding every c): no gradient, so the policy never moves and
    # the probe measures no entropy change; control: the default ratio trains and moves the entropy
    h, probe, _ = _run(policy_loss="clip_cov", clip_cov_ratio=1.0, clip_cov_lb=-1e9, clip_cov_ub=1e9)
    assert [r["entropy_change"] for r in probe.rows] == [0.0, 0.0]
    assert h.steps[0]["cov_frac"] > 0.9 and h.steps[0]["grad_norm"] == 0.0
    h, probe, ref = _run(policy_loss="clip_cov")
    assert all(r["entropy_change"] != 0.0 for r in probe.rows)
    assert [r["covariance"] for r in probe.rows] == [s["cov_logp_adv"] for s in h.steps]
    h, probe, _ = _run(policy_loss="kl_cov", kl_cov_ratio=0.5)
    assert 0.4 < h.steps[0]["cov_frac"] <= 0.5 and "clip_ratio" not in h.steps[0]


def test_the_logged_covariance_and_the_probe_by_hand():
    # step 1: the covariance of the rollout's own log-probs and the group advantage over its tokens; the probe's
    # "before" is the reference on that rollout (the callback sees the rollout)
    seen = []
    preset = get_preset("cpu", sequences_per_step=32)
    ref = _tiny()
    probe = EntropyProbe(ref)

    def watch(info):
        seen.append((info.rollout, info.scores))
        probe(info)

    algo = make_algorithm("grpo", beta=0.0, group_size=4, adv_eps=1e-4)
    h = train(algo, task_of(preset), ref, preset=preset, steps=1, seed=0, progress=False, callback=watch)
    ro, scores = seen[0]
    adv, _ = Fn.group_advantages(scores.sum(dim=1), 4, eps=1e-4)
    want = float(Fn.token_covariance(ro.logprobs, adv, ro.mask))
    assert h.steps[0]["cov_logp_adv"] == pytest.approx(want, rel=1e-6, abs=1e-9)
    assert probe.rows[0]["entropy_before"] == pytest.approx(rollout_entropy(ref, ro), abs=1e-6)


def test_entropy_prediction_by_hand():
    # -Cov = 1, -1, 2, -2, 1, 3; dH = 2, -2, 4, -4, -1, 1: the first half fits c = (2+2+8)/(1+1+4) = 2; the rest's
    # summed change: measured -4 - 1 + 1 = -4, predicted 2 * (-2 + 1 + 3) = 4 (opposite signs)
    cov = [-1.0, 1.0, -2.0, 2.0, -1.0, -3.0]
    dh = [2.0, -2.0, 4.0, -4.0, -1.0, 1.0]
    got = entropy_prediction(cov, dh)
    assert got["scale"] == pytest.approx(2.0) and got["fit_steps"] == 3
    assert got["summed_measured"] == pytest.approx(-4.0) and got["summed_predicted"] == pytest.approx(4.0)
    assert got["summed_sign"] == 0.0 and got["sign_agreement"] == pytest.approx(5 / 6)
    assert got["summed_naive"] == pytest.approx(4.0)  # the first half's mean, (2 - 2 + 4) / 3, times 3 steps
    # a perfect predictor: dH = 0.5 (-Cov) -> r = 1, every sign, the sum exact
    perfect = entropy_prediction(cov, [-0.5 * c for c in cov])
    assert perfect["pearson"] == pytest.approx(1.0) and perfect["sign_agreement"] == 1.0
    assert perfect["summed_predicted"] == pytest.approx(perfect["summed_measured"])
    with pytest.raises(ValueError, match="one length"):
        entropy_prediction(cov, dh[:5])
    with pytest.raises(ValueError, match="at least 4"):
        entropy_prediction(cov[:3], dh[:3])
