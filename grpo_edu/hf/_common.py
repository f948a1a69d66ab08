"""What every part of the bridge needs: importing the optional packages, and quiet runs."""

from __future__ import annotations

import os

INSTALL = 'pip install -e ".[trl]"'


EXTRA = ("trl", "transformers", "datasets", "accelerate", "tokenizers")  # the [trl] extra (pyproject.toml)


def batch_of(sequences_per_step, preset="cpu") -> int:
    """``sequences_per_step``, or with None the preset's (its owner: `grpo_edu.warmstart.presets`)."""
    if sequences_per_step is not None:
        return sequences_per_step
    from ..warmstart.presets import resolve_preset

    return resolve_preset(preset).sequences_per_step


class MissingExtraError(ImportError):
    """A package of the ``[trl]`` extra is not installed (the message says how to install it)."""


def missing_extra() -> str | None:
    """Why the ``[trl]`` extra is unusable, as the end of a sentence ("needs the optional package
    'trl' ...": the first package of it that cannot be found), or None when all are there. It looks
    the packages up without importing them: no work."""
    import importlib.util

    for module in EXTRA:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a module stubbed out in sys.modules, or a broken one
            found = False
        if not found:
            return f"needs the optional package {module!r} (the [trl] extra): install it with {INSTALL}"
    return None


def require_extra() -> None:
    """Raise `MissingExtraError` (one line, nothing chained) unless the whole ``[trl]`` extra is installed:
    called first by what needs it (`grpo-edu bench --trl`, `grpo-edu trl-launch`), before any work."""
    reason = missing_extra()
    if reason:
        raise MissingExtraError(f"grpo_edu.hf {reason}")


def _require(module: str):
    """Import an optional dependency or raise an ImportError that says how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"grpo_edu.hf needs the optional package {module.split('.')[0]!r}: install the extra with {INSTALL}"
        ) from exc


def _quiet_progress(transformers):
    """Silence transformers' weight loading/saving progress bars (they write to stderr)."""
    import contextlib

    @contextlib.contextmanager
    def ctx():
        log = transformers.utils.logging
        was = log.is_progress_bar_enabled()
        log.disable_progress_bar()
        try:
            yield
        finally:
            if was:
                log.enable_progress_bar()

    return ctx()


def quiet():
    """A context that silences the deprecation notices and logger advice transformers, TRL
    and the torch DataLoader print during a small CPU run (errors still raise)."""
    import contextlib
    import warnings

    transformers = _require("transformers")

    @contextlib.contextmanager
    def ctx():
        log = transformers.utils.logging
        level = log.get_verbosity()
        log.set_verbosity_error()
        with warnings.catch_warnings(), _quiet_progress(transformers):
            for category in (FutureWarning, DeprecationWarning, UserWarning):
                warnings.filterwarnings("ignore", category=category)
            os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
            try:
                yield
            finally:
                log.set_verbosity(level)

    return ctx()
