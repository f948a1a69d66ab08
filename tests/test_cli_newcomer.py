"""What a newcomer met in the `grpo-edu` command, mended: every mistake is one line (a misspelled verb
and a bad --algo printed the usage above it), an unknown flag's line suggests the closest flags
without listing all forty, the help says which verbs take which common flags and that sample's --from
is required, sample says its answers are written reversed, and a run's log has lines, not frames."""

import re

import pytest

from grpo_edu.command.cli import VERB_NAMES, _parser, main


def _error(argv, capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "usage:" not in captured.err, captured.err
    return captured.err


def test_a_misspelled_verb_is_one_line_naming_the_closest(capsys):
    err = _error(["trian", "--steps", "3"], capsys)
    assert err.startswith("grpo-edu: error: unknown verb 'trian': did you mean train? the verbs are compare, train,")
    assert _error(["xyzzy"], capsys).startswith("grpo-edu: error: unknown verb 'xyzzy': the verbs are")  # no guess
    assert list(VERB_NAMES) == list(_parser()._subparsers._group_actions[0].choices)  # the one list


def test_a_bad_algo_is_one_line(capsys):
    err = _error(["train", "--algo", "grpoo"], capsys)
    assert err == ("grpo-edu train: error: argument --algo: invalid choice: 'grpoo' (choose from 'reinforce', "
                   "'baseline', 'ppo', 'grpo')\n")  # fmt: skip


def test_an_unknown_flag_suggests_without_listing_every_flag(capsys):
    err = _error(["train", "--bta", "0.1"], capsys)
    assert (
        err
        == "grpo-edu train: error: unknown flag --bta: did you mean --beta, --out? (grpo-edu train --help lists them)\n"
    )
    flags = [o for a in _parser()._subparsers._group_actions[0].choices["train"]._actions for o in a.option_strings]
    assert len(flags) > 40 and len(err) < 120  # the control: the list it no longer prints
    err = _error(["compare", "--zzz"], capsys)
    assert err == "grpo-edu compare: error: unknown flag --zzz: (grpo-edu compare --help lists them)\n"


def test_the_help_says_which_verbs_take_the_common_flags(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit):
        main(["--help"])
    epilog = " ".join(capsys.readouterr().out.split("check-notebooks\n")[-1].split())
    verbs = _parser()._subparsers._group_actions[0].choices
    without = [v for v, p in verbs.items() if "--preset" not in p._option_string_actions]
    assert without == ["sample", "speedrun", "check-notebooks"]  # the verbs that take no preset
    assert (
        "Every verb but sample, speedrun and check-notebooks takes --preset cpu|gpu|auto, --world, --seed and --quiet"
        in epilog
    )
    for v, p in verbs.items():  # what the sentence says, flag by flag
        has = {f for f in ("--preset", "--world", "--seed", "--quiet") if f in p._option_string_actions}
        assert has == (
            {"--seed"} if v == "sample" else set() if v in without else {"--preset", "--world", "--seed", "--quiet"}
        ), v
    with pytest.raises(SystemExit):
        main(["sample", "--help"])
    text = capsys.readouterr().out
    assert text.startswith("usage: grpo-edu sample [-h] --from DIR [") and "[--from" not in text  # required, shown so
    assert re.search(r"^required:\n  --from DIR", text, flags=re.M)
    err = _error(["sample", "--n", "3"], capsys)
    assert (
        err == "grpo-edu sample: error: --from DIR is required: the folder grpo-edu train --out DIR kept the run in\n"
    )


def test_sample_says_the_answers_are_written_reversed():
    from grpo_edu.command.reports import format_samples

    rows = [{"prompt": "21+38=", "answer": "95", "expected": "95", "value": 59, "right": True},
            {"prompt": "70+45=", "answer": "511", "expected": "511", "value": 115, "right": True}]  # fmt: skip
    res = {"path": "run/policy.pt", "rows": rows, "accuracy": 1.0, "temperature": 0.0, "seed": 0, "reversed": True,
           "info": {"algo": "grpo", "steps": 2, "final_accuracy": 1.0}}  # fmt: skip
    lines = format_samples(res).splitlines()
    assert lines[0].endswith("answers least-significant digit first: 21+38=59 is written 95")
    assert lines[2].split() == ["21+38=", "95", "95", "right"] and lines[-1].startswith("accuracy 2/2 = 1.000")
    assert "least-significant" not in format_samples({**res, "reversed": False})  # control: a task written as read


def test_a_run_written_to_a_log_has_lines_not_frames(capsys):
    """`grpo-edu train > log 2>&1`: the progress bar writes whole lines (a few), no carriage return; with
    --quiet, none (captured output is not a terminal, as a log is not)."""
    assert main(["train", "--preset", "cpu", "--algo", "reinforce", "--steps", "3"]) == 0
    captured = capsys.readouterr()
    assert "\r" not in captured.err and captured.err.endswith("\n")
    bars = [line for line in captured.err.splitlines() if line.startswith("reinforce:")]
    assert 1 <= len(bars) <= 4 and bars[-1].startswith("reinforce: 100%") and "3/3" in bars[-1]
    assert max(len(line) for line in captured.err.splitlines()) < 200
    assert main(["train", "--preset", "cpu", "--algo", "reinforce", "--steps", "1", "--quiet"]) == 0
    assert capsys.readouterr().err == ""
