"""grpo_edu.studies.gpu_curve: the gpu preset's curve run, checked here on the cpu preset's sizes
(the same code path; the gpu sizes take minutes a step on a CPU, see README's "On a GPU")."""

import json
import statistics

import pytest

from grpo_edu.studies import gpu_curve


@pytest.fixture(scope="module")
def kept(tmp_path_factory, reference):  # the session's cached cpu reference, so no SFT runs here
    out = tmp_path_factory.mktemp("curve")
    return out, gpu_curve.run(out, preset="cpu", device="cpu", steps=2)


def test_a_run_keeps_the_sft_curve_every_step_and_a_summary(kept):
    out, summary = kept
    for name in ("sft.json", "config.toml", "metrics.jsonl", "evals.jsonl", "policy.pt", "summary.json"):
        assert (out / name).is_file(), name
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [1, 2]
    assert all(x["seconds"] > 0 and x["peak_memory_mb"] > 0 for x in lines)
    assert summary["rl_steps"] == 2 and summary["device"] == "cpu" and summary["threads"] == 1
    assert summary["rl_step_seconds_median"] == pytest.approx(statistics.median(x["seconds"] for x in lines))
    assert summary["sft"]["accuracy"] >= 0.5  # the cpu reference stops at 50% greedy held-out
    assert summary["rl_evals"][-1]["step"] == 2 and 0 <= summary["rl_evals"][-1]["accuracy"] <= 1
    assert summary["peak_memory_mb"] >= max(x["peak_memory_mb"] for x in lines)


def test_a_stopped_run_still_summarises_the_steps_it_took(kept, tmp_path):
    out, _ = kept
    for name in ("sft.json", "evals.jsonl"):
        (tmp_path / name).write_text((out / name).read_text())
    (tmp_path / "metrics.jsonl").write_text((out / "metrics.jsonl").read_text().splitlines()[0] + "\n")
    s = gpu_curve.summarize(tmp_path)
    assert s["rl_steps"] == 1 and json.loads((tmp_path / "summary.json").read_text())["rl_steps"] == 1


def test_bad_steps_is_one_line_before_any_work(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        gpu_curve.main(["--out", str(tmp_path), "--steps", "0"])
    assert e.value.code == 2 and "--steps must be >= 1, got 0" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_summarize_prints_the_curve_the_run_kept(kept, capsys):
    out, summary = kept
    assert gpu_curve.main(["--summarize", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"reference (SFT): {summary['sft']['steps']} steps" in text and "GRPO: 2 steps" in text
    last = summary["rl_evals"][-1]
    row = ["2", f"{last['samples']:,d}", f"{last['seconds']:.0f}", f"{last['accuracy']:.3f}"]
    assert row in [line.split() for line in text.splitlines()]
    assert f"reward   {summary['rl_reward'][0]:5.3f} {summary['rl_reward'][1]:5.3f}" in text


def test_the_kept_h200_run_prints_the_measurements_block(tmp_path):
    """The H200 run's kept files (tests/data/gpu_curve_h200) summarise to exactly the block the page quotes."""
    import shutil

    from course.site.blocks import ROOT, read

    kept = ROOT / "tests/data/gpu_curve_h200"
    for name in ("sft.json", "metrics.jsonl", "evals.jsonl"):
        shutil.copy(kept / name, tmp_path / name)
    s = gpu_curve.summarize(tmp_path)
    assert s == json.loads((kept / "summary.json").read_text())
    assert s["device"] == "cuda" and s["rl_steps"] == 100
    assert gpu_curve.format_summary(s) == read("gpucurveh200")


def test_the_kept_h200_compare_is_the_measurements_block():
    """The four rungs' H200 run: the page's comparegpu block is the output kept in tests/data/compare_gpu_h200."""
    from course.site.blocks import ROOT, read

    kept = (ROOT / "tests/data/compare_gpu_h200/compare.txt").read_text().rstrip("\n")
    assert read("comparegpu") == kept
    assert "on cuda" in kept and "compare exit 0" in (ROOT / "tests/data/compare_gpu_h200/machine.txt").read_text()
