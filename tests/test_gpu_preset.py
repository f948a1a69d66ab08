"""The gpu preset at its real shapes, built and stepped on the CPU (device forced to cpu), from a
random-init model (no SFT): one RL step of each algorithm.

By default each step keeps every shape of a gpu-preset row (3-digit task, d_model 256, 4 layers,
16 positions, GRPO's default 8 completions per prompt) with 16 times fewer prompts than the preset's
4096 completions per step. ``GRPO_EDU_GPU_PRESET_FULL=1`` runs the full 4096-completion step too,
which takes minutes on one CPU thread (``pytest -s`` prints each step's seconds), so it is off by
default.
"""

import math
import os
import time
from dataclasses import replace

import pytest
import torch

from grpo_edu import TinyGPT, get_preset, make_algorithm, make_task, train
from grpo_edu.algorithms import ALGORITHMS

FULL = os.environ.get("GRPO_EDU_GPU_PRESET_FULL") == "1"


@pytest.fixture(scope="module")
def gpu_on_cpu():
    preset = get_preset("gpu", device="cpu")
    task = make_task(replace(preset, task={**preset.task, "eval_size": 64}))  # the evaluation is no RL shape
    torch.manual_seed(0)
    return preset, task, TinyGPT(preset.model)  # random init: no SFT


def test_the_gpu_preset_has_its_sizes_on_the_cpu(gpu_on_cpu):
    preset, task, model = gpu_on_cpu
    assert preset.name == "gpu" and preset.device == "cpu" and next(model.parameters()).device.type == "cpu"
    assert (preset.model.d_model, preset.model.n_layers, preset.model.max_seq_len) == (256, 4, 16)
    assert task.digits == 3 and task.prompt_length + task.max_answer_length <= preset.model.max_seq_len
    assert make_task(preset).config == {**task.config, "eval_size": 1000}  # the RL task is the preset's
    assert preset.sequences_per_step == 4096  # GRPO: 512 prompts x 8
    assert 3_000_000 < sum(p.numel() for p in model.parameters()) < 3_500_000  # 30x the cpu preset's model


def _one_step(name, preset, task, model, sequences):
    """One RL step through train(); a per-digit (process) reward, so that a random-init model,
    which gets no whole answer right, still has rewards that differ and a gradient."""
    algo = make_algorithm(name)  # each config's defaults: GRPO's 8 completions per prompt
    t0 = time.process_time()
    h = train(algo, task=task, reference=model, preset=preset, steps=1, sequences_per_step=sequences,
              reward_kind="process", progress=False)  # fmt: skip
    (step,) = h.steps
    assert step["samples"] == sequences and step["updates"] == algo.config.epochs * algo.config.minibatches
    assert all(math.isfinite(v) for v in step.values() if isinstance(v, float)), step
    assert step["reward"] > 0 and step["grad_norm"] > 0  # it did update
    print(
        f"{name}: {sequences} completions, step {step['seconds']:.1f} s wall; the test {time.process_time() - t0:.1f} s CPU"
    )
    return step


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_one_step_of_each_algorithm_at_the_gpu_presets_row_shapes(gpu_on_cpu, name):
    preset, task, model = gpu_on_cpu
    _one_step(name, preset, task, model, preset.sequences_per_step // 16)  # GRPO: 32 prompts x 8


@pytest.mark.skipif(not FULL, reason="minutes on a CPU: set GRPO_EDU_GPU_PRESET_FULL=1 to run the full 4096-row step")
@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_one_full_step_of_each_algorithm_at_the_gpu_presets_sizes(gpu_on_cpu, name):
    preset, task, model = gpu_on_cpu
    _one_step(name, preset, task, model, preset.sequences_per_step)
