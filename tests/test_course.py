"""The course's homework machinery (course/): for every homework, the autograder passes
the reference solution on every graded test, and fails the untouched starter on every
graded test with NotImplementedError (never with another error).

The autograders run in this process through `course.grade.grade` (pytest.main with a
collecting plugin), so torch is imported once and the SFT reference comes from the cache.
"""

import ast
import inspect

import pytest

import grpo_edu.functional as Fn
from course.autograde import load_module
from course.grade import COURSE, HOMEWORKS, grade, main

SOLUTIONS = {hw: COURSE / "solutions" / f"{hw}.py" for hw in HOMEWORKS}
STARTERS = {hw: COURSE / folder / "starter.py" for hw, (folder, _) in HOMEWORKS.items()}


@pytest.mark.parametrize("hw", list(HOMEWORKS))
def test_solution_passes_every_graded_test(hw):
    report = grade(hw, SOLUTIONS[hw])
    assert report.results, f"no graded test ran:\n{report.output[-3000:]}"
    assert len(report.results) == report.collected, f"every collected test must be graded:\n{report.summary()}"
    assert report.all_passed and report.pytest_exit_code == 0, report.summary()


@pytest.mark.parametrize("hw", list(HOMEWORKS))
def test_starter_fails_every_graded_test_with_not_implemented(hw):
    report = grade(hw, STARTERS[hw])
    assert report.results and len(report.results) == report.collected, report.summary()
    other = [r for r in report.results if r.verdict != "not implemented"]
    assert not other, "the untouched starter must fail only with NotImplementedError:\n" + report.summary()
    assert report.score == 0 and report.pytest_exit_code == 1


@pytest.mark.parametrize("hw", list(HOMEWORKS))
def test_starter_matches_solution_and_library_signatures(hw):
    starter, solution = load_module(STARTERS[hw]), load_module(SOLUTIONS[hw])
    assert starter.__all__ == solution.__all__
    for name in starter.__all__:
        sig = inspect.signature(getattr(starter, name))
        assert [p.name for p in sig.parameters.values()] == list(
            inspect.signature(getattr(solution, name)).parameters
        ), name
        if name in Fn.__all__:  # same parameters and defaults as the library's function
            lib = inspect.signature(getattr(Fn, name))
            assert [(p.name, p.default) for p in sig.parameters.values()] == [
                (p.name, p.default) for p in lib.parameters.values()
            ], name
        doc = getattr(starter, name).__doc__
        assert doc and "Equation" in doc and "Returns" in doc, f"{hw}.{name}: docstring with the equation and shapes"


@pytest.mark.parametrize("hw", list(HOMEWORKS))
def test_solutions_are_plain_torch(hw):
    """Reference solutions are written independently: they import no grpo_edu code."""
    tree = ast.parse(SOLUTIONS[hw].read_text())
    imported = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    imported += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert not [m for m in imported if m.startswith("grpo_edu")], imported


def test_main_test_run_skips_the_autograders(monkeypatch):
    """Collecting course/ without $GRPO_EDU_SUBMISSION collects no autograder (and no error)."""
    monkeypatch.delenv("GRPO_EDU_SUBMISSION", raising=False)

    class Count:
        items, errors = [], []

        def pytest_collection_finish(self, session):
            self.items = [i.nodeid for i in session.items]

        def pytest_collectreport(self, report):
            if report.failed:
                self.errors.append(report.nodeid)

    count = Count()
    code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", str(COURSE)], plugins=[count])
    assert not count.errors and not [i for i in count.items if "test_autograder" in i], count.items
    assert code in (0, 5)  # 5: nothing collected


def test_grade_command_line_errors(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["hw9", str(SOLUTIONS["hw1"])])
    assert exc.value.code == 2 and "homework must be one of" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["hw1", "no/such/file.py"])
    assert exc.value.code == 2 and "no such submission file" in capsys.readouterr().err


def test_starter_experiments_run_with_the_solution(monkeypatch):
    """The experiment helpers of each starter run (tiny budgets) once the functions exist."""
    monkeypatch.setenv("MPLBACKEND", "Agg")
    mods = {}
    for hw in HOMEWORKS:
        starter, solution = load_module(STARTERS[hw]), load_module(SOLUTIONS[hw])
        for name in starter.__all__:
            setattr(starter, name, getattr(solution, name))
        mods[hw] = starter
    tiny = dict(sequences_per_step=32)
    assert len(mods["hw1"].maze_experiment(steps=2)["success"]) == 2
    assert len(mods["hw1"].arithmetic_experiment(steps=1, **tiny).steps) == 1
    for baseline in ("critic", "running_mean"):
        assert len(mods["hw2"].training_experiment(baseline, steps=1, **tiny).steps) == 1
    runs = mods["hw3"].clip_ablation(eps_values=(0.2,), steps=1, seeds=(0,), **tiny)
    assert list(runs) == ["eps=0.2"] and len(runs["eps=0.2"][0].steps) == 1
    runs = mods["hw4"].experiment("loss_type", ("sequence_mean", "constant"), steps=1, seeds=(0,), **tiny)
    assert list(runs) == ["loss_type=sequence_mean", "loss_type=constant"]
    mods["hw4"].plot_metrics(runs, keys=("reward", "completion_length"))
