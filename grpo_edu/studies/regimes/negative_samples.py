"""The negative-samples regime: what training on the wrong answers alone, or the right ones alone, does to pass@k.

Zhu et al. ("The Surprising Effectiveness of Negative Reinforcement in LLM Reasoning", 2025) split the
RLVR objective with rewards +1 / -1 into positive-sample reinforcement (PSR: only the right answers,
pulled up) and negative-sample reinforcement (NSR: only the wrong ones, pushed down). On Qwen models
and MATH, NSR alone raised pass@k over the base model at every k up to 256; PSR alone raised pass@1
and lowered pass@k at large k (it sharpens); their Weighted-REINFORCE keeps both with the right
answers weighted by lambda = 0.1.

Here each is GRPO with one knob (`GRPOConfig.advantage_sign`, ``positive_weight``) on the group
advantage A_i = (r_i - mean) / std: NSR keeps A_i < 0, PSR A_i > 0, W-REINFORCE weights A_i > 0 by 0.1
(`functional.signed_advantages`). Zhu et al.'s objective has no baseline (A = r = +-1); with the
group mean a wrong answer in an all-wrong group has A = 0, so ours pushes down only the wrong
answers of groups with a right one. The world is the spread one (notebook 08: a reference taught only
operands < 60, better on the easy prompts than on the hard ones), where pass@k stands far above
pass@1. MEASURED per run: pass@k (k up to the largest of ``pass_ks``, n = that many answers per
prompt), greedy held-out accuracy and the entropy of the policy on its own samples.
"""

from __future__ import annotations

import copy

import numpy as np

from ...algorithms import make_algorithm
from ...evaluation import evaluate
from ...measure.difficulty import pass_at_k_curve
from ...train import train
from ...warmstart.presets import resolve_preset, with_world
from .common import bar, claim, paired, rule, spread, task_of, verdict

RUNS = {  # name -> the GRPOConfig knobs (the course's defaults otherwise)
    "GRPO": {},
    "NSR": {"advantage_sign": "negative"},
    "PSR": {"advantage_sign": "positive"},
    "W-REINFORCE": {"positive_weight": 0.1},
}
WORLD = "spread"
SIZES = {  # "full": the verb's; "notebook": notebook 12's; "tiny": the tests' (seconds, numbers meaningless)
    "full": dict(steps=30, pass_prompts=200, pass_ks=(1, 2, 4, 8, 16, 32, 64, 128, 256)),
    "notebook": dict(steps=20, pass_prompts=100, pass_ks=(1, 2, 4, 8, 16, 32, 64)),
    "tiny": dict(steps=2, pass_prompts=4, pass_ks=(1, 2)),
}


def measure_policy(policy, task, z: dict, seed: int) -> dict:
    """Greedy held-out accuracy and pass@k on the first ``z["pass_prompts"]`` held-out prompts."""
    probs = task.eval_problems()[: z["pass_prompts"]]
    pk = pass_at_k_curve(policy, task, z["pass_ks"], problems=probs, seed=seed)["all"]
    return {"greedy": float(evaluate(policy, task)), "pass": {int(k): float(v) for k, v in pk.items()}}


def one_run(reference, task, preset, name: str, seed: int, z: dict) -> dict:
    """Run ``name`` of `RUNS` for ``z["steps"]`` from ``reference``: `measure_policy` and the entropy per step."""
    if name not in RUNS:
        raise ValueError(f"unknown run {name!r}; choose from {list(RUNS)}")
    policy = copy.deepcopy(reference)
    h = train(make_algorithm("grpo", **RUNS[name]), task, reference, policy, preset, steps=z["steps"], seed=seed,
              eval_every=z["steps"], progress=False, name=name)  # fmt: skip
    out = measure_policy(policy, task, z, seed)
    out["entropy"] = [round(float(x), 5) for x in h.series("entropy")]
    return out


def run_negative_samples(reference, preset="cpu", seeds=(0, 1, 2), size: str = "full", references=None,
                         progress=True) -> dict:  # fmt: skip
    """Each run of `RUNS` in the spread world, per seed, from the spread world's reference
    (``reference`` if ``preset`` is that world, else ``references["spread"]``, else `reference_policy`
    of the spread preset, trained once and cached), and the reference's own pass@k."""
    from ...warmstart.reference import reference_policy

    if size not in SIZES:
        raise ValueError(f"size must be one of {list(SIZES)}, got {size!r}")
    preset, z = resolve_preset(preset), SIZES[size]
    world = with_world(preset, WORLD)
    ref = reference if preset.world == WORLD else (references or {}).get(WORLD)
    ref = ref if ref is not None else reference_policy(world, progress=progress)
    task = task_of(world)
    res = {"size": size, "steps": z["steps"], "seeds": list(seeds), "ks": list(z["pass_ks"]), "reference": [],
           "runs": {r: [] for r in RUNS}}  # fmt: skip
    progress_bar = bar(len(seeds) * (len(RUNS) + 1), "negative samples", progress)
    for seed in seeds:
        res["reference"].append(measure_policy(ref, task, z, seed))
        progress_bar.update(1)
        for name in RUNS:
            res["runs"][name].append(one_run(ref, task, world, name, seed, z))
            progress_bar.update(1)
    progress_bar.close()
    res["claims"] = claims(res)
    return res


def gains(res, name: str) -> dict:
    """pass@k after run ``name`` minus the reference's, per k, a list over seeds."""
    return {k: paired([r["pass"][k] for r in res["runs"][name]], [r["pass"][k] for r in res["reference"]])
            for k in res["ks"]}  # fmt: skip


def claims(res) -> list:
    """Zhu et al.'s claims, each by the two-sided rule over the seeds."""
    runs, ref, n, steps, ks = res["runs"], res["reference"], len(res["seeds"]), res["steps"], res["ks"]
    k_max = max(ks)

    def each(values, spec=".3f"):
        return spread(list(values), spec)

    def curve(rs):
        return ", ".join(f"@{k} {each(r['pass'][k] for r in rs)}" for k in (1, ks[len(ks) // 2], k_max))

    def ent(name):
        w = max(1, steps // 10)
        return [float(np.mean(r["entropy"][-w:])) for r in runs[name]]

    nsr, psr = gains(res, "NSR"), gains(res, "PSR")
    text = f"pass@k reference {curve(ref)}; " + "; ".join(f"{m} {curve(runs[m])}" for m in RUNS)
    return [
        claim(
            f"NSR (only the wrong answers, pushed down) raises pass@k over the reference at every k up to {k_max}",
            f"after {steps} steps, {text}; the smallest gain over k {each(min(nsr[k][s] for k in ks) for s in range(n))} "
            f"({rule(0.01, 0.0, 'the smallest gain over k', n)})",
            verdict([min(nsr[k][s] for k in ks) for s in range(n)], 0.01, 0.0),
        ),
        claim(
            "PSR (only the right answers, pulled up) raises pass@1",
            f"pass@1 gain PSR {each(psr[1])}, NSR {each(nsr[1])} ({rule(0.02, 0.0, 'the PSR gain', n)})",
            verdict(psr[1], 0.02, 0.0),
        ),
        claim(
            f"... and lowers pass@{k_max} below the reference's (it sharpens)",
            f"pass@{k_max} gain PSR {each(psr[k_max])}, NSR {each(nsr[k_max])} "
            f"({rule(0.01, 0.0, f'the fall of pass@{k_max}', n)})",
            verdict([-g for g in psr[k_max]], 0.01, 0.0),
        ),
        claim(
            f"PSR ends below NSR at pass@{k_max} (the right answers alone narrow, the wrong ones alone do not)",
            f"pass@{k_max} NSR {each(r['pass'][k_max] for r in runs['NSR'])}, PSR "
            f"{each(r['pass'][k_max] for r in runs['PSR'])} ({rule(0.01, 0.0, 'NSR minus PSR, per seed', n)})",
            verdict(paired(nsr[k_max], psr[k_max]), 0.01, 0.0),
        ),
        claim(
            "NSR keeps the entropy higher than PSR",
            f"token entropy after {steps} steps: NSR {each(ent('NSR'))}, PSR {each(ent('PSR'))}, GRPO "
            f"{each(ent('GRPO'))}, W-REINFORCE {each(ent('W-REINFORCE'))} "
            f"({rule(0.02, 0.0, 'NSR minus PSR, per seed', n)})",
            verdict(paired(ent("NSR"), ent("PSR")), 0.02, 0.0),
        ),
        claim(
            f"W-REINFORCE (lambda = 0.1 on the right answers) beats plain GRPO at pass@{k_max}",
            f"pass@{k_max} W-REINFORCE {each(r['pass'][k_max] for r in runs['W-REINFORCE'])}, GRPO "
            f"{each(r['pass'][k_max] for r in runs['GRPO'])}; pass@1 "
            f"{each(r['pass'][1] for r in runs['W-REINFORCE'])} vs {each(r['pass'][1] for r in runs['GRPO'])} "
            f"({rule(0.01, 0.0, 'W-REINFORCE minus GRPO, per seed', n)})",
            verdict(
                paired([r["pass"][k_max] for r in runs["W-REINFORCE"]], [r["pass"][k_max] for r in runs["GRPO"]]),
                0.01,
                0.0,
            ),  # fmt: skip
        ),
    ]


def figure(res):
    """pass@k against k at the reference and after each run (mean over seeds)."""
    from ...figures.plotstyle import PALETTE, set_alt
    from .figures import PERCENT, new_figure

    fig, ax = new_figure()
    ks = res["ks"]

    def mean(rs):
        return [float(np.mean([r["pass"][k] for r in rs])) for k in ks]

    ax.plot(ks, mean(res["reference"]), "--", color="0.3", label="reference")
    for i, (name, rs) in enumerate(res["runs"].items()):
        ax.plot(ks, mean(rs), "-o", ms=3, color=PALETTE[i], label=name)
    ax.set_xscale("log", base=2)
    ax.yaxis.set_major_formatter(PERCENT)
    ax.set_xlabel("k (answers sampled per prompt)")
    ax.set_ylabel("pass@k (held-out)")
    ax.set_title(f"pass@k after {res['steps']} steps, spread world (mean over seeds)")
    ax.legend()
    return set_alt(fig, "pass@k against k on a log scale, at the spread world's reference (dashed) and after "
                   "GRPO, NSR, PSR and W-REINFORCE (solid).")  # fmt: skip
