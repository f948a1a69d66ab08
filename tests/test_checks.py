"""course/checks/, the registry of the notebooks' checks: the machinery on hand-made checks, then the
records behind every registered bound.

- A check passes when its value satisfies its rule and its control does not; a control that passes
  the rule makes the check fail (it tests nothing). The check cell prints names only, the same on
  every machine, and raises naming every failing check with its values.
- Each asserted, seed-dependent comparison was calibrated on five seed shifts and its bound sits at
  least three standard deviations from their mean, on the side the rule wants (ratios on log10).
- Each asserted check passed every held-out draw, judged against the bound it has now; the held-out
  draws used shifts no bound was set on, on two CPU kernels at least.
- The testing page's table is the registry's (``python -m course.checks table --write``).
"""

from __future__ import annotations

import json
import math

import pytest

from course import checks as C
from course.checks.__main__ import PAGE

# ------------------------------------------------------------------ the machinery, by hand


def _check(fn, asserted=True, exact=False):
    return C.Check("nb", fn.__name__, "a claim", "a control", fn, asserted=asserted, why_printed="why", exact=exact)


def test_a_rule_passes_and_its_control_must_fail():
    assert C.Measured("x", 2.0, ">", 1.0, control=0.5).ok
    assert not C.Measured("x", 2.0, ">", 1.0, control=1.5).ok  # the control passes too: tests nothing
    assert not C.Measured("x", 0.9, ">", 1.0).ok
    assert C.Measured("x", 0.9, "<", 1.0).ok
    assert not C.Measured("x", float("nan"), "<", 1.0).ok
    with pytest.raises(ValueError, match="op"):
        C.Measured("x", 1.0, ">=", 1.0)


def test_run_checks_prints_names_only_and_raises_naming_each_failure(monkeypatch):
    monkeypatch.delenv(C.RECORD_ENV, raising=False)

    def rises(ns):
        return C.Measured("rise", ns["rise"], ">", 1.3, control=1.0, scale="log")

    def tied(ns):
        return [C.Measured("a", ns["a"], "<", 0.1), C.Measured("b", 0.0, "<", 0.1)]

    def quoted(ns):
        return C.Measured("lead", ns["lead"], ">", 0.0)

    checks = [_check(rises), _check(tied), _check(quoted, asserted=False)]
    outputs = []
    for ns in ({"rise": 1.8, "a": 0.01, "lead": -1.0}, {"rise": 2.5, "a": 0.05, "lead": 3.0}):
        lines = []
        C.run_checks("nb", ns, checks, echo=lines.append)
        outputs.append(lines)
    assert outputs[0] == outputs[1]  # another draw, the same output: no number in it
    assert outputs[0][0] == "nb: 2 of 2 checks passed"
    with pytest.raises(AssertionError) as err:
        C.run_checks("nb", {"rise": 1.1, "a": 0.5, "lead": 0.0}, checks, echo=lambda s: None)
    text = str(err.value)
    assert "2 check(s) failed" in text and "rise = 1.1" in text and "a = 0.5" in text and "lead" not in text
    with pytest.raises(AssertionError, match="raised KeyError"):
        C.run_checks("nb", {}, checks[:1], echo=lambda s: None)


def test_draws_are_written_filed_and_summed_by_hand(tmp_path, monkeypatch):
    monkeypatch.setattr(C, "RECORDS", tmp_path / "records")
    monkeypatch.setenv(C.RECORD_ENV, str(tmp_path / "draws"))
    monkeypatch.delenv(C.KERNEL_ENV, raising=False)

    def rises(ns):
        return C.Measured("rise", ns["rise"], ">", 1.3, control=1.0, scale="log")

    for shift, rise in enumerate([1.6, 1.8, 2.0, 1.7, 1.9]):
        monkeypatch.setenv(C.SHIFT_ENV, str(shift))
        C.run_checks("nb", {"rise": rise}, [_check(rises)], echo=lambda s: None)
    assert len(list((tmp_path / "draws").glob("*.json"))) == 5
    C.add_draws([tmp_path / "draws"], "calibration")
    monkeypatch.setattr(C, "checks_of", lambda nb: [_check(rises)])
    cal = C.calibration("nb", "rises", "rise")
    logs = [math.log10(x) for x in (1.6, 1.8, 2.0, 1.7, 1.9)]
    mean = sum(logs) / 5
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 4)
    assert cal["n"] == 5 and cal["shifts"] == [0, 1, 2, 3, 4]
    assert cal["mean"] == pytest.approx(mean) and cal["sd"] == pytest.approx(sd)
    assert cal["sd_from_bound"] == pytest.approx((mean - math.log10(1.3)) / sd)
    assert C.seed_range("nb", "rises") == (1.6, 2.0, 5)
    assert C.seed_range("nb", "rises", here=2.5) == (1.6, 2.5, 5)  # this run (shift 4) stands in for shift 4's 1.9
    assert C.rebound("nb", "rises", "rise", 1.5) == 5  # a bound set from the spread, before any held-out draw
    assert C.calibration("nb", "rises", "rise")["sd_from_bound"] == pytest.approx((mean - math.log10(1.5)) / sd)
    C.rebound("nb", "rises", "rise", 1.3)
    # a held-out draw that fails is filed as such; a second draw of the same shift and kernel is refused,
    # naming the flags to add, and replaces it only with a reason, logged with the failure it replaced
    held = tmp_path / "draws" / "nb__shift21__native.json"
    for rise in (1.2, 1.5):
        monkeypatch.setenv(C.SHIFT_ENV, "21")
        try:
            C.run_checks("nb", {"rise": rise}, [_check(rises)], echo=lambda s: None)
        except AssertionError:
            pass
        if rise == 1.5:
            with pytest.raises(ValueError, match='add --replace --why "'):
                C.add_draws([held], "held-out")
            with pytest.raises(ValueError, match="needs --why"):
                C.add_draws([held], "held-out", replace=True)
            assert [r["ok"] for r in C.held_out("nb", "rises")] == [False]  # nothing filed when refused
            assert C.replaced() == []
        C.add_draws([held], "held-out", replace=rise == 1.5, why="bound re-set" if rise == 1.5 else "")
        assert [r["ok"] for r in C.held_out("nb", "rises")] == [rise > 1.3]
    [entry] = C.replaced()
    assert (entry["notebook"], entry["shift"], entry["kernel"], entry["why"]) == ("nb", 21, "native", "bound re-set")
    assert entry["old_failed"] == ["rises"] and entry["new_failed"] == []
    assert "| nb | 21 native |" in C.table(["nb"]) and "rises; none | bound re-set |" in C.table(["nb"])
    with pytest.raises(ValueError, match="role"):
        C.add_draws([tmp_path / "draws"], "tuning")
    with pytest.raises(ValueError, match="held-out draws"):  # after a held-out draw a bound moved is a re-tune
        C.rebound("nb", "rises", "rise", 1.1)


def test_the_command_refuses_a_second_held_out_draw_before_running_it(tmp_path, monkeypatch, capsys):
    from course.checks import __main__ as cli

    monkeypatch.setattr(C, "RECORDS", tmp_path / "records")
    monkeypatch.setenv(C.RECORD_ENV, str(tmp_path / "draws"))
    monkeypatch.setenv(C.SHIFT_ENV, "21")
    monkeypatch.delenv(C.KERNEL_ENV, raising=False)
    C.run_checks("nb", {}, [_check(lambda ns: C.Measured("x", 1.0, ">", 0.0))], echo=lambda s: None)
    assert cli.main(["add", "--role", "held-out", str(tmp_path / "draws")]) == 0
    assert cli.main(["add", "--role", "held-out", str(tmp_path / "draws")]) == 2
    assert "nb shift 21 native" in capsys.readouterr().err

    def executed(*args, **kwargs):
        raise AssertionError("a refused draw executed a notebook")

    monkeypatch.setattr(cli.subprocess, "run", executed)
    assert cli.main(["draw", "--role", "held-out", "--runs", "21:native", "notebooks/nb.ipynb"]) == 2
    assert '--replace --why "' in capsys.readouterr().err
    assert cli.main(["draw", "--role", "held-out", "--runs", "21:native", "--replace", "nb.ipynb"]) == 2  # no why
    assert C.replaced() == []


# ------------------------------------------------------------------ the registry's records


def _asserted_comparisons() -> list:
    return [
        pytest.param(nb, c, m, id=f"{nb}.{c.name}: {m['quantity']}")
        for nb in C.CONVERTED
        for c in C.checks_of(nb)
        if c.asserted
        for m in C._latest(nb, c.name)
    ]


def test_every_check_has_a_claim_a_control_and_a_record():
    for nb in C.CONVERTED:
        checks = C.checks_of(nb)
        assert len({c.name for c in checks}) == len(checks)
        for c in checks:
            assert C._latest(nb, c.name), f"{nb}.{c.name}: no draw recorded (python -m course.checks draw)"


@pytest.mark.parametrize("nb, c, m", _asserted_comparisons())
def test_each_bound_is_three_deviations_from_its_calibration(nb, c, m):
    cal = C.calibration(nb, c.name, m["quantity"])
    if c.exact:
        assert all(C.Measured(**_args(m, value=x)).passes() for x in cal.get("values", [m["value"]]))
        return
    assert cal["n"] >= 5 and set(cal["shifts"]) >= {0, 1, 2, 3, 4}, f"calibrated on {cal.get('shifts')}"
    assert cal["sd_from_bound"] >= C.MIN_SD, (
        f"{nb}.{c.name} {m['quantity']}: bound {cal['bound']} is {cal['sd_from_bound']:.2f} sd from the mean "
        f"{cal['mean']:.4g} ({cal['scale']}; values {cal['values']}): print it, or set the bound from the spread"
    )


def _args(m: dict, value=None) -> dict:
    return {
        "quantity": m["quantity"],
        "value": m["value"] if value is None else value,
        "op": m["op"],
        "bound": m["bound"],
    }


@pytest.mark.parametrize("nb, c, m", _asserted_comparisons())
def test_each_control_fails_its_rule_in_every_draw(nb, c, m):
    for d in C.records(nb)["draws"]:
        for x in d["results"].get(c.name, {}).get("measured", []):
            if x["quantity"] == m["quantity"] and x["control"] is not None:
                assert not x["control_passes"], f"{nb}.{c.name}: its control passes at shift {d['shift']} {d['kernel']}"


@pytest.mark.parametrize("nb", C.CONVERTED)
def test_held_out_draws_passed_with_the_bounds_of_now(nb):
    draws = C.records(nb)["draws"]
    held = [d for d in draws if d["role"] == "held-out"]
    cal = {d["shift"] for d in draws if d["role"] == "calibration"}
    assert len({d["kernel"] for d in held}) >= 2, f"{nb}: held-out draws on {[d['kernel'] for d in held]}"
    assert not cal & {d["shift"] for d in held}, "a held-out shift also set a bound"
    for c in C.checks_of(nb):
        if not c.asserted:
            continue
        now = {m["quantity"]: m["bound"] for m in C._latest(nb, c.name)}
        for d in held:
            r = d["results"][c.name]
            assert r["ok"], f"{nb}.{c.name} failed held-out shift {d['shift']} {d['kernel']}: print it, do not re-tune"
            assert {m["quantity"]: m["bound"] for m in r["measured"]} == now, f"{nb}.{c.name}: bound changed since"


def test_the_testing_page_shows_the_registry():
    page = PAGE.read_text()
    assert C.page_with_table(page) == page, "run: python -m course.checks table --write"


def test_the_records_are_the_draws_of_the_converted_notebooks():
    for path in sorted(C.RECORDS.glob("*.json")):
        rec = json.loads(path.read_text())
        assert rec["notebook"] == path.stem and path.stem in C.CONVERTED
        assert {d["role"] for d in rec["draws"]} <= set(C.ROLES)
