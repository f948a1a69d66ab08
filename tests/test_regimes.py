"""grpo-edu regimes: each regime's measurement on a tiny setup (seconds), and the verb's input checks."""

import pytest
import torch

from grpo_edu import ModelConfig, TinyGPT, get_preset
from grpo_edu.studies import regimes

VERDICTS = {"holds", "fails here", "depends"}


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    ref = TinyGPT(ModelConfig(d_model=16, n_layers=1, n_heads=2, max_seq_len=12))
    preset = get_preset("cpu", sequences_per_step=64)
    return ref, preset


def check_claims(res):
    assert res["claims"]
    for c in res["claims"]:
        assert set(c) == {"claim", "measurement", "verdict"} and c["verdict"] in VERDICTS


def test_affine_gap_by_hand():
    r = torch.tensor([0.0, 1, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1])  # a group with p = 1/4, a tied group
    assert regimes.affine_gap(r, 5.0, 1.0) < 1e-6  # an offset: the same advantages
    std = 0.75**0.5 * 0.25**0.5  # 1/G std of the first group
    # right answers: A = 0.75 / (std + eps); scaled by 1e-4: 0.75e-4 / (1e-4 std + eps)
    expected = 0.75 / (std + 1e-4) - 0.75e-4 / (1e-4 * std + 1e-4)
    assert regimes.affine_gap(r, 0.0, 1e-4) == pytest.approx(expected, rel=1e-5)
    assert expected > 1.2
    # a scale of 2: 2 * 0.75 / (2 std + eps) is larger by eps / (2 std) relative, no more
    assert regimes.affine_gap(r, -1.0, 2.0) == pytest.approx(1.5 / (2 * std + 1e-4) - 0.75 / (std + 1e-4), abs=2e-6)


def test_offset_on_a_tiny_setup(tiny, tmp_path):
    ref, preset = tiny
    res = regimes.run_offset(ref, preset, seeds=(0,), steps=1, warmup=1, progress=False)
    check_claims(res)
    assert set(res["adv_diff"]) == {"(5, 6)", "(-1, 1)", "(0, 1e-4)", "(0, 1e-2)"}
    assert all(len(v) == 1 and 0 <= v[0] <= 1 for v in res["accuracy"].values())
    # a batch-mean baseline sees exactly the same advantages under an offset: the same run
    assert res["accuracy"]["batch-mean baseline (5, 6)"] == res["accuracy"]["batch-mean baseline (0, 1)"]
    regimes.plot_regime("offset", res, tmp_path / "o.png")
    assert (tmp_path / "o.png").stat().st_size > 0


def test_reward_model_on_a_tiny_setup(tiny, tmp_path):
    ref, preset = tiny
    res = regimes.run_reward_model(
        ref, preset, seeds=(0,), steps=2, settings=((0.0, "loss"), (0.3, "reward")), n_labels=64, progress=False
    )
    check_claims(res)
    for runs in res["curves"].values():
        c = runs[0]
        assert c["step"] == [0, 2] and len(c["gold"]) == len(c["kl"]) == len(c["proxy"]) == 2
        assert abs(c["kl"][0]) < 1e-5  # the policy starts as the reference: KL 0 (to float rounding)
        assert c["kl"][1] >= -1e-6 and all(0 < p < 1 for p in c["proxy"])
    regimes.plot_regime("reward_model", res, tmp_path / "r.png")


def test_difficulty_on_a_tiny_setup(tiny, tmp_path):
    ref, preset = tiny
    res = regimes.run_mixed_digits(ref, preset, seeds=(0,), critic_steps=1, own_reference=ref, progress=False)
    check_claims(res)
    mixed = res["setups"]["mixed"]["by_class"]
    assert set(mixed) <= {"1+1 digits", "1+2 digits", "2+2 digits"} and sum(c["groups"] for c in mixed.values()) == 128
    # the uniform task draws a 1-digit operand 10% of the time, the mixed one half of the time
    assert (
        res["setups"]["uniform"]["by_class"]["2+2 digits"]["groups"] > mixed.get("2+2 digits", {"groups": 0})["groups"]
    )
    regimes.plot_regime("difficulty", res, tmp_path / "d.png")
    text = regimes.format_regimes({"difficulty": res})
    assert "regime difficulty (" in text and "[" in text


def test_run_regimes_rejects_unknown_names(tiny):
    with pytest.raises(ValueError, match="unknown regimes"):
        regimes.run_regimes(tiny[1], only=("offset", "nope"), reference=tiny[0], progress=False)
    with pytest.raises(ValueError, match="no regime given"):
        regimes.check_names(())
    with pytest.raises(ValueError, match="unknown regime 'nope'"):
        regimes.runner("nope")


def test_regime_figures_are_styled_and_ordered(tiny, tmp_path):
    """Each figure has a title, alt text, accuracy in percent, and the offset runs top to bottom in print order."""
    from grpo_edu.figures.plotstyle import alt_text

    ref, preset = tiny
    res = regimes.run_offset(ref, preset, seeds=(0,), steps=1, warmup=1, progress=False)
    fig = regimes.regime_figure("offset", res)
    ax = fig.axes[0]
    assert ax.get_title() and alt_text(fig)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == list(res["accuracy"])
    assert ax.yaxis_inverted()  # the first run printed is the top row
    assert ax.xaxis.get_major_formatter()(0.5, 0).endswith("%")
    path = regimes.plot_regime("offset", res, tmp_path / "o.png")
    from PIL import Image

    assert Image.open(path).info.get("Description") == alt_text(fig)


def test_format_regimes_says_seeds_notebook_figure_and_time(tiny):
    res = {"claims": [{"claim": "c", "measurement": "m", "verdict": "fails here"}], "seeds": 2, "seconds": 3.0,
           "figure": "out/regimes/regime_offset.png"}  # fmt: skip
    text = regimes.format_regimes({"offset": res}, seconds=True)
    assert "2 seeds" in text and "notebook 07 section 1" in text and "regime_offset.png" in text
    assert "took 3 s" in text and text.endswith("total: 3 s") and "mean [min, max]" in text and "A'" in text


def test_cli_help_and_bad_input(capsys):
    from grpo_edu.command.cli import main

    with pytest.raises(SystemExit) as e:
        main(["regimes", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "--only" in out and "--seeds" in out and "--out" in out
    with pytest.raises(SystemExit) as e:
        main(["regimes", "--only", "offset,bogus", "--preset", "cpu"])
    assert e.value.code == 2 and "bogus" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["regimes", "--seeds", "0"])
    assert e.value.code == 2


def test_long_run_on_a_tiny_setup(tiny, tmp_path):
    ref, preset = tiny
    res = regimes.run_long_run(ref, preset, seeds=(0,), steps=2, progress=False)
    check_claims(res)
    assert set(res["curves"]) == {"clip 0.2", "clip-higher 0.28"}
    for runs in res["curves"].values():
        c = runs[0]
        assert len(c["entropy"]) == 2 and all(e > 0 for e in c["entropy"])  # one logged entropy per step
        assert c["eval_step"] == [0, 2] and len(c["accuracy"]) == 2
    regimes.plot_regime("long_run", res, tmp_path / "l.png")
    assert (tmp_path / "l.png").stat().st_size > 0
    assert all(len(line) <= 120 for line in regimes.format_regimes({"long_run": res}).splitlines())


def test_token_weight_and_length_push_by_hand():
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 1, 0.0]])
    w = {m: regimes.token_weight(mask, m) for m in ("sequence_mean", "token_mean", "constant")}
    torch.testing.assert_close(w["sequence_mean"], torch.tensor([1 / 8, 1 / 16, 1 / 4, 1 / 12]))  # 1/(B |o_i|)
    torch.testing.assert_close(w["token_mean"], torch.full((4,), 1 / 10))  # 1 / sum |o|
    torch.testing.assert_close(w["constant"], torch.full((4,), 1 / 16))  # 1 / (B T)

    class Ro:  # what length_push reads of a rollout
        pass

    ro = Ro()
    ro.mask = mask
    r = torch.tensor([1.0, 0, 0, 0])  # groups of 2: (right, wrong), (wrong, wrong): the second ties
    push = regimes.length_push(ro, r, 2, "sequence_mean")
    a = 0.5 / (0.5 + 1e-6)  # |A| of both answers of the first group (1/G std 0.5); the tied group: 0
    torch.testing.assert_close(push, torch.tensor([a / 8, a / 16, 0, 0]))


def test_long_over_short_is_the_aggregations_own_weight():
    # one group of 4 wrong answers (the same A) of lengths 2, 4, 3, 4, one of 2 right and 2 wrong
    lengths = torch.tensor([2, 4, 3, 4, 2, 6, 5, 3])
    push = 1.0 / lengths.float()  # sequence_mean with |A| = 1
    wrong = torch.tensor([True, True, True, True, False, False, True, True])
    # group 1: longest 4 over shortest 2 -> 1/2; group 2 (wrong: lengths 5, 3): 3/5; geometric mean
    assert regimes.long_over_short(push, lengths, wrong, 4) == pytest.approx((0.5 * 0.6) ** 0.5)
    assert regimes.long_over_short(torch.ones(8), lengths, wrong, 4) == pytest.approx(1.0)  # constant weight
    tied = torch.zeros(8)  # every group tied: nothing pushed, nothing to compare
    assert regimes.long_over_short(tied, lengths, wrong, 4) != regimes.long_over_short(tied, lengths, wrong, 4)  # nan


def test_free_length_on_a_tiny_setup(tmp_path):
    task, fit = regimes.free_length_setup(get_preset("cpu", sequences_per_step=64))
    assert task.filler == 4 and fit.model.max_seq_len >= task.prompt_length + task.max_answer_length
    torch.manual_seed(0)
    own = TinyGPT(ModelConfig(d_model=16, n_layers=1, n_heads=2, max_seq_len=fit.model.max_seq_len))
    res = regimes.run_free_length(None, fit, seeds=(0,), steps=1, own_reference=own, progress=False)
    check_claims(res)
    assert set(res["gap"]) == {"sequence_mean", "constant"} and all(len(v) == 1 for v in res["gap"].values())
    b = res["budget"]  # the same two runs with room for one filler only
    assert b["filler_budget"] == 1 and all(len(v) == 1 for v in b["truncated"].values())
    assert all(0 <= v[0] <= 1 for v in b["accuracy"].values()) and 0 <= b["start_truncated"][0] <= 1
    assert len(res["claims"]) == 7
    assert len(regimes.run_free_length(None, fit, seeds=(0,), steps=1, own_reference=own, budget=None,
                                       progress=False)["claims"]) == 5  # fmt: skip
    weights = res["by_length"]["token_mean"]
    assert weights and all(v == pytest.approx(1.0) for v in weights.values())  # token_mean is the unit
    seq = res["by_length"]["sequence_mean"]  # 1/|o| relative: falls with the length
    assert all(seq[a] > seq[b] for a, b in zip(sorted(seq), sorted(seq)[1:]))
    regimes.plot_regime("free_length", res, tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 0
    assert all(len(line) <= 120 for line in regimes.format_regimes({"free_length": res}).splitlines())
