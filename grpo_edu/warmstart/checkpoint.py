"""Checkpoints written atomically and loaded safely (``weights_only=True``)."""

from __future__ import annotations

import os
import pickle
import tempfile
import warnings
from pathlib import Path

import torch


class NotWritableError(OSError):
    """A place results were to be written to cannot be written; the message is one line that
    names the path, what set it (a flag, an environment variable) and what to do."""


def ensure_writable(path, what: str, fix: str = "", file: bool = False) -> Path:
    """Check, before any time is spent, that ``path`` (a folder, created if missing; with
    ``file=True`` a file, whose folder is created) can be written. Raises `NotWritableError`
    with one line: ``cannot write to <path> (<what>): <why>; <fix>``."""
    path = Path(path).expanduser()
    folder = path.parent if file else path

    def fail(why):
        raise NotWritableError(f"cannot write to {path} ({what}): {why}" + (f"; {fix}" if fix else "")) from None

    if file and path.is_dir():
        fail("it is a folder, not a file")
    above = next((q for q in (folder, *folder.parents) if q.exists()), None)
    if above is not None and not above.is_dir():
        fail(f"{above} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"the folder cannot be created ({exc.strerror or exc})")
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".grpo-edu-write-check.")
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        fail(f"no file can be created in {'its folder' if file else 'it'} ({exc.strerror or exc})")
    if file and path.exists() and not os.access(path, os.W_OK):
        fail("the file is read-only")
    return path


def _readable_as_open_makes(tmp) -> None:
    """mkstemp's file is private (0600); give it the mode ``open()`` would (0666 less the umask)."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)


def _write_atomic(path, mode: str, write) -> Path:
    """Call ``write(f)`` on a temporary file in ``path``'s folder (opened with ``mode``), flush it to
    disk, then ``os.replace`` it onto ``path``: a crash mid-write never leaves a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, mode) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        _readable_as_open_makes(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def save_checkpoint(path, state: dict) -> Path:
    """Write ``state`` (tensors, numbers, strings, dicts, lists) to ``path`` atomically:
    to a temporary file in the same folder, then ``os.replace``. A crash mid-write never
    leaves a half-written checkpoint under ``path``."""
    return _write_atomic(path, "wb", lambda f: torch.save(state, f))


def write_text_atomic(path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (a temporary file in the same folder, then ``os.replace``)."""
    return _write_atomic(path, "w", lambda f: f.write(text))


POLICY_FORMAT = 1  # the layout of save_policy's file; load_policy refuses another


def save_policy(path, policy, task, **info) -> Path:
    """A trained policy with what rebuilds it (its model config, the task's config), atomically;
    ``info``: plain data kept beside it (the algorithm, the steps, the final accuracy)."""
    state = {
        "format": POLICY_FORMAT,
        "state_dict": {k: v.detach().cpu() for k, v in policy.state_dict().items()},
        "model": policy.config.to_dict(),
        "task": dict(task.config),
        **info,
    }
    return save_checkpoint(path, state)


def load_policy(path, device: str = "cpu"):
    """``(policy, task, state)`` from a `save_policy` file, loaded with ``weights_only=True``."""
    from envs import ArithmeticTask

    from ..model import ModelConfig, TinyGPT

    state = load_checkpoint(path)
    if state.get("format") != POLICY_FORMAT or "model" not in state or "task" not in state:
        raise CheckpointError(path, f"it is not a policy saved by grpo-edu train --out (format {POLICY_FORMAT})")
    policy = TinyGPT(ModelConfig(**state["model"]))
    load_state_dict_checked(policy, state["state_dict"], source=str(path))
    return policy.to(device).eval(), ArithmeticTask(**state["task"]), state


class CheckpointError(ValueError):
    """A file that is not a usable checkpoint. ``reason`` says why in a user's words, in one
    line ("the file is empty", "it is not a PyTorch checkpoint", "it was written by another
    version of grpo-edu", ...); the message is ``"<path> is not a usable grpo-edu checkpoint:
    <reason>"``; torch's own error, if any, is chained as ``__cause__``."""

    def __init__(self, path, reason: str, message: str | None = None):
        self.path, self.reason = str(path), reason
        super().__init__(message or f"{path} is not a usable grpo-edu checkpoint: {reason}")


def _unreadable_reason(path: Path, exc: Exception) -> str:
    """Why ``torch.load`` failed, from the file's first bytes rather than torch's text."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(4)
    if size == 0:
        return "the file is empty (0 bytes)"
    if head == b"PK\x03\x04":  # torch.save writes a zip archive
        if isinstance(exc, pickle.UnpicklingError):
            return "it holds Python objects besides tensors and plain data, which a safe load (weights_only) refuses"
        return f"it is a damaged or truncated PyTorch file ({size:,} bytes)"
    if head[:1] == b"\x80":  # a pickle (protocol 2 or later): torch's legacy format or plain pickle
        return "it is a Python pickle that a safe load (weights_only) refuses, not a grpo-edu checkpoint"
    return f"it is not a PyTorch checkpoint (neither a torch zip archive nor a pickle; {size:,} bytes)"


def load_checkpoint(path, expected_config: dict | None = None) -> dict:
    """Load a checkpoint with ``weights_only=True`` (no arbitrary code runs).

    A file that cannot be used raises a `CheckpointError` (a ``ValueError``) whose
    ``reason`` says what is wrong: empty, not a PyTorch checkpoint, damaged, not a grpo-edu
    checkpoint, or, when ``expected_config`` is given and the stored ``"config"`` differs,
    written by another version of grpo-edu (its ``"format"`` differs) or made with another
    config (the fields that differ are named).
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}")
    try:
        with warnings.catch_warnings():  # torch warns about pickle protocols before failing
            warnings.simplefilter("ignore")
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # corrupt file, or something that is not a plain checkpoint
        raise CheckpointError(path, _unreadable_reason(path, exc)) from exc
    if not isinstance(state, dict) or "state_dict" not in state:
        raise CheckpointError(path, "it is a PyTorch file but not a grpo-edu checkpoint (no 'state_dict' entry)")
    if expected_config is not None:
        got = state.get("config")
        if got != expected_config:
            got = got if isinstance(got, dict) else {}
            if "format" in got and got["format"] != expected_config.get("format"):
                raise CheckpointError(
                    path,
                    f"it was written by another version of grpo-edu (checkpoint format {got['format']}, "
                    f"this version reads format {expected_config.get('format')})",
                )
            diff = sorted(k for k in set(expected_config) | set(got) if got.get(k) != expected_config.get(k))
            raise CheckpointError(path, f"it was made with another config (fields that differ: {diff})")
    return state


def load_state_dict_checked(model: torch.nn.Module, state_dict: dict, source="checkpoint"):
    """``model.load_state_dict`` with a clear error when the shapes or keys do not match (a
    `CheckpointError` whose reason names the first few missing, unexpected and misshapen keys)."""
    own = model.state_dict()
    missing = sorted(set(own) - set(state_dict))
    unexpected = sorted(set(state_dict) - set(own))
    wrong = sorted(
        f"{k}: checkpoint {tuple(state_dict[k].shape)} vs model {tuple(own[k].shape)}"
        for k in set(own) & set(state_dict)
        if tuple(own[k].shape) != tuple(state_dict[k].shape)
    )
    if missing or unexpected or wrong:
        parts = [(missing, "missing keys"), (unexpected, "unexpected keys"), (wrong, "wrong shapes")]
        what = "; ".join(
            f"{name} {keys[:3]}" + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
            for keys, name in parts
            if keys
        )
        raise CheckpointError(
            source, f"its weights do not fit this model ({what})", f"{source} does not fit this model: {what}"
        )
    model.load_state_dict(state_dict)
