"""The main job, the benchmarks and the command line, on small budgets."""

import json
import re

import pytest

from grpo_edu import get_preset
from grpo_edu.command.cli import main
from grpo_edu.command.reports import format_ablation, format_memory_sweep, format_variance_study, write_report
from grpo_edu.hf import missing_extra
from grpo_edu.measure import claims, format_table, run_comparison, where_each_wins
from grpo_edu.studies.ablation import Variant, run_ablation
from grpo_edu.studies.bench import generation_speed
from grpo_edu.studies.sweep import best_learning_rates
from grpo_edu.studies.variance_study import run_variance_study

needs_trl = pytest.mark.skipif(missing_extra() is not None, reason='needs the [trl] extra: pip install -e ".[trl]"')


def test_reference_verb(capsys):
    assert main(["reference", "--preset", "cpu", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "held-out greedy accuracy: 0." in out


def test_train_verb_says_what_it_ran(capsys):
    assert main(["train", "--preset", "cpu", "--algo", "reinforce", "--steps", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("training reinforce (cpu preset, seed 0)") and "step    1" in out


def test_comparison_small(tmp_path, reference):
    preset = get_preset("cpu", sequences_per_step=64)
    res = run_comparison(preset, seeds=2, steps=2, variance_batches=2, critic_steps=5, progress=False)
    assert list(res["algorithms"]) == ["reinforce", "baseline", "ppo", "grpo"]
    for r in res["algorithms"].values():
        assert r["samples"] == 128  # same budget of sampled completions for everyone
        assert len(r["final_accuracy"]) == len(r["histories"]) == 2  # one per seed
        assert r["relative_variance"] > 0 and r["peak_step_memory_mb"] > 0
    assert res["seeds"] == [0, 1]
    assert res["algorithms"]["grpo"]["memory_ratio_to_grpo"] == 1.0
    assert res["algorithms"]["ppo"]["updates_per_step"] == 4
    table = format_table(res)
    assert "grpo = GRPO" in table and "ppo = PPO + critic" in table and "budget: 128 sampled" in table
    assert "rel. var = " in table and "peak MB = " in table and "critic MB = " in table  # one definition per column
    assert "where each rung wins (the worst seed counts)" in table and "min-max over seeds" in table
    assert max(map(len, table.splitlines())) <= 120  # fits a 120-column terminal
    rows = res["algorithms"]
    assert rows["grpo"]["critic_mb"] == 0 < rows["ppo"]["critic_mb"]
    assert rows["reinforce"]["peak_step_memory_unshared_mb"] == rows["reinforce"]["peak_step_memory_mb"]
    assert rows["ppo"]["rows_per_update"] == 32 and rows["reinforce"]["rows_per_update"] == 64
    paths = write_report(res, tmp_path)
    data = json.loads((tmp_path / "comparison.json").read_text())
    assert data["algorithms"]["grpo"]["final_accuracy"] == res["algorithms"]["grpo"]["final_accuracy"]
    for key in ("curves_samples", "curves_seconds", "variance", "memory"):
        assert (tmp_path / paths[key].split("/")[-1]).stat().st_size > 10_000  # a real PNG


def test_one_seed_gives_no_verdict_between_rungs():
    """With one seed a comparison between two rungs has no spread: the verdict says so, and the
    legend does not speak of seeds it does not have."""
    rows = {
        a: {"label": a.upper(), "initial_accuracy": 0.5, "final_accuracy": [0.9], "samples_to_target": [s],
            "seconds_to_target": [s / 100], "steps_to_target": [s // 512], "seconds_per_step": 0.1,
            "updates_per_step": 1}
        for a, s in (("reinforce", 51200), ("ppo", 20480), ("grpo", 30720))
    }  # fmt: skip
    one = {"seeds": [0], "algorithms": rows, "target": 0.9}
    verdicts = {c["claim"]: c["verdict"] for c in claims(one)}
    assert verdicts["every rung learns from the same reference"] == "holds"  # a fact of this one run
    for claim, v in verdicts.items():
        if claim != "every rung learns from the same reference":
            assert v == "one seed", claim
    several = {**one, "seeds": [0, 1], "algorithms": {a: {**r, "samples_to_target": r["samples_to_target"] * 2,
               "seconds_to_target": r["seconds_to_target"] * 2, "final_accuracy": [0.9, 0.9]} for a, r in rows.items()}}  # fmt: skip
    verdicts = {c["claim"]: c["verdict"] for c in claims(several)}  # two seeds that agree: verdicts
    assert verdicts["a learned critic (PPO) beats the group baseline (GRPO) per sampled answer"] == "holds"
    assert verdicts["GRPO reaches the target in less wall time than PPO"] == "fails here"  # 307 s vs 205 s
    table = format_table({**one, "wins": where_each_wins(one), "claims": claims(one), "budget": "samples",
                          "samples_budget": 1024, "sequences_per_step": 512, "reference": {"accuracy": 0.5}})  # fmt: skip
    assert "[  one seed]" in table and "best on this one seed (not a ranking)" in table
    assert "worst seed" not in table and "min-max over seeds" not in table and "depends" not in table


def test_where_each_wins_by_hand():
    rows = {
        "a": {
            "samples_to_target": [100, 300],
            "seconds_to_target": [1.0, 2.0],
            "seconds_per_step": 0.1,
            "peak_step_memory_mb": 5.0,
            "final_accuracy": [0.95, 0.91],
        },
        "b": {
            "samples_to_target": [200, 200],
            "seconds_to_target": [0.5, None],
            "seconds_per_step": 0.2,
            "peak_step_memory_mb": 4.0,
            "final_accuracy": [0.99, 0.89],
        },
    }
    wins = where_each_wins({"algorithms": rows})
    assert wins["completions to target"]["winner"] == "b"  # the worst seed counts: 200 < 300
    assert wins["seconds to target"]["winner"] == "a"  # b missed on one seed
    assert wins["seconds per step"]["winner"] == "a" and wins["peak step memory (MB)"]["winner"] == "b"
    assert wins["final accuracy (worst seed)"]["winner"] == "a"  # 0.91 > 0.89


def test_kv_cache_is_faster(reference, task):
    g = generation_speed(reference, task, n_prompts=64, group_size=8, repeats=3)
    assert g["speedup"] > 1.3, g  # measured 2.3-2.7x at 64 x 8 on the 2-vCPU machine
    assert g["share_speedup"] > 1.2, g  # each prompt once for its 8 rows: measured ~2x


def test_best_learning_rate_picks_the_mean_best():
    sweep = {
        "rows": [
            {"algorithm": "grpo", "lr": 1e-4, "final_accuracy": 0.5},
            {"algorithm": "grpo", "lr": 1e-4, "final_accuracy": 0.7},
            {"algorithm": "grpo", "lr": 3e-4, "final_accuracy": 0.65},
            {"algorithm": "grpo", "lr": 3e-4, "final_accuracy": 0.66},
        ]
    }
    lr, mean, lo, hi = best_learning_rates(sweep)["grpo"]
    assert lr == 3e-4 and mean == pytest.approx(0.655) and (lo, hi) == (0.65, 0.66)


@pytest.mark.parametrize(
    "argv, match",
    [
        (["compare", "--preset", "tpu"], "--preset: invalid choice: 'tpu'"),
        (["sweep", "--lrs", "fast"], "--lrs: expected comma-separated"),
        (["compare", "--seed", "-1"], "--seed: must be >= 0, got -1"),
        (["compare", "--seeds", "0"], "--seeds: must be >= 1"),
        (["compare", "--steps", "many"], "--steps: expected an integer"),
        (["compare", "--seconds", "-5"], "--seconds: must be > 0"),
        (["variance", "--batches", "1"], "--batches: must be >= 2"),
        (["ablate", "--rows", "nope"], "unknown rows"),
        (["train", "--algo", "dpo"], "invalid choice"),
    ],
)
def test_bad_arguments_are_one_line_errors_naming_the_flag(argv, match, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code != 0
    err = capsys.readouterr().err + str(exc.value.code)
    assert match in err
    assert "Traceback" not in err


def _verb_names():
    from grpo_edu.command.cli import VERBS

    return [*VERBS, "speedrun", "check-notebooks"]


def test_help_lists_every_verb_once_and_every_default_once(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out
    assert "``" not in top  # plain text, no reStructuredText
    listed = re.findall(r"^    (\S+)", top.split("verbs:")[1], flags=re.M)  # a verb's line, not a wrapped one
    verbs = _verb_names()
    assert {"compare", "train", "reference", "bench", "sweep", "variance", "ablate"} <= set(verbs)
    assert sorted(listed) == sorted(verbs)  # each verb once
    assert all(f"grpo-edu {v}" not in top for v in verbs), top  # no second list in the description
    assert max(len(line) for line in top.splitlines()) <= 80
    for verb in verbs:
        with pytest.raises(SystemExit):
            main([verb, "--help"])
        text = capsys.readouterr().out
        assert max(len(line) for line in text.splitlines()) <= 80, (verb, text)
        assert "(default: None)" not in text and "(default: False)" not in text, (verb, text)
        # one entry per flag: no entry says its default twice
        entries = re.split(r"\n  (?=\S)", text.split("options:")[1])
        assert all(e.count("(default") <= 1 for e in entries), (verb, [e for e in entries if e.count("(default") > 1])
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    text = " ".join(capsys.readouterr().out.split())  # unwrapped
    assert "(default: 1)" in text and "(default: auto)" in text and "(default: out/compare)" in text
    assert "steps of the samples budget (default: the preset's) --seconds" in text


def test_gpu_preset_without_cuda_is_a_one_line_error(capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as exc:
        main(["train", "--preset", "gpu", "--steps", "1", "--quiet"])
    assert exc.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing started
    assert captured.err == (
        "grpo-edu train: error: --preset gpu needs CUDA, which is not available on this machine: "
        "use --preset cpu (or auto, the default, which picks cpu here)\n"
    )


def test_unwritable_cache_is_a_one_line_error_before_training(tmp_path, capsys, monkeypatch):
    import grpo_edu.warmstart.reference as ref

    monkeypatch.setattr(ref, "train_sft", lambda *a, **k: pytest.fail("trained before checking the cache"))
    (tmp_path / "a-file").write_text("")
    cache = tmp_path / "a-file" / "cache"
    monkeypatch.setenv("GRPO_EDU_CACHE", str(cache))
    with pytest.raises(SystemExit) as exc:
        main(["reference", "--preset", "cpu", "--quiet"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err == (
        f"grpo-edu reference: error: cannot write to {cache} (the reference cache, set by $GRPO_EDU_CACHE): "
        f"{tmp_path / 'a-file'} is a file, not a folder; set $GRPO_EDU_CACHE to a writable folder\n"
    )


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["compare", "--out", "{bad}"], "--out"),
        (["bench", "--json", "{bad}/b.json"], "--json"),
        (["sweep", "--json", "{bad}/s.json"], "--json"),
        (["variance", "--json", "{bad}/v.json"], "--json"),
        (["ablate", "--json", "{bad}/a.json"], "--json"),
        (["check-notebooks", "--json", "{bad}/c.json"], "--json"),
        (["bench", "--json", "{folder}"], "--json"),
    ],
)
def test_unwritable_output_is_a_one_line_error_before_anything_runs(tmp_path, capsys, monkeypatch, argv, flag):
    import grpo_edu.warmstart.reference as ref

    monkeypatch.setattr(ref, "train_sft", lambda *a, **k: pytest.fail("trained before checking the output"))
    (tmp_path / "a-file").write_text("")
    argv = [a.format(bad=tmp_path / "a-file", folder=tmp_path) for a in argv]
    with pytest.raises(SystemExit) as exc:
        main(argv + ["--quiet"] if argv[0] != "check-notebooks" else argv)
    assert exc.value.code == 2
    captured = capsys.readouterr()
    err = captured.err
    assert captured.out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"grpo-edu {argv[0]}: error: cannot write to {argv[-1]} ({flag}): ")
    assert err.endswith(f"; pass {flag} a writable path\n")
    assert ("is a file, not a folder" in err) or ("it is a folder, not a file" in err)


def test_run_comparison_rejects_bad_budget():
    with pytest.raises(ValueError, match="budget"):
        run_comparison("cpu", budget="tokens")
    with pytest.raises(ValueError, match="unknown algorithms"):
        run_comparison("cpu", algorithms=("dpo",))
    with pytest.raises(ValueError, match="seeds"):
        run_comparison("cpu", seeds=0)


def test_variance_study_small():
    p = get_preset("cpu", sequences_per_step=16)
    study = run_variance_study(
        p, targets=(0.5, 0.99), n_batches=2, critic_steps=2, max_steps=1, mixed_digits=None, progress=False
    )
    # the reference (54%) already meets 50%: that snapshot would repeat its row, so it is skipped
    assert study["rows"][0]["accuracy"] >= 0.5
    assert [r["label"] for r in study["rows"]] == ["reference", "REINFORCE to 99%"]
    text = format_variance_study(study)
    assert "2x8" in text and "16x1" in text and "b*" in text
    for r in study["rows"]:
        assert r["group"]["group_norm"]["relative_variance"] > 0
        assert "group_norm" not in r["distinct"]  # needs groups


def test_format_memory_sweep():
    row = {
        "d_model": 64,
        "n_layers": 2,
        "params": 101_952,
        "batch_size": 512,
        "ppo_measured": 30.3e6,
        "grpo_measured": 28.6e6,
        "ratio_measured": 30.3 / 28.6,
        "ratio_analytic": 1.06,
    }
    text = format_memory_sweep([row])
    assert "d64 L2" in text and "101,952" in text and "1.06" in text and "30.3" in text


def test_ablation_runs_one_row_per_difference():
    from envs import ArithmeticTask  # noqa: F401  (the preset's task)

    preset = get_preset("cpu", sequences_per_step=8)
    tiny_sft = dict(max_steps=5, eval_every=5, batch_size=16)
    rows = (
        Variant("a", "the defaults", sft=tiny_sft),
        Variant("b", "tied", model=dict(tie_embeddings=True), sft=tiny_sft),
    )
    res = run_ablation(preset, rows=rows, seeds=(0, 1), steps=2, algorithms=("reinforce", "grpo"), progress=False)
    assert [r["name"] for r in res["rows"]] == ["a", "b"]
    assert all(len(r["runs"]) == 2 for r in res["rows"])
    text = format_ablation(res)
    assert "reinforce @2" in text and "grpo @2" in text and "b = tied" in text


def test_check_notebooks_names_the_failed_cell_and_its_error():
    from tests.tools.check_notebooks import _failures, format_check

    out = (
        "\x1b[31m____ notebooks/05_side_by_side.ipynb::Cell 7 ____\x1b[0m\nCell 7: Cell execution caused an exception\n"
        "----> 3 assert all(s is not None for s in reached), (name, reached)\n\n"
        "AssertionError: ('ppo', [None, 25600, 30720])\n"
        "==== short test summary info ====\nFAILED notebooks/05_side_by_side.ipynb::Cell 7\n"
    )
    import re

    found = _failures(re.sub(r"\x1b\[[0-9;]*m", "", out))
    assert found == ["05_side_by_side.ipynb::Cell 7: AssertionError: ('ppo', [None, 25600, 30720])"]
    run = dict(shift="1", capability="avx2", exit_code=1, failed_notebooks=["05_side_by_side.ipynb"], summary="")
    res = {
        "notebooks": ["05_side_by_side.ipynb"],
        "runs": [{**run, "seconds": 60, "failures": found}],
        "all_passed": False,
    }
    text = format_check(res)
    assert "FAIL" in text and "Cell 7: AssertionError" in text and "some runs FAILED" in text


def test_readme_command_table_shows_the_real_defaults():
    """Every `[--flag value]` in README's "The command" table is that flag's argparse default
    (of `a|b`, the first): parsing it gives the same arguments as leaving it out."""
    from pathlib import Path

    from grpo_edu.command.cli import _parser

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    table = readme.split("## The command\n", 1)[1].split("\n## ", 1)[0]
    checked = 0
    for row in re.findall(r"^\| `grpo-edu ([\w-]+)([^`]*)`", table, flags=re.M):
        verb, flags = row
        for flag, value in re.findall(r"\[(--[\w-]+) ([^\]\s]+)\]", flags):
            value = value.replace("\\|", "|").split("|")[0]
            if value == "N" or value == "...":  # the preset's / a placeholder
                continue
            assert _parser().parse_args([verb, flag, value]) == _parser().parse_args([verb]), (verb, flag, value)
            checked += 1
    assert checked >= 8  # compare --seeds, train --algo, sweep x3, variance, ablate x2, ...


def _no_work(monkeypatch):
    """Any training or benchmark that starts fails the test: what is checked must be checked before."""
    import grpo_edu.measure as measure
    import grpo_edu.studies.ablation as ablation
    import grpo_edu.studies.bench as bench
    import grpo_edu.studies.sweep as sweep
    import grpo_edu.warmstart.reference as ref

    for module, name in ((ref, "train_sft"), (ref, "reference_policy"), (bench, "run_bench"),
                         (measure, "run_comparison"), (sweep, "run_sweep"), (ablation, "run_ablation")):  # fmt: skip
        monkeypatch.setattr(module, name, lambda *a, _n=name, **k: pytest.fail(f"{_n} ran before the check"))


def _one_line_error(argv, capsys, code=2) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == code
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "Traceback" not in captured.err, captured.err
    return captured.err


@pytest.mark.parametrize(
    "argv, start",
    [
        (["bench", "--trl"], "grpo-edu bench: error: --trl needs the optional package 'trl'"),
        (["trl-launch"], "grpo-edu trl-launch: error: this verb needs the optional package 'trl'"),
    ],
)
def test_missing_trl_extra_is_one_line_before_any_work(argv, start, capsys, monkeypatch):
    import sys

    for module in ("trl", "transformers"):
        monkeypatch.setitem(sys.modules, module, None)  # `import trl` raises ImportError, as if not installed
    _no_work(monkeypatch)
    err = _one_line_error(argv + ["--preset", "cpu", "--quiet"], capsys)
    assert err.startswith(start) and err.endswith('install it with pip install -e ".[trl]"' + (
        " (or drop --trl)\n" if argv[0] == "bench" else "\n"))  # fmt: skip


@needs_trl
def test_missing_extra_names_the_first_missing_package_and_the_library_fails_first(monkeypatch):
    import sys

    from grpo_edu import hf
    from grpo_edu.hf import launch

    assert not hf.missing_extra()  # the test environment has the extra (needs_trl skips it otherwise)
    monkeypatch.setitem(sys.modules, "datasets", None)
    assert hf.missing_extra().startswith("needs the optional package 'datasets' (the [trl] extra)")
    _no_work(monkeypatch)
    for call in (lambda: launch.launch(nproc=1, steps=1), lambda: hf.bench_trl()):
        with pytest.raises(hf.MissingExtraError, match=r"^grpo_edu.hf needs the optional package 'datasets'") as exc:
            call()
        assert exc.value.__cause__ is None  # one message, nothing chained


@pytest.mark.parametrize(
    "argv, message",
    [
        (["compare", "--seconds", "5"], "--seconds acts only with --budget seconds (got --budget samples): add "
         "--budget seconds, or drop --seconds"),
        (["compare", "--budget", "samples", "--seconds", "5"], "--seconds acts only with --budget seconds"),
        (["compare", "--budget", "seconds", "--steps", "3"], "--steps acts only with --budget samples (got --budget "
         "seconds): drop --steps"),
    ],
)  # fmt: skip
def test_a_flag_without_effect_is_refused_before_any_work(argv, message, capsys, monkeypatch):
    _no_work(monkeypatch)
    err = _one_line_error(argv + ["--quiet"], capsys)
    assert err.startswith(f"grpo-edu {argv[0]}: error: {message}")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["sweep", "--lrs", "1e-4,,3e-4"], "argument --lrs: empty item in '1e-4,,3e-4' (item 2)"),
        (["sweep", "--lrs", "1e-4,3e-4,"], "argument --lrs: empty item in '1e-4,3e-4,' (item 3)"),
        (["sweep", "--lrs", "1e-4,0.0001"], "argument --lrs: repeated item '0.0001' in '1e-4,0.0001'"),
        (["sweep", "--seeds", "0,1,0"], "argument --seeds: repeated item '0' in '0,1,0'"),
        (["regimes", "--only", "offset,offset"], "argument --only: repeated item 'offset' in 'offset,offset'"),
        (["ablate", "--rows", ","], "argument --rows: expected at least one value"),
    ],
)
def test_list_flags_refuse_empty_and_repeated_items(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.endswith(f"grpo-edu {argv[0]}: error: {message}\n"), err


def test_a_bad_preset_is_one_line_naming_the_verb(capsys):
    """The verb's own error line, not the top level's, and no usage above it (compare's is 22 lines of flags;
    ``grpo-edu compare --help`` shows them)."""
    with pytest.raises(SystemExit) as exc:
        main(["compare", "--preset", "cuda"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err == ("grpo-edu compare: error: argument --preset: invalid choice: 'cuda' (choose from 'cpu', "
                   "'gpu', 'auto')\n")  # fmt: skip


def test_empty_cache_variable_is_a_one_line_error(capsys, monkeypatch, tmp_path):
    from grpo_edu.warmstart.reference import CacheEnvError, cache_dir

    monkeypatch.delenv("GRPO_EDU_CACHE", raising=False)
    assert cache_dir().parts[-2:] == (".cache", "grpo-edu")  # unset: the default
    monkeypatch.setenv("GRPO_EDU_CACHE", str(tmp_path))
    assert cache_dir() == tmp_path
    for empty in ("", " "):
        monkeypatch.setenv("GRPO_EDU_CACHE", empty)
        with pytest.raises(CacheEnvError, match=r"^\$GRPO_EDU_CACHE is set but empty"):
            cache_dir()
    import grpo_edu.warmstart.reference as ref

    monkeypatch.setattr(ref, "train_sft", lambda *a, **k: pytest.fail("trained before checking the cache"))
    err = _one_line_error(["reference", "--preset", "cpu", "--quiet"], capsys)
    assert err == (
        "grpo-edu reference: error: $GRPO_EDU_CACHE is set but empty (' '): unset it for the default cache "
        "(~/.cache/grpo-edu), or set it to a folder\n"
    )


@needs_trl  # bench --trl checks the extra before any work
def test_memory_sweep_and_seed_reach_the_jobs(capsys, monkeypatch):
    """compare --memory-sweep adds the sweep to the report (it was once parsed and dropped); bench
    hands --seed to the TRL bench and the sweep."""
    import grpo_edu.command.reports as reports
    import grpo_edu.hf as hf
    import grpo_edu.measure as measure
    import grpo_edu.studies.bench as bench

    seen = {}

    def sweep(preset, seed, progress):
        seen["sweep_seed"] = seed
        return [{"params": 1}]

    monkeypatch.setattr(measure, "run_comparison", lambda preset, **k: {"total_seconds": 1.0})
    monkeypatch.setattr(measure, "format_table", lambda res: "TABLE")
    monkeypatch.setattr(measure, "memory_sweep", sweep)
    monkeypatch.setattr(reports, "format_memory_sweep", lambda rows: f"SWEEP {rows}")
    monkeypatch.setattr(reports, "write_report", lambda res, out: seen.update(report=res) or {"x": "x.png"})
    assert main(["compare", "--preset", "cpu", "--memory-sweep", "--seed", "3", "--quiet"]) == 0
    assert seen == {"sweep_seed": 3, "report": {"total_seconds": 1.0, "memory_sweep": [{"params": 1}]}}
    assert "SWEEP [{'params': 1}]" in capsys.readouterr().out
    monkeypatch.setattr(bench, "run_bench", lambda preset, seed, progress: {"seed": seed})
    monkeypatch.setattr(reports, "format_bench", lambda res: "BENCH")
    monkeypatch.setattr(hf, "bench_trl", lambda preset, seed: seen.update(trl_seed=seed) or {})
    monkeypatch.setattr(hf, "format_bench_trl", lambda res: "TRL")
    assert main(["bench", "--preset", "cpu", "--trl", "--memory-sweep", "--seed", "2", "--quiet"]) == 0
    assert seen["trl_seed"] == seen["sweep_seed"] == 2


def test_world_flag_reaches_the_verb_and_names_its_choices(capsys, monkeypatch):
    """--world spread hands the verb the spread world's preset (its own reference); a bad world is argparse's
    one clear error, naming the allowed values; the flag's choices are presets.WORLDS."""
    import grpo_edu.studies.regimes as regimes
    from grpo_edu.command.cli import _parser
    from grpo_edu.warmstart.presets import WORLDS

    seen = {}
    monkeypatch.setattr(regimes, "run_regimes", lambda preset, **k: seen.update(preset=preset) or {})
    monkeypatch.setattr(regimes, "format_regimes", lambda res, seconds=False: "REGIMES")
    assert main(["regimes", "--preset", "cpu", "--world", "spread", "--only", "difficulty", "--quiet"]) == 0
    assert seen["preset"].world == "spread" and seen["preset"].sft.operand_below == 60
    assert main(["regimes", "--preset", "cpu", "--only", "difficulty", "--quiet"]) == 0
    assert seen["preset"].world == "default" and seen["preset"].sft.operand_below is None
    with pytest.raises(SystemExit) as exc:
        main(["compare", "--preset", "cpu", "--world", "flat"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument --world: invalid choice: 'flat' (choose from 'default', 'spread')" in err
    for verb in ("compare", "train", "reference", "sweep", "regimes"):
        action = next(a for a in _parser()._subparsers._group_actions[0].choices[verb]._actions if a.dest == "world")
        assert tuple(action.choices) == tuple(WORLDS)


def test_reference_verb_in_the_spread_world_says_so(capsys):
    assert main(["reference", "--preset", "cpu", "--world", "spread", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("reference policy (cpu preset, spread world, ") and "held-out greedy accuracy: 0." in out
