"""`grpo-edu variance`: does a baseline lower the variance of the policy gradient, and when?"""

from __future__ import annotations

import copy

from ..algorithms import make_algorithm
from ..evaluation import evaluate
from ..measure.variance import gradient_variance, score_norms
from ..train import train
from ..warmstart.presets import make_task, resolve_preset, setup_torch
from ..warmstart.reference import reference_policy


def run_variance_study(
    preset="cpu",
    targets=(0.75, 0.9),
    n_batches: int = 16,
    seed: int = 0,
    mixed_digits=(1, 2),
    max_steps: int = 400,
    critic_steps: int = 100,
    progress: bool = True,
    configs: dict | None = None,
) -> dict:
    """Relative gradient variance of each estimator at several policy snapshots.

    Snapshots: the reference, then REINFORCE-trained policies first reaching each accuracy
    in ``targets`` (a target the reference already meets is skipped: it would repeat the
    reference's row); at each, both layouts (64 prompts x 8 samples, 512 distinct prompts x
    1) and the score norms of right vs wrong answers with the optimal baseline b*. With
    ``mixed_digits``, also at the reference of a task whose operands have mixed lengths
    (prompts of different difficulty: where a per-prompt baseline should matter most).
    ``configs`` maps an algorithm name to config overrides: the group layout is GRPO's
    (``preset.sequences_per_step / G`` prompts x G, G its ``group_size``), the training REINFORCE's.
    """
    from envs import ArithmeticTask

    configs = configs or {}
    preset = resolve_preset(preset)
    G = make_algorithm("grpo", **configs.get("grpo", {})).config.group_size  # the group layout's G
    setup_torch(preset, seed)
    task = make_task(preset)
    reference = reference_policy(preset, task=task, progress=progress)

    def measure(policy, tsk, label, acc):
        row = {"label": label, "accuracy": acc}
        for layout in ("group", "distinct"):
            row[layout] = gradient_variance(
                policy,
                tsk,
                n_batches=n_batches,
                prompts_per_batch=preset.prompts(G),
                group_size=G,
                layout=layout,
                seed=seed,
                progress=progress,
                critic_steps=critic_steps,
            )
        row["score_norms"] = {k: v for k, v in score_norms(policy, tsk, seed=seed).items() if not hasattr(v, "__len__")}
        return row

    rows = [measure(reference, task, "reference", evaluate(reference, task))]
    policy = copy.deepcopy(reference)
    algo = make_algorithm("reinforce", **configs.get("reinforce", {}))
    for target in [t for t in targets if t > rows[0]["accuracy"]]:
        budget = dict(steps=max_steps, target_accuracy=target, eval_every=5)
        h = train(algo, task, reference, policy, preset, seed=seed, progress=progress, **budget)
        rows.append(measure(policy, task, f"REINFORCE to {target:.0%}", h.final_accuracy))
        # fresh optimizer state; the policy carries on
        algo = make_algorithm("reinforce", **configs.get("reinforce", {}))
        seed += 1
    if mixed_digits:
        mixed = ArithmeticTask(**{**preset.task, "mixed_digits": tuple(mixed_digits)})
        ref_m = reference_policy(
            task=mixed, model_config=preset.model, sft_config=preset.sft, device=preset.device, progress=progress
        )
        rows.append(measure(ref_m, mixed, f"mixed digits {tuple(mixed_digits)} reference", evaluate(ref_m, mixed)))
    return {
        "preset": preset.name,
        "n_batches": n_batches,
        "prompts": preset.prompts(G),
        "group_size": G,
        "rows": rows,
    }
