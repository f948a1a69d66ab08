"""`grpo-edu bench`: generation speed, step time, passes and memory of each algorithm."""

from __future__ import annotations

import math
import os
import platform

import torch

from ..measure.compare import ORDER
from ..measure.cost import generation_speed, step_cost
from ..measure.memory import step_memory
from ..presets import make_task, resolve_preset, setup_torch
from ..reference import reference_policy


def run_bench(preset="cpu", seed: int = 0, algorithms=ORDER, n_steps: int = 5, progress: bool = True) -> dict:
    preset = resolve_preset(preset)
    setup_torch(preset, seed)
    task = make_task(preset)
    reference = reference_policy(preset, task=task, progress=progress)
    gen = generation_speed(reference, task, preset.prompts_per_step, preset.group_size, seed=seed)
    rows = {}
    for a in algorithms:
        cost = step_cost(a, preset=preset, reference=reference, n_steps=n_steps, seed=seed)
        mem = step_memory(a, preset=preset, batch_size=preset.sequences_per_step, seed=seed)
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


def _cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} vCPU)"
    except OSError:
        pass
    return f"{platform.processor() or 'CPU'} ({os.cpu_count()} vCPU)"
