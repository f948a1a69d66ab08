"""The difficulty regime: easy and hard prompts, in the spread world and the default one.

For a 0/1 reward with p_q = P(right | q): Var(R) = E_q[p(1-p)] + Var_q(p); the best V(s_0) is p_q,
so a critic's first-token value V(s_0), and every baseline that sees only the prompt, explains at
most EV_max = Var_q(p) / Var(R) (its V(s_t) after a written digit is not bounded by it: notebook 08
part 2), and the leave-one-out group mean leaves
Var(R - b_loo) / Var(R - b_batch) = G/(G-1) (1 - EV_max) (`grpo_edu.measure.difficulty`). The
default reference is about as unsure of every prompt (EV_max near 0); the spread world's reference
(`get_preset(world="spread")`) was taught only the problems with small operands, so it is sure of
those and lost on the rest, as a base model is on easy and hard prompts. Both worlds, every claim,
the same seeds.

How the spread world was chosen (GRPO, cpu preset defaults, 100 steps, greedy held-out gain; the
target: EV_max >= 0.5 and a gain >= 0.15 on 3 seeds). SFT on operands < k to a sampled accuracy there:

    k, target        EV_max at its reference   gain, RL seeds 0/1/2 from the seed-0 reference
    < 60, 0.7        0.65                      +0.46 / +0.39 / +0.44      <- the spread world
    < 70, 0.8        0.74                      +0.15 / +0.17 / +0.16
    (each with its own SFT seed s = RL seed s: EV_max, gain)
    < 70, 0.7        0.59 / 0.53 / 0.45        +0.12 / +0.09 / +0.42
    < 70, 0.8        0.74 / 0.64 / 0.57        +0.15 / +0.12 / +0.33
    < 60, 0.7        0.65 / 0.62 / 0.54        +0.46 / +0.04 / +0.22
    < 80, 0.8        0.50 / 0.47 / 0.47        +0.24 / +0.13 / +0.28
    < 70, 0.8, 5% of each SFT batch from the whole task (whole_share=0.05)
                     0.18 / 0.29               +0.00 / +0.10   (the reference learns to add: no spread)
    < 70, 0.8, G = 16 (32 prompts x 16)        0.74   +0.07

Whether RL breaks through on the hard prompts depends on the reference's few right answers there,
so under other SFT seeds (the notebooks' seed shifts) the gain varies from +0.04 to +0.46.
"""

from __future__ import annotations

import copy
import math

import numpy as np

from ...algorithms import make_algorithm
from ...evaluation import evaluate
from ...measure.difficulty import PASS_KS, easy_mask, group_push, measure_world, pass_at_k_curve, std_weight
from ...measure.variance import fit_critic
from ...rollout import sample_batch
from ...train import train
from ...warmstart.presets import make_task, resolve_preset, with_world
from .common import above, bar, claim, rngs, rule, spread, task_of, verdict

WORLDS = ("spread", "default")
RUNS = {  # name -> (algorithm, config): every run from the world's reference, the same steps and samples per step
    "GRPO": ("grpo", {}),
    "GRPO, dynamic sampling": ("grpo", {"dynamic_sampling": True}),
    "GRPO, scale_rewards none": ("grpo", {"scale_rewards": "none"}),
    "GRPO, sequence_mean": ("grpo", {"loss_type": "sequence_mean"}),
    "PPO": ("ppo", {}),
}
SIZES = {  # "full": the verb's run; "tiny": the tests' (seconds, numbers meaningless)
    "full": dict(steps=40, eval_every=5, n_prompts=384, samples=64, batches=8, grad_batches=16, critic_steps=40,
                 score_prompts=48, score_samples=16, pass_prompts=200, pass_ks=PASS_KS),
    "tiny": dict(steps=2, eval_every=1, n_prompts=8, samples=4, batches=1, grad_batches=2, critic_steps=1,
                 score_prompts=4, score_samples=2, pass_prompts=4, pass_ks=(1, 2, 4)),
}  # fmt: skip


class ByDifficulty:
    """Held-out accuracy on the easy prompts (both operands < ``bound``) and on the hard ones at every
    evaluation of a run: ``train(..., on_evaluate=logged)`` hands it each `grpo_edu.train.Evaluation`
    (step 0 and the last included), whose per-problem answers it splits; ``log`` holds the pairs."""

    def __init__(self, task, bound: int):
        self.bound, self.easy = bound, easy_mask(task.eval_problems(), bound)
        self.log: list[tuple[float, float]] = []

    def __call__(self, evaluation) -> None:
        self.log.append(bucket_accuracy(evaluation.correct.numpy(), self.easy))


def group_size() -> int:
    """G of the runs: plain GRPO's ``config.group_size`` in `RUNS` (the measurements use its layout)."""
    algo, config = RUNS["GRPO"]
    return make_algorithm(algo, **config).config.group_size


def bucket_accuracy(correct, easy) -> tuple[float, float]:
    """(accuracy on the easy prompts, on the hard ones) of a 0/1 array."""
    correct = np.asarray(correct, dtype=float)
    return tuple(float(correct[sel].mean()) if sel.any() else math.nan for sel in (easy, ~easy))


def _to_target(evals, target):
    """Completions sampled (the discarded ones counted) until held-out accuracy >= target; inf if never.
    ``evals``: (completions, accuracy) at each evaluation."""
    return next((s for s, a in evals if a >= target), math.inf)


def _world_run(ref, preset, world, seed, z, bound) -> dict:
    """Every measurement of one world at one seed: the algebra at the reference, the runs, pass@k."""
    task = make_task(preset)
    sizes = {k: z[k] for k in ("n_prompts", "samples", "batches", "grad_batches", "critic_steps", "score_prompts",
                               "score_samples")}  # fmt: skip
    G = group_size()  # the group layout is GRPO's, as it trains in RUNS
    out = {"measure": measure_world(ref, task, bound, G, prompts_per_batch=preset.prompts(G), seed=seed,
                                    **sizes)}  # fmt: skip
    probs = task.eval_problems()[: z["pass_prompts"]]
    ks = z["pass_ks"]
    out["pass_ref"] = {k: v for k, v in pass_at_k_curve(ref, task, ks, problems=probs, bound=bound, seed=seed).items()
                       if k in ("all", "easy", "hard")}  # fmt: skip
    _, correct = evaluate(ref, task, return_correct=True)
    easy = easy_mask(task.eval_problems(), bound)
    out["start"] = float(correct.float().mean())
    out["start_buckets"] = bucket_accuracy(correct.numpy(), easy)
    lengths = np.array([len(p.answer) + 1 for p in task.eval_problems()])
    out["answer_length"] = (float(lengths[easy].mean()), float(lengths[~easy].mean()))
    out["runs"] = {}
    for name, (algo, cfg) in RUNS.items():
        logged = ByDifficulty(task, bound)
        policy = copy.deepcopy(ref)
        h = train(make_algorithm(algo, **cfg), task, ref, policy, preset, steps=z["steps"], seed=seed,
                  eval_every=z["eval_every"], progress=False, name=name, on_evaluate=logged)  # fmt: skip
        run = {"accuracy": h.final_accuracy, "buckets": logged.log, "curve": list(h.eval_series()),
               "steps": [e["step"] for e in h.evals],
               "samples": h.steps[-1]["samples"] if h.steps else 0,
               "tied": float(np.nanmean(h.series("frac_reward_zero_std"))) if algo == "grpo" else math.nan}  # fmt: skip
        run["evals"] = [(e["samples"], e["accuracy"]) for e in h.evals]
        if name == "GRPO":
            pk = pass_at_k_curve(policy, task, ks, problems=probs, bound=bound, seed=seed)
            run["pass"] = {k: v for k, v in pk.items() if k in ("all", "easy", "hard")}
        out["runs"][name] = run
    return out


def run_difficulty(reference, preset="cpu", seeds=(0, 1), size: str = "full", references=None, progress=True) -> dict:
    """Both worlds (`WORLDS`: "spread", "default"), each from its own reference: ``reference`` is
    the one of ``preset``'s world, ``references`` (``{world: policy}``) may give the others
    (default: `reference_policy` of `with_world(preset, world)`, trained once and cached).
    ``size``: "full" (the verb's, a few minutes on the cpu preset) or "tiny" (the tests').

    MEASURED per world and seed (`measure.difficulty.measure_world`): p_q of 384 prompts from 64
    answers each, EV_max and the predicted ratios; the critic's explained variance; the advantage
    ratios on 8 batches of the RL layout and the gradient's over 16; score norms of easy and hard
    prompts' right and wrong answers. Then each run of `RUNS` for ``steps``: held-out accuracy on
    the easy (both operands < the spread reference's bound) and hard prompts at each evaluation,
    completions to the accuracy plain GRPO ends at, and pass@k (k up to 256, 256 answers to each of
    200 held-out prompts) at the reference and after GRPO."""
    from ...warmstart.reference import reference_policy

    if size not in SIZES:
        raise ValueError(f"size must be one of {list(SIZES)}, got {size!r}")
    preset, z = resolve_preset(preset), SIZES[size]
    refs = {preset.world: reference, **(references or {})}
    presets = {w: with_world(preset, w) for w in WORLDS}
    bound = presets["spread"].sft.operand_below
    for w in WORLDS:
        if refs.get(w) is None:
            refs[w] = reference_policy(presets[w], progress=progress)
    res = {"worlds": {w: [] for w in WORLDS}, "bound": bound, "size": size, "steps": z["steps"], "seeds": list(seeds)}
    progress_bar = bar(len(WORLDS) * len(seeds), "difficulty", progress)
    for seed in seeds:
        for w in WORLDS:
            res["worlds"][w].append(_world_run(refs[w], presets[w], w, seed, z, bound))
            progress_bar.update(1)
    progress_bar.close()
    res["claims"] = [c for w in WORLDS for c in _claims(res["worlds"][w], w, bound, z, group_size())]
    res["claims"] = _interleave(res["claims"], len(WORLDS))
    return res


def _interleave(claims, n_worlds):
    """Each claim's lines of every world side by side: spread, default, next claim, ..."""
    per = len(claims) // n_worlds
    return [claims[w * per + i] for i in range(per) for w in range(n_worlds)]


def _claims(runs, world, bound, z, G) -> list:
    n, tag = len(runs), f"[{world}] "
    m = [r["measure"] for r in runs]

    def each(values, spec=".3f"):
        return spread(list(values), spec)

    ev_max = [x["decomposition"]["ev_max"] for x in m]
    ev = [x["critic_ev"] for x in m]
    pred_loo = [x["decomposition"]["predicted"]["group_loo"] for x in m]
    adv_loo = [x["advantage"]["ratio"]["group_loo"] for x in m]
    adv_critic = [x["advantage"]["ratio"]["critic"] for x in m]
    grad_loo = [x["gradient"]["group_loo"] for x in m]
    grad_critic = [x["gradient"]["critic"] for x in m]
    weighted = [x["score"]["weighted"]["group_loo"] for x in m]
    by = [x["score"]["by"] for x in m]
    tied = [x["advantage"]["tied"] for x in m]
    flat = [x["decomposition"]["mean"] ** G + (1 - x["decomposition"]["mean"]) ** G for x in m]
    runs_of = {name: [r["runs"][name] for r in runs] for name in RUNS}
    grpo = runs_of["GRPO"]
    steps = z["steps"]

    def gain(rs, part):  # accuracy gain on the easy (0) or hard (1) prompts, per seed
        return [r["buckets"][-1][part] - r["buckets"][0][part] for r in rs]

    p_easy, p_hard = each(x["p_easy"] for x in m), each(x["p_hard"] for x in m)
    out = [
        claim(
            tag + "the critic learns the value of a prompt (its explained variance, against the ceiling EV_max)",
            f"p_q mean {each(x['decomposition']['mean'] for x in m)} (easy {p_easy}, hard {p_hard}); EV_max = "
            f"Var_q(p)/Var(R) {each(ev_max)}; critic EV {each(ev)} after {z['critic_steps']} steps "
            f"({rule(0.1, 0.02, 'the critic EV', n)})",
            verdict(ev, 0.1, 0.02),
        ),
        claim(
            tag + "a per-prompt baseline (the other G-1 answers) lowers the advantage variance below the batch mean's",
            f"Var(R - b_loo)/Var(R - b_batch): predicted G/(G-1)(1 - EV_max) {each(pred_loo)}, measured "
            f"{each(adv_loo)}; critic {each(adv_critic)} ({rule(0.1, 0.0, 'one minus the measured ratio', n)})",
            verdict([1 - r for r in adv_loo], 0.1, 0.0),
        ),
        claim(
            tag + "... and the gradient variance (tr Cov(g)) below the batch mean's",
            f"tr Cov ratio over {z['grad_batches']} batches: leave-one-out {each(grad_loo)}, critic "
            f"{each(grad_critic)}; the advantage algebra weighted by score norms predicts {each(weighted)} "
            f"({rule(0.1, 0.0, 'one minus the leave-one-out ratio', n)})",
            verdict([1 - r for r in grad_loo], 0.1, 0.0),
        ),
        claim(
            tag + "the score norms part the two arguments: an easy prompt's wrong answers carry far larger "
            "|grad log pi|^2 than its right ones, so b*_q = E[R|s|^2|q]/E[|s|^2|q] sits below p_q",
            f"|s|^2 easy wrong / easy right {each((b['easy wrong'] / b['easy right'] for b in by), '.1f')}, "
            f"hard wrong {each((b['hard wrong'] for b in by), '.0f')}; on easy prompts b*_q "
            f"{each(x['score']['b_star_easy'] for x in m)} vs p_q {each(x['score']['p_easy'] for x in m)} "
            f"({rule(0.1, 0.0, 'p_q - b*_q on easy prompts', n)})",
            verdict([x["score"]["p_easy"] - x["score"]["b_star_easy"] for x in m], 0.1, 0.0),
        ),
        claim(
            tag + "whole groups tie (all right or all wrong) more than if every prompt had the mean p: "
            "GRPO's effective batch shrinks",
            f"tied groups of {G} at the reference {each(tied)} (all right "
            f"{each(x['advantage']['all_right'] for x in m)}), E[p^G + (1-p)^G] "
            f"{each(x['decomposition']['tied'] for x in m)}, with one p for all {each(flat)}; over GRPO's "
            f"training {each(r['tied'] for r in grpo)} ({rule(0.1, 0.02, 'tied minus one-p tied', n)})",
            verdict([t - f for t, f in zip(tied, flat)], 0.1, 0.02),
        ),
    ]
    plain, dyn = runs_of["GRPO"], runs_of["GRPO, dynamic sampling"]
    targets = [r["accuracy"] for r in plain]  # the target: what plain GRPO reaches with its completions
    to_p = [_to_target(p["evals"], t) for p, t in zip(plain, targets)]
    to_d = [_to_target(d["evals"], t) for d, t in zip(dyn, targets)]
    fmt = lambda v: "never" if math.isinf(v) else f"{v:.0f}"  # noqa: E731
    ratio = [(a / b if not math.isinf(b) else (0.0 if not math.isinf(a) else math.nan)) if b > 0 else math.nan
             for a, b in zip(to_p, to_d)]  # fmt: skip
    at_budget = [[a for s, a in d["evals"] if s <= p["samples"]][-1] for p, d in zip(plain, dyn)]
    out.append(claim(
        tag + "DAPO's dynamic sampling pays: fewer completions to a target accuracy, the discarded ones counted",
        f"completions to plain GRPO's final accuracy: GRPO {', '.join(map(fmt, to_p))}, with dynamic "
        f"sampling {', '.join(map(fmt, to_d))}; at GRPO's {plain[0]['samples']} completions "
        f"{each(r['accuracy'] for r in plain)} vs {each(at_budget)}; after {steps} steps with dynamic sampling "
        f"{each(r['accuracy'] for r in dyn)} ({each((r['samples'] for r in dyn), '.0f')} completions) "
        f"({rule(0.1, 0.0, 'GRPO completions / dynamic sampling completions - 1', n)})",
        verdict([r - 1 for r in ratio], 0.1, 0.0),
    ))  # fmt: skip
    none = runs_of["GRPO, scale_rewards none"]
    w_lo, w_mid = (float(std_weight(p, G)[0]) for p in (0.05, 0.5))
    push = float(group_push(0.05, G, "group")[0] / group_push(0.5, G, "group")[0]) / float(
        group_push(0.05, G, "none")[0] / group_push(0.5, G, "none")[0]
    )
    out.append(claim(
        tag + "the std normalisation (Dr. GRPO drops it): with it the hard prompts "
        "(rare successes) gain more than without (scale_rewards 'group' vs 'none')",
        f"E[1/std | not tied] {w_lo:.2f} at p = 0.05 vs {w_mid:.2f} at p = 0.5 (a group's push at 0.05 over 0.5: "
        f"{push:.2f}x with the std); hard-prompt gain after {steps} steps: group {each(gain(plain, 1))}, none "
        f"{each(gain(none, 1))}; easy: {each(gain(plain, 0))} vs {each(gain(none, 0))} "
        f"({rule(0.02, 0.0, 'group minus none on hard prompts', n)})",
        verdict([a - b for a, b in zip(gain(plain, 1), gain(none, 1))], 0.02, 0.0),
    ))  # fmt: skip
    seq = runs_of["GRPO, sequence_mean"]
    L = runs[0]["answer_length"]
    out.append(claim(
        tag + "where hard prompts have longer answers, the token-level loss (token_mean, DAPO) learns them more "
        "than the sequence mean (GRPO's 1/|o_i|)",
        f"answer length (tokens with <eos>) easy {L[0]:.2f}, hard {L[1]:.2f}; hard-prompt gain after {steps} steps: "
        f"token_mean {each(gain(plain, 1))}, sequence_mean {each(gain(seq, 1))} "
        f"({rule(0.02, 0.0, 'token_mean minus sequence_mean on hard prompts', n)})",
        verdict([a - b for a, b in zip(gain(plain, 1), gain(seq, 1))], 0.02, 0.0),
    ))  # fmt: skip
    ppo = runs_of["PPO"]
    out.append(claim(
        tag + "GRPO's group learns more per sampled answer than PPO's critic",
        f"held-out accuracy after {steps} steps of the same completions: GRPO {each(r['accuracy'] for r in plain)}, "
        f"PPO {each(r['accuracy'] for r in ppo)} ({rule(0.02, 0.0, 'GRPO minus PPO', n)})",
        verdict([a["accuracy"] - b["accuracy"] for a, b in zip(plain, ppo)], 0.02, 0.0),
    ))  # fmt: skip
    out.append(claim(
        tag + f"RL improves most where the reference is weak: the hard prompts (an operand >= {bound}) gain more "
        "than the easy ones",
        f"GRPO, held-out accuracy easy {each(r['buckets'][0][0] for r in plain)} -> "
        f"{each(r['buckets'][-1][0] for r in plain)}, hard {each(r['buckets'][0][1] for r in plain)} -> "
        f"{each(r['buckets'][-1][1] for r in plain)} ({rule(0.05, 0.0, 'hard gain minus easy gain', n)})",
        verdict([h - e for h, e in zip(gain(plain, 1), gain(plain, 0))], 0.05, 0.0),
    ))  # fmt: skip
    k_max = max(z["pass_ks"])
    p1_ref, p1_rl = [r["pass_ref"]["all"][1] for r in runs], [r["pass"]["all"][1] for r in grpo]
    pk_ref, pk_rl = [r["pass_ref"]["all"][k_max] for r in runs], [r["pass"]["all"][k_max] for r in grpo]
    out.append(claim(
        tag + "RL raises pass@1",
        f"pass@1 (sampled) {each(p1_ref)} -> {each(p1_rl)} after {steps} GRPO steps "
        f"({rule(0.02, 0.0, 'the rise', n)})",
        verdict([b - a for a, b in zip(p1_ref, p1_rl)], 0.02, 0.0),
    ))  # fmt: skip
    out.append(claim(
        tag + "... but pass@k at large k falls (Yue et al. 2025: RL narrows what the model can reach)",
        f"pass@{k_max} {each(pk_ref)} -> {each(pk_rl)} (hard prompts {each(r['pass_ref']['hard'][k_max] for r in runs)} "
        f"-> {each(r['pass']['hard'][k_max] for r in grpo)}; pass@{z['pass_ks'][len(z['pass_ks']) // 2]} "
        f"{each(r['pass_ref']['all'][z['pass_ks'][len(z['pass_ks']) // 2]] for r in runs)} -> "
        f"{each(r['pass']['all'][z['pass_ks'][len(z['pass_ks']) // 2]] for r in grpo)}) "
        f"({rule(0.01, 0.0, f'the fall of pass@{k_max}', n)})",
        verdict([a - b for a, b in zip(pk_ref, pk_rl)], 0.01, 0.0),
    ))  # fmt: skip
    return out


def _difficulty_class(p) -> str:
    short = (p.a < 10) + (p.b < 10)
    return ("2+2 digits", "1+2 digits", "1+1 digits")[short]


def run_mixed_digits(reference, preset="cpu", seeds=(0, 1), critic_steps=40, own_reference=None, progress=True) -> dict:
    """(Notebook 07 section 3, the first search of this regime.) Uniform 2-digit addition vs mixed operand lengths (1 or 2 digits), from the default
    reference and from one trained by SFT on the mixed task itself (``own_reference``;
    default: `reference_policy` of the mixed task, trained once and cached).

    MEASURED per seed: the explained variance of R by a critic fitted at the reference
    (`fit_critic`); on one batch of 128 prompts x 8, Var(R - b) with b the leave-one-out mean
    of the other 7 answers to the same prompt over Var(R - batch mean); the share of groups
    whose 8 rewards tie (GRPO's frac_reward_zero_std: 1 - the effective batch), by difficulty."""
    from ...warmstart.reference import reference_policy

    preset = resolve_preset(preset)
    mixed = task_of(preset, mixed_digits=(1, 2))
    setups = {
        "uniform": (task_of(preset), reference),
        "mixed": (mixed, reference),
        "mixed, own reference": (mixed, own_reference or reference_policy(preset, task=mixed, progress=progress)),
    }
    res = {k: {"ev": [], "var_ratio": [], "zero_std": [], "by_class": {}} for k in setups}
    G, progress_bar = group_size(), bar(len(setups) * len(seeds), "difficulty", progress)  # GRPO's G
    for seed in seeds:
        for name, (task, ref) in setups.items():
            r = res[name]
            r["ev"].append(fit_critic(ref, task, critic_steps, seed=seed, progress=False)[1]["explained_variance"])
            ro, scores, problems = sample_batch(ref, task, 128, G, *rngs(seed + 5, preset.device))
            g = scores.sum(1).double().view(-1, G)
            loo = (g.sum(1, keepdim=True) - g) / (G - 1)
            r["var_ratio"].append(float((g - loo).var() / (g - g.mean()).var()))
            tied = g.amax(1) == g.amin(1)
            r["zero_std"].append(float(tied.float().mean()))
            for i, p in enumerate(problems[::G]):
                c = r["by_class"].setdefault(_difficulty_class(p), {"groups": 0, "all right": 0, "all wrong": 0})
                c["groups"] += 1
                c["all right"] += int(tied[i] and g[i, 0] > 0)
                c["all wrong"] += int(tied[i] and g[i, 0] == 0)
            progress_bar.update(1)
    progress_bar.close()

    def each(key, spec=".3f"):
        return ", ".join(f"{k} {spread(v[key], spec)}" for k, v in res.items())

    own = res["mixed, own reference"]
    share = ", ".join(
        f"{k}: {v['all right'] / v['groups']:.2f} all right, {v['all wrong'] / v['groups']:.2f} all wrong"
        for k, v in sorted(own["by_class"].items())
    )
    n = len(seeds)
    ev, ratio = own["ev"], own["var_ratio"]
    claims = [
        claim(
            "the critic learns to predict the reward from the prompt",
            f"explained variance of R by V(s_0): {each('ev')} ({rule(0.1, 0.02, 'own reference EV', n)})",
            verdict(ev, 0.1, 0.02),
        ),
        claim(
            "a per-prompt baseline (the other answers to the prompt) leaves less variance than the batch mean",
            f"Var(R - b_loo) / Var(R - b_batch): {each('var_ratio')} "
            f"({rule(0.1, 0.0, 'one minus the own reference ratio', n)})",
            verdict([1 - r for r in ratio], 0.1, 0.0),
        ),
        claim(
            "easy and hard prompts tie whole groups (all right or all wrong): GRPO's effective batch shrinks",
            f"tied groups of 8 at the reference: {each('zero_std')}; own reference by difficulty: {share} "
            f"({rule(0.02, 0.0, 'own reference minus uniform', n)})",
            above(own["zero_std"], res["uniform"]["zero_std"], 0.02, pair=True),
        ),
    ]
    return {"setups": res, "claims": claims}


def figure(res):
    """p_q of the prompts at each world's reference (first seed), and pass@k at the reference and after GRPO
    (a `run_mixed_digits` result: its tied groups by operand lengths, `_mixed_digits_figure`)."""
    if "setups" in res:
        return _mixed_digits_figure(res)
    from matplotlib.figure import Figure
    from matplotlib.ticker import PercentFormatter

    from ...figures.plotstyle import PALETTE, set_alt

    fig = Figure(figsize=(10, 4), layout="constrained")
    ax, bx = fig.subplots(1, 2)
    for i, (w, runs) in enumerate(res["worlds"].items()):
        r, d = runs[0], runs[0]["measure"]["decomposition"]
        ax.bar(np.arange(3) + 0.4 * i, [d["all_wrong"], 1 - d["all_wrong"] - d["all_right"], d["all_right"]], 0.4,
               color=PALETTE[i], label=f"{w}: EV_max {d['ev_max']:.2f}")  # fmt: skip
        ks = sorted(r["pass_ref"]["all"])
        bx.plot(ks, [r["pass_ref"]["all"][k] for k in ks], "--", color=PALETTE[i], label=f"{w}, reference")
        bx.plot(ks, [r["runs"]["GRPO"]["pass"]["all"][k] for k in ks], "-", color=PALETTE[i], label=f"{w}, after GRPO")
    ax.set_xticks(np.arange(3) + 0.2, ["all wrong", "mixed", "all right"])
    ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ax.set_ylabel("groups of G (predicted from p_q)")
    ax.set_title("groups at the reference: tied or informative")
    ax.legend()
    bx.set_xscale("log", base=2)
    bx.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    bx.set_xlabel("k (answers sampled per prompt)")
    bx.set_ylabel("pass@k (held-out)")
    bx.set_title(f"pass@k before and after {res['steps']} GRPO steps")
    bx.legend()
    return set_alt(fig, "Left: the share of groups predicted all wrong, mixed and all right at each world's "
                   "reference. Right: pass@k against k on a log scale, at the reference (dashed) and after GRPO "
                   "(solid), for the spread and the default world.")  # fmt: skip


def _mixed_digits_figure(res):
    """`run_mixed_digits`'s figure: the share of tied groups by operand lengths, at its own reference."""
    from ...figures.plotstyle import PALETTE, set_alt
    from .figures import PERCENT, new_figure

    fig, ax = new_figure()
    cls = res["setups"]["mixed, own reference"]["by_class"]
    keys = sorted(cls)
    for j, what in enumerate(("all right", "all wrong")):
        share = [cls[k][what] / cls[k]["groups"] for k in keys]
        ax.bar(np.arange(len(keys)) + 0.4 * j, share, 0.4, label=what, color=PALETTE[j])
    ax.set_xticks(np.arange(len(keys)) + 0.2, keys)
    ax.yaxis.set_major_formatter(PERCENT)
    ax.set_ylabel("groups of 8 whose rewards tie")
    ax.set_title("mixed operand lengths, at the reference trained on them")
    ax.legend()
    return set_alt(fig, "Share of groups whose eight rewards are all right or all wrong, by operand lengths.")
