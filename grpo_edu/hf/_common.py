"""What every part of the bridge needs: importing the optional packages, and quiet runs."""

from __future__ import annotations

import os

INSTALL = 'pip install -e ".[trl]"'


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
