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
    if hw == "hw5":  # Part B hands out two functions with a planted bug each: they fail as "wrong"
        other = [r for r in other if not (r.verdict == "wrong" and not r.name.startswith("test_diagnose"))]
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
        equation = "Equation" in doc or (hw, name) == ("hw5", "diagnose")  # a diagnosis has no equation
        assert doc and equation and "Returns" in doc, f"{hw}.{name}: docstring with the equation and shapes"


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
    runs = mods["hw5"].practice_runs(names=("healthy", "answers_cut"), steps=2, sequences_per_step=32)
    assert list(runs) == ["healthy", "answers_cut"] and len(runs["healthy"][0].steps) == 2
    assert 0.0 <= mods["hw5"].score(runs) <= 1.0


# ------------------------------------------------------- hw5: the diagnosis is scored fairly


def _hw5_answering(folder, answer: str):
    """The hw5 solution with a ``diagnose`` that always returns ``answer``."""
    path = folder / "hw5_constant.py"
    path.write_text(
        "from course.autograde import load_module\n"
        f"_solution = load_module({str(SOLUTIONS['hw5'])!r})\n"
        "__all__ = _solution.__all__\n"
        "group_advantages, clipped_surrogate_loss = _solution.group_advantages, _solution.clipped_surrogate_loss\n\n\n"
        f"def diagnose(history):\n    return {answer!r}\n"
    )
    return path


def test_hw5_a_constant_diagnosis_scores_chance(tmp_path):
    """Balanced held-out runs (as many per class): answering one class always scores exactly
    1 / (number of classes) of Part A's points, whichever class (graded end to end for "healthy"
    and two bugs); the solution (the control) scores all of them."""
    from collections import Counter

    from course.hw5_diagnosis.make_data import load_runs

    data = load_runs()
    classes = data["meta"]["classes"]
    counts = Counter(run["label"] for run in data["runs"])
    assert len(classes) >= 9 and "healthy" in classes and set(counts) == set(classes)
    assert len(set(counts.values())) == 1, f"not balanced: {counts}"
    for answer in ("healthy", classes[1], classes[-1]):
        report = grade("hw5", _hw5_answering(tmp_path, answer), pytest_args=["-k", "diagnose"])
        part_a = [r for r in report.results if r.name.startswith("test_diagnose")]
        assert part_a and len(part_a) == report.collected, report.summary()
        got = sum(r.points for r in part_a if r.verdict == "passed") / sum(r.points for r in part_a)
        assert got == pytest.approx(1 / len(classes)), f"always {answer!r}: {got:.3f} of Part A\n{report.summary()}"
    report = grade("hw5", SOLUTIONS["hw5"], pytest_args=["-k", "diagnose"])
    assert report.results and report.all_passed, report.summary()


def test_hw5_an_unknown_name_is_a_one_line_error_listing_the_names(tmp_path):
    from grpo_edu.demos.silent_bugs import BUG_NAMES

    report = grade("hw5", _hw5_answering(tmp_path, "overfitting"), pytest_args=["-k", "diagnose"])
    assert report.results and all(r.verdict == "wrong" for r in report.results), report.summary()
    message = report.results[0].message
    assert len(message.splitlines()) == 1 and "'overfitting'" in message and "not a known name" in message, message
    assert all(name in message for name in BUG_NAMES), message
