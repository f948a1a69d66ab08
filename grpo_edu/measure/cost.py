"""What one training step costs: forward and backward passes, and seconds (``step_cost``)."""

from __future__ import annotations

import statistics
import time

import torch

from ..train import update
from ..warmstart.presets import resolve_preset
from .memory import setup_step


def _count_passes(algo, counts: dict, phase: list) -> list:
    """Hooks counting, under ``phase[0]``, forward calls of each model and backward passes (a
    hook on each trained model's first parameter). In generation every call counts (one per
    token); outside it a call continuing a KV cache is the rest of the same pass (a shared
    prompt, then the completions on its cache)."""

    def bump(key, args=()):
        cache = args[1] if len(args) > 1 else None
        if phase[0] != "generation" and cache is not None and cache.length > 0:
            return
        counts[phase[0], key] = counts.get((phase[0], key), 0) + 1

    handles = []
    critic = algo.critic.model if algo.critic is not None else None
    for name, m in (("policy", algo.policy), ("reference", algo.reference), ("critic", critic)):
        if m is not None:
            handles.append(m.register_forward_pre_hook(lambda _, args, k=f"{name}_forward": bump(k, args)))
            p = next(m.parameters())
            if p.requires_grad:
                handles.append(p.register_post_accumulate_grad_hook(lambda _, k=f"{name}_backward": bump(k)))
    return handles


def step_cost(
    algorithm_name, preset="cpu", reference=None, n_steps=5, seed=0, with_reference=None, share_prompts=True
) -> dict:
    """MEASURED: what one training step (``sample_batch``, then ``update``) does: forward and
    backward passes of the policy / reference / critic per step and per update, counted by
    hooks (generation, one policy forward per token, apart); seconds of generation and update,
    medians over ``n_steps`` after an uncounted warm-up. ``reference=None``: a random-init
    policy (the counts do not depend on the weights). The reference is attached when used
    (beta > 0) or ``with_reference=True``, and run only when used (as in ``train()``).
    ``share_prompts=False``: every row runs its own prompt (GRPO's G rows of a prompt too), so that
    GRPO's update is timed like for like with a rung that has one answer per prompt.
    """
    if n_steps < 1:
        raise ValueError(f"n_steps must be >= 1, got {n_steps}")
    algo, device, sample = setup_step(
        algorithm_name, reference, preset, seed, with_reference, share_prompts=share_prompts
    )
    n_prompts = resolve_preset(preset).prompts(algo.config.group_size)  # the algorithm's G
    phase, counts = ["generation"], {}
    handles = _count_passes(algo, counts, phase)

    def timed(name, fn, *args):
        phase[0] = name
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        out = fn(*args)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return out, time.perf_counter() - t0

    times, updates = [], []
    try:
        for step in range(n_steps + 1):
            if step == 1:
                counts.clear()  # the warm-up step is not counted
            (ro, scores, _, _), t_gen = timed("generation", sample, n_prompts * algo.config.group_size)
            stats, t_upd = timed("update", update, algo, ro, scores)
            times.append((t_gen, t_upd))
            updates.append(stats["updates"])
    finally:
        for h in handles:
            h.remove()
    u = statistics.mean(updates[1:])
    keys = [f"{m}_{d}" for m in ("policy", "reference", "critic") for d in ("forward", "backward")]
    per_step = {k: counts.get(("update", k), 0) / n_steps for k in keys}
    t_gen, t_upd = zip(*times[1:], strict=True)
    return {
        "algorithm": algo.name,
        "device": str(device),
        "n_steps": n_steps,
        "share_prompts": share_prompts,
        "sequences_per_step": n_prompts * algo.config.group_size,
        "updates_per_step": u,
        "generation_forwards_per_step": counts.get(("generation", "policy_forward"), 0) / n_steps,
        "passes_per_step": per_step,
        "passes_per_update": {k: v / u for k, v in per_step.items()},
        "seconds_per_step": statistics.median(a + b for a, b in times[1:]),
        "generation_seconds": statistics.median(t_gen),
        "update_seconds": statistics.median(t_upd),
    }
