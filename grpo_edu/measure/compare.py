"""The main job (`grpo-edu compare`): the four rungs trained from one reference with one budget,
side by side; their gradient variance and step memory at the reference; where each wins; the
derivation's claims tested on the result."""

from __future__ import annotations

import math
import statistics
import time

import torch

from ..algorithms import ALGORITHMS, make_algorithm
from ..train import train
from ..warmstart.presets import make_task, resolve_preset, setup_torch
from ..warmstart.reference import reference_policy
from .common import reach
from .memory import step_memory
from .variance import GROUP_ESTIMATORS, fit_critic, gradient_variance
from .verdicts import above, verdict

ORDER = tuple(ALGORITHMS)  # the ladder, bottom up
LABELS = {"reinforce": "REINFORCE", "baseline": "REINFORCE + critic baseline", "ppo": "PPO + critic", "grpo": "GRPO"}
# the gradient estimator each algorithm applies (measure.variance names; PPO's: GAE with the critic, whitened)
ESTIMATOR_OF = {"reinforce": "raw", "baseline": "critic", "ppo": "ppo", "grpo": "group_norm"}
TARGET = 0.9  # the accuracy whose cost (steps, completions, seconds) the comparison reports


def _row(name, algo, histories) -> dict:
    """One algorithm's numbers over its seeds (lists: one entry per seed)."""
    h0, per_step = histories[0], [h.steps[-1]["seconds"] / len(h.steps) for h in histories if h.steps]
    return {
        "label": LABELS[name],
        "initial_accuracy": h0.initial_accuracy,
        "final_accuracy": [h.final_accuracy for h in histories],
        "steps": len(h0.steps),
        "samples": h0.steps[-1]["samples"] if h0.steps else 0,
        "train_seconds": [h.steps[-1]["seconds"] if h.steps else 0.0 for h in histories],
        "seconds_per_step": statistics.mean(per_step) if h0.steps else math.nan,
        "steps_to_target": [h.first_reaching(TARGET, "step") for h in histories],
        "seconds_to_target": [h.first_reaching(TARGET, "seconds") for h in histories],
        "samples_to_target": [h.first_reaching(TARGET, "samples") for h in histories],
        "updates_per_step": algo.config.epochs * algo.config.minibatches,
        "minibatches": algo.config.minibatches,
        "histories": [h.to_dict() for h in histories],
    }


def run_comparison(
    preset="cpu",
    seeds: int = 1,
    budget: str = "samples",
    steps: int | None = None,
    seconds: float | None = None,
    algorithms=ORDER,
    variance_batches: int = 8,
    critic_steps: int = 50,
    measure: bool = True,
    progress: bool = True,
    configs: dict | None = None,
) -> dict:
    """Train each algorithm from one reference with one budget, ``seeds`` times (RL seeds
    ``preset.seed + k``); measure variance and memory once, at the reference.

    budget="samples": every algorithm sees ``steps * sequences_per_step`` completions;
    "seconds": ``seconds`` of training wall time each (evaluation excluded). ``configs``
    maps an algorithm name to config overrides. One SFT reference: references differ by
    more than RL seeds do (`grpo-edu ablate`).
    """
    if budget not in ("samples", "seconds"):
        raise ValueError(f"budget must be 'samples' or 'seconds', got {budget!r}")
    if budget == "seconds" and seconds is None:
        raise ValueError("budget='seconds' needs seconds=")
    unknown = [a for a in algorithms if a not in ORDER]
    if unknown:
        raise ValueError(f"unknown algorithms {unknown}; choose from {list(ORDER)}")
    if not isinstance(seeds, int) or seeds < 1:
        raise ValueError(f"seeds must be a positive integer, got {seeds!r}")
    preset = resolve_preset(preset)
    setup_torch(preset, preset.seed)
    task = make_task(preset)
    t0 = time.perf_counter()
    reference, ref_info = reference_policy(preset, task=task, progress=progress, return_info=True)
    n_samples = (steps or preset.steps) * preset.sequences_per_step
    seed_list = [preset.seed + k for k in range(seeds)]
    out = {
        "preset": preset.name,
        "device": preset.device,
        "seeds": seed_list,
        "budget": budget,
        "samples_budget": n_samples if budget == "samples" else None,
        "seconds_budget": seconds if budget == "seconds" else None,
        "target": TARGET,
        "sequences_per_step": preset.sequences_per_step,
        "reference": {"accuracy": ref_info["accuracy"], "loaded": ref_info["loaded"]},
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "algorithms": {},
    }
    kw = dict(task=task, reference=reference, preset=preset, progress=progress)
    kw |= dict(samples=n_samples) if budget == "samples" else dict(seconds=seconds)
    for name in algorithms:
        runs = []
        for seed in seed_list:
            algo = make_algorithm(name, **(configs or {}).get(name, {}))
            runs.append(train(algo, seed=seed, name=LABELS[name], **kw))
        out["algorithms"][name] = _row(name, algo, runs)
    if measure:
        args = (variance_batches, progress, algorithms, critic_steps, configs)
        measure_at_reference(out, preset, task, reference, *args)
    out["wins"] = where_each_wins(out)
    out["claims"] = claims(out)
    out["total_seconds"] = time.perf_counter() - t0
    return out


def _worst(values):
    """The largest value over seeds, None when some seed never got there."""
    return None if any(v is None for v in values) else max(values)


def where_each_wins(result: dict) -> dict:
    """Which rung is best (lowest) on each measure: completions and seconds to the target (the
    worst seed counts: missing on one seed loses), seconds per step, peak step memory; and
    the highest final accuracy of the worst seed."""
    rows = result["algorithms"]
    measures = {
        "completions to target": {a: _worst(r["samples_to_target"]) for a, r in rows.items()},
        "seconds to target": {a: _worst(r["seconds_to_target"]) for a, r in rows.items()},
        "seconds per step": {a: r["seconds_per_step"] for a, r in rows.items()},
        "peak step memory (MB)": {a: r.get("peak_step_memory_mb") for a, r in rows.items()},
    }
    wins = {}
    for what, vals in measures.items():
        ok = {a: v for a, v in vals.items() if v is not None and not (isinstance(v, float) and math.isnan(v))}
        wins[what] = {"winner": min(ok, key=ok.get) if ok else None, "values": vals}
    finals = {a: min(r["final_accuracy"]) for a, r in rows.items()}
    wins["final accuracy (worst seed)"] = {"winner": max(finals, key=finals.get), "values": finals}
    return wins


def measure_at_reference(
    out, preset, task, reference, variance_batches, progress, algorithms, critic_steps, configs=None
):
    """Into ``out``: each method's estimator variance in the layout it trains with (prompts x 1;
    GRPO prompts x G), one critic for both layouts (PPO's estimator its own: GAE with that critic, whitened
    as `PPO.prepare` whitens); the memory of one step. Each algorithm is built with its ``configs``
    overrides, as it trained: G is GRPO's ``config.group_size``, PPO's advantage follows its config."""

    def algorithm(name):  # a fresh one each time (a measurement sets it up on its own policy)
        return make_algorithm(name, **(configs or {}).get(name, {}))

    G = algorithm("grpo").config.group_size  # the group layout is GRPO's: its prompts x its G
    est = [ESTIMATOR_OF[a] for a in algorithms]
    critic = None
    if {"critic", "gae", "ppo"} & set(est):
        critic, fit = fit_critic(reference, task, steps=critic_steps, seed=preset.seed + 1, progress=progress)
    kw = dict(n_batches=variance_batches, prompts_per_batch=preset.prompts(G), group_size=G)
    kw.update(seed=preset.seed, progress=progress, critic=critic, ppo_config=(configs or {}).get("ppo", {}))
    extra = ["batch_mean", "group_mean", "group_loo"]
    var = gradient_variance(reference, task, estimators=tuple(dict.fromkeys(est + extra)), **kw)
    if critic is not None:
        var["_meta"]["critic_explained_variance"] = fit["explained_variance"]
    out["gradient_variance"] = var  # all estimators on the same prompts x G batches
    solo = [e for e in est if e not in GROUP_ESTIMATORS]
    var_distinct = gradient_variance(reference, task, estimators=tuple(solo), layout="distinct", **kw) if solo else {}
    out["gradient_variance_distinct"] = var_distinct  # the same number of sequences, prompts x 1
    mem_kw = dict(preset=preset, batch_size=preset.sequences_per_step, seed=preset.seed)
    out["memory"] = mem = {a: step_memory(algorithm(a), **mem_kw) for a in algorithms}
    grpo_peak = mem["grpo"]["measured_peak_step"] if "grpo" in mem else math.nan
    if "grpo" in mem:  # the same step with every row running its own prompt: the critic alone vs PPO
        unshared = step_memory(algorithm("grpo"), share_prompts=False, **mem_kw)["measured_peak_step"]
        out["algorithms"]["grpo"]["peak_step_memory_unshared_mb"] = unshared / 1e6
    for a in algorithms:
        row, (_, own) = out["algorithms"][a], own_variance(out, a)
        row.update({k: own[k] for k in ("relative_variance", "relative_variance_corrected", "mean_cosine")})
        row["peak_step_memory_mb"] = mem[a]["measured_peak_step"] / 1e6
        row["peak_with_rollout_mb"] = (mem[a]["measured_peak_with_rollout"] or math.nan) / 1e6
        row["memory_ratio_to_grpo"] = mem[a]["measured_peak_step"] / grpo_peak
        row["analytic_mb"] = mem[a]["analytic_total"] / 1e6
        b = mem[a]["breakdown"]
        row["critic_mb"] = (b["critic_params"] + b["critic_grads"] + b["critic_optimizer_state"]) / 1e6
        row["rows_per_update"] = preset.sequences_per_step // row["minibatches"]
        # one completion per prompt has nothing to share: the same step with every row's own prompt
        row.setdefault("peak_step_memory_unshared_mb", row["peak_step_memory_mb"])


def own_variance(result: dict, algorithm: str) -> tuple[str, dict]:
    """("64x8" | "512x1", stats): ``algorithm``'s estimator in the layout it trains with (group
    estimators on prompts x G, the others on distinct prompts), read from the measurement."""
    grouped = ESTIMATOR_OF[algorithm] in GROUP_ESTIMATORS
    var = result["gradient_variance" if grouped else "gradient_variance_distinct"]
    meta = var["_meta"]
    return f"{meta['prompts_per_batch']}x{meta['group_size'] if grouped else 1}", var[ESTIMATOR_OF[algorithm]]


def _compare_ranges(lower_is_better_a, b, seeds: int = 2):
    """`verdicts.above` of b over a (a is better when lower), every seed of one against every seed
    of the other: holds when every a is below every b, fails here when every b is below every a
    (a tie is not a reversal: completions to the target come in whole evaluation intervals), else
    depends. A rung that never reached the target has no value; when neither did, the measure
    ranks nothing: depends. With one seed a comparison between two rungs has no spread: "one
    seed" (no verdict)."""
    a, b = ([x for x in v if x is not None] for v in (lower_is_better_a, b))
    if seeds < 2 and a and b:
        return "one seed"
    if not a and not b:
        return "depends"
    if not a:
        return "fails here"
    if not b:
        return "holds"
    return above(b, a, margin=0.0, null=-1e-9)


def _by_margin(ratio: float, below: float = 0.9, above_: float = 1.1) -> str:
    """One measurement against another (no seeds): `verdicts.verdict` of 1 - ratio, holds below
    ``below``x, fails here at or above ``above_``x, depends between."""
    return verdict([1.0 - ratio], margin=1.0 - below, null=1.0 - above_)


def claims(result: dict) -> list[dict]:
    """The derivation's claims, each with the measurement that tests it here and a verdict:
    "holds", "fails here", "depends" (ranges over seeds overlap) or "one seed" (no spread to
    decide between rungs). One measurement without seeds holds or fails by its stated margin."""
    rows, n, out = result["algorithms"], len(result["seeds"]), []
    have = set(rows)

    def add(claim, measurement, verdict):
        out.append({"claim": claim, "measurement": measurement, "verdict": verdict})

    def to_target(a, key="samples_to_target", spec=","):
        return reach(rows[a][key], spec)

    gains = {r["label"]: min(r["final_accuracy"]) - r["initial_accuracy"] for r in rows.values()}
    gained = ", ".join(f"{k} {g:+.3f}" for k, g in gains.items())
    add(
        "every rung learns from the same reference",
        f"held-out gain after the budget{', worst seed' if n > 1 else ''}: {gained}",
        verdict(list(gains.values()), margin=0.1, null=0.02),
    )
    pct = f"{TARGET:.0%}"
    if {"reinforce", "ppo", "grpo"} <= have:
        reuse = rows["ppo"]["samples_to_target"] + rows["grpo"]["samples_to_target"]
        add(
            "reusing each batch (PPO, GRPO: epochs x minibatches updates) learns more per sampled answer",
            f"completions to {pct}: PPO {to_target('ppo')}, GRPO {to_target('grpo')} vs REINFORCE {to_target('reinforce')}",
            _compare_ranges(reuse, rows["reinforce"]["samples_to_target"], n),
        )
    if {"ppo", "grpo"} <= have:
        add(
            "a learned critic (PPO) beats the group baseline (GRPO) per sampled answer",
            f"completions to {pct}: PPO {to_target('ppo')} vs GRPO {to_target('grpo')}",
            _compare_ranges(rows["ppo"]["samples_to_target"], rows["grpo"]["samples_to_target"], n),
        )
        add(
            "GRPO reaches the target in less wall time than PPO",
            f"seconds to {pct}: GRPO {to_target('grpo', 'seconds_to_target', '.1f')} vs PPO "
            f"{to_target('ppo', 'seconds_to_target', '.1f')}",
            _compare_ranges(rows["grpo"]["seconds_to_target"], rows["ppo"]["seconds_to_target"], n),
        )
    if {"ppo", "grpo"} <= have and "peak_step_memory_unshared_mb" in rows["grpo"]:
        unshared = rows["grpo"]["peak_step_memory_unshared_mb"]
        ratio = rows["ppo"]["peak_step_memory_mb"] / unshared
        add(
            "dropping the critic saves memory (PPO vs GRPO, every row running its own prompt)",
            f"peak step memory PPO / GRPO = {ratio:.2f} at this size (activations dominate here; "
            "towards 1.8 when parameters dominate: grpo-edu bench --memory-sweep)",
            verdict([ratio - 1.0], margin=0.02, null=0.0),
        )
        shared = unshared / rows["grpo"]["peak_step_memory_mb"]
        add(
            "GRPO's G completions per prompt let it run each prompt once (fewer activations)",
            f"GRPO's peak step memory, every row's own prompt / each prompt once = {shared:.2f}",
            verdict([shared - 1.0], margin=0.02, null=0.0),
        )
    if "relative_variance_corrected" in rows.get("baseline", {}) and "reinforce" in have:
        raw, base = rows["reinforce"]["relative_variance_corrected"], rows["baseline"]["relative_variance_corrected"]
        add(
            "a baseline lowers the variance of the policy gradient",
            f"relative variance at the reference ({own_variance(result, 'baseline')[0]}): critic baseline "
            f"{base:.3f} vs REINFORCE {raw:.3f} (holds below 0.9x, fails above 1.1x)",
            _by_margin(base / raw),
        )
    ev = result.get("gradient_variance", {}).get("_meta", {}).get("critic_explained_variance")
    if ev is not None:
        add(
            "the critic learns to predict the reward from the prompt",
            f"explained variance of R by V(s_0) at the reference: {ev:.3f} (holds above 0.1)",
            verdict([ev], margin=0.1, null=0.02),
        )
    if "relative_variance_corrected" in rows.get("grpo", {}) and "reinforce" in have:
        raw, grp = rows["reinforce"]["relative_variance_corrected"], rows["grpo"]["relative_variance_corrected"]
        add(
            "the group baseline gives GRPO a less noisy gradient than plain REINFORCE",
            f"relative variance, each in its own layout: GRPO ({own_variance(result, 'grpo')[0]}) {grp:.3f} vs "
            f"REINFORCE ({own_variance(result, 'reinforce')[0]}) {raw:.3f} (holds below 0.9x, fails above 1.1x)",
            _by_margin(grp / raw),
        )
    return out
