"""Why PPO is ahead of GRPO per sampled answer in the default world (issue 32): one switch at a time.

The difficulty regime's default world prints PPO 0.904 [0.892, 0.916] against GRPO 0.813 [0.768, 0.858]
(greedy held-out accuracy after 40 steps of 512 completions, seeds 0 and 1). With the configs as the
regime builds them (``make_algorithm("ppo")``, ``make_algorithm("grpo")``), the two differ in
(`config_differences` lists them, the test checks the list):

    advantage       PPO: A_t = G_t - V(s_t) per token (GAE, gamma = lam = 1), whitened over the batch's
                    tokens | GRPO: A_i = (r_i - mean_g r) / (std_g r + eps), per completion
    layout          group_size 1 (512 prompts x 1) | 8 (64 prompts x 8); the same 512 completions a step
    KL              kl_placement "reward" (beta k1 inside r_t) | "loss" (beta k3 added to the loss)
    normalisation   whiten_advantages (batch std of A_t) | scale_rewards "group" (each group's std)

and in nothing else that trains: lr, clip range, beta, loss_type, epochs and minibatches (the reuse:
2 x 2 = 4 optimizer steps on each batch) are the same. Each arm below starts from the same reference
with the same seed and the same completions per step, and changes exactly one thing of its base run
(`arm_spec` is what the test compares). "PPO, batch-mean baseline" keeps PPO's config and swaps the
critic's V(s_t) in GAE for the batch's mean return: its PPO is built with ``functions={"gae":
batch_mean_gae}`` (the library's loop, no second one); the critic still trains, its values unused.

MEASURED (cpu preset, 40 steps x 512 completions, seeds 0, 1, 2; ``python -m grpo_edu.studies.gap_ablation
--seeds 3``; PPO and GRPO at seeds 0 and 1 are the regime's runs, the same numbers). Held-out accuracy, mean
[min, max]; diff: paired by seed, from its base arm; closes: the share of the mean gap (0.097) it closes:

    PPO                                      0.901 [0.892, 0.916]
    PPO, batch-mean baseline (critic off)    0.918 [0.900, 0.932]   +0.017 [+0.006, +0.036]  -17%  fails here
    PPO, 64 x 8 (GRPO's layout)              0.777 [0.772, 0.788]   -0.124 [-0.128, -0.120]  +128% holds
    PPO, KL in the loss (GRPO's)             0.895 [0.854, 0.920]   -0.007 [-0.062, +0.024]   +7%  depends
    PPO, no whitening                        0.901 [0.858, 0.946]   -0.001 [-0.034, +0.050]   +1%  depends
    GRPO                                     0.805 [0.768, 0.858]
    GRPO, 128 x 4                            0.766 [0.712, 0.822]   -0.039 [-0.076, -0.004]  -40%  fails here
    GRPO, 256 x 2                            0.715 [0.650, 0.772]   -0.090 [-0.208, +0.004]  -93%  depends
    GRPO, KL in the reward (PPO's)           0.737 [0.710, 0.786]   -0.067 [-0.142, -0.002]  -70%  fails here
    GRPO, batch std (PPO-like scale)         0.719 [0.668, 0.750]   -0.086 [-0.108, -0.050]  -89%  fails here
    PPO, 256 x 2                             0.895 [0.844, 0.934]   -0.007 [-0.048, +0.018]   +7%  depends
    PPO, 128 x 4                             0.847 [0.812, 0.900]   -0.054 [-0.084, -0.016]  +56%  depends
    PPO, 64 x 8, batch-mean baseline         0.737 [0.650, 0.822]   -0.040 [-0.122, +0.034]  (base: PPO, 64 x 8) depends
    (verdict: the switch moves its base toward the other algorithm by > 0.02 on each of 3 seeds: holds;
    <= 0 on each: fails here; else depends)

The layout carries the gap: PPO on GRPO's 64 prompts x 8 loses 0.12 on every seed, more than the whole gap,
and PPO's accuracy falls with the prompts per step (512: 0.901, 256: 0.895, 128: 0.847, 64: 0.777); at the
same layout PPO is not ahead (PPO 64 x 8 minus GRPO per seed: +0.020, -0.086, -0.016). The critic does not
carry it: without it PPO does as well or better (+0.017). GRPO cannot take the wider layout: its groups tie
more as they shrink (the share of groups with all rewards equal over training: G = 8 0.25, 4 0.46, 2 0.72,
advantage 0 for all of them), and it falls (128 x 4 -0.039, 256 x 2 -0.090). In this world the reference
is about as unsure of every prompt (the difficulty regime measures EV_max = 0.016 at the reference, so
Var(R - b_loo) / Var(R - b_batch) = 1.12 at G = 8): a per-prompt baseline has nothing to explain, and the
group pays in prompts (G = 8) or in tied groups (G = 2) for nothing (a reading of the arms, which do not
ablate it further). PPO's other settings do not carry the gap (KL placement, whitening: depends, within
the seeds' spread). On GRPO, PPO's KL in the reward hurts (-0.067; with it no group ties, tied share 0.00
against 0.25, so the group std scales the KL's differences up in groups whose answers all scored the
same: a reading, not ablated), and so does the batch std (-0.086). Reuse (epochs 2 x
minibatches 2), lr, clip range and beta are the same in both: no arm.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import time
from dataclasses import fields

from .. import functional as Fn
from ..algorithms import GRPOConfig, PPOConfig, make_algorithm
from ..measure.common import spread
from ..measure.verdicts import paired, rule, verdict

BASES = ("PPO", "GRPO")
ARMS = {  # name -> (base arm, switch): the base arm's algorithm and config, with one field switched
    "PPO": ("PPO", {}),
    "PPO, batch-mean baseline (critic off)": ("PPO", {"advantage_baseline": "batch_mean"}),
    "PPO, 64 x 8 (GRPO's layout)": ("PPO", {"group_size": GRPOConfig.group_size}),
    "PPO, KL in the loss (GRPO's)": ("PPO", {"kl_placement": "loss"}),
    "PPO, no whitening": ("PPO", {"whiten_advantages": False}),
    "GRPO": ("GRPO", {}),
    "GRPO, 128 x 4": ("GRPO", {"group_size": 4}),
    "GRPO, 256 x 2": ("GRPO", {"group_size": 2}),
    "GRPO, KL in the reward (PPO's)": ("GRPO", {"kl_placement": "reward"}),
    "GRPO, batch std (PPO-like scale)": ("GRPO", {"scale_rewards": "batch"}),
    # follow-ups: the layout's dose for PPO, and the layout without the critic (base: another arm)
    "PPO, 128 x 4": ("PPO", {"group_size": 4}),
    "PPO, 256 x 2": ("PPO", {"group_size": 2}),
    "PPO, 64 x 8, batch-mean baseline": ("PPO, 64 x 8 (GRPO's layout)", {"advantage_baseline": "batch_mean"}),
}
ALGO = {"PPO": "ppo", "GRPO": "grpo"}
SIZES = {  # "full": the difficulty regime's budget (the preset's batch); "tiny": the test's (seconds, numbers meaningless)
    "full": dict(steps=40, sequences_per_step=None, eval_every=5),
    "tiny": dict(steps=1, sequences_per_step=16, eval_every=1),
}
PSEUDO = ("advantage_baseline", "sequences_per_step")  # what an arm sets that is not a config field


def batch_mean_gae(rewards, values, mask, gamma: float = 1.0, lam: float = 1.0):
    """GAE with the critic replaced by the batch's mean return: ``A_t = G_t - mean_i(G_{i,0})``.

    ``values`` are ignored (so ``lam`` too: with a constant baseline every lambda gives G_t - b).
    ``returns`` (the critic's target) are G_t, what `functional.gae` returns at lam = 1."""
    returns = Fn.discounted_returns(rewards, mask, gamma)
    b = Fn.masked_sum(rewards, mask, dim=1).mean()  # mean return of the batch's completions
    return Fn.baseline_advantages(returns, b, mask), returns


def config_differences() -> dict:
    """Every field where the default PPOConfig and GRPOConfig differ, or that only one of them has:
    ``{field: (ppo value, grpo value)}``, a missing field as ``"-"``."""
    ppo, grpo = PPOConfig().to_dict(), GRPOConfig().to_dict()
    out = {}
    for k in sorted(set(ppo) | set(grpo)):
        a, b = ppo.get(k, "-"), grpo.get(k, "-")
        if a != b:
            out[k] = (a, b)
    return out


def root(name: str) -> str:
    """The base algorithm ("PPO" or "GRPO") an arm is switched from, through its chain of bases."""
    while name not in BASES:
        name = ARMS[name][0]
    return name


def switches(name: str) -> dict:
    """Every switch from the arm's root to it (its base's, then its own)."""
    base, own = ARMS[name]
    return own if name in BASES else {**switches(base), **own}


def arm_spec(name: str, sequences_per_step: int | None = None) -> dict:
    """Everything that sets the arm's training: its algorithm, every field of its config, the
    completions per step (None: the preset's) and the advantage's baseline (the algorithm's own, or
    the batch mean that replaces the critic in its gae)."""
    base, switch = root(name), switches(name)
    cfg = {k: v for k, v in switch.items() if k not in PSEUDO}
    config = make_algorithm(ALGO[base], **cfg).config
    spec = {"algorithm": ALGO[base], **{f.name: getattr(config, f.name) for f in fields(config)}}
    spec["sequences_per_step"] = sequences_per_step
    spec["advantage_baseline"] = switch.get("advantage_baseline", "own")
    return spec


def make_arm(name: str):
    """The arm's algorithm: its base's, its switches set, and with the batch-mean baseline its ``gae``
    replaced by `batch_mean_gae` (``functions=``: that algorithm's only)."""
    base, switch = root(name), switches(name)
    cfg = {k: v for k, v in switch.items() if k not in PSEUDO}
    functions = {"gae": batch_mean_gae} if switch.get("advantage_baseline") == "batch_mean" else None
    return make_algorithm(ALGO[base], functions=functions, **cfg)


def _run_arm(name, reference, task, preset, seed, z) -> dict:
    from ..train import train

    base, algorithm = root(name), make_arm(name)
    t0 = time.perf_counter()
    h = train(algorithm, task, reference, copy.deepcopy(reference), preset, steps=z["steps"], seed=seed,
              sequences_per_step=z["sequences_per_step"], eval_every=z["eval_every"], progress=False,
              name=name)  # fmt: skip
    return {
        "accuracy": h.final_accuracy,
        "curve": [(e["samples"], e["accuracy"]) for e in h.evals],
        "samples": h.steps[-1]["samples"],
        "reward": float(h.series("reward")[-5:].mean()),
        "tied": float(h.series("frac_reward_zero_std").mean()) if base == "GRPO" else math.nan,
        "kl": float(h.series("kl")[-5:].mean()),
        "seconds": time.perf_counter() - t0,
    }


def run_gap_ablation(preset="cpu", seeds=3, steps=None, tiny=False, arms=None, reference=None, progress=True,
                     previous=None):  # fmt: skip
    """Each arm of `ARMS` (or ``arms``, with the bases they are read against) at seeds ``0 .. seeds-1``
    (or the list ``seeds``) for ``steps`` (default the regime's 40; tiny: 1) from ``preset``'s
    default-world reference; ``previous`` (an earlier result of the same steps, layout and seeds) gives
    the runs it already has. Returns ``{"runs": {arm: [per seed]}, "table": [rows], "seeds", "steps",
    ...}``; each row has the arm's held-out accuracy (per seed, mean, min, max), its paired difference
    from its base run, and the share of the PPO - GRPO gap it closes (`table`)."""
    from ..warmstart.presets import make_task, resolve_preset, setup_torch
    from ..warmstart.reference import reference_policy

    preset = resolve_preset(preset)
    if preset.world != "default":
        raise ValueError(f"the gap is the default world's; got a preset of world {preset.world!r}")
    setup_torch(preset)
    z = dict(SIZES["tiny" if tiny else "full"])
    z["sequences_per_step"] = z["sequences_per_step"] or preset.sequences_per_step
    if steps is not None:
        z["steps"] = steps
    seeds = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    wanted, chain = list(arms or ARMS), set()
    for n in wanted:  # every arm's chain of bases down to PPO or GRPO, which every row is read against
        chain |= {n, *BASES}
        while n not in BASES:
            n = ARMS[n][0]
            chain.add(n)
    names = [n for n in ARMS if n in chain]
    runs = {n: [] for n in names}
    if previous is not None:
        if [previous["steps"], previous["sequences_per_step"], previous["seeds"]] != [z["steps"],
                                                                                       z["sequences_per_step"], seeds]:  # fmt: skip
            raise ValueError("previous: another budget or other seeds than this run's")
        runs.update({n: list(rs) for n, rs in previous["runs"].items() if n in runs})
    todo = [n for n in names if not runs[n]]
    if todo:
        reference = reference if reference is not None else reference_policy(preset, progress=progress)
        task = make_task(preset)
    for seed in seeds:
        for n in todo:
            runs[n].append(_run_arm(n, reference, task, preset, seed, z))
            if progress:
                r = runs[n][-1]
                print(f"seed {seed} {n:40s} {r['accuracy']:.3f} ({r['seconds']:.0f} s)", flush=True)
    return {"steps": z["steps"], "sequences_per_step": z["sequences_per_step"], "seeds": seeds,
            "runs": runs, "table": table(runs), "differences": {k: list(v) for k, v in config_differences().items()},
            "specs": {n: arm_spec(n, z["sequences_per_step"]) for n in names}}  # fmt: skip


def table(runs) -> list[dict]:
    """One row per arm: held-out accuracy per seed, mean, min, max; ``diff``, the paired (same seed)
    difference from its base arm (the one switch); ``closes``, the share of the mean PPO - GRPO gap the
    arm closes from its root (PPO arms by going down, GRPO arms by going up: the mean over seeds of the
    move over the mean gap); and ``verdict``, on "the switch moves its base toward the other algorithm
    by more than 0.02" (paired by seed: holds / fails here / depends)."""
    acc = {n: [r["accuracy"] for r in rs] for n, rs in runs.items()}
    gap = paired(acc["PPO"], acc["GRPO"])  # PPO minus GRPO, per seed
    mean_gap = sum(gap) / len(gap)

    def toward(a, b, r):  # a's move from b toward the other algorithm than r, per seed
        return [-d for d in paired(a, b)] if r == "PPO" else paired(a, b)

    rows = []
    for n, a in acc.items():
        base, r = ARMS[n][0], root(n)
        closes = toward(a, acc[r], r)
        row = {"arm": n, "base": base, "switch": ARMS[n][1], "accuracy": a, "mean": sum(a) / len(a),
               "min": min(a), "max": max(a), "diff": paired(a, acc[base]),
               "closes": sum(closes) / len(closes) / mean_gap if mean_gap else math.nan}  # fmt: skip
        row["verdict"] = verdict(toward(a, acc[base], r), 0.02, 0.0) if n not in BASES else ""
        rows.append(row)
    return rows


def format_table(res) -> str:
    n = len(res["seeds"])
    lines = [f"held-out accuracy after {res['steps']} steps x {res['sequences_per_step']} completions, "
             f"seeds {res['seeds']}: mean [min, max]; diff: paired, from its base arm; closes: the share "
             f"of the mean PPO - GRPO gap it closes from its root (PPO or GRPO)",
             f"{'arm':40s} {'accuracy':22s} {'diff from base':24s} {'closes':>7s}  verdict"]  # fmt: skip
    for r in res["table"]:
        d = "" if r["arm"] in BASES else spread(r["diff"], "+.3f")
        c = "" if r["arm"] in BASES else f"{r['closes']:+.0%}"
        lines.append(f"{r['arm']:40s} {spread(r['accuracy'], '.3f'):22s} {d:24s} {c:>7s}  {r['verdict']}")
    lines.append(f"verdict: the switch moves its base toward the other algorithm ("
                 f"{rule(0.02, 0.0, 'the paired move', n)})")  # fmt: skip
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--preset", default="cpu")
    p.add_argument("--arms", nargs="*", default=None, help="arm names (default: all of ARMS)")
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--out", default="/tmp/gap_ablation.json")
    p.add_argument("--reuse", default=None, help="an earlier --out of the same budget: its runs are not rerun")
    a = p.parse_args(argv)
    previous = json.load(open(a.reuse)) if a.reuse else None
    res = run_gap_ablation(a.preset, a.seeds, a.steps, a.tiny, a.arms, previous=previous)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1, default=str)
    print(format_table(res))


if __name__ == "__main__":
    main()
