"""Every config field a flag and a --config key under the same name; a run kept with --out;
its policy sampled with grpo-edu sample (issue 34)."""

import json
from dataclasses import dataclass, fields

import pytest
import torch

from grpo_edu.algorithms import ALGORITHMS, GRPOConfig, PPOConfig
from grpo_edu.command.cli import main
from grpo_edu.command.config_io import field_docs
from grpo_edu.train import History


@pytest.fixture
def fake_training(monkeypatch):
    """train without training: records the algorithm train() was given (and fails a test that
    expects no work if it is reached, by the caller's assert on ``seen``)."""
    import grpo_edu.warmstart.reference as ref
    from grpo_edu import TinyGPT

    seen = {}

    def train_from_preset(algo, task, reference, policy, preset, steps, progress, callback):
        seen["config"] = algo.config
        h = History(algo.name)
        h.evals = [{"step": 0, "samples": 0, "seconds": 0.0, "accuracy": 0.5}]
        return h

    monkeypatch.setattr(ref, "train_from_preset", train_from_preset)
    monkeypatch.setattr(ref, "reference_policy", lambda preset, task, progress: TinyGPT(preset.model))
    return seen


def _train(*argv):
    return main(["train", "--preset", "cpu", "--steps", "2", "--quiet", *argv])


def test_a_flag_reaches_the_config(fake_training):
    assert _train("--beta", "0.1", "--loss_type", "dr_grpo", "--unbiased_std", "--adam_betas", "0.9,0.99") == 0
    cfg = fake_training["config"]
    assert isinstance(cfg, GRPOConfig) and cfg.beta == 0.1 and cfg.loss_type == "constant"  # TRL's dr_grpo
    assert cfg.unbiased_std is True and cfg.adam_betas == (0.9, 0.99)
    assert cfg.lr == GRPOConfig().lr  # a field not given keeps its default
    assert _train("--algo", "ppo", "--value_clip", "none", "--whiten_advantages", "false") == 0
    cfg = fake_training["config"]
    assert isinstance(cfg, PPOConfig) and cfg.value_clip is None and cfg.whiten_advantages is False
    assert PPOConfig().value_clip is not None  # control: none changed it


@pytest.mark.parametrize("suffix", [".toml", ".yaml", ".json"])
def test_the_file_and_the_flag_agree_and_the_flag_wins(fake_training, tmp_path, suffix):
    text = {
        ".toml": 'beta = 0.1\nloss_type = "dr_grpo"\neps_high = "none"\nadam_betas = [0.9, 0.99]\n',
        ".yaml": "beta: 0.1\nloss_type: dr_grpo\neps_high: null\nadam_betas: [0.9, 0.99]\n",
        ".json": '{"beta": 0.1, "loss_type": "dr_grpo", "eps_high": null, "adam_betas": [0.9, 0.99]}',
    }[suffix]
    path = tmp_path / f"run{suffix}"
    path.write_text(text)
    _train("--beta", "0.1", "--loss_type", "dr_grpo", "--adam_betas", "0.9,0.99")
    by_flags = fake_training["config"]
    _train("--config", str(path))
    assert fake_training["config"] == by_flags != GRPOConfig()
    _train("--config", str(path), "--beta", "0.2")  # the flag beats the file
    assert fake_training["config"].beta == 0.2 and fake_training["config"].loss_type == "constant"


@pytest.mark.parametrize(
    "argv, file, policy_loss, loss_type",
    [
        (["--loss_type", "cispo"], None, "cispo", "token_mean"),
        (["--loss_type", "dapo"], None, "clip", "token_mean"),
        (["--importance_sampling_level", "sequence", "--loss_type", "grpo"], None, "gspo", "sequence_mean"),
        ([], 'loss_type = "cispo"', "cispo", "token_mean"),
        ([], 'importance_sampling_level = "sequence"', "gspo", "token_mean"),
        (["--policy_loss", "gspo"], None, "gspo", "token_mean"),  # control: our own name
    ],
)
def test_trl_loss_names_still_work_as_our_two_knobs(fake_training, tmp_path, argv, file, policy_loss, loss_type):
    """TRL's loss names on the command line and in config files, as before policy_loss was a knob:
    the bridge (grpo_edu.hf.names.from_trl) makes them policy_loss and loss_type."""
    if file is not None:
        (tmp_path / "run.toml").write_text(file + "\n")
        argv = [*argv, "--config", str(tmp_path / "run.toml")]
    assert _train(*argv) == 0
    cfg = fake_training["config"]
    assert (cfg.policy_loss, cfg.loss_type) == (policy_loss, loss_type)


def test_the_file_sets_the_run_too(fake_training, tmp_path):
    (tmp_path / "run.toml").write_text('algo = "ppo"\nlam = 0.9\n')  # lam: a PPO field, known once algo is read
    _train("--config", str(tmp_path / "run.toml"))
    assert isinstance(fake_training["config"], PPOConfig) and fake_training["config"].lam == 0.9


@pytest.mark.parametrize(
    "argv, file, message",
    [
        (["--bta", "0.1"], None, "unknown flag --bta: did you mean --beta"),
        (["--algo", "ppo", "--leave_one_out"], None, "unknown flag --leave_one_out: "),  # GRPO's, not PPO's
        (["--beta", "abc"], None, "--beta takes a number, got 'abc'"),
        (["--epochs", "2.5"], None, "--epochs takes an integer, got '2.5'"),
        (["--unbiased_std", "maybe"], None, "--unbiased_std takes true or false, got 'maybe'"),
        (["--beta", "-1"], None, "GRPOConfig.beta must be >= 0, got -1.0"),
        (["--loss_type", "foo"], None, "GRPOConfig.loss_type must be one of ['bnpo', 'cispo', 'constant', 'dapo'"),
        ([], "bta = 0.1", "unknown key --config {path}: bta: did you mean beta"),
        ([], 'epochs = "two"', "--config {path}: epochs takes an integer, got 'two'"),
        ([], "group_size = 1", "GRPOConfig.group_size must be >= 2, got 1"),
        ([], "beta = ", "--config {path}: not valid TOML"),
        ([], 'algo = "dpo"', "--config {path}: algo: unknown algorithm 'dpo'; choose one of ['reinforce'"),
    ],
)
def test_a_bad_knob_is_one_line_naming_it_before_any_work(fake_training, tmp_path, capsys, argv, file, message):
    path = tmp_path / "run.toml"
    if file is not None:
        path.write_text(file + "\n")
        argv = [*argv, "--config", str(path)]
    with pytest.raises(SystemExit) as exc:
        _train(*argv)
    assert exc.value.code == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"grpo-edu train: error: {message.format(path=path)}"), captured.err
    assert captured.err.count("\n") == 1 and captured.out == "" and "config" not in fake_training  # no work
    assert _train() == 0 and "config" in fake_training  # control: the same run without the bad knob trains


def test_every_field_is_a_flag_with_its_comment_and_trl_name(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    for algo, cls in ALGORITHMS.items():
        with pytest.raises(SystemExit):
            main(["train", "--algo", algo, "--help"])
        text = capsys.readouterr().out
        docs = field_docs(cls.Config)
        for f in fields(cls.Config):
            assert f"--{f.name} " in text, (algo, f.name)
            assert docs[f.name] and docs[f.name][:40] in " ".join(text.split()), (algo, f.name)
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "[TRL: num_generations]" not in text  # group_size's own help names it already
    assert "--eps_low float clip range below (trl epsilon, verl clip_ratio_low)" in text.lower()
    assert "--sampler_dtype str|none none: the policy samples" in text.lower() and "[TRL: use_vllm]" in text


def test_field_docs_read_comments_and_docstrings():
    """Both ways of documenting a field: a trailing comment, or a string on the line after it."""

    @dataclass
    class Commented:
        beta: float = 0.04  # KL coefficient (TRL beta)
        lr: float = 3e-4  # AdamW learning rate

    @dataclass
    class Documented:
        beta: float = 0.04
        """KL coefficient
        (TRL beta)"""
        lr: float = 3e-4  # AdamW learning rate
        """AdamW learning rate, as a docstring"""
        tag: str = "x"

    assert field_docs(Commented) == {"beta": "KL coefficient (TRL beta)", "lr": "AdamW learning rate"}
    assert field_docs(Documented) == {"beta": "KL coefficient (TRL beta)", "lr": "AdamW learning rate, as a docstring"}


def test_compare_sets_a_field_on_each_rung_that_has_it(capsys, monkeypatch, tmp_path):
    import grpo_edu.command.reports as reports
    import grpo_edu.measure as measure

    seen = {}
    monkeypatch.setattr(measure, "run_comparison", lambda preset, **k: seen.update(k) or {"total_seconds": 1.0})
    monkeypatch.setattr(measure, "format_table", lambda res: "TABLE")
    monkeypatch.setattr(reports, "write_report", lambda res, out: {})
    argv = ["compare", "--preset", "cpu", "--quiet", "--out", str(tmp_path)]
    assert main([*argv, "--beta", "0.1", "--lr", "1e-4"]) == 0
    assert seen["configs"] == {
        "reinforce": {"lr": 1e-4},
        "baseline": {"lr": 1e-4},
        "ppo": {"beta": 0.1, "lr": 1e-4},
        "grpo": {"beta": 0.1, "lr": 1e-4},
    }
    with pytest.raises(SystemExit) as exc:  # checked on each rung: PPO's eps_low rule names PPOConfig
        main([*argv, "--eps_low", "0"])
    assert exc.value.code == 2 and "PPOConfig.eps_low must be > 0, got 0.0" in capsys.readouterr().err
    (tmp_path / "c.yaml").write_text("seeds: 2\nvariance-batches: 4\ngamma: 0.9\n")  # the verb's flags too
    assert main([*argv, "--config", str(tmp_path / "c.yaml")]) == 0
    assert seen["seeds"] == 2 and seen["variance_batches"] == 4
    assert seen["configs"] == {
        "reinforce": {"gamma": 0.9},
        "baseline": {"gamma": 0.9},
        "ppo": {"gamma": 0.9},
        "grpo": {},
    }
    (tmp_path / "c.yaml").write_text("algo: grpo\n")  # compare runs all four: no algo key
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--config", str(tmp_path / "c.yaml")])
    assert exc.value.code == 2 and "unknown key --config " in capsys.readouterr().err


@pytest.fixture(scope="module")
def kept(tmp_path_factory, reference):
    """A 2-step GRPO run kept with --out, then the same run from its config.toml."""
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("runs")
    knobs = ["--beta", "0.1", "--loss_type", "dr_grpo", "--epochs", "1"]
    assert main(["train", "--preset", "cpu", "--steps", "2", "--quiet", *knobs, "--out", str(root / "a")]) == 0
    assert main(["train", "--config", str(root / "a" / "config.toml"), "--quiet", "--out", str(root / "b")]) == 0
    return root


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_out_keeps_the_run(kept):
    run = kept / "a"
    for name in ("config.toml", "metrics.jsonl", "evals.jsonl", "policy.pt"):
        assert (run / name).stat().st_size > 0, name
    steps = _rows(run / "metrics.jsonl")
    assert [s["step"] for s in steps] == [1, 2]
    for key in ("reward", "reward_std", "kl", "entropy", "clip_ratio", "completion_length", "grad_norm"):
        assert all(isinstance(s[key], float) for s in steps), key
    assert [e["step"] for e in _rows(run / "evals.jsonl")] == [0, 2]
    state = torch.load(run / "policy.pt", weights_only=True)
    assert state["algo"] == "grpo" and state["steps"] == 2 and "state_dict" in state
    text = (run / "config.toml").read_text()
    assert 'loss_type = "constant"' in text and "beta = 0.1" in text and "steps = 2" in text  # ours, of TRL's dr_grpo
    assert 'eps_high = "none"' in text  # None, as the flag takes it


def test_the_config_repeats_the_run_to_the_same_numbers(kept):
    a, b = (_rows(kept / r / "metrics.jsonl") for r in "ab")
    drop = lambda rows: [{k: v for k, v in r.items() if k != "seconds"} for r in rows]  # noqa: E731
    assert drop(a) == drop(b) and len(a) == 2
    assert [e["accuracy"] for e in _rows(kept / "a" / "evals.jsonl")] == [
        e["accuracy"] for e in _rows(kept / "b" / "evals.jsonl")
    ]
    sa = torch.load(kept / "a" / "policy.pt", weights_only=True)["state_dict"]
    sb = torch.load(kept / "b" / "policy.pt", weights_only=True)["state_dict"]
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    ref = torch.load(kept / "a" / "policy.pt", weights_only=True)  # control: training moved the weights
    from grpo_edu import reference_policy

    start = reference_policy("cpu", progress=False).state_dict()
    assert not all(torch.equal(ref["state_dict"][k], start[k]) for k in start)


def test_tensorboard_events_or_a_one_line_note_and_lines_as_it_trains(kept, tmp_path, capsys, monkeypatch):
    import importlib.util

    import grpo_edu.warmstart.run_dir as run_dir

    events = sorted((kept / "a").glob("events.out.tfevents.*"))
    if importlib.util.find_spec("tensorboard") is not None:
        assert events and events[0].stat().st_size > 0
    else:
        assert events == []
    real, call, lines = importlib.util.find_spec, run_dir.RunLog.__call__, []

    def watch(self, info):  # what a reader of metrics.jsonl sees after each step
        call(self, info)
        lines.append(len((tmp_path / "metrics.jsonl").read_text().splitlines()))

    monkeypatch.setattr(run_dir.RunLog, "__call__", watch)
    monkeypatch.setattr(run_dir.importlib.util, "find_spec", lambda n: None if n == "tensorboard" else real(n))
    assert main(["train", "--preset", "cpu", "--steps", "2", "--quiet", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == run_dir.TENSORBOARD_NOTE and not list(tmp_path.glob("events*"))
    assert lines == [1, 2]  # a line per step as it trains, not all at the end


def test_sample_prints_answers_from_a_saved_policy(kept, capsys):
    assert main(["sample", "--from", str(kept / "a"), "--n", "6"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = lines[2:-1]
    assert len(rows) == 6 and all(r.split()[-1] in ("right", "wrong") for r in rows)
    assert all(r.split()[0].endswith("=") for r in rows)  # the prompt, e.g. 61+42=
    k = sum(r.split()[-1] == "right" for r in rows)
    assert lines[-1].startswith(f"accuracy {k}/6 = ")
    with pytest.raises(SystemExit) as exc:  # control: a folder without a policy is a one-line error
        main(["sample", "--from", str(kept)])
    assert exc.value.code == 2 and capsys.readouterr().err.startswith("grpo-edu sample: error: no policy in ")
