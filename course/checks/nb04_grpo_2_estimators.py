"""Checks of notebooks/04_grpo_2_estimators.ipynb (part 2: the KL term, and the objectives after DAPO).

Before this registry the notebook held 26 assert lines: E[k1] = E[k3] = KL(pi||ref), not KL(ref||pi) (2);
the sampled k1 and k3 within 4 standard errors of the exact KL, k1 sometimes negative and k3 never, and the
sampled stds ordered k2 < k3 < k1 (3); the exact stds' order at three distances (3); the expected gradients
of k1, k2, k3 in the loss and of k1 in the reward against the exact KL gradients, and the two directions
apart (5); the sampled gradients within 4.5 standard errors of them (1); per token against per answer (3);
GSPO's gradient equal to GRPO's on-policy and apart off it (2); CISPO keeping the gradient PPO's clip
silences (2); a bfloat16 sampler's bias and what each importance weight leaves of it (5). Each runs here
with its control, except the sampled k1's 4-standard-error rule, which no target it could fail exists for
at 4000 samples (printed). The KL placement section, moved here from part 1, gains one exact check.
"""

from __future__ import annotations

import torch

from course.checks import Measured, check, printed

NB = "04_grpo_2_estimators"


# ------------------------------------------------------------------ section 5: in the reward or in the loss


@check(
    NB,
    exact=True,
    claim="With the KL in the reward and std scaling, the all-wrong group gets advantages of order 1 (KL noise "
    "blown up); without std scaling they stay tiny",
    control="the KL in the loss (A = 0 in that group) for the first; std scaling on for the second",
)
def kl_in_reward_noise(ns):
    from grpo_edu import functional as Fn

    r, A_loss = ns["r"], ns["A"]
    group = float(Fn.group_advantages(r, 4, scale="group", eps=1e-4)[0][:4].abs().mean())
    none = float(Fn.group_advantages(r, 4, scale="none", eps=1e-4)[0][:4].abs().mean())
    return [
        Measured(
            "all-wrong group: mean |A|, KL in the reward, std scaling", group, ">", 0.4, float(A_loss[:4].abs().mean())
        ),
        Measured("all-wrong group: mean |A|, KL in the reward, no std scaling", none, "<", 0.01, group),
    ]


# ------------------------------------------------------------------ section 5b: three estimators


@check(
    NB,
    exact=True,
    claim="Sampled under pi_theta, k1 and k3 have expectation exactly KL(pi_theta || pi_ref)",
    control="the other direction, KL(pi_ref || pi_theta)",
)
def k1_k3_estimate_forward_kl(ns):
    e, f, r = ns["expected"], ns["kl_forward"], ns["kl_reverse"]
    return [Measured(f"|E[{k}] - KL(pi||ref)|", abs(e[k] - f), "<", 1e-6, abs(e[k] - r)) for k in ("k1", "k3")]


@check(
    NB,
    exact=True,
    claim="The two directions of the KL differ on this example: E[k3] misses KL(pi_ref || pi_theta)",
    control="the direction it estimates, KL(pi_theta || pi_ref)",
)
def directions_differ(ns):
    e = ns["expected"]["k3"]
    return Measured("|E[k3] - KL(ref||pi)|", abs(e - ns["kl_reverse"]), ">", 0.04, abs(e - ns["kl_forward"]))


def _z(samples, target) -> float:
    return float(abs(samples.mean() - target) / (samples.std() / len(samples) ** 0.5))


@check(
    NB,
    claim="The sampled mean of k3 (4000 tokens) lands within sampling error of KL(pi_theta || pi_ref)",
    control="the same mean against KL(pi_ref || pi_theta)",
)
def k3_sampled_unbiased(ns):
    k3 = ns["samples"]["k3"]
    return Measured("k3: |sampled mean - KL(pi||ref)| in standard errors", _z(k3, ns["kl_forward"]), "<", 4.0,
                    _z(k3, ns["kl_reverse"]))  # fmt: skip


@printed(
    NB,
    claim="The sampled mean of k1 (4000 tokens) lands within sampling error of KL(pi_theta || pi_ref)",
    why="at 4000 tokens k1's standard error cannot tell KL(pi||ref) from KL(ref||pi) (their gap is about 3.5 of "
    "its standard errors), so a rule of 4 standard errors has no target that fails it",
)
def k1_sampled_unbiased(ns):
    return Measured(
        "k1: |sampled mean - KL(pi||ref)| in standard errors", _z(ns["samples"]["k1"], ns["kl_forward"]), "<", 4.0
    )


@check(
    NB,
    exact=True,
    claim="k1 takes negative values, k3 never does (log r <= r - 1)",
    control="k3's share of negative values; k1's least value",
)
def signs(ns):
    s = ns["samples"]
    return [
        Measured("share of sampled k1 below 0", float((s["k1"] < 0).float().mean()), ">", 0.0, float((s["k3"] < 0).float().mean())),
        Measured("least sampled k3", float(s["k3"].min()), ">", -1e-12, float(s["k1"].min())),
    ]  # fmt: skip


@check(
    NB,
    claim="On this example (4000 samples) the sampled stds rank k2 < k3 < k1",
    control="the exact stds at a quarter of the perturbation (k3 below k2) and at twice it (k3 above k1)",
)
def sampled_std_order(ns):
    s, ex = ns["samples"], ns["exact_std"]
    return [
        Measured("std k2 / std k3, sampled", float(s["k2"].std() / s["k3"].std()), "<", 1.0,
                 ex[0.25]["k2"] / ex[0.25]["k3"], "log"),
        Measured("std k3 / std k1, sampled", float(s["k3"].std() / s["k1"].std()), "<", 1.0,
                 ex[2.0]["k3"] / ex[2.0]["k1"], "log"),
    ]  # fmt: skip


@check(
    NB,
    exact=True,
    claim="The exact stds' ranking moves with the distance: k3 the least noisy near pi_ref (x0.25), k2 < k3 < k1 "
    "at x1, k3 over twice k1's far from it (x2)",
    control="each ratio at another distance, where the ranking differs",
)
def exact_std_order(ns):
    ex = ns["exact_std"]

    def ratio(s, a, b):
        return ex[s][a] / ex[s][b]

    return [
        Measured("x0.25: std k3 / std k2", ratio(0.25, "k3", "k2"), "<", 1.0, ratio(1.0, "k3", "k2"), "log"),
        Measured("x0.25: std k2 / std k1", ratio(0.25, "k2", "k1"), "<", 1.0, None, "log"),
        Measured("x1: std k2 / std k3", ratio(1.0, "k2", "k3"), "<", 1.0, ratio(0.25, "k2", "k3"), "log"),
        Measured("x1: std k3 / std k1", ratio(1.0, "k3", "k1"), "<", 1.0, ratio(2.0, "k3", "k1"), "log"),
        Measured("x2: std k3 / std k1", ratio(2.0, "k3", "k1"), ">", 2.0, ratio(1.0, "k3", "k1"), "log"),
    ]


# ------------------------------------------------------------------ section 5c: the gradient in the loss


@check(
    NB,
    exact=True,
    claim="E[grad k1] = 0 in the loss; E[grad k2] = grad KL(pi||ref); E[grad k3] = grad KL(ref||pi); k1 in the "
    "reward has E = grad KL(pi||ref) (float64)",
    control="each expectation against the other direction's exact gradient (k1 in the loss: against grad KL(pi||ref))",
)
def gradient_identities(ns):
    g = ns["grads"]
    names = list(g)
    fwd, rev = g["grad KL(pi||ref)   exact"], g["grad KL(ref||pi)   exact"]

    def gap(a, b):
        return float((a - b).abs().max())

    return [
        Measured("largest |E[grad k1]|, k1 in the loss", float(g[names[0]].abs().max()), "<", 1e-12, gap(g[names[0]], fwd)),
        Measured("largest |E[grad k2] - grad KL(pi||ref)|", gap(g[names[1]], fwd), "<", 1e-12, gap(g[names[1]], rev)),
        Measured("largest |E[grad k3] - grad KL(ref||pi)|", gap(g[names[2]], rev), "<", 1e-12, gap(g[names[2]], fwd)),
        Measured("largest |E[k1 grad log pi] - grad KL(pi||ref)|", gap(g[names[3]], fwd), "<", 1e-12, gap(g[names[3]], rev)),
    ]  # fmt: skip


@check(
    NB,
    exact=True,
    claim="The gradients of the two directions of the KL really differ on this example",
    control="the same two gradients at pi_theta = pi_ref (both 0)",
)
def gradient_directions_differ(ns):
    import torch.nn.functional as F  # noqa: F401

    from grpo_edu import functional as Fn

    g = ns["grads"]
    gap = float((g["grad KL(pi||ref)   exact"] - g["grad KL(ref||pi)   exact"]).abs().max())
    z = ns["ref_logits"].double().clone().requires_grad_(True)
    ref = ns["ref_logits"].double()
    (fwd,) = torch.autograd.grad(Fn.exact_kl(z, ref, "pi||ref").sum(), z)
    (rev,) = torch.autograd.grad(Fn.exact_kl(z, ref, "ref||pi").sum(), z)
    return Measured("largest |grad KL(pi||ref) - grad KL(ref||pi)|", gap, ">", 0.1, float((fwd - rev).abs().max()))


@check(
    NB,
    claim="The sampled gradients (4000 tokens) land within sampling error of their expectations: 0 for k1, "
    "grad KL(pi||ref) for k2, grad KL(ref||pi) for k3",
    control="each sampled mean against another estimator's expectation (k1: k2's; k2: k3's; k3: k2's)",
)
def sampled_gradients(ns):
    per_token, tokens, targets = ns["per_token_grad"], ns["tokens"], ns["targets"]
    other = {"k1": "k2", "k2": "k3", "k3": "k2"}
    out = []
    for kind, g in per_token.items():
        s = g[tokens]
        mean, se = s.mean(0), s.std(0) / len(tokens) ** 0.5
        z = float(((mean - targets[kind]) / se).abs().max())
        control = float(((mean - targets[other[kind]]) / se).abs().max())
        out.append(Measured(f"{kind}: largest gap to E[grad], in standard errors", z, "<", 4.5, control))
    return out


# ------------------------------------------------------------------ section 5d: per token is not per answer


@check(
    NB,
    exact=True,
    claim="k2 in the loss has the gradient of the per-position KLs (prefixes held); k1 in the reward has the "
    "gradient of the whole answer's KL; the prefix term is a large share of it",
    control="each against the other's target; for the share, k1 in the reward's own (0)",
)
def per_token_not_per_answer(ns):
    g = ns["g"]
    names = list(g)
    k2_loss, per_pos, k1_reward, seq = (g[n] for n in names)

    def gap(a, b):
        return float((a - b).abs().max())

    missing_k1 = float((seq - k1_reward).norm() / seq.norm())
    return [
        Measured("largest |E[grad k2 in the loss] - per-position KLs' gradient|", gap(k2_loss, per_pos), "<", 1e-12, gap(k2_loss, seq)),
        Measured("largest |E[k1 in the reward] - sequence KL's gradient|", gap(k1_reward, seq), "<", 1e-12, gap(k1_reward, per_pos)),
        Measured("share of the sequence KL's gradient k2 in the loss misses", float(ns["missing"]), ">", 0.2, missing_k1),
    ]  # fmt: skip


# ------------------------------------------------------------------ section 6: after DAPO


@check(
    NB,
    claim="GSPO's gradient equals GRPO's (sequence_mean) on-policy, and points elsewhere once pi_theta has moved "
    "(epochs 1-3)",
    control="the other epochs: the least cosine off-policy for the first; the on-policy angle for the second",
)
def gspo_vs_grpo(ns):
    cos, angle = ns["cos"], ns["angle"]
    return [
        Measured("cos(GSPO, GRPO), epoch 0 (on-policy)", float(cos[0]), ">", 0.9999, float(min(cos[1:]))),
        Measured("least angle between GSPO and GRPO, epochs 1-3, degrees", float(min(angle[1:])), ">", 7.0, float(angle[0]),
                 "log"),
    ]  # fmt: skip


@check(
    NB,
    claim="After part 1's step PPO's clip leaves some tokens with an advantage without gradient; CISPO leaves none",
    control="each objective is the other's",
)
def cispo_keeps_gradient(ns):
    dead = ns["dead"]
    return [
        Measured("PPO clip: share of tokens with A != 0 without gradient", dead["PPO/GRPO clip"], ">", 0.05, dead["CISPO"]),
        Measured("CISPO: share of tokens with A != 0 without gradient", dead["CISPO"], "<", 1e-9, dead["PPO/GRPO clip"]),
    ]  # fmt: skip


@check(
    NB,
    claim="CISPO's cap binds on some tokens, and every capped token keeps its gradient",
    control="PPO's clip, which silences the capped tokens with A > 0",
)
def cispo_cap(ns):
    alive = ns["alive"]
    return [
        Measured("tokens whose CISPO weight is capped", float(ns["capped"].sum()), ">", 0.5),
        Measured("share of capped tokens with a gradient, CISPO", alive["CISPO"], ">", 0.999, alive["PPO/GRPO clip"]),
    ]


@check(
    NB,
    claim="A bfloat16 sampler biases the exact policy gradient; the sequence weight removes the bias to float "
    "rounding; the per-token weight leaves part of it; a cap of 2 never binds; a mask at 1.005 adds bias",
    control="an fp32 sampler (no bias); the uncorrected gradient; the sequence weight; the cap of 1.005 as a "
    "truncation; the uncorrected gradient against the truncation at 1.005",
)
def sampler_mismatch(ns):
    e, same = ns["e"], ns["same"]
    return [
        Measured("relative error, no correction", e["no correction"], ">", 2e-3, same, "log"),
        Measured("relative error, sequence weight", e["sequence, no cap"], "<", 1e-4, e["no correction"], "log"),
        Measured("relative error, token weight", e["token, no cap"], ">", 1e-4, e["sequence, no cap"], "log"),
        Measured("|token_truncate C=2 - token, no cap|", abs(e["token_truncate C=2"] - e["token, no cap"]), "<", 1e-12,
                 abs(e["token_truncate C=1.005"] - e["token, no cap"])),
        Measured("token_mask C=1.005 over no correction", e["token_mask C=1.005"] / e["no correction"], ">", 1.0,
                 e["token_truncate C=1.005"] / e["no correction"], "log"),
    ]  # fmt: skip


@printed(
    NB,
    claim="The per-token weight (TIS) removes part of the sampler's bias: the share it removes",
    why="48% to 81% over seed shifts 0-4 before this registry, and 29% at held-out shift 6 (default kernel), "
    "below the 30% then asserted: its share depends on the batch",
)
def token_weight_share(ns):
    return Measured("share of the bias the per-token weight removes", float(ns["removed"]), ">", 0.3)
