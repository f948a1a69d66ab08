"""grpo-edu: learn GRPO by building it, on a tiny transformer that learns arithmetic.

    from grpo_edu import get_preset, make_task, reference_policy, make_algorithm, train
    preset = get_preset("auto")                  # "cpu" on a laptop, "gpu" with CUDA
    task = make_task(preset)                     # the arithmetic world
    reference = reference_policy(preset, task=task)  # SFT warm start, cached
    history = train(make_algorithm("grpo"), task=task, reference=reference, preset=preset)

(``train_from_preset(make_algorithm("grpo"), preset="cpu")`` builds the task and the reference.)

The functional core (`grpo_edu.functional`) holds one function per equation. A run that uses your
own version of one says so, ``make_algorithm("grpo", functions={"group_advantages": mine})``; the
homework's shortcut, ``with plug(name=fn):``, swaps it in everywhere for the ``with`` block only
(that is how the homework's solutions run inside the library's training loop).
"""

from __future__ import annotations

import contextlib
import functools

from . import functional
from .algorithms import ALGORITHMS, GRPO, PPO, GRPOConfig, Reinforce, ReinforceBaseline, make_algorithm
from .algorithms.base import check_replacements
from .evaluation import evaluate
from .model import ModelConfig, TinyGPT, ValueModel
from .rollout import Rollout, generate, sample_batch, sequence_logprobs
from .tokenizer import CharTokenizer
from .train import History, train, update
from .warmstart.presets import get_preset, make_task, setup_torch
from .warmstart.reference import reference_policy, train_from_preset
from .warmstart.sft import SFTConfig

__version__ = "0.1.0"


@contextlib.contextmanager
def plug(**functions):
    """The homework's shortcut: replace functions of the functional core for a ``with`` block, e.g.

        with grpo_edu.plug(group_advantages=my_group_advantages):
            train(make_algorithm("grpo"), ...)

    For the block, and only then, ``grpo_edu.functional.<name>`` (and the name in the module of the
    core that defines it) is your function: every caller that looks the name up when it calls uses
    it (the algorithms, the measurements, the core's own functions calling each other,
    ``Fn.name(...)``); a name imported with ``from grpo_edu.functional import name`` before the
    block keeps the library's. Inside your function, a call of the function it replaces is the
    library's (so it may wrap it). The block restores the library's functions on exit, also when
    it raises; while it runs the whole process sees the swap (plug from one thread at a time).
    Outside the homework, say it explicitly instead: ``make_algorithm(name, functions={...})``.
    The library calls every function with its full signature, so a replacement must accept every
    parameter of the original, by the same name: one that does not is refused here with a
    ``ValueError`` naming the missing parameter (not a ``TypeError`` deep in training).
    """
    check_replacements(functions, "plug")
    swapped = []  # (module, name, what it held): restored in reverse order on exit
    try:
        for name, fn in functions.items():
            library = _LIBRARY[name]
            guarded = _guarded(fn, library)
            for module in _CORE_MODULES:
                if name in vars(module):
                    swapped.append((module, name, vars(module)[name]))
                    setattr(module, name, guarded)
        yield
    finally:
        for module, name, held in reversed(swapped):
            setattr(module, name, held)


_LIBRARY = {name: getattr(functional, name) for name in functional.__all__}  # the core's own functions
_CORE_MODULES = (functional, *(getattr(functional, m) for m in ("advantages", "covariance", "distillation", "logprobs", "losses", "objectives", "off_policy", "reductions")))  # fmt: skip


def _guarded(fn, library):
    """``fn``, except that a call of the same name from inside ``fn`` is the library's."""
    running = []

    @functools.wraps(library)
    def call(*args, **kwargs):
        if running:
            return library(*args, **kwargs)
        running.append(True)
        try:
            return fn(*args, **kwargs)
        finally:
            running.pop()

    return call


__all__ = [
    "ALGORITHMS",
    "CharTokenizer",
    "GRPO",
    "GRPOConfig",
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
    "train_from_preset",
    "update",
]
