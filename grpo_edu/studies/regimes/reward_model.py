"""The reward-model regime: GRPO against a learned r_phi (`grpo_edu.demos.reward_model`), gold = the checker.

Over-optimisation (Gao et al. 2022): the proxy reward rises while the gold accuracy first rises,
then falls as the policy drifts from the reference; the KL penalty beta limits the drift.
"""

from __future__ import annotations

import copy

import numpy as np

from ... import functional as Fn
from ...algorithms import make_algorithm
from ...demos.reward_model import ProxyTask, RewardModelConfig, exploits, train_reward_model
from ...measure.verdicts import on_seeds
from ...rollout import expand, generate, sequence_logprobs
from ...train import train
from ...warmstart.presets import make_task, resolve_preset
from .common import above, bar, claim, rule, spread, verdict


class KLMonitor:
    """At each evaluation (``train(..., on_evaluate=monitor)``): KL(pi || pi_ref) per completion (exact
    over the vocabulary, summed over the tokens of completions sampled from pi for a fixed set of prompts),
    and ``sampled_gold``, the exact reward's mean on those same sampled completions (Gao et al.'s gold: the
    gold score of the policy's samples, where the training's "gold" is greedy held-out accuracy)."""

    def __init__(self, policy, reference, task, n_prompts=64, group=4, seed=12345):
        self.policy, self.reference, self.task, self.seed, self.group = policy, reference, task, seed, group
        self.problems = task.sample(n_prompts, seed)
        self.prompts = task.encode_prompts(self.problems)
        self.kl: list[float] = []
        self.sampled_gold: list[float] = []

    def __call__(self, *_):
        import torch

        with torch.no_grad():
            gen = torch.Generator(device=next(self.policy.parameters()).device).manual_seed(self.seed)
            ro = generate(self.policy, self.prompts, self.group, self.task.max_answer_length, 1.0, generator=gen)
            _, logits = sequence_logprobs(self.policy, ro, return_logits=True)
            _, ref_logits = sequence_logprobs(self.reference, ro, return_logits=True)
            self.kl.append(float(Fn.masked_sum(Fn.exact_kl(logits, ref_logits), ro.mask, dim=1).mean()))
            rows = expand(self.problems, self.group)
            scores = self.task.token_scores(rows, ro.completion_ids, ro.mask).to(ro.mask.device)
            self.sampled_gold.append(float(scores.sum(1).mean()))


DEFAULT_SETTINGS = ((0.0, "loss"), (0.3, "loss"), (1.0, "loss"), (0.3, "reward"))


def rl_against(rm, reference, task, preset, beta, where, seed, steps, eval_every=10):
    """One GRPO run from ``reference`` against sigmoid(``rm``) with the KL penalty ``beta`` (in the
    loss or the reward: ``where``): ``(curve, policy, proxy)``, the curve MEASURED at each
    evaluation (every ``eval_every`` steps): "step", "gold" (exact held-out accuracy), "kl"
    (KL(pi || pi_ref) per completion, `KLMonitor`), "sampled_gold" (the exact reward's mean on the monitor's
    sampled completions), "proxy" (the batch's proxy reward, at step 0
    the first batch's, then the mean of the 5 steps before)."""
    policy = copy.deepcopy(reference)
    monitor = KLMonitor(policy, reference, task)
    proxy = ProxyTask(task, rm)
    algo = make_algorithm("grpo", beta=beta, kl_placement=where)
    h = train(algo, proxy, reference, policy, preset, steps=steps, seed=seed, eval_every=eval_every, progress=False,
              on_evaluate=monitor)  # fmt: skip
    ev, reward = [e["step"] for e in h.evals], h.series("reward")
    proxy_curve = [float(reward[0])] + [float(np.mean(reward[max(0, s - 5) : s])) for s in ev[1:]]
    curve = {"step": ev, "gold": list(h.eval_series()), "kl": monitor.kl, "sampled_gold": monitor.sampled_gold}
    return {**curve, "proxy": proxy_curve}, policy, proxy


def run_reward_model(
    reference, preset="cpu", seeds=(0, 1), steps=60, settings=DEFAULT_SETTINGS, n_labels=8192, progress=True
) -> dict:
    """GRPO against sigmoid(r_phi) with each (beta, kl_placement) of ``settings``, per seed.

    MEASURED every 10 steps: gold (exact) held-out accuracy, the proxy reward of the training
    batch, KL(pi || pi_ref) per completion on a fixed prompt set; the completions r_phi scores
    highest among those the checker rejects, at the end of the beta = 0 run of the first seed."""
    preset = resolve_preset(preset)
    task = make_task(preset)
    rm, rm_info = train_reward_model(reference, task, RewardModelConfig(n_labels=n_labels, seed=preset.seed), progress)
    curves, examples, progress_bar = {}, [], bar(len(settings) * len(seeds), "reward model", progress)
    for beta, where in settings:
        key = f"beta {beta:g}" + (f" ({where})" if beta > 0 else "")
        curves[key] = []
        for seed in seeds:
            curve, policy, proxy = rl_against(rm, reference, task, preset, beta, where, seed, steps)
            curves[key].append(curve)
            if beta == 0 and not examples:
                examples = exploits(proxy, policy, seed=seed)
            progress_bar.update(1)
    progress_bar.close()
    n = len(seeds)
    b0, start = curves["beta 0"], curves["beta 0"][0]["gold"][0]
    peak, final = [max(c["gold"]) for c in b0], [c["gold"][-1] for c in b0]
    rise = [c["proxy"][-1] - c["proxy"][0] for c in b0]
    ends = {
        k: (spread([c["kl"][-1] for c in v], ".2f"), spread([c["gold"][-1] for c in v], ".3f"))
        for k, v in curves.items()
    }
    claims = [
        claim(
            "r_phi tells right from wrong on the reference's samples better than a constant 'wrong'",
            f"validation accuracy {rm_info['val_accuracy']:.3f} vs {rm_info['always_wrong']:.3f} for 'always wrong' "
            f"({n_labels} labels; {rule(0.02, 0.0, 'the difference', 1)})",
            verdict([rm_info["val_accuracy"] - rm_info["always_wrong"]], 0.02, 0.0),
        ),
        claim(
            "optimising a learned reward without a penalty: the proxy rises, the gold accuracy falls (reward hacking)",
            f"beta 0: proxy {spread([c['proxy'][0] for c in b0], '.3f')} -> {spread([c['proxy'][-1] for c in b0], '.3f')}; "
            f"gold {start:.3f} -> {spread(final, '.3f')} at step {steps} "
            f"({rule(0.1, 0.0, 'the gold fall where the proxy rose', n)})",
            verdict([start - f if r > 0 else -1.0 for f, r in zip(final, rise, strict=True)], 0.1, 0.0),
        ),
        claim(
            "the gold accuracy first rises, then falls as the KL grows (Gao et al. 2022)",
            f"beta 0: peak {spread(peak, '.3f')} vs start {start:.3f}; KL, gold at step {steps}: "
            + ", ".join(f"{k} {kl}, {g}" for k, (kl, g) in ends.items())
            + f" ({rule(0.05, 0.0, 'the smaller of peak - start and peak - end', n)})",
            verdict([min(p - start, p - f) for p, f in zip(peak, final, strict=True)], 0.05, 0.0),
        ),
    ]
    for key in list(curves)[1:]:
        g = [c["gold"][-1] for c in curves[key]]
        claims.append(
            claim(
                f"the KL penalty ({key}) limits the reward hacking (gold ends above beta 0's)",
                f"gold at step {steps}: {spread(g, '.3f')} vs {spread(final, '.3f')} at beta 0 "
                f"({rule(0.05, 0.0, 'the difference', n)})",
                above(g, final, 0.05, pair=True),
            )
        )
        claims.append(
            claim(
                f"... and prevents it ({key}): gold ends no lower than the reference's",
                f"gold at step {steps}: {spread(g, '.3f')} vs the reference's {start:.3f} "
                f"(holds: gold > reference - 0.02 on {on_seeds(n)}; fails here: gold <= reference - 0.05 on "
                f"{on_seeds(n)}; between: depends)",
                verdict([x - start + 0.02 for x in g], 0.0, -0.03),
            )
        )
    claims += gao_claims(curves)
    return {"reward_model": rm_info, "curves": curves, "examples": examples, "steps": steps, "claims": claims}


def _gao(curve):
    """Gao et al.'s curve fitted to one run's points after step 0 (its step 0 is the start), or None
    when the run has too few points for a fit."""
    from ...measure.fits import gao_fit

    try:
        return gao_fit(curve["kl"][1:], curve["gold"][1:], start=curve["gold"][0])
    except ValueError:
        return None


def gao_claims(curves: dict) -> list[dict]:
    """Gao et al.'s two findings on `run_reward_model`'s curves, per seed: the curve
    d (alpha - beta log d) fitted to the beta 0 run turns down (beta > 0), and each penalised run's
    points lie on that curve, not above it (their mean gold minus the curve at the same KL)."""
    b0 = curves["beta 0"]
    fits, n = [_gao(c) for c in b0], len(b0)
    each = "; ".join(f"alpha {f.alpha:+.2f}, beta {f.beta:+.2f}" if f else "too few points" for f in fits)
    out = [
        claim(
            "Gao et al.'s curve gold - gold_0 = d (alpha - beta log d), d = sqrt(KL), fitted to beta 0's points, "
            "turns down (beta > 0: a peak d*)",
            f"beta 0, per seed: {each} ({rule(0.0, 0.0, 'the fitted beta', n)})",
            verdict([f.beta if f else None for f in fits], 0.0, 0.0),
        )
    ]
    for key in list(curves)[1:]:
        res = [
            float(np.mean(f.residuals(c["kl"][1:], c["gold"][1:]))) if f else None
            for f, c in zip(fits, curves[key], strict=True)
        ]
        shown = ", ".join("no fit" if r is None else f"{r:+.3f}" for r in res)
        out.append(
            claim(
                f"the KL penalty ({key}) moves a run along beta 0's fitted curve, not above it (Gao et al.)",
                f"mean gold minus beta 0's curve at the same KL, per seed: {shown} (holds: < 0.05 on "
                f"{on_seeds(n)}; fails here: >= 0.10 on {on_seeds(n)}; between: depends)",
                verdict([None if r is None else 0.05 - r for r in res], 0.0, -0.05),
            )
        )
    return out


def gao_frontier(runs: dict, betas) -> tuple[dict, dict]:
    """Per size ``n`` of ``runs[n][beta]`` (`run_overoptimisation`'s curves): Gao et al.'s curve fitted to
    the unpenalised runs' points (``fits[n]``), and each penalised run's residuals against it
    (``frontier[n][beta]``: mean, largest |residual|, the number of points)."""
    from ...measure.fits import gao_fit

    fits, frontier = {}, {}
    for n in runs:
        points = runs[n][0.0]  # step 0 of each run is the reference: its gold is the start (its KL 0 to rounding)
        kl, gold = [k for c in points for k in c["kl"][1:]], [g for c in points for g in c["gold"][1:]]
        fits[n] = gao_fit(kl, gold, start=points[0]["gold"][0])
        frontier[n] = {}
        for beta in betas:
            if beta == 0:
                continue
            kl = [k for c in runs[n][beta] for k in c["kl"][1:]]
            res = fits[n].residuals(kl, [g for c in runs[n][beta] for g in c["gold"][1:]])
            frontier[n][beta] = {"mean": float(np.mean(res)), "max_abs": float(np.max(np.abs(res))), "n": len(res)}
    return fits, frontier


def run_overoptimisation(
    reference, preset="cpu", seeds=(0,), steps=60, betas=(0.0, 0.1, 0.3), sizes=(8192, 16384, 32768),
    eval_every=5, progress=True,
) -> dict:  # fmt: skip
    """Gao et al.'s picture: gold against d = sqrt(KL) for reward models of several sizes (``sizes``:
    labels r_phi is trained on) and several KL penalties (``betas``, in the loss), per seed.

    MEASURED: each r_phi's held-out accuracy (``"reward_models"[n]``); every run's curve
    (``"runs"[n][beta]``: one `rl_against` curve per seed, evaluated every ``eval_every`` steps).
    COMPUTED (`grpo_edu.measure.fits.gao_fit`): per size, the curve gold - gold_0 = d (alpha - beta
    log d) fitted to the unpenalised runs' points (``"fits"[n]``), and the frontier question
    (``"frontier"[n][beta]``: the penalised runs' points against that curve, their mean residual
    gold - fitted and the largest |residual|; Gao et al. find the penalty moves a run along the
    frontier, not above it, so the residuals should be about the fit's own rmse)."""
    if 0.0 not in betas:
        raise ValueError(f"betas must include 0 (the unpenalised runs the curve is fitted to), got {betas}")
    preset = resolve_preset(preset)
    task = make_task(preset)
    infos, runs = {}, {}
    progress_bar = bar(len(sizes) * (1 + len(betas) * len(seeds)), "reward models", progress)
    for n in sizes:
        rm, infos[n] = train_reward_model(reference, task, RewardModelConfig(n_labels=n, seed=preset.seed), False)
        progress_bar.update(1)
        runs[n] = {}
        for beta in betas:
            runs[n][beta] = []
            for seed in seeds:
                runs[n][beta].append(rl_against(rm, reference, task, preset, beta, "loss", seed, steps, eval_every)[0])
                progress_bar.update(1)
    progress_bar.close()
    fits, frontier = gao_frontier(runs, betas)
    return {"reward_models": infos, "runs": runs, "fits": fits, "frontier": frontier, "steps": steps,
            "eval_every": eval_every, "seeds": tuple(seeds)}  # fmt: skip


def figure(res):
    """The regime's figure: gold accuracy against the KL to the reference, one line per beta and seed."""
    from ...figures.plotstyle import PALETTE, set_alt
    from .figures import PERCENT, new_figure

    fig, ax = new_figure()
    for i, (k, runs) in enumerate(res["curves"].items()):
        for j, c in enumerate(runs):
            ax.plot(c["kl"], c["gold"], "o-", color=PALETTE[i % len(PALETTE)], alpha=0.8, label=k if j == 0 else None)
    ax.yaxis.set_major_formatter(PERCENT)
    ax.set_xlabel("KL(pi || pi_ref) per completion (nats)")
    ax.set_ylabel("gold (exact) held-out accuracy")
    ax.set_title("RL against a learned reward: gold accuracy as the policy drifts")
    ax.legend()
    return set_alt(fig, "Gold accuracy against the KL to the reference, one line per beta and seed, "
                   "measured every 10 steps.")  # fmt: skip
