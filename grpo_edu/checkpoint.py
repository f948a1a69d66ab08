"""Checkpoints written atomically and loaded safely (``weights_only=True``)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import torch


def save_checkpoint(path, state: dict) -> Path:
    """Write ``state`` (tensors, numbers, strings, dicts, lists) to ``path`` atomically:
    to a temporary file in the same folder, then ``os.replace``. A crash mid-write never
    leaves a half-written checkpoint under ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def load_checkpoint(path, expected_config: dict | None = None) -> dict:
    """Load a checkpoint with ``weights_only=True`` (no arbitrary code runs).

    If ``expected_config`` is given, the checkpoint's ``"config"`` must equal it; otherwise
    a ``ValueError`` names the fields that differ.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # corrupt file, or something that is not a plain checkpoint
        raise ValueError(f"{path} is not a readable grpo-edu checkpoint: {exc}") from exc
    if not isinstance(state, dict) or "state_dict" not in state:
        raise ValueError(f"{path} is not a grpo-edu checkpoint (no 'state_dict' entry)")
    if expected_config is not None:
        got = state.get("config")
        if got != expected_config:
            diff = sorted(
                k for k in set(expected_config) | set(got or {}) if (got or {}).get(k) != expected_config.get(k)
            )
            raise ValueError(
                f"checkpoint {path} was made with another config (fields that differ: {diff}); "
                "retrain it or pass the matching config"
            )
    return state


def load_state_dict_checked(model: torch.nn.Module, state_dict: dict, source="checkpoint"):
    """``model.load_state_dict`` with a clear error when the shapes or keys do not match."""
    own = model.state_dict()
    missing = sorted(set(own) - set(state_dict))
    unexpected = sorted(set(state_dict) - set(own))
    wrong = sorted(
        f"{k}: checkpoint {tuple(state_dict[k].shape)} vs model {tuple(own[k].shape)}"
        for k in set(own) & set(state_dict)
        if tuple(own[k].shape) != tuple(state_dict[k].shape)
    )
    if missing or unexpected or wrong:
        raise ValueError(
            f"{source} does not fit this model: missing {missing[:5]}, unexpected "
            f"{unexpected[:5]}, wrong shapes {wrong[:5]}"
        )
    model.load_state_dict(state_dict)
