"""Where a critic's credit pays, and where it does not (issue 32): three worlds, one condition.

PPO's critic gives each token its own advantage, A_t = G_t - V(s_t) (GAE, lambda = 1); GRPO gives every
token of an answer the same A_i. A per-token value can buy PPO more than a value of the prompt only where
three things hold, written down before the measurement:

    (1) the prefix reveals the outcome: the exact V*(s_t) = P(R = 1 | s_t) under the policy (its own value,
        computed exactly: `measure.credit.oracle_values`; not the optimal value) explains more of R after a
        few tokens than V*(s_0) = p_q does (EV_t > EV_0);
    (2) the critic reads it: a learned V(s_t), fitted as PPO fits it, comes near V*'s EV_t;
    (3) learning waits on which token to blame: one advantage per answer is the slow part, so a per-token
        one gets further per sampled answer.

The worlds (cpu preset, 2-digit addition): "default" and "spread" (`presets.WORLDS`: the same task,
references that differ in what they know), and "junk" (`junk_setup`: `ArithmeticTask(junk=0.5)`, a
reference trained 500 SFT steps on answers half of which carry one junk token '=', which the checker
counts wrong; `junk_rates` measures how often it writes one).

The arms, from the world's reference, 40 steps x 512 completions (the difficulty regime's budget):

    batch mean                   PPO with the critic's V(s_t) replaced by the batch's mean return (`gap_ablation`)
    V*(s_0), exact prompt value  PPO with `measure.credit.ExactCritic(prompt_only=True)`: p_q at every token,
                                 the best predictor of R from the prompt (what EV_max measures)
    V*(s_t), lam 1               PPO with `ExactCritic`: A_t = G_t - V*(s_t)
    V*(s_t), lam 0               the same, and GAE lambda 0: A_t = r_t + V*(s_{t+1}) - V*(s_t), each token's own
                                 credit (two switches from the prompt value: the per-token values and lambda)
    learned critic (PPO)         PPO as it is: a `Critic` from the policy's trunk, learning as it trains
    GRPO                         `make_algorithm("grpo")`: 64 prompts x 8, one advantage per answer

(G_t and r_t carry PPO's KL penalty, beta k1 per token, as well as the outcome R; `ExactCritic` values R
alone.) The measure is sampled held-out accuracy (temperature 1, each of the 500 held-out problems sampled
4 times: what RL optimises, and the accuracy that sees junk), with greedy held-out accuracy beside it. The
reading (1)-(2) is measured at the reference: a critic fitted 40 steps (`fit_critic`) and V*, EV_t by
position (`critic_by_position`). Notebook 08 part 2's longest cells are `scratchpad_reading`, `junk_reading`
and `run_pairs`, numbers only (JSON): `grpo_edu.studies.stored_runs` keeps them.

    python -m grpo_edu.studies.credit_pays --seeds 3          # about 15 minutes on one thread

MEASURED: the measurements page's block "Where a critic's credit pays" (`creditpays`) holds the run.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import math
import time

import numpy as np

from ..algorithms import make_algorithm
from ..measure.common import plain, spread
from ..measure.verdicts import paired, rule, verdict

WORLDS = ("default", "spread", "junk")
JUNK = 0.5  # the junk world's share of demonstrations with one junk token
JUNK_SFT_STEPS = 500  # long enough that the junk reference rarely writes a wrong digit (sampled, junk-free: ~0.87)
ARMS = {  # name -> (algorithm, its config switches, the baseline: "own" | "batch_mean" | "exact" | "exact_prompt")
    "batch mean": ("ppo", {}, "batch_mean"),
    "V*(s_0), exact prompt value": ("ppo", {}, "exact_prompt"),
    "V*(s_t), lam 1": ("ppo", {}, "exact"),
    "V*(s_t), lam 0": ("ppo", {"lam": 0.0}, "exact"),
    "learned critic (PPO)": ("ppo", {}, "own"),
    "GRPO": ("grpo", {}, "own"),
}
COMPARISONS = (  # (what, arm, against it, the claim) each a paired difference per seed, verdict at margin 0.02
    ("per-token credit", "V*(s_t), lam 0", "V*(s_0), exact prompt value", "exact per-token credit beats the exact prompt value"),
    ("per-token values", "V*(s_t), lam 1", "V*(s_0), exact prompt value", "exact per-token values at PPO's lambda 1 beat it"),
    ("lambda 0", "V*(s_t), lam 0", "V*(s_t), lam 1", "with exact values, lambda 0 beats lambda 1"),
    ("the learned critic", "learned critic (PPO)", "batch mean", "the learned critic's V(s_t) beats the batch mean"),
    ("PPO over GRPO", "learned critic (PPO)", "GRPO", "PPO beats GRPO per sampled answer"),
)  # fmt: skip
MARGIN = 0.02
SIZES = {  # "full": the difficulty regime's budget; "tiny": the test's (seconds, numbers meaningless)
    "full": dict(  # the preset's batch
        steps=40, sequences_per_step=None, fit_steps=40, probe=2048, samples=4, prompts=192, prompt_samples=32
    ),
    "tiny": dict(steps=1, sequences_per_step=16, fit_steps=2, probe=32, samples=1, prompts=8, prompt_samples=2),
}


def junk_setup(preset="cpu", junk: float = JUNK, sft_steps: int = JUNK_SFT_STEPS):
    """``(task, preset)`` of the junk world: `ArithmeticTask(junk=junk)` on the preset's digits and a
    preset whose reference trains ``sft_steps`` SFT steps (no early stop: target accuracy 1), with a
    context long enough for the junk token. ``reference_policy(preset, task=task)`` trains it (cached)."""
    from envs import ArithmeticTask

    from ..warmstart.presets import resolve_preset

    preset = resolve_preset(preset)
    task = ArithmeticTask(**preset.task, junk=junk)
    fit = task.prompt_length + task.max_answer_length
    model = dataclasses.replace(preset.model, max_seq_len=max(preset.model.max_seq_len, fit))
    sft = dataclasses.replace(preset.sft, target_accuracy=1.0, max_steps=sft_steps)
    return task, dataclasses.replace(preset, model=model, sft=sft)


def junk_rates(policy, task, n: int = 2048, seed: int = 0, temperature: float = 1.0) -> dict:
    """MEASURED on ``n`` fresh training prompts (one answer each, at ``temperature``; 0: greedy): the share of
    answers that write a junk token ``=`` (``"junk"``), the accuracy of those that do not (``"right_without"``),
    the accuracy of all (``"accuracy"``) and how many answers (``"n"``)."""
    import torch

    from ..measure.common import rngs
    from ..rollout import sample_batch

    rng, gen = rngs(seed, next(policy.parameters()).device)
    with torch.no_grad():
        ro, scores, _ = sample_batch(policy, task, n, 1, rng, gen, temperature=temperature)
    junk = ((ro.completion_ids == task.tokenizer.stoi["="]) & (ro.mask > 0)).any(1).cpu()
    R = scores.sum(1).cpu()
    return {
        "junk": float(junk.float().mean()),
        "right_without": float(R[~junk].mean()) if bool((~junk).any()) else math.nan,
        "accuracy": float(R.mean()),
        "n": int(len(R)),
    }


def world_setup(world: str, preset="cpu"):
    """``(task, preset)`` of one of `WORLDS` at the preset's size (the preset's seed and shift kept)."""
    from ..warmstart.presets import make_task, resolve_preset, with_world

    if world not in WORLDS:
        raise ValueError(f"unknown world {world!r}; choose from {list(WORLDS)}")
    preset = resolve_preset(preset)
    if world == "junk":
        return junk_setup(with_world(preset, "default"))
    p = with_world(preset, world)
    return make_task(p), p


def make_arm(name: str, task):
    """The arm's algorithm: with the batch-mean baseline its ``gae`` is `gap_ablation.batch_mean_gae`
    (``functions=``, that algorithm's only), with an exact one its critic is an `ExactCritic`."""
    from ..measure.credit import ExactCritic
    from .gap_ablation import batch_mean_gae

    if name not in ARMS:
        raise ValueError(f"unknown arm {name!r}; choose from {list(ARMS)}")
    algo_name, switch, baseline = ARMS[name]
    functions = {"gae": batch_mean_gae} if baseline == "batch_mean" else None
    algorithm = make_algorithm(algo_name, functions=functions, **switch)
    if baseline in ("exact", "exact_prompt"):
        prompt_only = baseline == "exact_prompt"
        algorithm.make_critic = lambda policy: ExactCritic(task, policy, prompt_only=prompt_only)
    return algorithm


def _rise(ev: np.ndarray) -> float:
    """max over t > 0 of EV_t, minus EV_0 (NaN where no EV_t past the first is defined)."""
    later = ev[1:][~np.isnan(ev[1:])]
    return float(later.max() - ev[0]) if later.size else math.nan


def reading(reference, task, fit_steps: int, n: int, seed: int) -> dict:
    """EV_t by position at the reference: a critic fitted ``fit_steps`` (`fit_critic`) and V*."""
    from ..measure import credit
    from ..measure.variance import fit_critic

    critic, _ = fit_critic(reference, task, steps=fit_steps, seed=seed + 1, progress=False)
    r = credit.critic_by_position(reference, task, critic, n=n, seed=seed + 7)
    ev, oracle = np.asarray(r["ev"], float), np.asarray(r["oracle_ev"], float)
    return {
        "ev": [round(float(x), 4) for x in ev],
        "oracle_ev": [round(float(x), 4) for x in oracle],
        "n": [int(x) for x in r["n"]],
        "rise": _rise(ev),  # the learned critic's best EV_t over EV_0
        "oracle_rise": _rise(oracle),
        "reward_mean": r["reward_mean"],
    }


def run_arm(name, task, preset, reference, seed, steps=40, sequences_per_step=None, samples=4) -> dict:
    """One arm of `ARMS` trained ``steps`` x ``sequences_per_step`` (None: the preset's) from ``reference`` at ``seed``:
    ``{"sampled"`` (held-out accuracy at temperature 1, ``samples`` of each problem), ``"greedy"``,
    ``"reward"`` (the sampled training reward of each step), ``"seconds"}``."""
    from ..evaluation import evaluate
    from ..train import train

    algorithm, policy = make_arm(name, task), copy.deepcopy(reference)
    t0 = time.perf_counter()
    h = train(algorithm, task, reference, policy, preset, steps=steps, seed=seed,
              sequences_per_step=sequences_per_step, eval_every=steps, progress=False, name=name)  # fmt: skip
    sampled = evaluate(policy, task, task.eval_problems() * samples, temperature=1.0, seed=seed + 11)
    return {
        "sampled": sampled,
        "greedy": h.final_accuracy,
        "reward": [round(float(x), 4) for x in h.series("reward")],
        "seconds": time.perf_counter() - t0,
    }


# -- notebook 08 part 2's longest cells, as numbers (JSON): `grpo_edu.studies.stored_runs` keeps them --------


def _one_seed(seeds) -> int:
    seeds = tuple(seeds)
    if len(seeds) != 1 or isinstance(seeds[0], bool) or not isinstance(seeds[0], int):
        raise ValueError(f"seeds must hold one integer seed, (seed,), got {seeds!r}")
    return seeds[0]


def _world_reference(world: str, preset, size: str):
    """``(task, preset, reference)`` of one of `WORLDS` (`world_setup`), its SFT reference cached; at the
    tiny size a 5-step SFT."""
    from ..warmstart.reference import reference_policy

    task, p = world_setup(world, preset)
    if size == "tiny":
        p = dataclasses.replace(p, sft=dataclasses.replace(p.sft, max_steps=5, eval_every=5, batch_size=32))
    return task, p, reference_policy(p, task=task, progress=False)


def reference_reading(reference, task, seed: int, size: str = "full", progress: bool = False) -> dict:
    """At ``reference``: ``"dec"``, the `variance_decomposition` of its success on the size's ``prompts``
    training problems (``prompt_samples`` answers each, seed ``seed``), and ``"pos"``, `critic_by_position`
    (seed ``seed + 2``) of a critic fitted ``fit_steps`` steps (seed ``seed + 1``)."""
    from ..measure import credit
    from ..measure import difficulty as D
    from ..measure.variance import fit_critic

    z = SIZES[size]
    p = D.prompt_success(reference, task, n_prompts=z["prompts"], samples=z["prompt_samples"], seed=seed)["p"]
    dec = D.variance_decomposition(p, make_algorithm("grpo").config.group_size, n_samples=z["prompt_samples"])
    critic, _ = fit_critic(reference, task, steps=z["fit_steps"], seed=seed + 1, progress=progress)
    return plain({"dec": dec, "pos": credit.critic_by_position(reference, task, critic, n=z["probe"], seed=seed + 2)})


def scratchpad_reading(preset="cpu", progress: bool = True, seeds=(0,), size: str = "full") -> dict:
    """Notebook 09's scratchpad world (`regimes.thinking.thinking_setup` of the preset's default world) read at
    its cached SFT reference: `reference_reading` at seed ``seeds[0] + 8``, ``{"dec", "pos"}``."""
    from ..warmstart.presets import resolve_preset, setup_torch, with_world
    from ..warmstart.reference import reference_policy
    from .regimes import thinking

    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; choose from {list(SIZES)}")
    preset = with_world(resolve_preset(preset), "default")
    setup_torch(preset)
    task, fit = thinking.thinking_setup(preset, tiny=size == "tiny")
    reference = reference_policy(fit, task=task, progress=False)
    return reference_reading(reference, task, _one_seed(seeds) + 8, size, progress)


def junk_reading(preset="cpu", progress: bool = True, seeds=(0,), size: str = "full") -> dict:
    """The junk world read at its cached reference (`junk_setup`): `reference_reading` at seed
    ``seeds[0] + 11``, ``"rates"`` (`junk_rates` sampled and greedy, seed ``seeds[0] + 5``) and ``"greedy"``,
    its greedy held-out accuracy."""
    from ..evaluation import evaluate
    from ..warmstart.presets import resolve_preset, setup_torch

    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; choose from {list(SIZES)}")
    seed, preset = _one_seed(seeds), resolve_preset(preset)
    setup_torch(preset)
    task, _, reference = _world_reference("junk", preset, size)
    n = SIZES[size]["probe"]
    rates = {k: junk_rates(reference, task, n, seed + 5, t) for k, t in (("sampled", 1.0), ("greedy", 0.0))}
    reading = reference_reading(reference, task, seed + 11, size, progress)
    return {**reading, "rates": rates, "greedy": float(evaluate(reference, task))}


def run_pairs(preset="cpu", progress: bool = True, seeds=(0,), pairs=None, size: str = "full") -> dict:
    """`run_arm` of each arm of ``pairs`` (``{world: arm names}``; None: every arm in every world) from the
    world's cached reference at seed ``seeds[0]``, with the size's budget: ``{world: {arm: its result}}``,
    without the measured ``"seconds"``."""
    from ..progress import progress_bar
    from ..warmstart.presets import resolve_preset, setup_torch

    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; choose from {list(SIZES)}")
    seed, preset, z = _one_seed(seeds), resolve_preset(preset), SIZES[size]
    pairs = {w: tuple(ARMS) for w in WORLDS} if pairs is None else pairs
    setup_torch(preset)
    bar = progress_bar(total=sum(len(a) for a in pairs.values()), desc="credit arms", disable=not progress)
    out = {}
    for world, arms in pairs.items():
        task, p, reference = _world_reference(world, preset, size)
        out[world] = {}
        for a in arms:
            r = run_arm(a, task, p, reference, seed, z["steps"], z["sequences_per_step"], z["samples"])
            out[world][a] = plain({k: v for k, v in r.items() if k != "seconds"})
            bar.update(1)
    bar.close()
    return out


def run_credit_pays(preset="cpu", seeds=3, worlds=WORLDS, arms=None, tiny=False, progress=True) -> dict:
    """Every arm of `ARMS` (or ``arms``) in each world at seeds ``0 .. seeds-1`` (or the list), plus each
    world's reading at the reference; ``{"worlds": {world: {"reading", "reference", "runs": {arm: [..]}}}}``."""
    from ..evaluation import evaluate
    from ..warmstart.presets import resolve_preset, setup_torch
    from ..warmstart.reference import reference_policy

    preset = resolve_preset(preset)
    setup_torch(preset)
    z = dict(SIZES["tiny" if tiny else "full"])
    z["sequences_per_step"] = z["sequences_per_step"] or preset.sequences_per_step
    seeds = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    names = list(arms or ARMS)
    out = {"seeds": seeds, "steps": z["steps"], "sequences_per_step": z["sequences_per_step"], "worlds": {}}
    for world in worlds:
        task, p = world_setup(world, preset)
        if tiny:
            p = dataclasses.replace(p, sft=dataclasses.replace(p.sft, max_steps=5, eval_every=5, batch_size=32))
        reference = reference_policy(p, task=task, progress=False)
        sampled0 = evaluate(reference, task, task.eval_problems() * z["samples"], temperature=1.0, seed=p.seed + 11)
        w = {
            "rates": {
                k: junk_rates(reference, task, z["probe"], p.seed + 5, t)
                for k, t in (("sampled", 1.0), ("greedy", 0.0))
            }
            if task.junk
            else None,
            "reading": reading(reference, task, z["fit_steps"], z["probe"], p.seed),
            "reference": {"sampled": sampled0, "greedy": evaluate(reference, task)},
            "runs": {n: [] for n in names},
        }
        for seed in seeds:
            for n in names:
                r = run_arm(n, task, p, reference, p.seed + seed, z["steps"], z["sequences_per_step"], z["samples"])
                w["runs"][n].append(r)
                if progress:
                    print(f"{world:8s} seed {seed} {n:30s} sampled {r['sampled']:.3f} greedy {r['greedy']:.3f} "
                          f"({r['seconds']:.0f} s)", flush=True)  # fmt: skip
        out["worlds"][world] = w
    out["verdicts"] = verdicts(out)
    return out


def verdicts(res) -> dict:
    """Per world and comparison: the paired differences (sampled held-out accuracy) and their verdict."""
    out = {}
    for world, w in res["worlds"].items():
        acc = {n: [r["sampled"] for r in rs] for n, rs in w["runs"].items()}
        for what, a, b, _claim in COMPARISONS:
            if a in acc and b in acc:
                d = paired(acc[a], acc[b])
                out.setdefault(world, {})[what] = {"diff": d, "verdict": verdict(d, MARGIN, 0.0)}
    return out


def format_result(res) -> str:
    n = len(res["seeds"])
    worlds = list(res["worlds"])
    lines = ["what a critic reads, at each world's reference: EV_t = 1 - Var(R - V(s_t)) / Var(R) by position t",
             f"{'world':8s} {'learned V(s_t), 40 fit steps':34s} {'exact V*(s_t)':34s} {'rise: learned':>13s} {'V*':>6s}"]  # fmt: skip
    for world in worlds:
        r = res["worlds"][world]["reading"]
        fmt = " ".join(f"{x:+.2f}" if not math.isnan(x) else "  nan" for x in r["ev"])
        ofmt = " ".join(f"{x:+.2f}" if not math.isnan(x) else "  nan" for x in r["oracle_ev"])
        lines.append(f"{world:8s} {fmt:34s} {ofmt:34s} {r['rise']:+13.3f} {r['oracle_rise']:+6.3f}")
    for world in worlds:
        rates = res["worlds"][world].get("rates")
        if rates:
            t1, t0 = rates["sampled"], rates["greedy"]
            lines.append(f"{world} reference, {t1['n']} training prompts: answers with junk "
                         f"{t1['junk']:.3f} sampled, {t0['junk']:.3f} greedy; accuracy of the answers without it "
                         f"{t1['right_without']:.3f} sampled, {t0['right_without']:.3f} greedy")  # fmt: skip
    lines += ["", f"sampled held-out accuracy (T = 1, 4 samples of each of 500 problems) after {res['steps']} steps x "
              f"{res['sequences_per_step']} completions, seeds {res['seeds']}: mean [min, max] (greedy beside it)"]  # fmt: skip
    lines.append(f"{'arm':30s} " + " ".join(f"{w:>34s}" for w in worlds))
    ref = " ".join(f"{spread([res['worlds'][w]['reference']['sampled']], '.3f') + ' (' + format(res['worlds'][w]['reference']['greedy'], '.3f') + ')':>34s}" for w in worlds)  # fmt: skip
    lines.append(f"{'the reference':30s} {ref}")
    for name in next(iter(res["worlds"].values()))["runs"]:
        cells = []
        for w in worlds:
            rs = res["worlds"][w]["runs"][name]
            g = sum(r["greedy"] for r in rs) / len(rs)
            cells.append(f"{spread([r['sampled'] for r in rs], '.3f') + f' ({g:.3f})':>34s}")
        lines.append(f"{name:30s} " + " ".join(cells))
    lines += ["", "the sampled training reward over steps 1-5, mean over seeds (how fast each arm moves at first):"]
    for name in next(iter(res["worlds"].values()))["runs"]:
        cells = []
        for w in worlds:
            rs = [r["reward"][:5] for r in res["worlds"][w]["runs"][name] if r.get("reward")]
            cells.append(f"{sum(map(sum, rs)) / max(1, sum(map(len, rs))):>34.3f}" if rs else f"{'-':>34s}")
        lines.append(f"{name:30s} " + " ".join(cells))
    lines += ["", "the comparisons, paired by seed (sampled accuracy):"]
    for what, a, b, claim in COMPARISONS:
        parts = []
        for w in worlds:
            v = res["verdicts"].get(w, {}).get(what)
            if v:
                parts.append(f"{w} [{v['verdict']}] {spread(v['diff'], '+.3f')}")
        lines.append(f"  {claim} ({a} minus {b}): " + "; ".join(parts))
    lines.append(f"verdict: {rule(MARGIN, 0.0, 'the paired difference', n)}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m grpo_edu.studies.credit_pays", description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--preset", default="cpu", choices=("cpu", "gpu", "auto"))
    ap.add_argument("--worlds", nargs="*", default=list(WORLDS), choices=WORLDS)
    ap.add_argument("--tiny", action="store_true", help="a test of the code: seconds, numbers meaningless")
    ap.add_argument("--out", default=None, help="write the result as JSON here")
    a = ap.parse_args(argv)
    if a.seeds < 1:
        ap.error(f"--seeds must be >= 1, got {a.seeds}")
    res = run_credit_pays(a.preset, a.seeds, tuple(a.worlds), tiny=a.tiny)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
    print(format_result(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
