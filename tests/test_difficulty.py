"""Easy and hard prompts (issue 25): the algebra by hand, the spread world's knob, its reference."""

import math

import numpy as np
import pytest
import torch

from envs import ArithmeticTask
from grpo_edu import functional as Fn
from grpo_edu.measure import difficulty as D


# ------------------------------------------------------------------ the formulas, by hand
def test_variance_decomposition_by_hand():
    d = D.variance_decomposition([0.0, 1.0, 0.5, 0.5], group_size=2)
    # within = mean p(1-p) = (0 + 0 + .25 + .25) / 4; between = mean (p - .5)^2 = (.25 + .25) / 4
    assert d["within"] == pytest.approx(0.125) and d["between"] == pytest.approx(0.125)
    assert d["total"] == pytest.approx(0.25) and d["ev_max"] == pytest.approx(0.5)
    # G/(G-1) (1 - ev) = 2 * .5; (G-1)/G (1 - ev) = .5 * .5; 1 - ev
    assert d["predicted"] == pytest.approx({"group_loo": 1.0, "group_mean": 0.25, "critic": 0.5})
    # tied = mean p^2 + (1-p)^2 = (1 + 1 + .5 + .5) / 4; all right = (0 + 1 + .25 + .25) / 4
    assert (d["tied"], d["all_right"], d["all_wrong"]) == pytest.approx((0.75, 0.375, 0.375))
    d = D.variance_decomposition([0.2, 0.8], group_size=8)
    assert (d["within"], d["between"], d["ev_max"]) == pytest.approx((0.16, 0.09, 0.36))
    assert d["predicted"]["group_loo"] == pytest.approx(8 / 7 * 0.64)


def test_variance_decomposition_is_the_law_of_total_variance_and_debiases_estimates():
    p = np.random.default_rng(0).uniform(size=200)
    d = D.variance_decomposition(p)
    assert d["within"] + d["between"] == pytest.approx(p.mean() * (1 - p.mean()))
    # estimates k/n from n = 2 samples: p(1-p) n/(n-1) is unbiased, what is left is between
    d = D.variance_decomposition([0.5, 0.5, 0.0, 1.0], n_samples=2)
    assert d["within"] == pytest.approx(0.125 * 2) and d["between"] == pytest.approx(0.0)
    # simulated: p_q uniform on {0.1, 0.9}, 64 samples each: the debiased ev_max is near the true 0.64
    rng = np.random.default_rng(1)
    true = rng.choice([0.1, 0.9], size=4000)
    est = rng.binomial(64, true) / 64
    assert D.variance_decomposition(est, n_samples=64)["ev_max"] == pytest.approx(0.64, abs=0.01)
    assert D.variance_decomposition(est)["ev_max"] > 0.64 + 0.003  # raw estimates inflate it by E[p(1-p)]/n


def test_tied_share_by_hand_and_unbiased():
    # n = 4 samples, G = 2, k = 0, 1, 2, 4 right: C(4, 2) = 6 pairs; all right C(k, 2), all wrong C(4 - k, 2)
    t = D.tied_share([0, 1, 2, 4], n=4, group_size=2)
    assert t["all_right"] == pytest.approx((0 + 0 + 1 / 6 + 1) / 4)
    assert t["all_wrong"] == pytest.approx((1 + 3 / 6 + 1 / 6 + 0) / 4)
    assert t["tied"] == pytest.approx((1 + 0.5 + 2 / 6 + 1) / 4)
    # the plug-in p = k/n overstates it: mean (k/4)^2 + (1 - k/4)^2 = (1 + .625 + .5 + 1) / 4
    plug = D.variance_decomposition([0.0, 0.25, 0.5, 1.0], group_size=2)["tied"]
    assert plug == pytest.approx(0.78125) and t["tied"] < plug
    assert D.variance_decomposition([0.0, 0.25, 0.5, 1.0], group_size=2, n_samples=4)["tied"] == pytest.approx(
        t["tied"]
    )
    # unbiased: its expectation over k ~ Bin(n, p) is p^G + (1 - p)^G exactly
    n, G, p = 10, 3, 0.3
    pmf = [math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1)]
    expect = sum(w * D.tied_share([k], n, G)["tied"] for k, w in enumerate(pmf))
    assert expect == pytest.approx(p**G + (1 - p) ** G, abs=1e-12)
    assert math.isnan(D.variance_decomposition([0.5], group_size=8, n_samples=4)["tied"])  # n < G: none exists
    for bad in (dict(correct=[5], n=4), dict(correct=[1.5], n=4), dict(correct=[1], n=4, group_size=5)):
        with pytest.raises(ValueError):
            D.tied_share(**bad)


@pytest.mark.parametrize(
    "bad", [dict(p=[]), dict(p=[1.5]), dict(p=[[0.5]]), dict(p=[0.5], group_size=1), dict(p=[0.5], n_samples=1)]
)
def test_variance_decomposition_rejects_nonsense(bad):
    with pytest.raises(ValueError):
        D.variance_decomposition(**bad)


def test_advantage_ratios_by_hand():
    R = [[1.0, 0.0], [1.0, 1.0]]
    a = D.advantage_ratios(R, values=[[0.5, 0.5], [1.0, 1.0]])
    # batch: mean (R - .75)^2 = (.0625 + .5625 + .0625 + .0625) / 4 = .1875
    assert a["batch"] == pytest.approx(0.1875)
    # loo: (1 - 0, 0 - 1, 0, 0) -> .5; group mean: (.5, -.5, 0, 0) -> .125; critic: (.5, -.5, 0, 0) -> .125
    assert a["ratio"] == pytest.approx(
        {"group_loo": 0.5 / 0.1875, "group_mean": 0.125 / 0.1875, "critic": 0.125 / 0.1875}
    )
    assert (a["tied"], a["all_right"], a["all_wrong"]) == (0.5, 0.5, 0.0)
    with pytest.raises(ValueError):
        D.advantage_ratios([1.0, 0.0])
    with pytest.raises(ValueError):
        D.advantage_ratios(R, values=[[0.5, 0.5]])


def test_measured_advantage_ratios_meet_the_prediction_on_simulated_rewards():
    rng = np.random.default_rng(0)
    p = rng.choice([0.05, 0.5, 0.95], size=20000)
    R = rng.binomial(1, p[:, None], size=(20000, 8)).astype(float)
    pred = D.variance_decomposition(p, 8)["predicted"]
    got = D.advantage_ratios(R, values=np.repeat(p[:, None], 8, 1))["ratio"]
    for k in ("group_loo", "group_mean", "critic"):
        assert got[k] == pytest.approx(pred[k], rel=0.02), k


def test_advantage_ratio_group_mean_is_grpo_group_advantages_unscaled():
    R = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
    A = Fn.group_advantages(R.flatten(), 4, scale="none")[0]
    batch = float(((R - R.mean()) ** 2).mean())
    assert D.advantage_ratios(R)["ratio"]["group_mean"] == pytest.approx(float((A**2).mean()) / batch)


def test_per_prompt_optimal_baseline_and_score_weighted_ratios_by_hand():
    R, s2 = [[1.0, 0.0]], [[1.0, 3.0]]
    assert D.per_prompt_optimal_baseline(R, s2) == pytest.approx([0.25])  # 1*1 / (1 + 3)
    w = D.score_weighted_ratios(R, s2, [0.5], group_size=2)
    # batch = 1 (.5)^2 + 3 (.5)^2 = 1; loo adds p(1-p)/(G-1) = .25 to each square: 1 * .5 + 3 * .5 = 2
    # b* = .25: 1 (.75)^2 + 3 (.25)^2 = .75
    assert w == pytest.approx({"critic": 1.0, "group_loo": 2.0, "b_star": 0.75})


def test_score_weighted_ratios_with_equal_score_norms_are_the_unweighted_prediction():
    # prompt 1: p = .5, answers (1, 0); prompt 2: p = 1, answers (1, 1): exact frequencies
    R, s2, p = [[1.0, 0.0], [1.0, 1.0]], [[1.0, 1.0], [1.0, 1.0]], [0.5, 1.0]
    w = D.score_weighted_ratios(R, s2, p, group_size=2)
    assert w["critic"] == pytest.approx(D.variance_decomposition(p, 2)["predicted"]["critic"])  # 2/3
    # prompt weights: a world that draws prompt 2 three times as often as prompt 1
    twice = D.score_weighted_ratios([[1.0, 0.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0]], np.ones((4, 2)),
                                    [0.5, 1.0, 1.0, 1.0], 2)  # fmt: skip
    assert D.score_weighted_ratios(R, s2, p, 2, prompt_weights=[1.0, 3.0]) == pytest.approx(twice)
    with pytest.raises(ValueError):
        D.score_weighted_ratios(R, s2, p, 2, prompt_weights=[0.0, 0.0])


def test_pass_at_k_by_hand():
    assert D.pass_at_k(4, 1, 2) == pytest.approx(0.5)  # 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert D.pass_at_k(5, 2, 2) == pytest.approx(0.7)  # 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert D.pass_at_k(10, 3, 1) == pytest.approx(0.3)  # pass@1 = c / n
    assert D.pass_at_k(4, 2, 3) == 1.0 and D.pass_at_k(4, 0, 4) == 0.0  # n - c < k; no right answer
    assert D.pass_at_k(256, [0, 1, 256], 256) == pytest.approx([0.0, 1.0, 1.0])  # k = n: any right one
    c = np.array([0, 3, 7])
    assert D.pass_at_k(8, c, 1) == pytest.approx(c / 8)
    for bad in ((4, 1, 0), (4, 1, 5), (4, 5, 1), (4, -1, 1)):
        with pytest.raises(ValueError):
            D.pass_at_k(*bad)


def test_std_weight_and_group_push_by_hand():
    assert D.std_weight(0.5, 2) == pytest.approx([2.0])  # k = 1 of 2: std = 1/2
    # G = 4, p = 1/2: k = 1, 3 (4/16 each): 4/sqrt(3); k = 2 (6/16): 4/2; over P(not tied) = 14/16
    assert D.std_weight(0.5, 4) == pytest.approx([(8 / 16 * 4 / math.sqrt(3) + 6 / 16 * 2) / (14 / 16)])
    assert np.isnan(D.std_weight(0.0, 4)[0])  # always tied: no weight to speak of
    assert D.std_weight([0.02, 0.5], 8)[0] > D.std_weight([0.02, 0.5], 8)[1]  # rare successes weigh more
    assert D.group_push(0.5, 2, "group") == pytest.approx([1.0])  # k = 1 of 2 (1/2): 2 sqrt(1 * 1)
    assert D.group_push(0.5, 2, "none") == pytest.approx([0.5])  # 2 * 1 * 1 / 2
    # G = 4, p = 1/2, group: 2 * 4/16 * 2 sqrt(3) + 6/16 * 2 * 2; none: 2 * 4/16 * 2*3/4 + 6/16 * 2*4/4
    assert D.group_push(0.5, 4, "group") == pytest.approx([math.sqrt(3) + 1.5])
    assert D.group_push(0.5, 4, "none") == pytest.approx([1.5])
    with pytest.raises(ValueError):
        D.group_push(0.5, 4, "batch")


def test_group_push_is_the_sum_of_grpo_advantages_of_each_group():
    G, p = 4, 0.3
    total = {"group": 0.0, "none": 0.0}
    for k in range(G + 1):
        r = torch.tensor([1.0] * k + [0.0] * (G - k))
        for scale in total:
            A = Fn.group_advantages(r, G, scale=scale, eps=0.0)[0]
            total[scale] += math.comb(G, k) * p**k * (1 - p) ** (G - k) * float(A.abs().sum())
    for scale, v in total.items():
        assert D.group_push(p, G, scale) == pytest.approx([v], rel=1e-5)


def test_easy_mask():
    task = ArithmeticTask()
    probs = [task.make_problem(10, 69), task.make_problem(70, 3), task.make_problem(5, 99)]
    assert D.easy_mask(probs, 70).tolist() == [True, False, False]


# ------------------------------------------------------------------ the spread world: a name a user passes
def test_spread_world_is_a_preset_with_its_own_reference_config():
    from grpo_edu import get_preset
    from grpo_edu.warmstart.presets import WORLDS, make_task, with_world
    from grpo_edu.warmstart.reference import reference_config

    default, spread = get_preset("cpu"), get_preset("cpu", world="spread")
    assert set(WORLDS) == {"default", "spread"} and default.world == "default" and spread.world == "spread"
    assert default.sft.operand_below is None and default.sft.target_accuracy == 0.5
    assert (spread.sft.operand_below, spread.sft.target_accuracy, spread.sft.target_metric) == (60, 0.7, "sampled")
    assert spread.task == default.task and spread.model == default.model  # the same RL task, another reference
    # the default world's cache key is what it always was (no operand_below in it); the spread one differs
    key = reference_config(make_task(default), default.model, default.sft)
    assert "operand_below" not in key["sft"] and set(key["sft"]) == {
        "lr", "n_examples", "batch_size", "max_steps", "target_accuracy", "target_metric", "eval_every",
        "grad_clip", "adam_betas", "weight_decay", "seed"}  # fmt: skip
    other = reference_config(make_task(spread), spread.model, spread.sft)
    assert other["sft"]["operand_below"] == 60 and other["task"] == key["task"] and other != key
    assert with_world(spread, "default") == default and with_world(default, "spread") == spread
    assert with_world(get_preset("cpu", steps=7), "spread").steps == 7  # other fields kept
    assert get_preset("gpu", device="cpu", world="spread").sft.operand_below == 600  # 60% of the range


@pytest.mark.parametrize("world", ["flat", "", None, 1, "Spread"])
def test_an_unknown_world_is_one_clear_error(world):
    from grpo_edu import get_preset
    from grpo_edu.warmstart.presets import with_world

    with pytest.raises(ValueError, match=r"unknown world .*choose one of \['default', 'spread'\]"):
        get_preset("cpu", world=world)
    with pytest.raises(ValueError, match=r"choose one of \['default', 'spread'\]"):
        with_world(get_preset("cpu"), world)


@pytest.mark.parametrize("bad", [0, -3, 1.5, True, "70"])
def test_sft_operand_below_rejects_nonsense(bad):
    from grpo_edu.warmstart.sft import SFTConfig

    with pytest.raises(ValueError, match="operand_below must be None or an integer >= 1"):
        SFTConfig(operand_below=bad)


def test_sft_on_a_subset_sees_only_small_operands():
    from grpo_edu.warmstart.sft import SFTConfig, labelled_set, sample_below, subset_eval_problems

    task = ArithmeticTask()
    got = sample_below(task, 300, np.random.default_rng(0), 70)
    assert len(got) == 300 and all(p.a < 70 and p.b < 70 and not task.is_heldout(p) for p in got)
    assert got == sample_below(task, 300, np.random.default_rng(0), 70)  # deterministic for a seed
    assert all(p.a < 30 and p.b < 30 for p in labelled_set(task, SFTConfig(n_examples=50, operand_below=30)))
    watched = subset_eval_problems(task, 70)  # held-out problems below the bound, repeated to >= 1000 rows
    assert len(watched) >= 1000 and all(p.a < 70 and p.b < 70 and task.is_heldout(p) for p in watched)
    with pytest.raises(ValueError, match="operand_below=1"):
        sample_below(ArithmeticTask(digits=3), 10, np.random.default_rng(0), 1)  # only 0+0 of a million


def test_sft_on_a_subset_stops_on_the_subsets_accuracy(tmp_path):
    from grpo_edu import ModelConfig
    from grpo_edu.warmstart.reference import reference_policy
    from grpo_edu.warmstart.sft import SFTConfig

    task = ArithmeticTask(digits=1, eval_size=50)
    cfg = SFTConfig(max_steps=10, eval_every=5, batch_size=32, target_accuracy=1.0, target_metric="sampled",
                    operand_below=5)  # fmt: skip
    _, info = reference_policy(task=task, model_config=ModelConfig(d_model=16, n_layers=1, n_heads=2, max_seq_len=12),
                               sft_config=cfg, cache=tmp_path, progress=False, return_info=True)  # fmt: skip
    assert info["steps"] == 10 and len(info["history"]["step"]) == 2
    assert list(tmp_path.glob("reference-*.pt"))  # cached like the default's


@pytest.fixture(scope="module")
def spread_reference():
    from grpo_edu import get_preset, reference_policy

    return reference_policy(get_preset("cpu", world="spread"), progress=False, return_info=True)


def test_the_spread_reference_knows_the_small_operands_only(spread_reference):
    from grpo_edu import get_preset, make_task
    from grpo_edu.evaluation import evaluate

    ref, info = spread_reference
    task = make_task(get_preset("cpu", world="spread"))
    easy = D.easy_mask(task.eval_problems(), 60)
    _, correct = evaluate(ref, task, return_correct=True)
    assert correct[torch.tensor(easy)].float().mean() > 0.9 > 0.3 > correct[torch.tensor(~easy)].float().mean()
    assert info["steps"] < 1000 and info["history"]["step"][-1] == info["steps"]  # stopped by the rule, not the cap


def test_prompt_success_and_pass_at_k_curve_agree(spread_reference):
    from grpo_edu import get_preset, make_task

    ref, _ = spread_reference
    task = make_task(get_preset("cpu", world="spread"))
    probs = task.eval_problems()[:40]
    s = D.prompt_success(ref, task, probs, samples=16, seed=3)
    assert s["correct"].shape == (40,) and s["n"] == 16 and np.all((s["p"] >= 0) & (s["p"] <= 1))
    c = D.pass_at_k_curve(ref, task, ks=(1, 4, 16), problems=probs, bound=60, seed=3)
    assert c["all"][1] == pytest.approx(s["p"].mean())  # the same samples: pass@1 is the mean p
    assert c["all"][1] <= c["all"][4] <= c["all"][16] and c["easy"][1] > c["hard"][1]


# ------------------------------------------------------------------ the regime, tiny
def test_difficulty_regime_runs_both_worlds_tiny(tmp_path):
    from grpo_edu import ModelConfig, TinyGPT, get_preset
    from grpo_edu.figures.plotstyle import alt_text
    from grpo_edu.studies import regimes
    from grpo_edu.studies.regimes.difficulty import RUNS, WORLDS

    torch.manual_seed(0)
    ref = TinyGPT(ModelConfig(d_model=16, n_layers=1, n_heads=2, max_seq_len=12))
    preset = get_preset("cpu", sequences_per_step=64)
    res = regimes.run_difficulty(ref, preset, seeds=(0, 1), size="tiny", references={"spread": ref}, progress=False)
    assert set(res["worlds"]) == set(WORLDS) and all(len(v) == 2 for v in res["worlds"].values())
    run = res["worlds"]["spread"][0]
    d = run["measure"]["decomposition"]
    assert d["within"] + d["between"] == pytest.approx(d["total"]) and set(d["predicted"]) == {
        "critic", "group_mean", "group_loo"}  # fmt: skip
    assert set(run["runs"]) == set(RUNS) and set(run["pass_ref"]["all"]) == {1, 2, 4}
    assert all(len(r["buckets"]) == len(r["curve"]) for r in run["runs"].values())  # one log per evaluation
    texts = [c["claim"] for c in res["claims"]]
    assert len(texts) == 2 * 12 and texts[0].startswith("[spread] ") and texts[1].startswith("[default] ")
    assert all(c["verdict"] in ("holds", "fails here", "depends") for c in res["claims"])
    assert "EV_max" in res["claims"][0]["measurement"] and "predicted" in res["claims"][2]["measurement"]
    text = regimes.format_regimes({"difficulty": res})
    assert "regime difficulty (" in text and "[spread]" in text and "[default]" in text
    fig = regimes.regime_figure("difficulty", res)
    assert alt_text(fig) and all(ax.get_title() for ax in fig.axes)
    with pytest.raises(ValueError, match="size must be one of"):
        regimes.run_difficulty(ref, preset, size="huge", references={"spread": ref}, progress=False)


def test_sft_whole_share_mixes_in_the_whole_task_and_keys_the_cache():
    from grpo_edu import get_preset
    from grpo_edu.warmstart.presets import make_task
    from grpo_edu.warmstart.reference import reference_config
    from grpo_edu.warmstart.sft import SFTConfig

    with pytest.raises(ValueError, match="whole_share acts only with operand_below"):
        SFTConfig(whole_share=0.1)
    for bad in (-0.1, 1.5, True, "0.1"):
        with pytest.raises(ValueError, match="whole_share must be a number in"):
            SFTConfig(operand_below=60, whole_share=bad)
    p = get_preset("cpu", world="spread")
    task = make_task(p)
    plain = reference_config(task, p.model, p.sft)
    mixed = reference_config(task, p.model, SFTConfig(**{**p.sft.__dict__, "whole_share": 0.05}))
    assert "whole_share" not in plain["sft"] and mixed["sft"]["whole_share"] == 0.05


def test_by_difficulty_splits_each_evaluation_train_hands_it(task, tiny_policy, cpu_preset):
    """ByDifficulty is train's on_evaluate hook: one (easy, hard) pair per evaluation (step 0 and the
    last included), the accuracy of each bucket of the answers train checked; by hand on a made-up
    evaluation, then on a tiny run where the buckets' weighted mean is each evaluation's accuracy."""
    import copy
    from dataclasses import replace
    from types import SimpleNamespace

    from grpo_edu import make_algorithm, train
    from grpo_edu.studies.regimes.difficulty import ByDifficulty

    logged = ByDifficulty(task, bound=50)
    easy = logged.easy
    assert easy.dtype == bool and 0 < easy.sum() < len(easy) == len(task.eval_problems())
    right = torch.tensor(easy, dtype=torch.float32)  # right on every easy prompt, wrong on every hard one
    logged(SimpleNamespace(correct=right))
    assert logged.log == [(1.0, 0.0)]
    logged = ByDifficulty(task, bound=50)
    preset = replace(cpu_preset, sequences_per_step=32, eval_every=2)
    h = train(make_algorithm("grpo", group_size=4), task, tiny_policy, copy.deepcopy(tiny_policy), preset, steps=3,
              progress=False, on_evaluate=logged)  # fmt: skip
    assert len(logged.log) == len(h.evals) == 3
    share = easy.mean()
    for (e, hard), ev in zip(logged.log, h.evals, strict=True):
        assert share * e + (1 - share) * hard == pytest.approx(ev["accuracy"])
