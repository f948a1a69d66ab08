"""The entropy mechanism (Cui et al. 2025) on notebook 10's long run: does -Cov(log pi, A) over a batch's tokens
predict each step's entropy change, per step and summed, and do Clip-Cov and KL-Cov keep the entropy higher than
the symmetric clip, beside clip-higher (the long_run regime's)?"""

from __future__ import annotations

import numpy as np

from ...measure.entropy_mechanism import EntropyProbe, entropy_prediction
from .common import above, claim, rule, spread, verdict
from .long_run import sweep

# the regime's Clip-Cov and KL-Cov fractions (verl's default 2e-4 is 0 or 1 token of a minibatch here)
CLIP_COV_RATIO = 0.02
KL_COV_RATIO = 0.02


def entropy_settings(eps_high=0.28, clip_cov_ratio=CLIP_COV_RATIO, kl_cov_ratio=KL_COV_RATIO) -> dict:
    """The four runs of `run_long_run_entropy`: name -> GRPO's knobs (the rest GRPO's defaults)."""
    return {
        "clip 0.2": {},
        f"clip-higher {eps_high}": {"eps_high": eps_high},
        "Clip-Cov": {"policy_loss": "clip_cov", "clip_cov_ratio": clip_cov_ratio},
        "KL-Cov": {"policy_loss": "kl_cov", "kl_cov_ratio": kl_cov_ratio},
    }


def _scores(c, shuffle=False):  # entropy_prediction of one run (the steps' covariances shuffled); NaN if too short
    keys = ("pearson", "sign_agreement", "summed_measured", "summed_predicted", "summed_naive")
    cov, dh = np.array(c["covariance"]), np.array(c["entropy_change"])
    if len(cov) < 4:
        return dict.fromkeys(keys, float("nan"))
    return entropy_prediction(cov[np.random.default_rng(0).permutation(len(cov))] if shuffle else cov, dh)


def run_long_run_entropy(
    reference, preset="cpu", seeds=(0, 1), steps=200, eps_high=0.28, clip_cov_ratio=CLIP_COV_RATIO,
    kl_cov_ratio=KL_COV_RATIO, progress=True,
) -> dict:  # fmt: skip
    """GRPO for ``steps`` steps, per seed, four ways (`entropy_settings`): the symmetric clip, clip-higher,
    Clip-Cov and KL-Cov (Cui et al. 2025, ``policy_loss`` "clip_cov" / "kl_cov", the fractions given). Every
    step: the batch covariance Cov(log pi_old, A) over the tokens GRPO logs (``cov_logp_adv``), the entropy
    of the policy before and after the step's update on the step's own rollout (`EntropyProbe`), the
    loss's ``entropy``, the batch reward and ``cov_frac`` (the share of tokens Clip-Cov / KL-Cov acted on);
    the held-out accuracy every ``preset.eval_every`` steps (``curves[name][seed index]``).

    The claims, each against what a trend alone gives: -Cov predicts the sign and size of each step's entropy
    change (per step, every run, against the same with the steps shuffled), and the summed change of a run's
    second half from a scale fitted on its first half (against the first half's rate continued);
    Clip-Cov and KL-Cov keep the entropy higher than the symmetric clip, and reach a higher held-out
    accuracy (the paper's two claims for them)."""
    settings = entropy_settings(eps_high, clip_cov_ratio, kl_cov_ratio)

    def record(h, probe):
        return {
            "entropy": [round(float(x), 5) for x in h.series("entropy")],
            "entropy_before": [round(float(x), 6) for x in probe.series("entropy_before")],
            "entropy_change": [float(x) for x in probe.series("entropy_change")],
            "covariance": [float(x) for x in probe.series("covariance")],
            "reward": [round(float(x), 5) for x in h.series("reward")],
            "cov_frac": [round(float(s.get("cov_frac", 0.0)), 6) for s in h.steps],
            "completion_length": [round(float(x), 3) for x in h.series("completion_length")],
            "eval_step": [e["step"] for e in h.evals],
            "accuracy": [e["accuracy"] for e in h.evals],
        }

    curves = sweep(reference, preset, settings, seeds, steps, record, "long run, entropy", progress, EntropyProbe)
    w = max(1, steps // 10)
    base, _, clip_cov, kl_cov = settings
    n, runs = len(seeds), [c for k in settings for c in curves[k]]
    scores, shuffled = [_scores(c) for c in runs], [_scores(c, shuffle=True) for c in runs]

    def last(name):  # the mean of the last w steps' entropy (before each update), per seed
        return [float(np.mean(c["entropy_before"][-w:])) for c in curves[name]]

    def final(name):
        return [c["accuracy"][-1] for c in curves[name]]

    agree = [s["sign_agreement"] - t["sign_agreement"] for s, t in zip(scores, shuffled, strict=True)]
    pearson = [s["pearson"] - t["pearson"] for s, t in zip(scores, shuffled, strict=True)]

    def err(s, key):  # |a sum's prediction - the measured sum| / |the measured sum|
        return abs(s[key] - s["summed_measured"]) / max(abs(s["summed_measured"]), 1e-12)

    summed = [err(s, "summed_naive") - err(s, "summed_predicted") for s in scores]
    k = len(runs)
    claims = [
        claim(
            "the sign of -Cov(log pi, A) over a batch's tokens predicts the sign of the step's entropy change (Cui et al.)",
            f"share of steps whose change has the sign of -Cov, minus the same with the steps shuffled, {k} runs: "
            f"{spread(agree, '.2f')} ({rule(0.05, 0.0, 'it, of each run')})",
            verdict(agree, 0.05, 0.0),
        ),
        claim(
            "per step, -Cov(log pi, A) and the entropy change correlate (Cui et al.)",
            f"Pearson r of -Cov and the step's change, minus the same with the steps shuffled, {k} runs: "
            f"{spread(pearson, '.2f')} ({rule(0.2, 0.0, 'it, of each run')})",
            verdict(pearson, 0.2, 0.0),
        ),
        claim(
            "summed over a run's second half, -Cov scaled on the first half predicts the entropy change better than the "
            "first half's rate continued",
            f"the rate's |error| minus the covariance's, over |the measured change|, {k} runs: {spread(summed, '.2f')} "
            f"({rule(0.05, 0.0, 'it, of each run')})",
            verdict(summed, 0.05, 0.0),
        ),
    ]
    for name in (clip_cov, kl_cov):
        claims += [
            claim(
                f"{name} keeps the entropy higher than the symmetric clip (Cui et al.)",
                f"entropy over the last {w} steps: {name} {spread(last(name), '.3f')} vs {base} "
                f"{spread(last(base), '.3f')} ({rule(0.0, 0.0, 'the difference', n)})",
                above(last(name), last(base), pair=True),
            ),
            claim(
                f"{name} reaches a higher held-out accuracy than the symmetric clip (Cui et al.)",
                f"held-out accuracy after {steps} steps: {name} {spread(final(name))} vs {base} {spread(final(base))} "
                f"({rule(0.0, -0.02, f'{name} minus the symmetric clip', n)})",
                above(final(name), final(base), 0.0, -0.02, pair=True),
            ),
        ]
    return {"steps": steps, "window": w, "curves": curves, "scores": scores, "claims": claims,
            "settings": settings}  # fmt: skip


def figure(res):
    """The entropy regime's figure: left, each step's entropy change against -Cov(log pi, A), every run; right,
    the entropy before each update over the steps, one line per run."""
    from matplotlib.figure import Figure

    from ...figures.plotstyle import PALETTE, set_alt

    fig = Figure(figsize=(11, 4.2), layout="constrained")
    ax_c, ax_h = fig.subplots(1, 2)
    for i, (k, runs) in enumerate(res["curves"].items()):
        for j, c in enumerate(runs):
            ax_c.scatter(-np.array(c["covariance"]), c["entropy_change"], s=4, color=PALETTE[i], alpha=0.5,
                         label=k if j == 0 else None)  # fmt: skip
            ax_h.plot(range(1, len(c["entropy_before"]) + 1), c["entropy_before"], color=PALETTE[i], alpha=0.8,
                      label=k if j == 0 else None)  # fmt: skip
    ax_c.axhline(0, color="grey", lw=0.5)
    ax_c.axvline(0, color="grey", lw=0.5)
    ax_c.set_xlabel("-Cov(log pi, A) over the batch's tokens")
    ax_c.set_ylabel("entropy change of the step's update (nats)")
    ax_h.set_xlabel("RL step")
    ax_h.set_ylabel("token entropy before the update (nats)")
    ax_h.legend()
    return set_alt(fig, "Left: each step's measured entropy change against minus the covariance of log pi and the "
                   "advantage, every run. Right: the policy's token entropy over the steps, one line per run, for "
                   "the symmetric clip, clip-higher, Clip-Cov and KL-Cov.")  # fmt: skip
