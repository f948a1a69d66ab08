"""The main job and the benchmarks, on a small budget."""

import json

import pytest

from grpo_edu import get_preset
from grpo_edu.cli import main
from grpo_edu.compare import (
    best_learning_rates,
    format_table,
    generation_speed,
    run_comparison,
    write_report,
)


def test_reference_verb(capsys):
    assert main(["reference", "--preset", "cpu", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "held-out greedy accuracy: 0." in out


def test_comparison_small(tmp_path, reference):
    preset = get_preset("cpu", prompts_per_step=8)  # 64 sequences per step
    res = run_comparison(preset, steps=2, variance_batches=2, critic_steps=5, progress=False)
    assert list(res["algorithms"]) == ["reinforce", "baseline", "ppo", "grpo"]
    for r in res["algorithms"].values():
        assert r["samples"] == 128  # same budget of sampled completions for everyone
        assert r["relative_variance"] > 0 and r["peak_step_memory_mb"] > 0
    assert res["algorithms"]["grpo"]["memory_ratio_to_grpo"] == 1.0
    assert res["algorithms"]["ppo"]["updates_per_step"] == 4
    table = format_table(res)
    assert "GRPO" in table and "PPO + critic" in table and "budget: 128 sampled" in table
    paths = write_report(res, tmp_path)
    data = json.loads((tmp_path / "comparison.json").read_text())
    assert data["algorithms"]["grpo"]["final_accuracy"] == res["algorithms"]["grpo"]["final_accuracy"]
    for key in ("curves_samples", "curves_seconds", "variance", "memory"):
        assert (tmp_path / paths[key].split("/")[-1]).stat().st_size > 10_000  # a real PNG


def test_kv_cache_is_faster(reference, task):
    g = generation_speed(reference, task, n_prompts=64, group_size=8, repeats=3)
    assert g["speedup"] > 1.3, g  # measured 2.5x at 64 x 8 on the 2-vCPU machine


def test_best_learning_rate_picks_the_mean_best():
    sweep = {"rows": [
        {"algorithm": "grpo", "lr": 1e-4, "final_accuracy": 0.5},
        {"algorithm": "grpo", "lr": 1e-4, "final_accuracy": 0.7},
        {"algorithm": "grpo", "lr": 3e-4, "final_accuracy": 0.65},
        {"algorithm": "grpo", "lr": 3e-4, "final_accuracy": 0.66},
    ]}
    lr, mean, lo, hi = best_learning_rates(sweep)["grpo"]
    assert lr == 3e-4 and mean == pytest.approx(0.655) and (lo, hi) == (0.65, 0.66)


@pytest.mark.parametrize("argv, match", [
    (["compare", "--preset", "tpu"], "unknown preset"),
    (["sweep", "--lrs", "fast"], "comma-separated"),
])
def test_bad_arguments(argv, match, capsys):
    with pytest.raises(SystemExit):
        main(argv)
    assert match in capsys.readouterr().err


def test_run_comparison_rejects_bad_budget():
    with pytest.raises(ValueError, match="budget"):
        run_comparison("cpu", budget="tokens")
    with pytest.raises(ValueError, match="unknown algorithms"):
        run_comparison("cpu", algorithms=("dpo",))


def test_variance_study_small():
    from grpo_edu.compare import format_variance_study, run_variance_study

    p = get_preset("cpu", prompts_per_step=2)
    study = run_variance_study(p, targets=(0.26,), n_batches=2, critic_steps=2, max_steps=1,
                               mixed_digits=None, progress=False)
    assert [r["label"] for r in study["rows"]] == ["reference", "REINFORCE to 26%"]
    text = format_variance_study(study)
    assert "2x8" in text and "16x1" in text and "b*" in text
    for r in study["rows"]:
        assert r["group"]["group_norm"]["relative_variance"] > 0
        assert "group_norm" not in r["distinct"]  # needs groups


def test_format_memory_sweep():
    from grpo_edu.compare import format_memory_sweep

    row = {"d_model": 64, "n_layers": 2, "params": 101_952, "batch_size": 512, "ppo_measured": 30.3e6,
           "grpo_measured": 28.6e6, "ratio_measured": 30.3 / 28.6, "ratio_analytic": 1.06}
    text = format_memory_sweep([row])
    assert "d64 L2" in text and "101,952" in text and "1.06" in text and "30.3" in text
