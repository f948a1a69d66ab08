"""Presets: the "cpu" configuration the notebooks and tests use, and a bigger "gpu" one.

Why the cpu preset is what it is (measured on a 2-vCPU machine, see README "Measurements"):
- 2-digit addition with the answer **reversed** (least significant digit first), the
  known trick that makes addition learnable by a small transformer in seconds.
- the reference: SFT on fresh problems stopped at 50% greedy held-out accuracy (about
  170-220 steps, under 10 s); see sft.py for why, measured (`grpo-edu ablate`).
- d_model 64, 2 layers, untied output head (about 103k parameters): a 512-sequence RL step
  takes ~0.1-0.4 s with one thread; d128 was 2-3x slower for no gain in the lesson.
- one torch thread: on a shared 2-vCPU machine two threads stalled 5-25% of the steps.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

import torch

from .model import ModelConfig
from .sft import SFTConfig


@dataclass
class Preset:
    name: str
    device: str
    threads: int | None  # torch threads (None: leave torch's default)
    task: dict  # ArithmeticTask keyword arguments
    model: ModelConfig
    sft: SFTConfig
    prompts_per_step: int = 64  # distinct problems per RL step
    group_size: int = 8  # GRPO samples per problem (prompts_per_step * group_size sequences)
    lr: float = 3e-4  # AdamW learning rate of the policy in RL
    steps: int = 150  # default RL steps for one training run
    eval_every: int = 10  # RL steps between held-out evaluations
    extra: dict = field(default_factory=dict)

    @property
    def sequences_per_step(self) -> int:
        return self.prompts_per_step * self.group_size


def _cpu(device="cpu") -> Preset:
    return Preset(
        name="cpu",
        device=device,
        threads=1,
        task=dict(digits=2, ops=("+",), reverse=True, eval_size=500),
        model=ModelConfig(vocab_size=17, d_model=64, n_layers=2, n_heads=4, max_seq_len=12),
        sft=SFTConfig(lr=1e-3, batch_size=256, max_steps=1000, target_accuracy=0.5, eval_every=5, seed=0),
        prompts_per_step=64,
        group_size=8,
        lr=3e-4,
        steps=100,
        eval_every=10,
    )


def _gpu(device="cuda") -> Preset:
    return Preset(
        name="gpu",
        device=device,
        threads=None,
        task=dict(digits=3, ops=("+",), reverse=True, eval_size=1000),
        model=ModelConfig(vocab_size=17, d_model=256, n_layers=4, n_heads=8, max_seq_len=16),
        sft=SFTConfig(lr=1e-3, batch_size=512, max_steps=2000, target_accuracy=0.5, eval_every=10, seed=0),
        prompts_per_step=256,
        group_size=16,
        lr=3e-4,
        steps=300,
        eval_every=10,
    )


PRESETS = {"cpu": _cpu, "gpu": _gpu}


def get_preset(name: str = "auto", device: str | None = None, **overrides) -> Preset:
    """``"cpu"``, ``"gpu"`` or ``"auto"`` (gpu when CUDA is available, else cpu).

    ``device`` overrides the preset's device (e.g. the cpu preset on a GPU); keyword
    ``overrides`` replace fields (``get_preset("cpu", steps=50)``).
    """
    if name == "auto":
        name = "gpu" if torch.cuda.is_available() else "cpu"
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)} or 'auto'")
    if device is None:
        device = "cuda" if name == "gpu" and torch.cuda.is_available() else ("cpu" if name == "cpu" else "cpu")
    preset = PRESETS[name](device)
    unknown = set(overrides) - set(preset.__dataclass_fields__)
    if unknown:
        raise ValueError(f"unknown preset fields {sorted(unknown)}")
    return replace(preset, **overrides)


def make_task(preset: Preset):
    from envs import ArithmeticTask

    return ArithmeticTask(**preset.task)


def setup_torch(preset: Preset | None = None, seed: int | None = None) -> None:
    """One torch thread on small CPUs (measured faster and stall-free), and a seed."""
    threads = preset.threads if preset is not None else None
    if threads is None and (os.cpu_count() or 1) <= 2:
        threads = 1
    if threads is not None and (preset is None or preset.device == "cpu"):
        torch.set_num_threads(threads)
    if seed is not None:
        torch.manual_seed(seed)
