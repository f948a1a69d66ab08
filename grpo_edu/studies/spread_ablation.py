"""What holds PPO and GRPO back in the spread world (issue 45): one switch at a time, in both worlds.

In the spread world (`grpo_edu.warmstart.presets.WORLDS`: the reference was taught only small operands)
REINFORCE passes 90% held-out within the budget and PPO and GRPO do not. PPO and GRPO differ from REINFORCE
in more than one thing, so each arm below starts from the same reference with the same seed and the same
completions per step (512), and changes ONE thing of its base run:

    beta 0          no KL penalty to the reference (PPO: beta k1 in the reward; GRPO: beta k3 in the loss)
    no clip         eps_low 1, eps_high 1e6: clip(rho, 0, 1e6) never binds (rho >= 0), the reuse kept
    one update      epochs 1 x minibatches 1: each batch used once, by one optimizer step (REINFORCE's)
    4 updates, no reuse   epochs 1 x minibatches 4: four optimizer steps per batch as the base takes, but each
                    row seen once (the reuse apart from the number of steps a batch gives)
    128 x 4         GRPO's layout: 128 prompts x 4 answers instead of 64 x 8 (fewer tied groups on hard prompts)
    no std          GRPO's advantage not divided by the group's std (Dr. GRPO: scale_rewards "none")

and, as follow-ups, beta 0 with one update (base: the beta 0 arm). The learning rate (3e-4), the gradient
clip (1.0) and the optimizer are the same in every rung: no arm. The default world's runs of the same arms
are the control, a world where the reference is not far from where RL must go. Each run also reports, at
its end, greedy held-out accuracy on the easy problems (both operands < 60, what the spread reference was
taught) and the hard ones, and KL(pi || pi_ref) per answer on fresh samples (the distance travelled).

`measure_reference` measures, at each world's reference and over seeds, what notebook 05 explains the
gradient noise with: each rung's relative gradient variance (`measure.gradient_variance`, the layout each
trains with; PPO's its whitened advantage, `measure.variance.ppo_advantages`, on the critic baseline's
batches), V(s_0)'s explained share of the reward (a critic fitted as `grpo-edu compare` fits it), EV_max,
and the score norms of right and wrong answers: tr Cov(g) ~ E[(R - b)^2 |s|^2], and the critic's baseline
puts weight V(s_0)^2 on every wrong answer, which REINFORCE (A = R) leaves at zero.

MEASURED (cpu preset, 128 steps x 512 completions, seeds 0, 1, 2; ``python -m grpo_edu.studies.spread_ablation
--seeds 3``, kept in tests/data/spread_ablation/ablation.json; `format_table` prints it whole, notebook 05
shows it). Final held-out accuracy, mean [min, max]; the change paired by seed from the base arm; verdict:

    spread world                REINFORCE 0.995 [0.994, 0.996]; PPO 0.757 [0.752, 0.764]; GRPO 0.781 [0.732, 0.832]
    PPO, beta 0                 0.955   +0.197 [+0.150, +0.238] holds     (90% after 15,360-20,480 answers)
    PPO, no clip                0.719   -0.038 [-0.206, +0.110] depends
    PPO, one update             0.787   +0.029 [-0.002, +0.056] depends
    PPO, 4 updates, no reuse    0.821   +0.063 [-0.010, +0.150] depends
    PPO, beta 0, one update     0.969   +0.015 [-0.026, +0.066] depends  (base: PPO, beta 0)
    GRPO, beta 0                0.908   +0.127 [+0.050, +0.218] holds
    GRPO, no clip               0.925   +0.144 [+0.100, +0.186] holds
    GRPO, one update            0.888   +0.107 [+0.062, +0.134] holds
    GRPO, 4 updates, no reuse   0.815   +0.035 [-0.014, +0.130] depends
    GRPO, 128 x 4               0.730   -0.051 [-0.138, +0.094] depends
    GRPO, no std                0.587   -0.194 [-0.292, -0.124] fails here
    GRPO, beta 0, one update    0.961   +0.053 [+0.012, +0.092] depends  (base: GRPO, beta 0)
    default world               REINFORCE 0.949; PPO 0.955; GRPO 0.941
    PPO: beta 0 -0.007 depends, no clip -0.034 fails here, one update -0.041 fails here
    GRPO: beta 0 -0.011 depends, no clip -0.015 fails here, one update -0.080 fails here

The KL leash holds both back in the spread world and costs nothing measurable in the default one: without
it PPO closes 83% of its gap to REINFORCE (hard problems 0.64 -> 0.96, KL travelled 2.9 -> 4.9 nats per
answer) and GRPO 59%. GRPO is held back by the clip too: without it, or with one update per batch (where
it never binds), it gains +0.14 and +0.11, while four updates on fresh rows (the reuse gone, the clip
binding from the second minibatch on) gain +0.035, depends (a reading: the clip caps how far a batch can
raise an answer's probability; not ablated further). For PPO the clip and the reuse depend on the seed.
In the default world the clip and the reuse are what PPO and GRPO gain from (fails here: switching them
off lowers accuracy on every seed). GRPO's group std carries its learning of the hard problems (no std:
hard 0.69 -> 0.40). At the references (3 measurement seeds): the critic's V(s_0) explains 0.61 [0.55,
0.64] of the reward in the spread world, and its baseline's gradient is 3.1x as noisy as REINFORCE's (0.568
against 0.182); the score norms predict x2.5 [1.8, 3.1], 74% of it from wrong answers (|s|^2 11x a right
answer's); in the default world EV -0.003, x1.27. (The kept measurements at the references predate PPO's
own: there its relative variance is the critic baseline's, `ppo_measured`.)
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import time

import numpy as np
import torch

from ..algorithms import make_algorithm
from ..measure.common import reach, rngs, spread
from ..measure.verdicts import paired, rule, verdict
from ..warmstart.presets import get_preset

RUNGS = {"REINFORCE": "reinforce", "critic baseline": "baseline", "PPO": "ppo", "GRPO": "grpo"}
NO_CLIP = {"eps_low": 1.0, "eps_high": 1e6}  # clip(rho, 0, 1e6): rho >= 0, so it never binds
ONE_UPDATE = {"epochs": 1, "minibatches": 1}
FRESH_4 = {"epochs": 1, "minibatches": 4}
ARMS = {  # name -> (base arm, switch): the base's algorithm and config, with one thing switched
    "REINFORCE": ("REINFORCE", {}),
    "critic baseline": ("critic baseline", {}),
    "PPO": ("PPO", {}),
    "PPO, beta 0": ("PPO", {"beta": 0.0}),
    "PPO, no clip": ("PPO", NO_CLIP),
    "PPO, one update": ("PPO", ONE_UPDATE),
    "PPO, 4 updates, no reuse": ("PPO", FRESH_4),
    "PPO, beta 0, one update": ("PPO, beta 0", ONE_UPDATE),
    "GRPO": ("GRPO", {}),
    "GRPO, beta 0": ("GRPO", {"beta": 0.0}),
    "GRPO, no clip": ("GRPO", NO_CLIP),
    "GRPO, one update": ("GRPO", ONE_UPDATE),
    "GRPO, 4 updates, no reuse": ("GRPO", FRESH_4),
    "GRPO, 128 x 4": ("GRPO", {"group_size": 4}),
    "GRPO, no std": ("GRPO", {"scale_rewards": "none"}),
    "GRPO, beta 0, one update": ("GRPO, beta 0", ONE_UPDATE),
}
WORLD_ARMS = {  # the arms each world runs: the default world's are the control of the three switches
    "spread": tuple(ARMS),
    "default": (
        "REINFORCE",
        "critic baseline",
        "PPO",
        "PPO, beta 0",
        "PPO, no clip",
        "PPO, one update",
        "GRPO",
        "GRPO, beta 0",
        "GRPO, no clip",
        "GRPO, one update",
    ),  # fmt: skip
}
SIZES = {  # "full": notebook 05's budget (65,536 completions); "tiny": the test's (numbers meaningless)
    "full": dict(steps=128, sequences_per_step=get_preset("cpu").sequences_per_step, eval_every=10),  # 512
    "tiny": dict(steps=2, sequences_per_step=32, eval_every=1),
}
MARGIN = 0.02  # the rule: the switch raises final held-out accuracy by more than this on every seed
TARGET = 0.9


def root(name: str) -> str:
    """The rung ("REINFORCE", "critic baseline", "PPO" or "GRPO") an arm is switched from."""
    while name not in RUNGS:
        name = ARMS[name][0]
    return name


def switches(name: str) -> dict:
    """Every switch from the arm's rung to it (its base's, then its own)."""
    base, own = ARMS[name]
    return dict(own) if name in RUNGS else {**switches(base), **own}


def make_arm(name: str):
    """The arm's algorithm: its rung's default config with its switches."""
    if name not in ARMS:
        raise ValueError(f"unknown arm {name!r}; choose from {list(ARMS)}")
    return make_algorithm(RUNGS[root(name)], **switches(name))


def easy_bound(preset) -> int:
    """Operands below this are the easy part of the task (what the spread reference was taught)."""
    from ..warmstart.presets import SPREAD

    return round(SPREAD["operand_fraction"] * 10 ** preset.task["digits"])


@torch.no_grad()
def kl_to_reference(policy, reference, task, n: int = 512, seed: int = 0) -> float:
    """MEASURED: KL(pi || pi_ref) per answer, ``E_{y ~ pi}[log pi(y) - log pi_ref(y)]``, from ``n``
    fresh answers of ``policy`` (distinct prompts, temperature 1)."""
    from ..rollout import sample_batch, sequence_logprobs

    ro = sample_batch(policy, task, n, 1, *rngs(seed, next(policy.parameters()).device))[0]
    return float((sequence_logprobs(policy, ro) - sequence_logprobs(reference, ro)).sum(1).mean())


def run_arm(name, reference, task, preset, seed, steps, sequences_per_step, eval_every) -> dict:
    """One training run of the arm; its curve, per-step reward and KL, and at its end the accuracy on
    easy and hard held-out problems and the KL to the reference travelled."""
    from ..evaluation import evaluate
    from ..measure.difficulty import easy_mask
    from ..train import train

    policy, t0 = copy.deepcopy(reference), time.perf_counter()
    h = train(make_arm(name), task, reference, policy, preset, steps=steps, seed=seed,
              sequences_per_step=sequences_per_step, eval_every=eval_every, progress=False, name=name)  # fmt: skip
    acc, correct = evaluate(policy, task, return_correct=True)
    easy = torch.as_tensor(easy_mask(task.eval_problems(), easy_bound(preset)))
    series = {k: [None if math.isnan(v) else round(float(v), 5) for v in h.series(k)] for k in ("reward", "kl")}
    return {
        "accuracy": h.final_accuracy,
        "easy": round(float(correct[easy].float().mean()), 4),
        "hard": round(float(correct[~easy].float().mean()), 4),
        "samples_to_target": h.first_reaching(TARGET, "samples"),
        "evals": [[e["step"], e["samples"], round(e["seconds"], 3), e["accuracy"]] for e in h.evals],
        **series,
        "tied": round(float(np.nanmean(h.series("frac_reward_zero_std"))), 4) if root(name) == "GRPO" else None,
        "clip_ratio": round(float(np.nanmean(h.series("clip_ratio"))), 5) if "clip_ratio" in h.steps[-1] else None,
        "kl_end": round(kl_to_reference(policy, reference, task, seed=seed + 10_000), 4),
        "seconds": round(time.perf_counter() - t0, 2),
    }


def run_spread_ablation(preset="cpu", seeds=3, worlds=("spread", "default"), arms=None, tiny=False, steps=None,
                        previous=(), progress=True) -> dict:  # fmt: skip
    """Each world's arms (`WORLD_ARMS`, or those of ``arms`` that it runs) at RL seeds ``preset.seed + k``,
    k < ``seeds``, each from that world's reference. ``previous``: earlier results of the same budget and
    seeds whose runs are kept, not rerun. Returns ``{"worlds": {world: {"runs": {arm: [per seed]},
    "table": [rows]}}, "seeds", "steps", ...}`` (`table`)."""
    from ..warmstart.presets import make_task, resolve_preset, setup_torch, with_world
    from ..warmstart.reference import reference_policy

    preset = resolve_preset(preset)
    unknown = [w for w in worlds if w not in WORLD_ARMS] + [a for a in arms or () if a not in ARMS]
    if unknown or not isinstance(seeds, int) or seeds < 1:
        raise ValueError(f"worlds from {list(WORLD_ARMS)}, arms from {list(ARMS)}, seeds >= 1; got {unknown or seeds}")
    z = dict(SIZES["tiny" if tiny else "full"])
    z["steps"] = steps or z["steps"]
    seed_list = [preset.seed + k for k in range(seeds)]
    out = {"preset": preset.name, "seeds": seed_list, **z, "target": TARGET, "margin": MARGIN, "worlds": {},
           "torch": torch.__version__, "threads": torch.get_num_threads()}  # fmt: skip
    for world in worlds:
        names = [a for a in WORLD_ARMS[world] if arms is None or a in arms]
        for a in list(names):  # every arm's chain of bases, which its row is read against
            while a not in RUNGS:
                a = ARMS[a][0]
                names.append(a)
        names = [a for a in ARMS if a in names]
        runs = {a: None for a in names}
        for prev in previous:
            if [prev["steps"], prev["sequences_per_step"], prev["seeds"]] != [z["steps"], z["sequences_per_step"],
                                                                              seed_list]:  # fmt: skip
                raise ValueError("previous: another budget or other seeds than this run's")
            for a, rs in prev["worlds"].get(world, {}).get("runs", {}).items():
                if a in runs and runs[a] is None:
                    runs[a] = list(rs)
        todo = [a for a in names if runs[a] is None]
        p = with_world(preset, world)
        if todo:
            setup_torch(p)
            task = make_task(p)
            reference = reference_policy(p, task=task, progress=progress)
        for seed in seed_list:
            for a in todo:
                r = run_arm(a, reference, task, p, seed, z["steps"], z["sequences_per_step"], z["eval_every"])
                runs[a] = (runs[a] or []) + [r]
                if progress:
                    print(f"{world:8s} seed {seed} {a:28s} {r['accuracy']:.3f} ({r['seconds']:.0f} s)", flush=True)
        out["worlds"][world] = {"runs": runs, "table": table(runs)}
    return out


def table(runs: dict) -> list[dict]:
    """One row per arm: final held-out accuracy per seed (mean, min, max), on the easy and hard problems,
    completions to 90%, KL travelled; ``diff``, paired by seed from its base arm; ``closes``, the mean of
    that move over the mean gap from its rung's run to REINFORCE's; ``verdict`` on "the switch raises
    final held-out accuracy by more than `MARGIN`" (paired: holds / fails here / depends)."""
    acc = {a: [r["accuracy"] for r in rs] for a, rs in runs.items()}
    rows = []
    for a, rs in runs.items():
        base = ARMS[a][0]
        row = {"arm": a, "base": base, "switch": ARMS[a][1], "accuracy": acc[a],
               "easy": [r["easy"] for r in rs], "hard": [r["hard"] for r in rs], "kl_end": [r["kl_end"] for r in rs],
               "samples_to_target": [r["samples_to_target"] for r in rs]}  # fmt: skip
        if a in RUNGS:
            row.update(diff=None, closes=None, verdict="")
        else:
            d = paired(acc[a], acc[base])
            gap = paired(acc["REINFORCE"], acc[root(a)]) if "REINFORCE" in acc else []
            mean_gap = sum(gap) / len(gap) if gap else math.nan
            closes = sum(d) / len(d) / mean_gap if abs(mean_gap) > MARGIN else None
            row.update(diff=d, closes=closes, verdict=verdict(d, MARGIN, 0.0))
        rows.append(row)
    return rows


def histories(res: dict, world: str, arm: str) -> list:
    """The stored runs of ``arm`` in ``world`` (one per seed) as `History` objects: their evaluations, and
    each step's sampled reward and KL (NaN where the run had no KL term), for the course's plots."""
    from ..train import History

    out, n = [], res["sequences_per_step"]
    for seed, r in zip(res["seeds"], res["worlds"][world]["runs"][arm], strict=True):
        h = History(arm, {"seed": seed, "sequences_per_step": n})
        h.evals = [dict(zip(("step", "samples", "seconds", "accuracy"), e, strict=True)) for e in r["evals"]]
        kl = [math.nan if k is None else k for k in r["kl"]]
        h.steps = [{"step": i + 1, "samples": (i + 1) * n, "reward": rw, "kl": k}
                   for i, (rw, k) in enumerate(zip(r["reward"], kl, strict=True))]  # fmt: skip
        out.append(h)
    return out


def as_comparison(res: dict, world: str, at_reference: dict | None = None, memory: dict | None = None) -> dict:
    """The four rungs' stored runs in ``world`` in the shape of `measure.run_comparison`'s result, so that
    `measure.claims` tests the derivation's claims on them: ``at_reference`` (a `measure_reference` result)
    adds the gradient variance and the critic's explained variance, ``memory`` (``{"ppo", "grpo",
    "grpo_unshared"}``: `measure.step_memory` results) the memory claims. Wall-clock numbers are left out
    (``seconds_to_target`` None): the stored runs shared a busy machine, so their seconds compare nothing."""
    from ..measure.compare import ESTIMATOR_OF, LABELS

    rows = {}
    for arm, a in RUNGS.items():
        rs = res["worlds"][world]["runs"][arm]
        rows[a] = {"label": LABELS[a], "initial_accuracy": rs[0]["evals"][0][3],
                   "final_accuracy": [r["accuracy"] for r in rs], "samples_to_target": [r["samples_to_target"] for r in rs],
                   "seconds_to_target": [None] * len(rs)}  # fmt: skip
    out = {"seeds": res["seeds"], "algorithms": rows}
    if at_reference is not None:
        g = at_reference["gradients"]
        out["gradient_variance"] = {**g["grouped"], "_meta": {**g["grouped"]["_meta"]}}
        out["gradient_variance"]["_meta"]["critic_explained_variance"] = at_reference["critic_ev"]
        out["gradient_variance_distinct"] = g["distinct"]
        for a, row in rows.items():
            if a == "ppo" and ppo_measured(at_reference):
                stats = g["ppo"]
            else:  # a record without PPO's measurement: the critic baseline's
                stats = (g["grouped"] if a == "grpo" else g["distinct"])[ESTIMATOR_OF[a] if a != "ppo" else "critic"]
            row["relative_variance_corrected"] = stats["relative_variance_corrected"]
    if memory is not None:
        rows["ppo"]["peak_step_memory_mb"] = memory["ppo"]["measured_peak_step"] / 1e6
        rows["grpo"]["peak_step_memory_mb"] = memory["grpo"]["measured_peak_step"] / 1e6
        rows["grpo"]["peak_step_memory_unshared_mb"] = memory["grpo_unshared"]["measured_peak_step"] / 1e6
    return out


def format_table(res: dict) -> str:
    """The table of every world's arms, at most 118 characters wide (the rows also hold "easy" and "closes")."""
    import textwrap

    n = len(res["seeds"])
    legend = (f"held-out accuracy (greedy) after {res['steps']} steps x {res['sequences_per_step']} completions, "
              f"seeds {res['seeds']}: mean [min, max]; hard: the mean on the problems with an operand >= 60; to 90%: "
              f"completions, min-max over seeds; KL: KL(pi || pi_ref) per answer at the end; diff: paired by seed, "
              f"from its base arm")  # fmt: skip
    lines = textwrap.wrap(legend, 118)
    head = f"{'arm':26s}{'accuracy':21s}{'hard':>5s}  {'to 90%':20s}{'KL':>4s}  {'diff from base':24s}verdict"
    for world, w in res["worlds"].items():
        lines += ["", f"{world} world", head]
        for r in w["table"]:
            d = "" if r["diff"] is None else spread(r["diff"], "+.3f")
            mean = lambda k, r=r: sum(r[k]) / len(r[k])  # noqa: E731
            to = reach(r["samples_to_target"], ",")
            lines.append(f"{r['arm']:26s}{spread(r['accuracy'], '.3f'):21s}{mean('hard'):5.2f}  {to:20s}"
                         f"{mean('kl_end'):4.1f}  {d:24s}{r['verdict']}".rstrip())  # fmt: skip
    rule_text = rule(MARGIN, 0.0, "the paired change", n)
    lines += textwrap.wrap(f"verdict: the switch raises final held-out accuracy ({rule_text})", 118)
    return "\n".join(lines)


# ------------------------------------------------------------------ at the reference
def predicted_ratio(rewards, v0, score_norm2) -> tuple[float, float]:
    """COMPUTED from answers' rewards R (0/1), a baseline V(s_0) of each and their score norms |s|^2:
    the gradient variance of the baseline over REINFORCE's, predicted as the score-weighted sums

        E[(R - V)^2 |s|^2] / E[R^2 |s|^2]

    (the signal term |E[R s]|^2 is negligible for one answer), and the share of the numerator that wrong
    answers (R = 0) carry: terms V^2 |s|^2 that REINFORCE, whose advantage on them is 0, does not have."""
    R, v, s2 = (torch.as_tensor(x, dtype=torch.float64).flatten() for x in (rewards, v0, score_norm2))
    if not (R.shape == v.shape == s2.shape) or R.numel() == 0 or float((R**2 * s2).sum()) <= 0:
        raise ValueError("rewards, v0 and score_norm2 must be alike, non-empty, with a right answer of norm > 0")
    terms = (R - v) ** 2 * s2
    return float(terms.sum() / (R**2 * s2).sum()), float(terms[R < 0.5].sum() / terms.sum())


def measure_reference(preset="cpu", world="spread", seed=0, batches=16, critic_steps=50, score_n=512,
                      success_prompts=384) -> dict:  # fmt: skip
    """MEASURED at ``world``'s reference, seed ``seed``: each rung's relative gradient variance
    (bias-corrected, `gradient_variance`, ``batches`` batches in the layout it trains with; PPO's, its
    whitened advantage, estimator "ppo", on the same batches as the critic baseline's), the explained share of R by
    V(s_0) of a critic fitted ``critic_steps`` steps, EV_max (`variance_decomposition`, ``success_prompts`` prompts x 64
    answers), and from ``score_n`` answers to distinct prompts: |s|^2 of right and wrong answers, b*, and
    `predicted_ratio` with the critic's V(s_0), and with every score as long (``"predicted_equal_norms"``: the
    score norms' part switched off). ``"gradients"``: the two `gradient_variance` results and ``"ppo"``, PPO's
    estimator's stats (records kept before it was measured lack it: there ``relative_variance["ppo"]`` is the
    critic baseline's, `ppo_measured`)."""
    from ..measure.difficulty import prompt_success, variance_decomposition
    from ..measure.variance import fit_critic, gradient_variance, optimal_baseline, row_score_norms
    from ..rollout import completion_values, sample_batch
    from ..warmstart.presets import make_task, resolve_preset, setup_torch, with_world
    from ..warmstart.reference import reference_policy

    p = with_world(resolve_preset(preset), world)
    setup_torch(p)
    task = make_task(p)
    reference = reference_policy(p, task=task, progress=False)
    critic, fit = fit_critic(reference, task, steps=critic_steps, seed=seed + 1, progress=False)
    G = make_algorithm("grpo").config.group_size
    kw = dict(n_batches=batches, prompts_per_batch=p.prompts(G), group_size=G, critic=critic, progress=False)
    est = ("raw", "batch_mean", "critic", "ppo")  # one batch, one forward, a backward per estimator
    distinct = gradient_variance(reference, task, est, layout="distinct", seed=seed, **kw)
    ppo = distinct.pop("ppo")  # kept apart: records before PPO's own was measured have no "ppo"
    grouped = gradient_variance(reference, task, ("raw", "group_mean", "group_loo", "group_norm"), seed=seed, **kw)
    key = "relative_variance_corrected"
    rel = {"reinforce": distinct["raw"][key], "baseline": distinct["critic"][key], "ppo": ppo[key],
           "grpo": grouped["group_norm"][key], "batch_mean": distinct["batch_mean"][key],
           "reinforce_grouped": grouped["raw"][key]}  # fmt: skip
    succ = prompt_success(reference, task, n_prompts=success_prompts, seed=seed + 3)
    dec = variance_decomposition(succ["p"], G, n_samples=succ["n"])
    ro, scores, _ = sample_batch(reference, task, score_n, 1, *rngs(seed + 7, next(reference.parameters()).device))
    s2 = row_score_norms(reference, ro)
    R = scores.sum(1).double().cpu()
    with torch.no_grad():
        v0 = completion_values(critic, ro)[:, 0].double().cpu()
    wrong = R < 0.5
    ratio, share = predicted_ratio(R, v0, s2)
    equal = predicted_ratio(R, v0, torch.full_like(s2, float(s2.mean())))[0]  # every answer's score as long
    return {
        "world": world,
        "seed": seed,
        "relative_variance": rel,
        "critic_ev": fit["explained_variance"],
        "ev_max": dec["ev_max"],
        "mean_reward": float(R.mean()),
        "score_norm2_right": float(s2[~wrong].mean()) if (~wrong).any() else math.nan,
        "score_norm2_wrong": float(s2[wrong].mean()) if wrong.any() else math.nan,
        "b_star": optimal_baseline(R, s2),
        "v0_wrong": float(v0[wrong].mean()) if wrong.any() else math.nan,
        "predicted_critic_over_raw": ratio,
        "wrong_share": share,
        "predicted_equal_norms": equal,
        "gradients": {"distinct": distinct, "grouped": grouped, "ppo": ppo},
    }


def ppo_measured(ref: dict) -> bool:
    """Whether a `measure_reference` result measured PPO's estimator (records kept before it was: no)."""
    return "ppo" in ref["gradients"]


def format_reference(ref: dict) -> str:
    """The measurements at each world's reference, mean [min, max] over their seeds."""
    lines = ["at the reference (mean [min, max] over measurement seeds): relative variance of the gradient "
             "(bias-corrected; GRPO on 64 x 8, the others on 512 x 1; PPO's advantage whitened, as it trains), "
             "V(s_0)'s explained share of R, EV_max, |s|^2 of right and wrong answers, and the critic's variance "
             "over REINFORCE's predicted from the score norms, with the wrong answers' share of it"]  # fmt: skip
    for w, ms in ref.items():
        one = lambda f, ms=ms: spread([f(m) for m in ms], ".3f")  # noqa: E731
        rungs = (
            ("reinforce", "baseline", "ppo", "grpo")
            if all(map(ppo_measured, ms))
            else ("reinforce", "baseline", "grpo")
        )
        rv = " ".join(f"{k} {one(lambda m, k=k: m['relative_variance'][k])}" for k in rungs)
        lines.append(
            f"{w}: {rv}" + ("" if "ppo" in rungs else " (PPO: assumed equal to the critic baseline's, not measured)")
        )
        lines.append(f"  EV of V(s_0) {one(lambda m: m['critic_ev'])}, EV_max {one(lambda m: m['ev_max'])}, mean R "
                     f"{one(lambda m: m['mean_reward'])}, b* {one(lambda m: m['b_star'])}, |s|^2 wrong / right "
                     f"{one(lambda m: m['score_norm2_wrong'] / m['score_norm2_right'])}, predicted critic / raw "
                     f"{one(lambda m: m['predicted_critic_over_raw'])} (wrong answers' share "
                     f"{one(lambda m: m['wrong_share'])})")  # fmt: skip
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--preset", default="cpu")
    p.add_argument("--worlds", nargs="*", default=list(WORLD_ARMS))
    p.add_argument("--arms", nargs="*", default=None, help="arm names (default: each world's WORLD_ARMS)")
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--no-reference", action="store_true", help="skip the measurements at the references")
    p.add_argument("--out", default="/tmp/spread_ablation.json")
    p.add_argument("--reuse", action="append", default=[], help="an earlier --out of the same budget (repeatable)")
    a = p.parse_args(argv)
    previous = [json.load(open(f)) for f in a.reuse]
    res = run_spread_ablation(a.preset, a.seeds, a.worlds, a.arms, a.tiny, a.steps, previous)
    flags = [f"--seeds {a.seeds}"] + (["--tiny"] if a.tiny else []) + ([f"--steps {a.steps}"] if a.steps else [])
    flags += [] if a.worlds == list(WORLD_ARMS) else ["--worlds " + " ".join(a.worlds)]
    res["command"] = " ".join(
        ["python -m grpo_edu.studies.spread_ablation", *flags]
    )  # what made it (--reuse: the same)
    res["reference"] = {w: r for prev in previous for w, r in prev.get("reference", {}).items() if w in a.worlds}
    save(res, a.out)
    print(format_table(res))
    if not a.no_reference:
        base = res["seeds"][0]
        for w in a.worlds:
            res["reference"][w] = [measure_reference(a.preset, w, base + k) for k in range(a.seeds)]
            save(res, a.out)
        print(format_reference(res["reference"]))


def save(res: dict, path) -> None:
    """``res`` as JSON, one key a line, each list of numbers on one line."""
    import re

    text = json.dumps(res, indent=1)
    text = re.sub(r"\[([-+\d.eE,\s]|null|NaN|Infinity)*\]", lambda m: " ".join(m.group(0).split()), text)
    with open(path, "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
