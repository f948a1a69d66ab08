"""The negative-samples regime: what training on the wrong answers alone, or the right ones alone, does to pass@k.

Zhu et al. ("The Surprising Effectiveness of Negative Reinforcement in LLM Reasoning", 2025) write the
RLVR objective with a reward of +1 for a right answer and -1 for a wrong one, and split it into
positive-sample reinforcement (PSR: only the right answers, pulled up) and negative-sample
reinforcement (NSR: only the wrong ones, pushed down). On Qwen models and MATH, NSR alone raised pass@k
over the base model at every k up to 256; PSR alone raised pass@1 and lowered pass@k at large k (it
sharpens); their Weighted-REINFORCE keeps both with the right answers weighted by lambda = 0.1.

Their advantage is the reward itself, with no baseline and no std, as their code computes it
(RLVR-Decomposed, ``compute_psr_nsr_outcome_advantage``, from the 0/1 score s of an answer): PSR
``A = s`` (+1 right, 0 wrong), NSR ``A = s - 1`` (0 right, -1 wrong), W-REINFORCE ``A = lambda s`` for a
right answer and ``s - 1 = -1`` for a wrong one, every token of an answer carrying its A, under PPO's
clipped loss, KL coefficient 0. Here that form ("Zhu et al.'s form") is GRPO with the task's rewards
(-1, +1), the group advantage replaced by the reward itself (`reward_as_advantage`, passed as
``functions={"group_advantages": ...}``) and one sign kept (`GRPOConfig.advantage_sign`,
``positive_weight``: `functional.signed_advantages`). Beside it runs the course's earlier variant,
"group-centred": the same sign knobs on GRPO's z-scored group advantage A_i = (r_i - mean) / std, where
a wrong answer in a group with no right answer has A_i = 0 and is not pushed down. In the spread world
(notebook 08: a reference taught only operands < 60) about half the groups are all wrong
(`wrong_in_tied_groups` counts them at the reference), and those are the hard prompts, where Zhu et
al.'s pass@k gain at large k would come from. Every verdict names the variant it tests.

beta = 0 in every run (Zhu et al.'s KL coefficient), the course's other defaults. MEASURED per run:
pass@k (k up to the largest of ``pass_ks``, n = that many answers per prompt), greedy held-out accuracy
and the entropy of the policy on its own samples; at the reference, the share of wrong answers in
all-wrong groups.
"""

from __future__ import annotations

import copy

import numpy as np

from ... import functional as Fn
from ...algorithms import make_algorithm
from ...evaluation import evaluate
from ...measure.difficulty import pass_at_k_curve
from ...train import train
from ...warmstart.presets import resolve_preset, with_world
from .common import bar, claim, paired, rule, spread, task_of, verdict

PAPER, CENTRED = "Zhu et al.'s form", "group-centred"  # the two variants a run can take
RUNS = {  # name -> (the variant, the GRPOConfig knobs on top of beta = 0 and the course's defaults)
    "GRPO": (CENTRED, {}),
    "NSR": (PAPER, {"advantage_sign": "negative"}),
    "PSR": (PAPER, {"advantage_sign": "positive"}),
    "W-REINFORCE": (PAPER, {"positive_weight": 0.1}),
    "NSR, group-centred": (CENTRED, {"advantage_sign": "negative"}),
    "PSR, group-centred": (CENTRED, {"advantage_sign": "positive"}),
    "W-REINFORCE, group-centred": (CENTRED, {"positive_weight": 0.1}),
}
BETA = 0.0  # Zhu et al. train with KL coefficient 0
REWARDS = (-1.0, 1.0)  # Zhu et al.'s reward (wrong, right), the task's reward_values in their form
WORLD = "spread"
W_MATCH, W_BEHIND = -0.02, -0.05  # W-REINFORCE minus GRPO at the largest k: above W_MATCH it matches or beats
# GRPO (Zhu et al.'s claim holds), at or below W_BEHIND it is clearly behind (fails here)
SIZES = {  # "full": the verb's; "notebook": notebook 12's; "tiny": the tests' (seconds, numbers meaningless)
    "full": dict(steps=30, pass_prompts=200, pass_ks=(1, 2, 4, 8, 16, 32, 64, 128, 256), runs=tuple(RUNS)),
    "notebook": dict(steps=20, pass_prompts=100, pass_ks=(1, 2, 4, 8, 16, 32, 64),
                     runs=("GRPO", "NSR", "PSR", "W-REINFORCE", "NSR, group-centred")),
    "tiny": dict(steps=2, pass_prompts=4, pass_ks=(1, 2), runs=tuple(RUNS)),
}  # fmt: skip


def reward_as_advantage(rewards, group_size, scale="group", eps=1e-6, unbiased=False, leave_one_out=False):
    """Zhu et al.'s advantage: the reward itself, A_i = r_i, no baseline and no std (with rewards
    (-1, +1): +1 for a right answer, -1 for a wrong one). A replacement of
    `functional.group_advantages` (same signature, same statistics of the groups, which the log
    reads), for ``make_algorithm("grpo", functions={"group_advantages": reward_as_advantage})``."""
    _, stats = Fn.group_advantages(rewards, group_size, scale, eps, unbiased, leave_one_out)
    return rewards.float().clone(), stats


def variant(name: str) -> str:
    """`PAPER` or `CENTRED`: the advantage run ``name`` uses."""
    if name not in RUNS:
        raise ValueError(f"unknown run {name!r}; choose from {list(RUNS)}")
    return RUNS[name][0]


def algorithm(name: str):
    """The GRPO of run ``name``: beta 0, its sign knobs, and in Zhu et al.'s form the reward as advantage."""
    form, knobs = variant(name), RUNS[name][1]
    functions = {"group_advantages": reward_as_advantage} if form == PAPER else None
    return make_algorithm("grpo", functions=functions, beta=BETA, **knobs)


def measure_policy(policy, task, z: dict, seed: int) -> dict:
    """Greedy held-out accuracy and pass@k on the first ``z["pass_prompts"]`` held-out prompts."""
    probs = task.eval_problems()[: z["pass_prompts"]]
    pk = pass_at_k_curve(policy, task, z["pass_ks"], problems=probs, seed=seed)["all"]
    return {"greedy": float(evaluate(policy, task)), "pass": {int(k): float(v) for k, v in pk.items()}}


def one_run(reference, task, preset, name: str, seed: int, z: dict) -> dict:
    """Run ``name`` of `RUNS` for ``z["steps"]`` from ``reference``: `measure_policy` (on ``task``, the
    0/1 task) and the entropy per step. Zhu et al.'s form trains on the same task with rewards (-1, +1)."""
    train_task = task_of(preset, reward_values=REWARDS) if variant(name) == PAPER else task
    policy = copy.deepcopy(reference)
    h = train(algorithm(name), train_task, reference, policy, preset, steps=z["steps"], seed=seed,
              eval_every=z["steps"], progress=False, name=name)  # fmt: skip
    out = measure_policy(policy, task, z, seed)
    out["entropy"] = [round(float(x), 5) for x in h.series("entropy")]
    return out


def wrong_in_tied_groups(reference, task, preset, seed: int, prompts: int = 128) -> dict:
    """MEASURED at the reference on one batch (``prompts`` x G answers): the share of groups whose G
    answers are all wrong, and the share of the wrong answers that sit in them (where the group-centred
    NSR gives A = 0 and Zhu et al.'s form gives -1)."""
    from ...measure.common import rngs
    from ...rollout import sample_batch

    G = make_algorithm("grpo").config.group_size
    rng, gen = rngs(seed + 2000, preset.device)
    _, scores, _ = sample_batch(reference, task, prompts, G, rng, gen)
    right = (scores.sum(1) > 0).view(-1, G)
    all_wrong = ~right.any(1)
    wrong = ~right
    return {
        "all_wrong_groups": float(all_wrong.float().mean()),
        "wrong_in_all_wrong_groups": float(wrong[all_wrong].sum() / wrong.sum().clamp(min=1)),
        "sampled_accuracy": float(right.float().mean()),
    }


def run_negative_samples(reference, preset="cpu", seeds=(0, 1, 2), size: str = "full", references=None,
                         progress=True, runs=None) -> dict:  # fmt: skip
    """Each run of ``runs`` (default: the size's) in the spread world, per seed, from the spread world's
    reference (``reference`` if ``preset`` is that world, else ``references["spread"]``, else
    `reference_policy` of the spread preset, trained once and cached), the reference's own pass@k and
    its tied groups (`wrong_in_tied_groups`)."""
    from ...warmstart.reference import reference_policy

    if size not in SIZES:
        raise ValueError(f"size must be one of {list(SIZES)}, got {size!r}")
    preset, z = resolve_preset(preset), SIZES[size]
    runs = tuple(z["runs"] if runs is None else runs)
    unknown = [r for r in runs if r not in RUNS]
    if unknown or not runs:
        raise ValueError(f"unknown runs {unknown or '(none given)'}; choose from {list(RUNS)}")
    world = with_world(preset, WORLD)
    ref = reference if preset.world == WORLD else (references or {}).get(WORLD)
    ref = ref if ref is not None else reference_policy(world, progress=progress)
    task = task_of(world)
    res = {"size": size, "steps": z["steps"], "seeds": list(seeds), "ks": list(z["pass_ks"]), "reference": [],
           "tied": [], "runs": {r: [] for r in runs}, "variants": {r: variant(r) for r in runs}}  # fmt: skip
    progress_bar = bar(len(seeds) * (len(runs) + 1), "negative samples", progress)
    for seed in seeds:
        res["reference"].append(measure_policy(ref, task, z, seed))
        res["tied"].append(wrong_in_tied_groups(ref, task, world, seed))
        progress_bar.update(1)
        for name in runs:
            res["runs"][name].append(one_run(ref, task, world, name, seed, z))
            progress_bar.update(1)
    progress_bar.close()
    res["claims"] = claims(res)
    return res


def gains(res, name: str) -> dict:
    """pass@k after run ``name`` minus the reference's, per k, a list over seeds."""
    return {k: paired([r["pass"][k] for r in res["runs"][name]], [r["pass"][k] for r in res["reference"]])
            for k in res["ks"]}  # fmt: skip


def entropy_tail(res, name: str) -> list:
    """The entropy of run ``name`` over the last tenth of its steps (at least one), per seed."""
    w = max(1, res["steps"] // 10)
    return [float(np.mean(r["entropy"][-w:])) for r in res["runs"][name]]


def claims(res) -> list:
    """Zhu et al.'s claims, each by the two-sided rule over the seeds, for the runs present; each
    claim's text says which variant of the advantage it tests."""
    runs, ref, n, steps, ks = res["runs"], res["reference"], len(res["seeds"]), res["steps"], res["ks"]
    k_max = max(ks)

    def each(values, spec=".3f"):
        return spread(list(values), spec)

    def curve(rs):
        return ", ".join(f"@{k} {each(r['pass'][k] for r in rs)}" for k in (1, ks[len(ks) // 2], k_max))

    def have(*names):
        return all(m in runs for m in names)

    def at(name, k):
        return [r["pass"][k] for r in runs[name]]

    tied = res.get("tied") or []
    ties = (f"at the reference {each(t['all_wrong_groups'] for t in tied)} of the groups are all wrong, holding "
            f"{each(t['wrong_in_all_wrong_groups'] for t in tied)} of the wrong answers; ") if tied else ""  # fmt: skip
    text = f"pass@k reference {curve(ref)}; " + "; ".join(f"{m} {curve(runs[m])}" for m in runs)
    out = []
    for name, form in (("NSR", f"{PAPER}: A = -1 for every wrong answer, no baseline"),
                       ("NSR, group-centred", f"{CENTRED}: A < 0 of the group z-score, 0 in an all-wrong group")):  # fmt: skip
        if have(name):
            g = gains(res, name)
            smallest = [min(g[k][s] for k in ks) for s in range(n)]
            out.append(claim(
                f"NSR ({form}) raises pass@k over the reference at every k up to {k_max}",
                f"after {steps} steps, {ties}{text}; the smallest gain over k {each(smallest)} "
                f"({rule(0.01, 0.0, 'the smallest gain over k', n)})",
                verdict(smallest, 0.01, 0.0),
            ))  # fmt: skip
            text, ties = "pass@k as above", ""
    if have("NSR", "NSR, group-centred"):
        out.append(claim(
            f"NSR in {PAPER} (every wrong answer pushed down) ends above the group-centred NSR at pass@{k_max}",
            f"pass@{k_max} {PAPER} {each(at('NSR', k_max))}, {CENTRED} {each(at('NSR, group-centred', k_max))} "
            f"({rule(0.01, 0.0, f'{PAPER} minus {CENTRED}, per seed', n)})",
            verdict(paired(at("NSR", k_max), at("NSR, group-centred", k_max)), 0.01, 0.0),
        ))  # fmt: skip
    if have("PSR", "NSR"):
        psr, nsr = gains(res, "PSR"), gains(res, "NSR")
        out += [
            claim(
                f"PSR ({PAPER}: A = +1 for every right answer) raises pass@1",
                f"pass@1 gain PSR {each(psr[1])}, NSR {each(nsr[1])} ({rule(0.02, 0.0, 'the PSR gain', n)})",
                verdict(psr[1], 0.02, 0.0),
            ),
            claim(
                f"... and PSR ({PAPER}) lowers pass@{k_max} below the reference's (it sharpens)",
                f"pass@{k_max} gain PSR {each(psr[k_max])}, NSR {each(nsr[k_max])} "
                f"({rule(0.01, 0.0, f'the fall of pass@{k_max}', n)})",
                verdict([-g for g in psr[k_max]], 0.01, 0.0),
            ),
            claim(
                f"PSR ends below NSR at pass@{k_max}, both in {PAPER} (the right answers alone narrow, the wrong "
                "ones alone do not)",
                f"pass@{k_max} NSR {each(at('NSR', k_max))}, PSR {each(at('PSR', k_max))} "
                f"({rule(0.01, 0.0, 'NSR minus PSR, per seed', n)})",
                verdict(paired(nsr[k_max], psr[k_max]), 0.01, 0.0),
            ),
            claim(
                f"NSR keeps the entropy higher than PSR, both in {PAPER}",
                f"token entropy over the last tenth of {steps} steps: "
                + ", ".join(f"{m} {each(entropy_tail(res, m))}" for m in runs)
                + f" ({rule(0.02, 0.0, 'NSR minus PSR, per seed', n)})",
                verdict(paired(entropy_tail(res, "NSR"), entropy_tail(res, "PSR")), 0.02, 0.0),
            ),
        ]
    if have("W-REINFORCE", "GRPO"):
        out.append(claim(
            f"W-REINFORCE ({PAPER}: +0.1 for a right answer, -1 for a wrong one) matches or beats plain GRPO "
            f"({CENTRED}) at pass@{k_max} (Zhu et al.; matching: no more than {-W_MATCH:g} behind)",
            f"pass@{k_max} W-REINFORCE {each(at('W-REINFORCE', k_max))}, GRPO {each(at('GRPO', k_max))}; pass@1 "
            f"{each(at('W-REINFORCE', 1))} vs {each(at('GRPO', 1))} "
            f"({rule(W_MATCH, W_BEHIND, 'W-REINFORCE minus GRPO, per seed', n)})",
            verdict(paired(at("W-REINFORCE", k_max), at("GRPO", k_max)), W_MATCH, W_BEHIND),
        ))  # fmt: skip
    return out


def figure(res):
    """pass@k against k at the reference and after each run (mean over seeds): Zhu et al.'s form solid,
    the group-centred runs dashed."""
    from ...figures.plotstyle import PALETTE, set_alt
    from .figures import PERCENT, new_figure

    fig, ax = new_figure()
    ks = res["ks"]

    def mean(rs):
        return [float(np.mean([r["pass"][k] for r in rs])) for k in ks]

    ax.plot(ks, mean(res["reference"]), ":", color="0.3", label="reference")
    for i, (name, rs) in enumerate(res["runs"].items()):
        style = "-o" if variant(name) == PAPER else "--s"
        ax.plot(ks, mean(rs), style, ms=3, color=PALETTE[i % len(PALETTE)], label=name)
    ax.set_xscale("log", base=2)
    ax.yaxis.set_major_formatter(PERCENT)
    ax.set_xlabel("k (answers sampled per prompt)")
    ax.set_ylabel("pass@k (held-out)")
    ax.set_title(f"pass@k after {res['steps']} steps, spread world (mean over seeds)")
    ax.legend(fontsize="small")
    return set_alt(fig, "pass@k against k on a log scale, at the spread world's reference (dotted) and after each "
                   "run: NSR, PSR and W-REINFORCE in Zhu et al.'s form, with no baseline (solid), and GRPO and the "
                   "group-centred variants (dashed).")  # fmt: skip
