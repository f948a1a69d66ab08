"""Which lessons hang on one reference: the same short runs from references trained with other seeds.

A notebook's reference is SFT from one seed; ``$GRPO_EDU_SEED_SHIFT`` moves that seed (and every
other one). A lesson that holds on the reference of shift 0 may not hold on the next. This study
trains the reference of each shift again and repeats, from it:

- **spread**: GRPO in the spread world (notebook 08): the held-out accuracy of the reference and
  after ``spread_steps`` steps, overall and on the hard prompts (an operand >= the spread bound);
- **reward_model**: GRPO with beta = 0 against reward models r_phi of each size in ``sizes``
  (notebooks 07 and 10): r_phi's held-out accuracy against "always wrong", and the gold (exact)
  greedy held-out accuracy at the start and after ``rm_steps`` steps.

Every number is MEASURED; nothing is fitted. Run it from the shell:

    python -m grpo_edu.studies.reference_seeds --shifts 0-7

(about a minute per shift and part on one CPU thread).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
from contextlib import contextmanager

import numpy as np

from ..warmstart.presets import SEED_SHIFT_ENV

PARTS = ("spread", "reward_model")


@contextmanager
def _shift(k: int):
    old = os.environ.get(SEED_SHIFT_ENV)
    os.environ[SEED_SHIFT_ENV] = str(k)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(SEED_SHIFT_ENV, None)
        else:
            os.environ[SEED_SHIFT_ENV] = old


def _spread(steps: int) -> dict:
    from .. import evaluate, get_preset, make_algorithm, make_task, reference_policy, setup_torch, train
    from ..measure.difficulty import easy_mask
    from ..warmstart.presets import SPREAD

    preset = get_preset("cpu", world="spread")
    setup_torch(preset)
    reference = reference_policy(preset, progress=False)
    task = make_task(preset)
    bound = round(SPREAD["operand_fraction"] * 10 ** preset.task["digits"])
    hard = ~easy_mask(task.eval_problems(), bound)

    def parts(policy):
        _, correct = evaluate(policy, task, return_correct=True)
        correct = correct.numpy().astype(float)
        return float(correct.mean()), float(correct[hard].mean())

    start = parts(reference)
    policy = copy.deepcopy(reference)
    train(make_algorithm("grpo"), task, reference, policy, preset, steps=steps, seed=preset.seed, progress=False)
    end = parts(policy)
    return {"start": start[0], "end": end[0], "hard_start": start[1], "hard_end": end[1]}


def _reward_model(sizes, steps: int) -> dict:
    from .. import evaluate, get_preset, make_task, reference_policy, setup_torch
    from ..demos.reward_model import RewardModelConfig, train_reward_model
    from .regimes.reward_model import rl_against

    preset = get_preset("cpu")
    setup_torch(preset)
    reference = reference_policy(preset, progress=False)
    task = make_task(preset)
    out = {"start": float(evaluate(reference, task))}
    for n in sizes:
        rm, info = train_reward_model(reference, task, RewardModelConfig(n_labels=n, seed=preset.seed), False)
        curve = rl_against(rm, reference, task, preset, 0.0, "loss", preset.seed, steps, eval_every=steps)[0]
        out[n] = {"val_accuracy": info["val_accuracy"], "always_wrong": info["always_wrong"], "gold": curve["gold"][-1]}
    return out


def run(shifts, parts=PARTS, spread_steps: int = 100, sizes=(8192, 32768), rm_steps: int = 60, progress=True) -> dict:
    """Each part of ``parts`` from the reference of every seed shift in ``shifts``: {part: {shift: row}}."""
    shifts = list(shifts)
    if not shifts or any(not isinstance(k, int) or k < 0 for k in shifts):
        raise ValueError(f"shifts must be non-negative integers, got {shifts}")
    bad = [p for p in parts if p not in PARTS]
    if bad:
        raise ValueError(f"unknown part(s) {bad}: choose from {list(PARTS)}")
    from ..progress import progress_bar as tqdm

    out = {p: {} for p in parts}
    with tqdm(total=len(shifts) * len(parts), desc="reference seeds", disable=not progress) as pbar:
        for k in shifts:
            with _shift(k):
                if "spread" in parts:
                    out["spread"][k] = _spread(spread_steps)
                    pbar.update(1)
                if "reward_model" in parts:
                    out["reward_model"][k] = _reward_model(sizes, rm_steps)
                    pbar.update(1)
    return out


def report(res: dict) -> str:
    """The table the command prints, one line per shift, then mean, std and [min, max] of each gain."""
    lines = []
    if res.get("spread"):
        rows = res["spread"]
        lines.append("spread world, GRPO from each shift's reference (greedy held-out accuracy):")
        for k, r in rows.items():
            lines.append(
                f"  shift {k}: all {r['start']:.3f} -> {r['end']:.3f} ({r['end'] - r['start']:+.3f}), "
                f"hard prompts {r['hard_start']:.3f} -> {r['hard_end']:.3f} ({r['hard_end'] - r['hard_start']:+.3f})"
            )
        for key, name in (("", "all"), ("hard_", "hard")):
            g = np.array([r[f"{key}end"] - r[f"{key}start"] for r in rows.values()])
            lines.append(f"  gain on {name}: mean {g.mean():+.3f}, std {g.std(ddof=1) if len(g) > 1 else 0:.3f}, "
                         f"[{g.min():+.3f}, {g.max():+.3f}] over {len(g)} references")  # fmt: skip
    if res.get("reward_model"):
        rows = res["reward_model"]
        sizes = [n for n in next(iter(rows.values())) if n != "start"]
        lines.append("reward models, GRPO with beta 0 against each r_phi (gold = exact greedy held-out accuracy):")
        for k, r in rows.items():
            cells = ", ".join(
                f"{n} labels: r_phi {r[n]['val_accuracy']:.3f} (always wrong {r[n]['always_wrong']:.3f}), "
                f"gold {r['start']:.3f} -> {r[n]['gold']:.3f}"
                for n in sizes
            )
            lines.append(f"  shift {k}: {cells}")
        for n in sizes:
            g = np.array([r[n]["gold"] - r["start"] for r in rows.values()])
            beat = sum(r[n]["val_accuracy"] > r[n]["always_wrong"] for r in rows.values())
            lines.append(
                f"  {n} labels: gold change mean {g.mean():+.3f}, std {g.std(ddof=1) if len(g) > 1 else 0:.3f}, "
                f"[{g.min():+.3f}, {g.max():+.3f}]; falls on {int((g < 0).sum())} of {len(g)} references; "
                f"r_phi beats 'always wrong' on {beat}"
            )
    return "\n".join(lines)


def _shifts(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        try:
            out += list(range(int(a), int(b) + 1)) if b else [int(a)]
        except ValueError:
            raise argparse.ArgumentTypeError(f"--shifts takes e.g. 0-7 or 0,3,5; got {text!r}") from None
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m grpo_edu.studies.reference_seeds", description=__doc__.split("\n")[0])
    p.add_argument("--shifts", type=_shifts, default=_shifts("0-7"), help="seed shifts, e.g. 0-7 (default)")
    p.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the numbers to this file")
    args = p.parse_args(argv)
    try:
        res = run(args.shifts, tuple(x for x in args.parts.split(",") if x))
    except ValueError as e:
        p.error(str(e))
    print(report(res))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({p: {str(k): v for k, v in rows.items()} for p, rows in res.items()}, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
