"""grpo-edu: learn GRPO by building it, on a tiny transformer that learns arithmetic.

    from grpo_edu import get_preset, reference_policy, make_algorithm, train
    preset = get_preset("auto")                  # "cpu" on a laptop, "gpu" with CUDA
    reference = reference_policy(preset)         # SFT warm start, cached
    history = train(make_algorithm("grpo"), reference=reference, preset=preset)

The functional core (`grpo_edu.functional`) holds one function per equation; the
algorithms call it through the module, so `plug(name=fn)` swaps in your own version
(that is how the homework's solutions run inside the library's training loop).
"""

from __future__ import annotations

import contextlib

from . import functional
from .algorithms import ALGORITHMS, GRPO, PPO, Reinforce, ReinforceBaseline, make_algorithm
from .evaluation import evaluate
from .model import ModelConfig, TinyGPT, ValueModel
from .presets import get_preset, make_task, setup_torch
from .reference import reference_policy
from .rollout import Rollout, generate, sample_batch, sequence_logprobs
from .sft import SFTConfig
from .tokenizer import CharTokenizer
from .train import History, train

__version__ = "0.1.0"


@contextlib.contextmanager
def plug(**functions):
    """Temporarily replace functions of the functional core, e.g.

        with grpo_edu.plug(group_advantages=my_group_advantages):
            train(make_algorithm("grpo"), ...)

    Every algorithm, the rollout code and the measurements look the functions up in
    `grpo_edu.functional` at call time, so the replacement is used everywhere. Optional
    keywords (``kind`` of ``kl_penalized_rewards``, ``leave_one_out`` of
    ``group_advantages``) are passed only when a config asks for a non-default value, so a
    function with the basic signature plugs in.
    """
    unknown = [name for name in functions if name not in functional.__all__]
    if unknown:
        raise ValueError(f"plug: {unknown} are not functions of grpo_edu.functional {functional.__all__}")
    saved = {name: getattr(functional, name) for name in functions}
    try:
        for name, fn in functions.items():
            if not callable(fn):
                raise ValueError(f"plug: {name} must be callable, got {type(fn).__name__}")
            setattr(functional, name, fn)
        yield
    finally:
        for name, fn in saved.items():
            setattr(functional, name, fn)


__all__ = [
    "ALGORITHMS",
    "CharTokenizer",
    "GRPO",
    "History",
    "ModelConfig",
    "PPO",
    "Reinforce",
    "ReinforceBaseline",
    "Rollout",
    "SFTConfig",
    "TinyGPT",
    "ValueModel",
    "evaluate",
    "functional",
    "generate",
    "get_preset",
    "make_algorithm",
    "make_task",
    "plug",
    "reference_policy",
    "sample_batch",
    "sequence_logprobs",
    "setup_torch",
    "train",
]
