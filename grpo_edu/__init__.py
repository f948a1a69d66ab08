"""grpo-edu: learn GRPO by building it, on a tiny transformer that learns arithmetic.

    from grpo_edu import get_preset, make_task, reference_policy, make_algorithm, train
    preset = get_preset("auto")                  # "cpu" on a laptop, "gpu" with CUDA
    task = make_task(preset)                     # the arithmetic world
    reference = reference_policy(preset, task=task)  # SFT warm start, cached
    history = train(make_algorithm("grpo"), task=task, reference=reference, preset=preset)

(``train_from_preset(make_algorithm("grpo"), preset="cpu")`` builds the task and the reference.)

The functional core (`grpo_edu.functional`) holds one function per equation; each consults
the core's registry on every call, so `plug(name=fn)` swaps in your own version everywhere
(that is how the homework's solutions run inside the library's training loop).
"""

from __future__ import annotations

import contextlib
import inspect

from . import functional
from .algorithms import ALGORITHMS, GRPO, PPO, GRPOConfig, Reinforce, ReinforceBaseline, make_algorithm
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
    """Temporarily replace functions of the functional core, e.g.

        with grpo_edu.plug(group_advantages=my_group_advantages):
            train(make_algorithm("grpo"), ...)

    The replacements go into the core's registry (`grpo_edu.functional.PLUGGED`), which every
    function of the core consults on each call: every algorithm, the rollout code, the
    measurements and the core's own functions use yours, however they imported the function.
    Inside your function, a call of the function it replaces is the library's (so it may wrap
    it). The library calls every function with its full signature, so a replacement must
    accept every parameter of the original, by the same name: one that does not is refused
    here with a ``ValueError`` naming the missing parameter (not a ``TypeError`` deep in
    training).
    """
    unknown = [name for name in functions if name not in functional.__all__]
    if unknown:
        raise ValueError(f"plug: {unknown} are not functions of grpo_edu.functional {functional.__all__}")
    for name, fn in functions.items():
        if not callable(fn):
            raise ValueError(f"plug: {name} must be callable, got {type(fn).__name__}")
        missing = _missing_parameters(getattr(functional, name), fn)
        if missing:
            want = inspect.signature(getattr(functional, name))
            raise ValueError(
                f"plug: your {name} has no parameter {', '.join(missing)}; the library calls it as {name}{want}"
            )
    saved = {name: functional.PLUGGED.get(name) for name in functions}
    try:
        functional.PLUGGED.update(functions)
        yield
    finally:
        for name, fn in saved.items():
            if fn is None:
                functional.PLUGGED.pop(name, None)
            else:
                functional.PLUGGED[name] = fn


def _missing_parameters(original, replacement) -> list[str]:
    """The parameters of ``original`` that ``replacement`` cannot take by name."""
    try:
        params = inspect.signature(replacement).parameters
    except (TypeError, ValueError):  # a builtin without a signature: trust it
        return []
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return []
    takes = {n for n, p in params.items() if p.kind is not inspect.Parameter.POSITIONAL_ONLY}
    return [n for n in inspect.signature(original).parameters if n not in takes]


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
