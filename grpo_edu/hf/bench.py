"""Seconds per GRPO cycle, grpo_edu and TRL side by side (`grpo-edu bench --trl`)."""

from __future__ import annotations

import statistics
import time

import torch

from ._common import _require, batch_of, quiet, require_extra
from .trainer import make_trainer


def _timed(obj, name: str, acc: dict, key: str):
    """Wrap the bound method ``obj.name`` so that its seconds add up in ``acc[key]``."""
    raw = getattr(obj, name)

    def wrapper(*a, **k):
        t0 = time.perf_counter()
        try:
            return raw(*a, **k)
        finally:
            acc[key] += time.perf_counter() - t0

    setattr(obj, name, wrapper)


def _bench_setting(policy, task, cfg, sequences_per_step, repeats, seed):
    """One (epochs, minibatches) setting of `bench_trl`: lists of per-cycle timings.

    Long on purpose: both trainers' cycles are timed in one function, side by side and
    interleaved, so that the same machine noise falls on both (split, the comparison would
    read across two places)."""
    import copy

    import numpy as np

    transformers = _require("transformers")
    from ..algorithms import make_algorithm
    from ..rollout import expand, generate
    from ..train import update

    per_cycle = cfg.epochs * cfg.minibatches
    acc = {"sample": 0.0, "reward": 0.0, "prep": 0.0, "mark": 0.0}
    t_trl = []

    def grpo_edu_cycles(share: bool):
        """A function that runs and times one grpo_edu cycle; ``share``: run each prompt once
        (generation and teacher forcing), the library's default; False: the ablation."""
        algo = make_algorithm("grpo", **cfg.to_dict())
        algo.setup(copy.deepcopy(policy), policy, generator=torch.Generator().manual_seed(seed + 1))
        gen, rng, clock, times = torch.Generator().manual_seed(seed), np.random.default_rng(seed), {"prep": 0.0}, []
        _timed(algo, "prepare", clock, "prep")

        def cycle():
            clock["prep"] = 0.0
            t0 = time.perf_counter()
            problems = task.sample(sequences_per_step // cfg.group_size, rng)
            ro = generate(
                algo.policy,
                task.encode_prompts(problems),
                group_size=cfg.group_size,
                max_new_tokens=task.max_answer_length,
                temperature=cfg.temperature,
                generator=gen,
                share_prompts=share,
            )
            t1 = time.perf_counter()
            scores = task.token_scores(expand(problems, cfg.group_size), ro.completion_ids, ro.mask)
            t2 = time.perf_counter()
            update(algo, ro, scores)  # the rollout carries share_prompts to the update's passes
            t3 = time.perf_counter()
            times.append(
                {"total": t3 - t0, "sample": t1 - t0, "reward": t2 - t1, "prep": clock["prep"],
                 "update": t3 - t2 - clock["prep"]}
            )  # fmt: skip

        return cycle, times

    ours_cycle, t_ours = grpo_edu_cycles(True)
    unshared_cycle, t_unshared = grpo_edu_cycles(False)

    class Alternate(transformers.TrainerCallback):
        def on_train_begin(self, args, state, control, **kw):
            acc["mark"] = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            if state.global_step % per_cycle:
                return
            total = time.perf_counter() - acc["mark"]
            t_trl.append(
                {
                    "total": total,
                    "sample": acc["sample"],
                    "reward": acc["reward"],
                    "prep": acc["prep"] - acc["sample"] - acc["reward"],
                    "update": total - acc["prep"],
                }
            )
            ours_cycle()  # side by side: one grpo_edu cycle after each TRL cycle, outside TRL's clock
            unshared_cycle()
            acc.update(sample=0.0, reward=0.0, prep=0.0, mark=time.perf_counter())

    trainer = make_trainer(
        policy, task, cfg, repeats + 1, sequences_per_step, seed, callbacks=[Alternate()], logging_steps=per_cycle
    )
    _timed(trainer, "_generate_single_turn", acc, "sample")
    _timed(trainer, "_calculate_rewards", acc, "reward")
    _timed(trainer, "_generate_and_score_completions", acc, "prep")
    with quiet():
        trainer.train()
    return {"grpo_edu": t_ours, "trl": t_trl, "grpo_edu_unshared": t_unshared}


def bench_trl(
    policy=None,
    task=None,
    grpo_config=None,
    sequences_per_step: int | None = None,
    settings=((1, 1), (2, 2)),
    repeats: int = 5,
    seed: int = 0,
    threads: int | None = 1,
    preset="cpu",
) -> dict:
    """Seconds per GRPO cycle (sample ``sequences_per_step`` completions, None: the preset's, + update), grpo_edu
    vs TRL's GRPOTrainer, on the same model (TRL trains its export) and the same knobs
    (``grpo_config``, default ``GRPOConfig(unbiased_std=True)``; the cpu preset's task and
    reference policy by default).

    ``settings`` are (epochs, minibatches) pairs: (1, 1) is mu = 1, (2, 2) the course's
    default. They run side by side: after each TRL cycle (a trainer callback) one grpo_edu
    cycle runs, outside TRL's clock, then one of grpo_edu with ``share_prompts=False`` (every
    row runs its own copy of the prompt, as TRL does: the ablation of the one design
    difference that is not a knob); the first cycle of each is warm-up; each number is the
    median of ``repeats``. A cycle is split into ``sample`` (generation), ``reward`` (the
    same reward, ``task.token_scores``), ``prep`` (advantages and the no-grad log-probs of
    pi_ref and, in TRL when it recomputes them (gradient_accumulation_steps not a multiple of
    steps_per_generation x num_iterations), of pi_old; in TRL also the decoding of the completions
    to text, padding and metrics) and ``update`` (the rest: forward/backward/optimizer
    steps and the trainer's bookkeeping).
    """
    require_extra()  # before the reference and the first cycle
    from ..algorithms import GRPOConfig
    from ..warmstart.presets import make_task, resolve_preset
    from ..warmstart.reference import reference_policy

    preset = resolve_preset(preset)
    sequences_per_step = batch_of(sequences_per_step, preset)

    old_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        task = task if task is not None else make_task(preset)
        if policy is None:
            policy = reference_policy(preset, task=task, progress=False)
        base = grpo_config or GRPOConfig(unbiased_std=True)
        rows = []
        for epochs, minibatches in settings:
            cfg = type(base)(**{**base.to_dict(), "epochs": epochs, "minibatches": minibatches})
            runs = _bench_setting(policy, task, cfg, sequences_per_step, repeats, seed)
            med = {who: {k: statistics.median(r[k] for r in t[1:]) for k in t[0]} for who, t in runs.items()}
            rows.append(
                {
                    "epochs": epochs,
                    "minibatches": minibatches,
                    **med,
                    "ratio": med["grpo_edu"]["total"] / med["trl"]["total"],
                    "ratio_unshared": med["grpo_edu_unshared"]["total"] / med["trl"]["total"],
                    "cycles": len(runs["trl"]) - 1,
                }
            )
        return {
            "settings": rows,
            "threads": torch.get_num_threads(),
            "sequences_per_step": sequences_per_step,
            "group_size": base.group_size,
            "beta": base.beta,
            "versions": {m: _require(m).__version__ for m in ("trl", "transformers", "torch")},
        }
    finally:
        torch.set_num_threads(old_threads)


def format_bench_trl(result: dict) -> str:
    """The `bench_trl` result as a text table (seconds per cycle, 4 decimals)."""
    r = result
    lines = [
        f"seconds per GRPO cycle ({r['sequences_per_step']} completions, G={r['group_size']}, "
        f"beta={r['beta']}), median of {r['settings'][0]['cycles']}, {r['threads']} thread(s); "
        f"trl {r['versions']['trl']}, transformers {r['versions']['transformers']}, "
        f"torch {r['versions']['torch']}",
        f"{'setting':<37}{'cycle s':>9}{'sample':>9}{'reward':>9}{'prep':>9}{'update':>9}",
    ]
    for row in r["settings"]:
        name = "mu=1" if row["epochs"] == row["minibatches"] == 1 else f"{row['epochs']} ep x {row['minibatches']} mb"
        for who, label in (("grpo_edu", "grpo_edu"), ("grpo_edu_unshared", "grpo_edu unshared"), ("trl", "trl")):
            d = row[who]
            lines.append(
                f"{name + ' ' + label:<37}"
                + "".join(f"{d[k]:>9.4f}" for k in ("total", "sample", "reward", "prep", "update"))
            )
        lines.append(f"{name + ' grpo_edu / TRL':<37}{row['ratio']:>9.4f}")
        lines.append(f"{name + ' grpo_edu unshared / TRL':<37}{row['ratio_unshared']:>9.4f}")
    return "\n".join(lines)
