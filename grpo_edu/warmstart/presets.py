"""Presets: the "cpu" configuration the notebooks and tests use, and a bigger "gpu" one.

Why the cpu preset is what it is (measured on a 2-vCPU machine, see the site's measurements page, course/site/measurements.md):
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
from dataclasses import dataclass, replace

import torch

from ..model import ModelConfig
from .sft import SFTConfig

SEED_SHIFT_ENV = "GRPO_EDU_SEED_SHIFT"  # shifts every seed a preset hands out (robustness checks)


@dataclass
class Preset:
    name: str
    device: str
    threads: int | None  # torch threads (None: leave torch's default)
    task: dict  # ArithmeticTask keyword arguments
    model: ModelConfig
    sft: SFTConfig
    sequences_per_step: int  # completions sampled per RL step, the same for every algorithm (_SIZES)
    steps: int  # default RL steps for one training run (_SIZES)
    eval_every: int  # RL steps between held-out evaluations
    seed: int = 0  # base seed of everything random (the reference's SFT too); $GRPO_EDU_SEED_SHIFT adds to it
    world: str = "default"  # which reference the task is learned from (WORLDS; get_preset(world=...))

    def __post_init__(self):
        n = self.sequences_per_step
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"Preset.sequences_per_step must be an integer >= 1, got {n!r}")

    def prompts(self, group_size: int) -> int:
        """Prompts per step for an algorithm that samples ``group_size`` completions of each:
        ``sequences_per_step / group_size`` (cpu: GRPO 512 / 8 = 64 prompts x 8, PPO 512 x 1).
        The group size is the algorithm's (``algo.config.group_size``), never the preset's."""
        if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
            raise ValueError(f"group_size must be an integer >= 1, got {group_size!r}")
        if self.sequences_per_step % group_size:
            raise ValueError(
                f"Preset.sequences_per_step={self.sequences_per_step} is not a multiple of group_size={group_size}"
            )
        return self.sequences_per_step // group_size


_SIZES = {  # what differs between the presets
    "cpu": dict(
        threads=1,
        digits=2,
        eval_size=500,
        d_model=64,
        n_layers=2,
        n_heads=4,
        max_seq_len=12,
        sft_batch=256,
        sft_steps=1000,
        sft_eval_every=5,
        sequences_per_step=512,  # GRPO 64 prompts x 8, PPO 512 x 1
        steps=128,
    ),
    "gpu": dict(
        threads=None,
        digits=3,
        eval_size=1000,
        d_model=256,
        n_layers=4,
        n_heads=8,
        max_seq_len=16,
        sft_batch=512,
        sft_steps=2000,
        sft_eval_every=10,
        sequences_per_step=4096,  # GRPO 512 prompts x 8 (GRPOConfig(group_size=16): 256 x 16)
        steps=300,
    ),
}
PRESETS = tuple(_SIZES)

# The worlds a preset can be built in: the same RL task, references that differ in what they know.
WORLDS = {
    "default": "SFT on the whole task to 50% greedy held-out accuracy: every prompt about as uncertain",
    "spread": "SFT only on problems whose operands are both < 60% of the range (< 60 for 2 digits), to 70% "
    "sampled accuracy there; RL on all of them: easy prompts it knows, hard ones it does not",
}
# chosen by measurement (the search: grpo_edu/studies/regimes/difficulty.py's docstring): EV_max 0.65 at its
# reference, GRPO +0.39..+0.46 held-out in 100 steps on 3 seeds; < 70 to 80% sampled: EV_max 0.74, gains +0.15..+0.17
SPREAD = dict(operand_fraction=0.6, target_accuracy=0.7, target_metric="sampled")


def _world(preset: Preset, world: str) -> Preset:
    if world == "default":
        return preset
    k = round(SPREAD["operand_fraction"] * 10 ** preset.task["digits"])
    sft = replace(preset.sft, operand_below=k, target_accuracy=SPREAD["target_accuracy"],
                  target_metric=SPREAD["target_metric"])  # fmt: skip
    return replace(preset, world=world, sft=sft)


def _build(name: str, device: str, seed: int) -> Preset:
    z = _SIZES[name]
    return Preset(
        name=name,
        device=device,
        threads=z["threads"],
        task=dict(digits=z["digits"], ops=("+",), reverse=True, eval_size=z["eval_size"]),
        model=ModelConfig(
            vocab_size=17,
            d_model=z["d_model"],
            n_layers=z["n_layers"],
            n_heads=z["n_heads"],
            max_seq_len=z["max_seq_len"],
        ),
        sft=SFTConfig(
            lr=1e-3,
            batch_size=z["sft_batch"],
            max_steps=z["sft_steps"],
            target_accuracy=0.5,
            eval_every=z["sft_eval_every"],
            seed=seed,
        ),
        sequences_per_step=z["sequences_per_step"],
        steps=z["steps"],
        eval_every=10,
        seed=seed,
    )


def seed_shift() -> int:
    """The value of $GRPO_EDU_SEED_SHIFT (0 when unset): added to every seed a preset hands out."""
    raw = os.environ.get(SEED_SHIFT_ENV, "0")
    if not raw.strip():  # set but empty: a typo in a script, not "no shift" (unset it for 0)
        raise ValueError(f"{SEED_SHIFT_ENV} is set but empty: unset it (no shift) or give a non-negative integer")
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{SEED_SHIFT_ENV} must be a non-negative integer, got {raw!r}") from None
    if value < 0:
        raise ValueError(f"{SEED_SHIFT_ENV} must be a non-negative integer, got {raw!r}")
    return value


def get_preset(name: str = "auto", device: str | None = None, world: str = "default", **overrides) -> Preset:
    """``"cpu"``, ``"gpu"`` or ``"auto"`` (gpu when CUDA is available, else cpu).

    ``"gpu"`` on a machine without CUDA is a ``ValueError`` (it would train the big sizes on
    the CPU for hours); ``get_preset("gpu", device="cpu")`` asks for exactly that (the tests
    run one step of it). ``device`` overrides the preset's device (e.g. the cpu preset on a
    GPU); keyword ``overrides`` replace fields (``get_preset("cpu", steps=50)``). The
    preset's ``seed`` (and its SFT seed) is ``$GRPO_EDU_SEED_SHIFT``, 0 by default.
    ``world`` (`WORLDS`) picks the reference: ``"default"``, or ``"spread"`` (SFT on the easy
    part of the task only, its own cached reference; the same task for RL).
    """
    if not isinstance(world, str) or world not in WORLDS:
        raise ValueError(f"unknown world {world!r}; choose one of {list(WORLDS)}")
    cuda = torch.cuda.is_available()
    if name == "auto":
        name = "gpu" if cuda else "cpu"
    if name not in _SIZES:
        raise ValueError(f"unknown preset {name!r}; choose one of {list(PRESETS)} or 'auto'")
    if device is None:
        if name == "gpu" and not cuda:
            raise ValueError(
                "the gpu preset needs CUDA, which is not available on this machine: use the 'cpu' "
                "preset (or 'auto', which picks it here), or get_preset('gpu', device='cpu') to run "
                "the gpu sizes on the CPU anyway"
            )
        device = "cuda" if name == "gpu" else "cpu"
    elif str(device).startswith("cuda") and not cuda:
        raise ValueError(f"device={device!r}, but CUDA is not available on this machine: use device='cpu'")
    preset = _world(_build(name, device, seed_shift()), world)
    unknown = set(overrides) - set(preset.__dataclass_fields__)
    if unknown:
        raise ValueError(f"unknown preset fields {sorted(unknown)}; known: {sorted(preset.__dataclass_fields__)}")
    return replace(preset, **overrides)


def resolve_preset(preset) -> Preset:
    """A `Preset` from a Preset or a name ("cpu", "gpu", "auto"): the one place names resolve."""
    if isinstance(preset, Preset):
        return preset
    if isinstance(preset, str):
        return get_preset(preset)
    raise ValueError(f"preset must be a Preset or one of {list(PRESETS)} / 'auto', got {preset!r}")


def with_world(preset: Preset, world: str) -> Preset:
    """``preset`` in another world (`WORLDS`): its reference's SFT config is that world's, for
    the preset's size and SFT seed; every other field (steps, layout, seed) kept."""
    if not isinstance(world, str) or world not in WORLDS:
        raise ValueError(f"unknown world {world!r}; choose one of {list(WORLDS)}")
    if preset.world == world:
        return preset
    sft = replace(_build(preset.name, preset.device, preset.seed).sft, seed=preset.sft.seed)
    return _world(replace(preset, world="default", sft=sft), world)


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
