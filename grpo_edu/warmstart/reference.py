"""The reference policy pi_ref of a preset: trained once by SFT (`grpo_edu.warmstart.sft`), then cached.

``reference_policy(preset)`` trains it the first time (seconds on a CPU) and saves it
atomically under ``$GRPO_EDU_CACHE`` (default ``~/.cache/grpo-edu``); later calls load it
with ``weights_only=True``. The file name is a hash of everything that determines the
weights (task, model, SFT config, seed, and the code and runtime that compute them: a hash of
the SFT path's source files, torch's version, the CPU kernel and the device type), and the
config is stored inside and compared on load, so a checkpoint made with another config, by
other code or on another kernel is never loaded by mistake. A corrupted or
foreign file under that name is replaced, with a one-line warning that says what was wrong
with it; a cache folder that cannot be written is a one-line `NotWritableError` before any
training.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

import torch

from ..evaluation import evaluate
from ..model import ModelConfig, TinyGPT
from ..train import train
from .checkpoint import CheckpointError, ensure_writable, load_checkpoint, load_state_dict_checked, save_checkpoint
from .presets import make_task, resolve_preset
from .sft import SFTConfig, train_sft

FORMAT_VERSION = 2


CACHE_ENV = "GRPO_EDU_CACHE"  # where reference policies are cached (default ~/.cache/grpo-edu)


class CacheEnvError(ValueError):
    """$GRPO_EDU_CACHE is set, but to nothing: not silently the default folder."""


def cache_dir() -> Path:
    """$GRPO_EDU_CACHE, or ``~/.cache/grpo-edu`` when it is unset; set but empty (``GRPO_EDU_CACHE=``,
    which might mean "no cache" as well as "the default") is a `CacheEnvError`."""
    raw = os.environ.get(CACHE_ENV)
    if raw is None:
        return Path.home() / ".cache" / "grpo-edu"
    if not raw.strip():
        raise CacheEnvError(
            f"${CACHE_ENV} is set but empty ({raw!r}): unset it for the default cache (~/.cache/grpo-edu), "
            "or set it to a folder"
        )
    return Path(raw)


_ROOT = Path(__file__).resolve().parents[2]  # the repository: the source patterns are relative to it

# the modules whose code runs while the reference is trained (tests/test_sft.py traces a short SFT
# and checks that every project file it runs is in this list): a change to any of them retrains
_SFT_SOURCES = (
    "grpo_edu/model.py",
    "grpo_edu/progress.py",
    "grpo_edu/rollout.py",
    "grpo_edu/evaluation.py",
    "grpo_edu/tokenizer.py",
    "grpo_edu/warmstart/sft.py",
    "grpo_edu/warmstart/reference.py",
    "envs/*.py",
)


def source_files(patterns: tuple[str, ...] = _SFT_SOURCES) -> list[Path]:
    """The project files matching ``patterns`` (globs relative to `_ROOT`; default ``_SFT_SOURCES``, the
    reference's), sorted (``envs/*.py``: every module of the package)."""
    return sorted({f for pattern in patterns for f in _ROOT.glob(pattern)})


@functools.cache
def code_fingerprint(patterns: tuple[str, ...] = _SFT_SOURCES) -> str:
    """A hash of the source of the files matching ``patterns`` (`source_files`; default: the modules that
    train the reference)."""
    h = hashlib.sha256()
    for f in source_files(patterns):
        h.update(f.relative_to(_ROOT).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def weights_hash(model) -> str:
    """A hash of a model's parameters and buffers (names, shapes, dtypes and bytes): which weights a result
    was computed from (a teacher's cache key, a stored run's provenance)."""
    h = hashlib.sha256()
    for name, t in model.state_dict().items():
        h.update(f"{name} {tuple(t.shape)} {t.dtype}".encode() + b"\0" + t.detach().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def runtime_fingerprint(device) -> dict:
    """What besides the config moves the trained weights: the SFT path's code, torch's version,
    the vector kernel ATen runs (another kernel rounds differently) and the device type."""
    device = torch.device(device or "cpu")
    kernel = torch.backends.cpu.get_cpu_capability() if device.type == "cpu" else torch.version.cuda
    return {"source": code_fingerprint(), "torch": str(torch.__version__), "kernel": str(kernel), "device": device.type}


_SUBSET_OFF = {"operand_below": None, "whole_share": 0.0}  # SFTConfig fields left out of the key at these values


def reference_config(task, model_config: ModelConfig, sft_config: SFTConfig, device=None) -> dict:
    """Everything that determines the reference weights (the cache key): the task, model and
    SFT config, and `runtime_fingerprint` (the code, torch, the kernel, the device type)."""
    return {
        "format": FORMAT_VERSION,
        # neither the training reward nor the completion budget changes SFT: tasks that differ
        # only in them share pi_ref
        "task": {k: v for k, v in task.config.items() if k not in ("reward_values", "filler_budget")},
        "model": model_config.to_dict(),
        # an SFT subset (the spread world's operand_below, whole_share) only when set: the default key is unchanged
        "sft": {k: v for k, v in asdict(sft_config).items() if not (k in _SUBSET_OFF and v == _SUBSET_OFF[k])},
        "runtime": runtime_fingerprint(device),
    }


def _load_cached(policy, path, cfg, info) -> None:
    """Load the cached weights into ``policy`` and fill ``info``; a corrupted, stale or
    foreign file is reported in one line that says what is wrong with it (and in
    ``info["warning"]``) and left to be replaced."""
    try:
        state = load_checkpoint(path, expected_config=cfg)
        load_state_dict_checked(policy, state["state_dict"], source=str(path))
        info.update(
            loaded=True, accuracy=state["accuracy"], steps=state["steps"], seconds=0.0, history=state.get("history")
        )
    except CheckpointError as exc:
        info["warning"] = f"retrained: {exc.reason}"
        sys.stderr.write(
            f"grpo-edu: the cached reference {path} is unusable: {exc.reason}; training a new one in its place\n"
        )


def _writable_cache(folder: Path, cache) -> None:
    """Fail in one line, before the SFT, when the cache folder cannot be written."""
    if cache is not True:
        what, fix = "the reference cache, reference_policy(cache=...)", "pass a writable folder or cache=False"
    elif CACHE_ENV in os.environ:
        what, fix = f"the reference cache, set by ${CACHE_ENV}", f"set ${CACHE_ENV} to a writable folder"
    else:
        what, fix = "the default reference cache", f"set ${CACHE_ENV} to a writable folder"
    ensure_writable(folder, what, fix)


def reference_policy(
    preset=None,
    *,
    task=None,
    model_config: ModelConfig | None = None,
    sft_config: SFTConfig | None = None,
    device=None,
    cache: bool | str | Path = True,
    retrain: bool = False,
    progress: bool = True,
    return_info: bool = False,
):
    """The SFT reference policy pi_ref for a preset (or an explicit task/model/SFT config).

    Trains it the first time and caches it; loads it afterwards. ``cache`` may be False
    (never touch disk) or a folder. Returns the policy in eval mode (and, with
    ``return_info``, a dict with ``accuracy``, ``steps``, ``seconds``, ``path``, ``loaded``
    and ``history``, the SFT curve ``{"step", "accuracy", "loss"}`` stored with the weights).
    """
    if preset is not None:
        preset = resolve_preset(preset)
        task = task or make_task(preset)
        model_config = model_config or preset.model
        sft_config = sft_config or preset.sft
        device = device or preset.device
    if task is None or model_config is None:
        raise ValueError("reference_policy needs a preset, or both task= and model_config=")
    sft_config = sft_config or SFTConfig()
    device = torch.device(device or "cpu")
    cfg = reference_config(task, model_config, sft_config, device)
    key = hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest()[:16]
    folder = None if cache is False else (cache_dir() if cache is True else Path(cache))
    path = folder / f"reference-{key}.pt" if folder is not None else None

    policy = TinyGPT(model_config)
    info = {"path": str(path) if path else None, "loaded": False}
    if path is not None and path.exists() and not retrain:
        _load_cached(policy, path, cfg, info)
    if not info["loaded"]:
        if path is not None:
            _writable_cache(folder, cache)
        torch.manual_seed(sft_config.seed)
        policy = TinyGPT(model_config)
        policy.to(device)
        hist = train_sft(policy, task, sft_config, progress=progress)
        acc = hist["accuracy"][-1] if hist["accuracy"] else evaluate(policy, task)
        curve = {k: [float(x) for x in hist[k]] for k in ("step", "accuracy", "loss")}
        info.update(accuracy=acc, steps=hist["step"][-1] if hist["step"] else 0, seconds=hist["seconds"], history=curve)
        if path is not None:
            sd = {k: v.detach().cpu() for k, v in policy.state_dict().items()}
            save_checkpoint(
                path, {"config": cfg, "state_dict": sd, "accuracy": acc, "steps": info["steps"], "history": curve}
            )
    policy.to(device).eval()
    for p in policy.parameters():
        p.requires_grad_(True)
    return (policy, info) if return_info else policy


def train_from_preset(algorithm, task=None, reference=None, policy=None, preset="cpu", progress: bool = True, **kw):
    """`grpo_edu.train` from a preset (a `Preset` or its name): the preset's task and its cached
    SFT reference (`reference_policy`) when not given, then the one loop on them. ``kw``: the
    budget and the rest of `grpo_edu.train`'s arguments (``steps``, ``seed``, ``name``, ...).

        h = train_from_preset(make_algorithm("grpo"), preset="cpu", steps=20)"""
    preset = resolve_preset(preset)
    task = task or make_task(preset)
    if reference is None:
        reference = reference_policy(preset, task=task, progress=progress)
    return train(algorithm, task, reference, policy, preset, progress=progress, **kw)
