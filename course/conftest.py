"""pytest glue of the autograders (course/hw*/test_autograder.py).

- The submission under test is the file named by ``$GRPO_EDU_SUBMISSION`` (default: the
  homework's own ``starter.py``), loaded by the ``submission`` fixture.
- ``@pytest.mark.graded(points=N)`` marks a graded test. Each report of a graded test
  carries ``user_properties`` ``points`` and ``verdict``: "passed", "not implemented"
  (the submission raised NotImplementedError: an untouched starter), "wrong" (an
  assertion of the grader failed), "crashed" (the submission raised another exception)
  or "error" (the test could not even start, e.g. the submission does not import).
- The main test run (``pytest`` at the repository root collects ``course/``) skips the
  autograders unless ``$GRPO_EDU_SUBMISSION`` is set: they grade one submission at a
  time, through ``python -m course.grade`` (tests/test_course.py checks them). Naming a
  file explicitly (``pytest course/hw1_reinforce/test_autograder.py``) always runs it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from course.autograde import SUBMISSION_ENV, load_module

AUTOGRADER = "test_autograder.py"


def pytest_configure(config):
    config.addinivalue_line("markers", "graded(points=1): an autograder test worth `points` points (course/)")


def pytest_ignore_collect(collection_path, config):
    if collection_path.name == AUTOGRADER and not os.environ.get(SUBMISSION_ENV):
        return True  # graded one submission at a time, by `python -m course.grade`
    return None


def verdict(report, excinfo) -> str:
    if report.passed:
        return "passed"
    if report.skipped:
        return "skipped"
    if report.when != "call":
        return "error"
    if excinfo is not None and excinfo.errisinstance(NotImplementedError):
        return "not implemented"
    if excinfo is not None and excinfo.errisinstance(AssertionError):
        return "wrong"
    return "crashed"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    marker = item.get_closest_marker("graded")
    if marker is not None and (report.when == "call" or not report.passed):
        points = marker.kwargs.get("points", marker.args[0] if marker.args else 1)
        doc = (getattr(item.function, "__doc__", None) or item.name).strip().splitlines()[0]
        if hasattr(item, "callspec"):
            doc += f" [{item.callspec.id}]"
        props = [("points", points), ("verdict", verdict(report, call.excinfo)), ("description", doc)]
        report.user_properties += props
        item.user_properties += props  # -> the teardown report, which --junitxml writes out
    return report


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)  # measured faster on small CPUs, and reproducible


@pytest.fixture(scope="module")
def submission(request):
    """The module under test: ``$GRPO_EDU_SUBMISSION`` or this homework's starter.py."""
    path = os.environ.get(SUBMISSION_ENV) or Path(request.module.__file__).parent / "starter.py"
    return load_module(path)


@pytest.fixture(scope="module")
def memo():
    """A dict that lives as long as the test module: expensive runs shared by its tests."""
    return {}


@pytest.fixture(scope="session")
def preset():
    from grpo_edu import get_preset

    return get_preset("cpu")  # graded on the small preset, on the CPU: same seed, same numbers


@pytest.fixture(scope="session")
def task(preset):
    from grpo_edu import make_task

    return make_task(preset)


@pytest.fixture(scope="session")
def reference(preset, task):
    """The SFT warm start (trained once, then loaded from the cache)."""
    from grpo_edu import reference_policy

    return reference_policy(preset, task=task, progress=False)
