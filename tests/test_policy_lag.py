"""The policy-lag study (notebook 13): its bad input, the runs it makes, and its table and report by hand."""

import argparse

import pytest

from grpo_edu.studies import policy_lag as pl


def _res():
    """Two seeds; lag 0 run as "none" and "m2po" only, lag 8 for three corrections; accuracies chosen by hand."""
    rows = []
    finals = {(0, "none"): (0.70, 0.80), (0, "m2po"): (0.60, 0.62), (8, "none"): (0.50, 0.54),
              (8, "ppo_clip"): (0.40, 0.44), (8, "decoupled"): (0.72, 0.76)}  # fmt: skip
    for (lag, c), accs in finals.items():
        for seed, a in enumerate(accs):
            rows.append({"lag": lag, "correction": c, "seed": seed, "start": 0.55, "final": a, "updates": [0, 4],
                         "accuracy": [0.55, a], "clipped": 0.3 if c == "ppo_clip" else 0.05, "dropped": 0.0,
                         "truncated": 0.0, "ratio_std": 0.2, "m2": 0.0, "seconds": 1.0})  # fmt: skip
    return {"preset": "cpu", "steps": 1, "updates_per_step": 4, "rows": rows}


def test_bad_input_is_one_line_before_any_work():
    with pytest.raises(ValueError, match=r"lags must be non-negative integers \(optimizer updates\), got \[0, -1\]"):
        pl.run(lags=(0, -1))
    with pytest.raises(ValueError, match=r"unknown correction\(s\) \['ppo'\]: choose from"):
        pl.run(corrections=("none", "ppo"))
    with pytest.raises(ValueError, match="seeds must be integers"):
        pl.run(seeds=())
    with pytest.raises(ValueError, match="steps must be an integer >= 1, got 0"):
        pl.run(steps=0)
    with pytest.raises(argparse.ArgumentTypeError, match="takes integers separated by commas"):
        pl._ints("0,x")


def test_lag_zero_is_run_once_for_the_corrections_that_are_none_there():
    runs = pl._runs([0, 2], pl.ORDER)
    assert runs[:2] == [(0, "none"), (0, "m2po")]  # ppo_clip, decoupled, icepop, tis at lag 0: "none"'s run
    assert runs[2:] == [(2, c) for c in pl.ORDER]


def test_table_final_and_stall_by_hand():
    res = _res()
    t = pl.table(res)
    assert t["none"] == {0: pytest.approx(0.75), 8: pytest.approx(0.52)}
    assert t["ppo_clip"][0] == pytest.approx(0.75)  # lag 0: "none"'s run
    assert t["m2po"] == {0: pytest.approx(0.61)}  # m2po was not run at lag 8
    assert pl.final(res, 8, "decoupled") == [0.72, 0.76]
    assert pl.stall_lag(res) == 8  # "none" 0.52 at lag 8 is below the start 0.55
    assert pl.stall_lag(res, "decoupled") is None  # above the start at both lags
    text = pl.report(res)
    assert "0.420 [0.400, 0.440]" in text  # ppo_clip at lag 8
    assert "clipped   ppo_clip   lag 0: 0.050  lag 8: 0.300" in text
    assert "plain GRPO ('none') ends no higher than it started from lag 8" in text


def test_the_figure_draws_one_line_per_correction_and_says_what_it_shows():
    from grpo_edu.figures.plotstyle import alt_text

    fig = pl.plot_lag(_res())
    left = fig.axes[0]
    labels = [line.get_label() for line in left.get_lines()]
    assert labels[:4] == ["none", "ppo_clip", "decoupled", "m2po"]
    assert "one line per correction (none, ppo_clip, decoupled, m2po)" in alt_text(fig)
    with pytest.raises(ValueError, match="res must hold the rows"):
        pl.plot_lag({"rows": []})


def test_a_short_run_records_each_correction_and_the_lag(reference, task, cpu_preset):
    res = pl.run(cpu_preset, lags=(0, 2), corrections=("none", "decoupled"), steps=2, eval_every=None,
                 reference=reference, task=task, progress=False)  # fmt: skip
    assert [(r["lag"], r["correction"]) for r in res["rows"]] == [(0, "none"), (2, "none"), (2, "decoupled")]
    assert res["updates_per_step"] == 4
    r0, r2 = res["rows"][0], res["rows"][2]
    assert r0["updates"] == [0, 8] and len(r0["accuracy"]) == 2
    assert r0["dropped"] == 0.0 and r2["dropped"] >= 0.0
    assert r0["start"] == r2["start"]  # the same reference


def test_merge_joins_seeds_and_refuses_a_mismatch_or_a_repeat(tmp_path, capsys):
    import json

    res = _res()
    a = {**res, "rows": [r for r in res["rows"] if r["seed"] == 0]}
    b = {**res, "rows": [r for r in res["rows"] if r["seed"] == 1]}
    merged = pl.merge([a, b])
    assert merged["rows"] == a["rows"] + b["rows"] and merged["steps"] == 1
    assert pl.table(merged) == pl.table(res)  # the same study as one run of both seeds
    with pytest.raises(ValueError, match=r"merge: results differ in \['steps'\]"):
        pl.merge([a, {**b, "steps": 2}])
    with pytest.raises(ValueError, match="appears twice"):
        pl.merge([a, a])
    with pytest.raises(ValueError, match="at least one"):
        pl.merge([])
    for name, r in (("a.json", a), ("b.json", b)):
        (tmp_path / name).write_text(json.dumps(r))
    pl.main(["--merge", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--json", str(tmp_path / "m.json")])
    out = capsys.readouterr().out
    assert "0.420 [0.400, 0.440]" in out and "regimes.policy_lag RESULT.json" in out
    from grpo_edu.studies.regimes import policy_lag as regime

    assert regime.main([str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == regime.claims(merged)
    assert "the papers' claims at this scale" in capsys.readouterr().out
    assert json.loads((tmp_path / "m.json").read_text())["rows"] == merged["rows"]
