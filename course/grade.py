"""Grade a student's copy of a homework:

    python -m course.grade hw1 path/to/student_hw1.py

runs the homework's autograder (``course/hw1_reinforce/test_autograder.py``) against that
file, prints one line per graded test and the score, and exits with 0 only if every graded
test passed. Verdicts: ``passed``; ``not implemented`` (the function still raises
NotImplementedError); ``wrong`` (a result differs from the expected one: the message says
what was expected and what came back); ``crashed`` (your code raised another exception);
``error`` (the test could not start, e.g. the file does not import).

Options: ``-v`` shows pytest's full report (tracebacks); ``--junitxml FILE`` writes one.
From Python: ``course.grade.grade("hw1", "student_hw1.py")`` returns a `GradeReport`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from course.autograde import SUBMISSION_ENV

COURSE = Path(__file__).resolve().parent
HOMEWORKS = {
    "hw1": ("hw1_reinforce", "REINFORCE"),
    "hw2": ("hw2_baselines", "baselines"),
    "hw3": ("hw3_ppo", "PPO"),
    "hw4": ("hw4_grpo", "GRPO"),
    "hw5": ("hw5_diagnosis", "diagnose a silent bug"),
}
TAGS = {"passed": "PASS", "not implemented": "TODO", "wrong": "WRONG", "crashed": "CRASH",
        "error": "ERROR", "skipped": "SKIP"}  # fmt: skip


@dataclass
class GradedTest:
    name: str  # the test function (with its parameters)
    description: str  # the first line of its docstring
    verdict: str  # passed | not implemented | wrong | crashed | error | skipped
    points: int
    message: str = ""  # why it did not pass
    seconds: float = 0.0


@dataclass
class GradeReport:
    homework: str
    submission: str
    results: list[GradedTest] = field(default_factory=list)
    pytest_exit_code: int = 0
    collected: int = 0  # tests the autograder collected (each should be graded)
    seconds: float = 0.0
    output: str = ""  # pytest's own report (shown with -v)

    @property
    def score(self) -> int:
        return sum(r.points for r in self.results if r.verdict == "passed")

    @property
    def total(self) -> int:
        return sum(r.points for r in self.results)

    def count(self, verdict: str) -> int:
        return sum(r.verdict == verdict for r in self.results)

    @property
    def all_passed(self) -> bool:
        return bool(self.results) and all(r.verdict == "passed" for r in self.results)

    def summary(self) -> str:
        folder, title = HOMEWORKS[self.homework]
        lines = [f"{self.homework} ({title}): grading {self.submission}"]
        previous = None
        for r in self.results:
            lines.append(
                f"  {TAGS.get(r.verdict, r.verdict):5s} {r.points if r.verdict == 'passed' else 0:>2}/{r.points:<2} {r.description}"
            )
            if r.verdict != "passed" and r.message:
                if r.message == previous and "\n" in r.message:
                    lines.append("        (the same message as above)")
                else:
                    lines += [f"        {line}" for line in r.message.splitlines()]
            previous = r.message if r.verdict != "passed" else None
        counts = ", ".join(f"{self.count(v)} {v}" for v in TAGS if self.count(v))
        lines.append(f"score {self.score}/{self.total} points ({counts}) in {self.seconds:.1f} s")
        if not self.results:
            lines.append(f"no graded test ran (pytest exit code {self.pytest_exit_code}): run with -v to see why")
        return "\n".join(lines)


def _message(report, verdict: str, max_lines: int = 8) -> str:
    """The exception's message: the 'E' lines of pytest's report, shortened."""
    text = report.longreprtext or ""
    lines = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("E ")]
    if not lines:
        lines = [ln for ln in text.strip().splitlines()[-3:]]
    if verdict == "not implemented":
        lines = lines[:1]
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"... ({len(lines) - max_lines} more lines: run with -v)"]
    return "\n".join(lines)


class _Collector:
    """A pytest plugin that keeps one `GradedTest` per graded test."""

    def __init__(self):
        self.results: dict[str, GradedTest] = {}
        self.collect_errors: list[str] = []
        self.collected = 0

    def pytest_collection_finish(self, session):
        self.collected = len(session.items)

    def pytest_runtest_logreport(self, report):
        props = dict(report.user_properties)
        if "verdict" not in props or (report.when == "teardown" and not report.failed):
            return
        verdict = props["verdict"]
        prev = self.results.get(report.nodeid)
        if prev is not None and prev.verdict != "passed":
            return  # keep the first failure (a teardown error after a failed call adds nothing)
        name = report.nodeid.split("::", 1)[-1]
        self.results[report.nodeid] = GradedTest(
            name=name, description=props.get("description", name), verdict=verdict,
            points=int(props.get("points", 1)), seconds=report.duration,
            message="" if verdict == "passed" else _message(report, verdict),
        )  # fmt: skip

    def pytest_collectreport(self, report):
        if report.failed:
            self.collect_errors.append(report.longreprtext)


def autograder_path(homework: str) -> Path:
    if homework not in HOMEWORKS:
        by_folder = {folder: hw for hw, (folder, _) in HOMEWORKS.items()}
        if homework in by_folder:
            homework = by_folder[homework]
        else:
            raise ValueError(f"homework must be one of {sorted(HOMEWORKS)}, got {homework!r}")
    return COURSE / HOMEWORKS[homework][0] / "test_autograder.py"


def grade(homework: str, submission, verbose: bool = False, pytest_args=()) -> GradeReport:
    """Run ``homework``'s autograder against the file ``submission``; never raises for a
    bad submission (the report says what went wrong)."""
    import pytest

    tests = autograder_path(homework)
    homework = tests.parent.name.split("_")[0]
    path = Path(submission).expanduser().resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no such submission file: {path}")
    collector = _Collector()
    args = [str(tests), "-p", "no:cacheprovider", "--rootdir", str(COURSE.parent),
            "-o", "console_output_style=classic", *pytest_args]  # fmt: skip
    if not verbose:
        args += ["-q"]
    old = os.environ.get(SUBMISSION_ENV)
    os.environ[SUBMISSION_ENV] = str(path)
    out = io.StringIO()
    t0 = time.perf_counter()
    try:
        redirect = contextlib.nullcontext() if verbose else contextlib.redirect_stdout(out)
        with redirect:
            code = pytest.main(args, plugins=[collector])
    finally:
        if old is None:
            os.environ.pop(SUBMISSION_ENV, None)
        else:
            os.environ[SUBMISSION_ENV] = old
    report = GradeReport(homework, str(path), list(collector.results.values()), int(code),
                         collector.collected, time.perf_counter() - t0, out.getvalue())  # fmt: skip
    for err in collector.collect_errors:
        report.results.append(
            GradedTest(
                "collection",
                "the autograder could not be collected",
                "error",
                0,
                err.strip().splitlines()[-1] if err.strip() else "",
            )
        )
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course.grade",
        description="Grade a homework submission: python -m course.grade hw1 path/to/student_hw1.py",
    )
    parser.add_argument("homework", help=f"one of {', '.join(HOMEWORKS)}")
    parser.add_argument("submission", help="the student's Python file (a filled-in copy of starter.py)")
    parser.add_argument("-v", "--verbose", action="store_true", help="show pytest's full report")
    parser.add_argument("--junitxml", help="also write a JUnit XML report to this file")
    a = parser.parse_args(argv)
    try:
        tests = autograder_path(a.homework)
        path = Path(a.submission)
        if not path.is_file():
            raise FileNotFoundError(f"no such submission file: {path}")
    except (ValueError, FileNotFoundError) as exc:
        parser.error(str(exc))
    extra = [f"--junitxml={a.junitxml}"] if a.junitxml else []
    report = grade(tests.parent.name, path, verbose=a.verbose, pytest_args=extra)
    print(report.summary())
    return 0 if report.all_passed and report.pytest_exit_code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
