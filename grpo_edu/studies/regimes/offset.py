"""The offset regime: rewards (wrong, right) = (0, 1), (5, 6), (-1, 1), the same reference.

An offset c in the reward adds c * grad log pi to every sampled answer's push: plain REINFORCE
pushes every answer up; a baseline removes it if it has learned it; GRPO's group normalisation
removes it exactly (up to its eps).
"""

from __future__ import annotations

from ... import functional as Fn
from ...algorithms import GRPOConfig, make_algorithm
from ...evaluation import evaluate
from ...rollout import sample_batch
from ...train import train
from ...warmstart.presets import resolve_preset
from .common import above, bar, claim, paired, rngs, rule, spread, task_of, verdict


def with_critic_warmup(algo, task, steps: int, seed: int):
    """``algo`` whose critic first fits ``steps`` batches from the starting policy, before the policy moves."""
    setup = algo.setup

    def warm_setup(policy, reference=None, generator=None):
        setup(policy, reference, generator)
        rng, gen = rngs(seed + 7, next(policy.parameters()).device)
        for _ in range(steps):
            ro, scores, _ = sample_batch(policy, task, 512, 1, rng, gen)
            algo.critic.step(ro, Fn.discounted_returns(scores, ro.mask, 1.0), ro.mask)
        return algo

    algo.setup = warm_setup
    return algo


def affine_gap(
    rewards, shift: float, scale: float, group_size: int = GRPOConfig.group_size, eps: float | None = None
) -> float:
    """max_i |A_i(shift + scale * r) - A_i(r)| of GRPO's group advantage (scale_rewards="group",
    ``eps`` default: GRPOConfig's adv_eps):
    0 up to float rounding for any shift, about eps / std(r) relative for a scale, and far
    more once scale * std(r) is not large against eps."""
    eps = GRPOConfig.adv_eps if eps is None else eps
    a = Fn.group_advantages(shift + scale * rewards, group_size, eps=eps)[0]
    return float((a - Fn.group_advantages(rewards, group_size, eps=eps)[0]).abs().max())


RUNS = {  # name -> (algorithm, reward_values, config, critic warm-up: True = the regime's warmup steps)
    "REINFORCE (0, 1)": ("reinforce", (0.0, 1.0), {}, False),
    "REINFORCE (5, 6)": ("reinforce", (5.0, 6.0), {}, False),
    "REINFORCE (-1, 1)": ("reinforce", (-1.0, 1.0), {}, False),
    "batch-mean baseline (0, 1)": ("baseline", (0.0, 1.0), {"baseline": "batch_mean"}, False),
    "batch-mean baseline (5, 6)": ("baseline", (5.0, 6.0), {"baseline": "batch_mean"}, False),
    "critic baseline (5, 6)": ("baseline", (5.0, 6.0), {}, False),
    "critic baseline (5, 6), warm-up": ("baseline", (5.0, 6.0), {}, True),
    "PPO (5, 6)": ("ppo", (5.0, 6.0), {}, False),
    "PPO (5, 6), no whitening": ("ppo", (5.0, 6.0), {"whiten_advantages": False}, False),
    "GRPO (0, 1)": ("grpo", (0.0, 1.0), {}, False),
    "GRPO (5, 6)": ("grpo", (5.0, 6.0), {}, False),
}


def run_offset(reference, preset="cpu", seeds=(0, 1), steps=20, warmup=60, progress=True) -> dict:
    """Rewards (wrong, right) = (0, 1), (5, 6), (-1, 1): REINFORCE, the baselines, PPO and GRPO.

    MEASURED: greedy held-out accuracy after ``steps`` steps, per seed; GRPO's advantages of
    one reference batch under affine maps of the reward (max |A' - A|, exact arithmetic)."""
    preset = resolve_preset(preset)
    start = evaluate(reference, task_of(preset))
    grpo = make_algorithm("grpo").config  # GRPO's G and eps: the advantages measured are its own
    ro, scores, _ = sample_batch(reference, task_of(preset), 64, grpo.group_size, *rngs(preset.seed, preset.device))
    r = scores.sum(1)
    maps = {"(5, 6)": (5.0, 1.0), "(-1, 1)": (-1.0, 2.0), "(0, 1e-4)": (0.0, 1e-4), "(0, 1e-2)": (0.0, 1e-2)}
    adv_diff = {k: affine_gap(r, a, b, grpo.group_size, grpo.adv_eps) for k, (a, b) in maps.items()}
    acc, progress_bar = {k: [] for k in RUNS}, bar(len(RUNS) * len(seeds), "offset", progress)
    for seed in seeds:
        for name, (algo, rv, cfg, warm) in RUNS.items():
            a, task = make_algorithm(algo, **cfg), task_of(preset, reward_values=rv)
            a = with_critic_warmup(a, task, warmup, seed) if warm and warmup else a
            h = train(a, task, reference, preset=preset, steps=steps, seed=seed, eval_every=steps, progress=False)
            acc[name].append(h.final_accuracy)
            progress_bar.update(1)
    progress_bar.close()

    n, gap_name = len(seeds), "max |A' - A|"
    bm5, bm0 = acc["batch-mean baseline (5, 6)"], acc["batch-mean baseline (0, 1)"]
    g5, g0 = acc["GRPO (5, 6)"], acc["GRPO (0, 1)"]
    warm, cold = acc["critic baseline (5, 6), warm-up"], acc["critic baseline (5, 6)"]
    claims = [
        claim(
            "an offset in the reward wrecks plain REINFORCE (every answer is pushed up)",
            f"held-out accuracy {start:.3f} -> {spread(acc['REINFORCE (5, 6)'], '.3f')} with (5, 6) vs "
            f"{spread(acc['REINFORCE (0, 1)'], '.3f')} with (0, 1) after {steps} steps "
            f"({rule(0.1, 0.0, '(0, 1) minus (5, 6)', n)})",
            above(acc["REINFORCE (0, 1)"], acc["REINFORCE (5, 6)"], 0.1, pair=True),
        ),
        claim(
            "a batch-mean baseline removes the offset (the same accuracy as with (0, 1))",
            f"batch-mean baseline {spread(bm5, '.3f')} with (5, 6) vs {spread(bm0, '.3f')} with (0, 1) "
            f"({rule(0.0, -0.03, '0.02 - |difference|', n)})",
            verdict([0.02 - abs(d) for d in paired(bm5, bm0)], 0.0, -0.03),
        ),
        claim(
            "a critic warm-up avoids the collapse an offset causes a cold critic",
            f"(5, 6): critic from cold {spread(cold, '.3f')}, after {warmup} critic-only steps "
            f"{spread(warm, '.3f')} ({rule(0.1, 0.0, 'warm-up minus cold', n)})",
            above(warm, cold, 0.1, pair=True),
        ),
        claim(
            "... and after its warm-up the critic baseline learns (ends above the reference)",
            f"(5, 6) after warm-up {spread(warm, '.3f')} vs the reference's {start:.3f} "
            f"({rule(0.02, 0.0, 'warm-up minus reference', n)})",
            verdict([w - start for w in warm], 0.02, 0.0),
        ),
        claim(
            "whitening the advantages (PPO) protects a cold critic from the offset",
            f"(5, 6): PPO {spread(acc['PPO (5, 6)'], '.3f')} vs without whitening "
            f"{spread(acc['PPO (5, 6), no whitening'], '.3f')} ({rule(0.1, 0.0, 'the difference', n)})",
            above(acc["PPO (5, 6)"], acc["PPO (5, 6), no whitening"], 0.1, pair=True),
        ),
        claim(
            "GRPO's group normalisation ignores an affine change of the reward",
            f"max |A' - A| on one batch: (5, 6) {adv_diff['(5, 6)']:.1e}, (-1, 1) {adv_diff['(-1, 1)']:.1e}; "
            f"training: {spread(g5, '.3f')} vs {spread(g0, '.3f')} (holds: |A' - A| < 1e-5 and the accuracies "
            f"within 0.01 on every seed; fails here: |A' - A| >= 1e-5 or 0.05 apart on every seed)",
            "fails here"
            if adv_diff["(5, 6)"] >= 1e-5
            else verdict([0.01 - abs(d) for d in paired(g5, g0)], 0.0, -0.04),
        ),
        claim(
            "... up to its eps: a reward scaled to (0, 1e-4) loses the normalisation",
            f"max |A' - A|: scale 1e-2 {adv_diff['(0, 1e-2)']:.1e}, scale 1e-4 {adv_diff['(0, 1e-4)']:.3f} "
            f"(adv_eps = {grpo.adv_eps:g}: A = (r - mean) / (std + eps / scale); {rule(0.1, 0.01, gap_name, 1)})",
            verdict([adv_diff["(0, 1e-4)"]], 0.1, 0.01),
        ),
        claim(
            "rewards (-1, +1) let plain REINFORCE push wrong answers down and learn faster than (0, 1)",
            f"REINFORCE {spread(acc['REINFORCE (-1, 1)'], '.3f')} with (-1, 1) vs "
            f"{spread(acc['REINFORCE (0, 1)'], '.3f')} with (0, 1) ({rule(0.02, 0.0, 'the difference', n)})",
            above(acc["REINFORCE (-1, 1)"], acc["REINFORCE (0, 1)"], 0.02, pair=True),
        ),
    ]
    return {"start": start, "steps": steps, "accuracy": acc, "adv_diff": adv_diff, "claims": claims}


def figure(res):
    """The regime's figure: held-out accuracy of each run after the same steps, one dot per seed."""
    from ...figures.plotstyle import PALETTE, set_alt
    from .figures import PERCENT, new_figure

    fig, ax = new_figure((7.5, 4.8))
    names = list(res["accuracy"])
    for i, k in enumerate(names):
        ax.scatter(res["accuracy"][k], [i] * len(res["accuracy"][k]), color=PALETTE[0], zorder=3)
    ax.axvline(res["start"], color="grey", ls="--", label="the reference")
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()  # the first run on top, as the verb prints them
    ax.xaxis.set_major_formatter(PERCENT)
    ax.set_xlabel(f"held-out accuracy after {res['steps']} steps (one dot per seed)")
    ax.set_title("an offset in the reward: who survives it")
    ax.legend(loc="upper left")
    return set_alt(fig, "Held-out accuracy of each algorithm and reward scale after the same number of steps, "
                   "one dot per seed, with the reference's accuracy as a dashed line.")  # fmt: skip
