"""Notebook 06 needs the optional TRL bridge: without the extra it is one skipped test, with its reason.
The figures' embedded pixels are sanitized before nbval compares outputs (see pytest_configure)."""

import importlib.util
from pathlib import Path

import pytest

NEEDS_TRL = {"06_graduate_to_trl.ipynb"}
TRL_EXTRA = ("trl", "transformers", "datasets", "accelerate")  # the [trl] extra of pyproject.toml
SKIP_REASON = 'needs the optional [trl] extra (pip install -e ".[trl]"): {} is not installed'


def missing_trl_package():
    """The first package of the [trl] extra that cannot be found, or None when all are installed."""
    for name in TRL_EXTRA:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # stubbed out in sys.modules, or broken
            found = False
        if not found:
            return name
    return None


class SkippedNotebook(pytest.Item):
    """Stands for a whole notebook that cannot run here: reported as one skipped test, with the reason."""

    def __init__(self, *, reason, **kwargs):
        super().__init__(**kwargs)
        self.add_marker(pytest.mark.skip(reason=reason))  # reported at the notebook's path, not here

    def runtest(self):  # never called: the mark skips it
        pass

    def reportinfo(self):
        return self.path, 0, f"{self.path.name}: skipped"


class SkippedNotebookFile(pytest.File):
    def collect(self):
        missing = missing_trl_package()
        yield SkippedNotebook.from_parent(self, name="notebook", reason=SKIP_REASON.format(repr(missing)))


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(file_path, parent):
    collected = yield
    if collected and file_path.name in NEEDS_TRL and missing_trl_package():
        return [SkippedNotebookFile.from_parent(parent, path=file_path)]  # instead of nbval's cells
    return collected


def pytest_configure(config):
    # A figure's output holds its PNG twice (as image/png, which nbval skips, and inside the
    # <img alt="..."> of its text/html, which carries the alt text): unless told otherwise,
    # sanitize.cfg replaces the embedded pixels, so nbval compares the alt text, not the image.
    if getattr(config.option, "nbval_sanitize_with", "") is None:
        config.option.nbval_sanitize_with = str(Path(__file__).with_name("sanitize.cfg"))
