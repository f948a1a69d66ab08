"""The difficulty regime: mixed operand lengths, so a prompt has a value to learn and groups tie.

For a 0/1 reward with p_q = P(right | q): Var(R) = E_q[p(1-p)] + Var_q(p); the best V(s_0) is p_q,
so a critic explains at most EV_max = Var_q(p) / Var(R) of the variance.
"""

from __future__ import annotations

from ...algorithms.critic import fit_critic
from ...presets import resolve_preset
from ...rollout import sample_batch
from .common import above, bar, claim, rngs, rule, spread, task_of, verdict


def _difficulty_class(p) -> str:
    short = (p.a < 10) + (p.b < 10)
    return ("2+2 digits", "1+2 digits", "1+1 digits")[short]


def run_difficulty(reference, preset="cpu", seeds=(0, 1), critic_steps=40, own_reference=None, progress=True) -> dict:
    """Uniform 2-digit addition vs mixed operand lengths (1 or 2 digits), from the default
    reference and from one trained by SFT on the mixed task itself (``own_reference``;
    default: `reference_policy` of the mixed task, trained once and cached).

    MEASURED per seed: the explained variance of R by a critic fitted at the reference
    (`fit_critic`); on one batch of 128 prompts x 8, Var(R - b) with b the leave-one-out mean
    of the other 7 answers to the same prompt over Var(R - batch mean); the share of groups
    whose 8 rewards tie (GRPO's frac_reward_zero_std: 1 - the effective batch), by difficulty."""
    from ...reference import reference_policy

    preset = resolve_preset(preset)
    mixed = task_of(preset, mixed_digits=(1, 2))
    setups = {
        "uniform": (task_of(preset), reference),
        "mixed": (mixed, reference),
        "mixed, own reference": (mixed, own_reference or reference_policy(preset, task=mixed, progress=progress)),
    }
    res = {k: {"ev": [], "var_ratio": [], "zero_std": [], "by_class": {}} for k in setups}
    G, progress_bar = 8, bar(len(setups) * len(seeds), "difficulty", progress)
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
