"""`grpo-edu bench`: generation speed, step time, passes and memory of each algorithm."""

from __future__ import annotations

import math
import os
import platform
import time

import torch

from ..algorithms import GRPOConfig, make_algorithm
from ..measure.compare import ORDER
from ..measure.cost import step_cost
from ..measure.memory import step_memory
from ..rollout import generate
from ..warmstart.presets import make_task, resolve_preset, setup_torch
from ..warmstart.reference import reference_policy


def run_bench(
    preset="cpu", seed: int = 0, algorithms=ORDER, n_steps: int = 5, progress: bool = True, configs=None
) -> dict:
    """Generation speed in GRPO's layout (``preset.sequences_per_step / G`` prompts x G, G GRPO's
    ``group_size``), then each algorithm's step cost and memory with its own config: ``configs``
    maps an algorithm name to config overrides (``{"grpo": {"group_size": 16}}``)."""

    def algorithm(name):  # a fresh one per measurement (each sets it up on its own policy)
        return make_algorithm(name, **(configs or {}).get(name, {}))

    preset = resolve_preset(preset)
    setup_torch(preset, seed)
    task = make_task(preset)
    reference = reference_policy(preset, task=task, progress=progress)
    G = algorithm("grpo").config.group_size
    gen = generation_speed(reference, task, preset.prompts(G), G, seed=seed)
    rows = {}
    for a in algorithms:
        cost = step_cost(algorithm(a), preset=preset, reference=reference, n_steps=n_steps, seed=seed)
        mem = step_memory(algorithm(a), preset=preset, batch_size=preset.sequences_per_step, seed=seed)
        rows[a] = {
            "seconds_per_step": cost["seconds_per_step"],
            "generation_seconds": cost["generation_seconds"],
            "update_seconds": cost["update_seconds"],
            "updates_per_step": cost["updates_per_step"],
            "passes_per_update": cost["passes_per_update"],
            "peak_step_mb": mem["measured_peak_step"] / 1e6,
            "peak_with_rollout_mb": (mem["measured_peak_with_rollout"] or math.nan) / 1e6,
            "analytic_mb": mem["analytic_total"] / 1e6,
            "memory_method": mem["method"],
        }
    dev = torch.cuda.get_device_name() if preset.device.startswith("cuda") else _cpu_name()
    return {
        "preset": preset.name,
        "device": dev,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "generation": gen,
        "algorithms": rows,
    }


def generation_speed(
    policy, task, n_prompts: int = 64, group_size: int = GRPOConfig.group_size, repeats: int = 5, seed: int = 0
) -> dict:
    """MEASURED: tokens/s of batched sampling (alternating, median of ``repeats``, same prompts
    and seeds) recomputing the prefix at every token, with the KV cache, and with the cache and
    each prompt run once for its ``group_size`` rows (`generate`'s default). "speedup": what the
    cache buys; "share_speedup": what sharing the prompt adds."""
    prompts = task.encode_prompts(task.sample(n_prompts, seed))
    modes = {"uncached": dict(use_cache=False), "cached": dict(share_prompts=False), "shared": {}}
    times = {m: [] for m in modes}
    tokens = 0
    for r in range(repeats + 1):
        for mode, kw in modes.items():
            g = torch.Generator(device=next(policy.parameters()).device).manual_seed(seed + r)
            t0 = time.perf_counter()
            ro = generate(
                policy, prompts, group_size=group_size, max_new_tokens=task.max_answer_length, generator=g, **kw
            )
            if ro.mask.is_cuda:
                torch.cuda.synchronize()
            if r:  # the first round warms up
                times[mode].append(time.perf_counter() - t0)
            tokens = ro.batch_size * ro.completion_ids.shape[1]
    med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    return {
        "batch": n_prompts * group_size,
        "tokens_per_call": tokens,
        "shared_tokens_per_s": tokens / med["shared"],
        "cached_tokens_per_s": tokens / med["cached"],
        "uncached_tokens_per_s": tokens / med["uncached"],
        "speedup": med["uncached"] / med["cached"],
        "share_speedup": med["cached"] / med["shared"],
    }


def _cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} vCPU)"
    except OSError:
        pass
    return f"{platform.processor() or 'CPU'} ({os.cpu_count()} vCPU)"
