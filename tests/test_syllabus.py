"""The syllabus (course/README.md) covers the whole course, its hours are the notebooks' own, and
the site walks it in order.

- Every notebook file and every homework set is named in the schedule, each once, in file order;
  each homework handout follows the last notebook of its week.
- Each week's stated reading and running time, and each path's total, is what the notebooks
  measure: reading at the course's pace (tests/test_notebook_reading.py: every cell's words at
  110 a minute), running as the sum of the committed cells' execution times (``metadata.execution``,
  ``iopub.status.busy`` to ``shell.execute_reply``), within the rounding the syllabus states.
- The site's navigation (course/site/index.md's toctrees, read from the source: no build) lists the
  start pages, then the syllabus's notebooks and handouts in its order, then the reference pages;
  "Next" follows the toctrees in this order.

``python tests/test_syllabus.py`` prints the measured table the syllabus quotes.
"""

from __future__ import annotations

import json
import re
import sys
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SYLLABUS = ROOT / "course" / "README.md"
INDEX = ROOT / "course" / "site" / "index.md"
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
HOMEWORK = sorted(p.parent.name for p in (ROOT / "course").glob("hw*/README.md"))
WORDS_PER_MINUTE = 110  # tests/test_notebook_reading.py's pace
# a week's reading is stated to 5 minutes, a path's to 0.1 h; each may be off by one unit, as a
# notebook's own "Reading time" may be (test_notebook_reading's SLACK), before the syllabus is updated
SLACK_MINUTES, SLACK_HOURS = 5.0, 0.1
START = ["/README", "/course/README"]  # the site's first pages, before the course
REFERENCE = ["derivation", "measurements", "questions", "knobs", "speedrun", "testing", "changes", "api/index"]


def reading_minutes(stem: str) -> float:
    """Every cell's words (prose and code) at 110 words a minute, as test_notebook_reading counts."""
    cells = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text())["cells"]
    return sum(len("".join(c["source"]).split()) for c in cells) / WORDS_PER_MINUTE


def running_minutes(stem: str, strict: bool = True) -> float:
    """The committed code cells' execution times, summed (busy -> execute_reply), in minutes; a
    code cell without them fails (``strict``) or counts as 0 (the table printed for a draft)."""
    cells = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text())["cells"]
    seconds = 0.0
    for c in cells:
        if c["cell_type"] != "code":
            continue
        ex = c["metadata"].get("execution")
        if not ex and not strict:
            continue
        assert ex, f"{stem}: a code cell without execution metadata (re-execute the notebook)"
        t0, t1 = (
            datetime.fromisoformat(ex[k].replace("Z", "+00:00")) for k in ("iopub.status.busy", "shell.execute_reply")
        )
        seconds += (t1 - t0).total_seconds()
    return seconds / 60


def schedule(text: str) -> list[dict]:
    """The rows of the syllabus's schedule table: week, notebooks, handouts out, stated minutes."""
    section = text.split("## Schedule", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or not cells[0].isdigit():
            continue
        week, _lecture, notebooks, minutes, homework = cells
        m = re.fullmatch(r"(\d+) \+ (<1|\d+)", minutes)
        assert m, f"week {week}: the time column reads {minutes!r}, not 'READ + RUN'"
        rows.append(
            {
                "week": int(week),
                "notebooks": re.findall(r"`notebooks/(\d\d_\w+)\.ipynb`", notebooks),
                "handouts": re.findall(r"\]\((hw\d_\w+)/README\.md\)", homework),
                "homework": homework,
                "reading": int(m.group(1)),
                "running": 0.5 if m.group(2) == "<1" else int(m.group(2)),
            }
        )
    return rows


def paths(text: str) -> list[dict]:
    """The syllabus's paths (short path, full semester): weeks and stated hours."""
    out = []
    for m in re.finditer(r"^\| \*\*(.+?)\*\* \| weeks (\d+)-(\d+) \|[^|\n]*\| ([\d.]+) h \| (\d+) min \|$", text, re.M):
        out.append({"name": m[1], "weeks": range(int(m[2]), int(m[3]) + 1), "hours": float(m[4]), "run": int(m[5])})
    return out


def course_order(text: str) -> list[str]:
    """The syllabus in reading order, as site documents: each week's notebooks, then its handouts."""
    order = []
    for row in schedule(text):
        order += [f"/notebooks/{n}" for n in row["notebooks"]]
        order += [f"/course/{h}/README" for h in row["handouts"]]
    return order


def toctree_entries(index: str) -> list[str]:
    """The documents of index.md's toctrees, in order (options and blank lines skipped)."""
    entries = []
    for block in re.findall(r"```\{toctree\}\n(.*?)```", index, re.S):
        entries += [ln.strip() for ln in block.splitlines() if ln.strip() and not ln.strip().startswith(":")]
    return entries


def _week_measured(row: dict, strict: bool = True) -> tuple[float, float]:
    running = sum(running_minutes(n, strict) for n in row["notebooks"])
    return sum(map(reading_minutes, row["notebooks"])), running


def measured_table() -> str:
    """What the syllabus should state, from the notebooks as they are (a cell not executed counts 0 s)."""
    lines = ["week  notebooks                            reading (min)  running (min)"]
    for row in schedule(SYLLABUS.read_text()):
        r, x = _week_measured(row, strict=False)
        lines.append(f"{row['week']:>4}  {', '.join(n[:2] for n in row['notebooks']):<36} {r:>13.1f}  {x:>13.1f}")
    for p in paths(SYLLABUS.read_text()):
        rows = [row for row in schedule(SYLLABUS.read_text()) if row["week"] in p["weeks"]]
        r, x = (sum(v) for v in zip(*(_week_measured(row, strict=False) for row in rows), strict=True))
        lines.append(f"{p['name']}: reading {r / 60:.2f} h, running {x:.1f} min")
    return "\n".join(lines)


# ------------------------------------------------------------------ the tests


def test_the_schedule_names_every_notebook_and_homework_once_in_course_order():
    rows = schedule(SYLLABUS.read_text())
    named = [n for row in rows for n in row["notebooks"]]
    assert named == NOTEBOOKS, f"the schedule names {named}; the notebooks are {NOTEBOOKS}"
    handouts = [h for row in rows for h in row["handouts"]]
    assert handouts == HOMEWORK, handouts
    assert [row["week"] for row in rows] == list(range(len(rows)))
    # each set comes out after the notebook it goes with (its handout's "Goes with" line names it first:
    # hw1-hw4 with notebooks 01-04, hw5 with 11) and is due a week later
    for row in rows:
        for h in row["handouts"]:
            n = int(h[2])
            goes_with = (ROOT / "course" / h / "README.md").read_text().split("Goes with", 1)[1].split("\n\n", 1)[0]
            nb = re.search(r"notebooks?[/ ](\d\d)", goes_with)
            assert nb, f"{h}/README.md: its 'Goes with' line names no notebook"
            assert row["notebooks"] and row["notebooks"][-1].startswith(f"{nb[1]}_"), (h, row["notebooks"])
            due = next(r for r in rows if r["week"] == row["week"] + 1)
            assert f"HW{n} due" in due["homework"], (h, due["homework"])


def test_the_paths_are_the_core_ladder_and_the_whole_semester():
    ps = {p["name"]: p for p in paths(SYLLABUS.read_text())}
    assert set(ps) == {"short path", "full semester"}, set(ps)
    rows = schedule(SYLLABUS.read_text())
    short = [n for r in rows if r["week"] in ps["short path"]["weeks"] for n in r["notebooks"]]
    full = [n for r in rows if r["week"] in ps["full semester"]["weeks"] for n in r["notebooks"]]
    assert short == [n for n in NOTEBOOKS if n[:2] <= "05"] and full == NOTEBOOKS


def hour_problems(text: str) -> list[str]:
    """Where the syllabus ``text`` states a time the notebooks do not measure (empty: none)."""
    problems = []
    for row in schedule(text):
        r, x = _week_measured(row)
        if abs(row["reading"] - r) > SLACK_MINUTES:
            problems.append(f"week {row['week']}: reading {row['reading']} min stated, {r:.1f} measured")
        if abs(row["running"] - x) > max(1.0, 0.2 * x):
            problems.append(f"week {row['week']}: running {row['running']} min stated, {x:.1f} measured")
    for p in paths(text):
        rows = [row for row in schedule(text) if row["week"] in p["weeks"]]
        r, x = (sum(v) for v in zip(*map(_week_measured, rows), strict=True))
        if abs(p["hours"] - r / 60) > SLACK_HOURS:
            problems.append(f"{p['name']}: {p['hours']} h of reading stated, {r / 60:.2f} measured")
        if abs(p["run"] - x) > max(1.0, 0.2 * x):
            problems.append(f"{p['name']}: {p['run']} min of running stated, {x:.1f} measured")
    return problems


def test_stated_hours_are_the_measured_ones():
    """Reading per week is stated to 5 minutes and per path to 0.1 h, each within one unit; running to
    the minute. A re-execution moves a running time by its own noise, so running may differ by 20%
    (1 minute at least) before the syllabus must be updated from ``python tests/test_syllabus.py``."""
    problems = hour_problems(SYLLABUS.read_text())
    assert not problems, "\n".join(problems) + "\n\nmeasured:\n" + measured_table()


def test_the_hours_check_fails_on_a_wrong_number():
    """Control: the same syllabus with week 1's reading moved by 10 minutes, or a path's hours by
    0.3, fails the check."""
    text = SYLLABUS.read_text()
    row, path = schedule(text)[1], paths(text)[0]
    week = f"| {row['reading']} + "
    hours = f"| {path['hours']} h |"
    assert week in text and hours in text
    assert any(
        p.startswith("week 1: reading") for p in hour_problems(text.replace(week, f"| {row['reading'] + 10} + ", 1))
    )
    assert any("h of reading" in p for p in hour_problems(text.replace(hours, f"| {path['hours'] + 0.3:.1f} h |", 1)))


def test_running_time_sums_the_cells_execution_metadata(tmp_path, monkeypatch):
    cell = {"cell_type": "code", "source": "x", "outputs": [], "execution_count": 1}
    cells = [
        {
            **cell,
            "metadata": {
                "execution": {
                    "iopub.status.busy": "2026-01-01T00:00:00.0Z",
                    "shell.execute_reply": "2026-01-01T00:01:30.0Z",
                }
            },
        },
        {
            **cell,
            "metadata": {
                "execution": {
                    "iopub.status.busy": "2026-01-01T00:02:00.0Z",
                    "shell.execute_reply": "2026-01-01T00:02:30.0Z",
                }
            },
        },
        {"cell_type": "markdown", "metadata": {}, "source": "one two three"},
    ]
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "99_x.ipynb").write_text(json.dumps({"cells": cells}))
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert running_minutes("99_x") == 2.0
    assert reading_minutes("99_x") == 5 / WORDS_PER_MINUTE  # "x", "x", "one", "two", "three"


def test_the_site_walks_the_syllabus():
    """index.md's toctrees: the start pages, the course in the syllabus's order, then the reference."""
    entries = toctree_entries(INDEX.read_text())
    course = course_order(SYLLABUS.read_text())
    assert entries == START + course + REFERENCE, entries
    assert "{glob}" not in INDEX.read_text() and ":glob:" not in INDEX.read_text()  # a glob would reorder it


def test_the_order_check_fails_on_a_handout_out_of_place():
    """Control: the handout of HW1 after notebook 02 instead of 01 is not the syllabus's order."""
    entries = toctree_entries(INDEX.read_text())
    moved = [e for e in entries if e != "/course/hw1_reinforce/README"]
    moved.insert(moved.index("/notebooks/02_baseline") + 1, "/course/hw1_reinforce/README")
    assert moved != START + course_order(SYLLABUS.read_text()) + REFERENCE


def test_split_notebooks_are_numbered_as_parts_everywhere():
    """A notebook split in parts is 'NN · part k/n' in its heading, the README's map and the syllabus."""
    groups: dict[str, list[str]] = {}
    for stem in NOTEBOOKS:
        groups.setdefault(stem[:2], []).append(stem)
    readme, syllabus = (ROOT / "README.md").read_text(), SYLLABUS.read_text()
    for num, stems in groups.items():
        for k, stem in enumerate(stems, 1):
            title = "".join(json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text())["cells"][0]["source"])
            title = title.splitlines()[0]
            if len(stems) == 1:
                assert title.startswith(f"# {num} · ") and " part " not in title, title
                continue
            part = f"{num} · part {k}/{len(stems)}"
            assert title.startswith(f"# {part}: "), title
            for name, text in (("README.md", readme), ("course/README.md", syllabus)):
                assert re.search(rf"`notebooks/{stem}\.ipynb`[^\n]*{re.escape(part)}", text), (name, stem, part)
    assert "02b" not in readme + syllabus


if __name__ == "__main__":
    print(measured_table())


RUNNING_SLACK = 0.3  # a notebook's own "running time about N" is within 30% of its committed cells' time,
RUNNING_FLOOR = 10 / 60  # or within 10 seconds (a 10-second notebook's run moves by seconds with the machine's load)
_UNITS = {"second": 1 / 60, "seconds": 1 / 60, "minute": 1.0, "minutes": 1.0}


def stated_running_minutes(stem: str) -> float | None:
    """The minutes a notebook's own text states ("running time about N seconds|minutes"), or None."""
    cells = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text())["cells"]
    text = " ".join(" ".join("".join(c["source"]).split()) for c in cells if c["cell_type"] == "markdown")
    m = re.search(r"[Rr]unning time about (\d+) (seconds?|minutes?)", text)
    return int(m.group(1)) * _UNITS[m.group(2)] if m else None


def running_problem(stem: str) -> str | None:
    """None when the notebook states its running time and the statement is within ``RUNNING_SLACK`` of
    the sum of its committed cells' execution times (``running_minutes``), or ``RUNNING_FLOOR``; else
    what is wrong."""
    stated, measured = stated_running_minutes(stem), running_minutes(stem)
    if stated is None:
        return f"{stem}: no 'running time about N seconds|minutes' in its text"
    if abs(stated - measured) > max(RUNNING_SLACK * measured, RUNNING_FLOOR):
        return f"{stem}: states {stated:.2f} min of running, its committed cells took {measured:.2f} min"
    return None


def test_each_notebook_states_its_measured_running_time():
    """Each notebook's "running time about N" is within 30% (or 10 s) of the time its committed cells took
    on one thread (the execution metadata of the run that is committed: a first run, references trained)."""
    problems = [p for p in map(running_problem, NOTEBOOKS) if p]
    assert not problems, "\n".join(problems)


def test_the_running_time_check_fails_on_a_stated_time_off_by_more_than_30_percent(tmp_path, monkeypatch):
    """Control: 10 seconds stated for 42 s of cells (notebook 00 before it was corrected) and 4 minutes
    for 168 s (04_grpo_3_variants before) fail; 3 minutes for 168 s passes."""
    t1 = {42: "2026-01-01T00:00:42.0Z", 168: "2026-01-01T00:02:48.0Z"}
    (tmp_path / "notebooks").mkdir()
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    for stated, seconds, ok in (("10 seconds", 42, False), ("4 minutes", 168, False), ("3 minutes", 168, True)):
        ex = {"iopub.status.busy": "2026-01-01T00:00:00.0Z", "shell.execute_reply": t1[seconds]}
        cells = [
            {
                "cell_type": "markdown",
                "metadata": {},
                "source": f"Reading time about 5 minutes; running time about {stated}.",
            },
            {"cell_type": "code", "source": "x", "outputs": [], "execution_count": 1, "metadata": {"execution": ex}},
        ]
        (tmp_path / "notebooks" / "99_x.ipynb").write_text(json.dumps({"cells": cells}))
        assert (running_problem("99_x") is None) == ok, (stated, seconds)
