"""Notebook 12's knobs, by hand on a small batch (issues 36 and 46): a reward that ignores correctness
(Shao et al. 2025, spurious rewards: random, and the incorrect label as a relabelled task), the true
reward negated, a loss over one sign of the advantage (Zhu et al. 2025, NSR and PSR) and W-REINFORCE's
weight on the right answers, both on the group's advantage and in Zhu et al.'s own form (the reward as
the advantage, no baseline); the clip's condition counted; each knob settable from the shell."""

import copy
import dataclasses
import math

import numpy as np
import pytest
import torch

from grpo_edu import functional as Fn
from grpo_edu.algorithms import GRPO, GRPOConfig
from grpo_edu.algorithms.grpo_extras import spurious_rewards
from grpo_edu.command.cli import main
from grpo_edu.rollout import expand, generate

# one group of G = 4: one right answer, three wrong. mean 1/4, std (1/G) sqrt(3)/4, so
# A = (r - 1/4) / (sqrt(3)/4) = +sqrt(3) for the right answer, -1/sqrt(3) for each wrong one
R = torch.tensor([1.0, 0.0, 0.0, 0.0])
A_RIGHT, A_WRONG = math.sqrt(3), -1 / math.sqrt(3)


def test_spurious_rewards_by_hand():
    c = torch.tensor([1.0, 0.0, 1.0, 0.0])
    assert spurious_rewards(c, "true").tolist() == [1, 0, 1, 0]
    assert spurious_rewards(c, "negated").tolist() == [0, 1, 0, 1]
    # random: the same draws whatever the answers (independent of correctness) ...
    draw = lambda x, p=0.5: spurious_rewards(x, "random", p, torch.Generator().manual_seed(3))  # noqa: E731
    assert torch.equal(draw(c), draw(1 - c)) and torch.equal(draw(torch.zeros(4)), draw(c))
    assert not torch.equal(spurious_rewards(c, "true"), spurious_rewards(1 - c, "true"))  # control
    # ... with mean p: 10^4 draws at p = 0.3 (std of the mean 0.0046)
    many = spurious_rewards(torch.zeros(10_000), "random", 0.3, torch.Generator().manual_seed(0))
    assert set(many.unique().tolist()) == {0.0, 1.0} and abs(many.mean().item() - 0.3) < 0.02
    assert draw(c, 0.0).sum() == 0 and draw(c, 1.0).sum() == 4


def test_signed_advantages_by_hand():
    a = torch.tensor([1.0, -2.0, 0.5, 0.0])
    assert Fn.signed_advantages(a).tolist() == [1.0, -2.0, 0.5, 0.0]  # the default changes nothing
    assert Fn.signed_advantages(a, "negative").tolist() == [0.0, -2.0, 0.0, 0.0]  # NSR
    assert Fn.signed_advantages(a, "positive").tolist() == [1.0, 0.0, 0.5, 0.0]  # PSR
    assert torch.allclose(Fn.signed_advantages(a, "both", 0.1), torch.tensor([0.1, -2.0, 0.05, 0.0]))  # W-REINFORCE
    a2 = a[:, None].expand(4, 3)  # [B, T] too
    assert torch.equal(Fn.signed_advantages(a2, "negative"), Fn.signed_advantages(a, "negative")[:, None].expand(4, 3))


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: spurious_rewards(torch.ones(2), "noise"), "signal must be one of"),
        (lambda: spurious_rewards(torch.ones(2), "random", 1.5), r"p must be in \[0.0, 1.0\]"),
        (lambda: spurious_rewards(torch.tensor([0.5, 1.0]), "negated"), "correct must hold only 0 and 1"),
        (lambda: spurious_rewards(torch.ones(2, 2)), r"correct must be \[B\]"),
        (lambda: Fn.signed_advantages(torch.ones(2), "neg"), "sign must be one of"),
        (lambda: Fn.signed_advantages(torch.ones(2), "both", -0.1), "positive_weight must be in"),
        (lambda: GRPOConfig(reward_signal="noise"), "GRPOConfig.reward_signal must be one of"),
        (lambda: GRPOConfig(random_reward_p=2.0), "GRPOConfig.random_reward_p must be <= 1"),
        (lambda: GRPOConfig(advantage_sign="pos"), "GRPOConfig.advantage_sign must be one of"),
        (lambda: GRPOConfig(positive_weight=-1.0), "GRPOConfig.positive_weight must be >= 0"),
        (lambda: GRPOConfig(reward_signal="random", kl_placement="reward"), "needs the 0/1 outcome"),
    ],
)
def test_bad_knobs_are_one_line_value_errors(call, message):
    with pytest.raises(ValueError, match=message) as exc:
        call()
    assert "\n" not in str(exc.value)


def _group_batch(task, policy, rewards, seed=0):
    """One group of G = len(rewards) completions of one prompt, scored ``rewards`` (at the first token)."""
    G = len(rewards)
    probs = task.sample(1, seed)
    ro = generate(policy, task.encode_prompts(probs), group_size=G, max_new_tokens=task.max_answer_length,
                  generator=torch.Generator().manual_seed(seed), tokenizer=task.tokenizer)  # fmt: skip
    scores = torch.zeros_like(ro.mask)
    scores[:, 0] = rewards
    return ro, scores, expand(probs, G)


def _algo(policy, **knobs):
    algo = GRPO(group_size=4, beta=0.0, **knobs)  # beta 0: the loss is the surrogate alone
    return algo.setup(policy, copy.deepcopy(policy), generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize(
    "knobs, advantages",
    [
        ({}, [A_RIGHT, A_WRONG, A_WRONG, A_WRONG]),  # control: plain GRPO
        ({"advantage_sign": "negative"}, [0.0, A_WRONG, A_WRONG, A_WRONG]),  # NSR
        ({"advantage_sign": "positive"}, [A_RIGHT, 0.0, 0.0, 0.0]),  # PSR
        ({"positive_weight": 0.1}, [0.1 * A_RIGHT, A_WRONG, A_WRONG, A_WRONG]),  # W-REINFORCE
        ({"reward_signal": "negated"}, [-A_RIGHT, -A_WRONG, -A_WRONG, -A_WRONG]),  # every wrong answer paid
        ({"reward_signal": "negated", "advantage_sign": "negative"}, [-A_RIGHT, 0.0, 0.0, 0.0]),
    ],
)
def test_grpo_advantage_and_loss_by_hand(task, tiny_policy, knobs, advantages):
    """prepare's advantages on one group of rewards (1, 0, 0, 0), and the loss at ratio 1 (the first
    minibatch of a batch: pi_theta = pi_old, the clip idle): token_mean of -A_i over every token,
    -sum_i A_i |o_i| / sum_i |o_i|."""
    algo = _algo(tiny_policy, **knobs)
    ro, scores, _ = _group_batch(task, tiny_policy, R)
    batch = algo.prepare(ro, scores)
    assert batch.advantages.tolist() == pytest.approx(advantages, abs=1e-3)  # adv_eps 1e-4 in the std
    lengths = ro.mask.sum(1)
    expected = -(torch.tensor(advantages) * lengths).sum() / lengths.sum()
    loss, stats = algo.loss(batch, torch.arange(4))
    assert loss.item() == pytest.approx(expected.item(), abs=1e-3)
    assert stats["clip_ratio"] == 0.0


def test_random_reward_ignores_the_answers(task, tiny_policy):
    """reward_signal="random": the advantages do not depend on which answers were right (the same
    generator state gives the same draws), but they do with the true reward (the control)."""
    adv = {}
    for signal in ("random", "true"):
        for name, r in (("one right", R), ("all wrong", torch.zeros(4))):
            algo = _algo(tiny_policy, reward_signal=signal)
            ro, scores, _ = _group_batch(task, tiny_policy, r)
            adv[signal, name] = algo.prepare(ro, scores).advantages
    assert torch.equal(adv["random", "one right"], adv["random", "all wrong"])
    assert adv["random", "all wrong"].abs().sum() > 0  # the draws vary: a constant reward would give A = 0
    assert not torch.equal(adv["true", "one right"], adv["true", "all wrong"])


def test_nsr_and_psr_split_grpos_gradient(task, tiny_policy):
    """The loss's gradient under NSR (the negative advantages only) plus PSR's (the positive ones only)
    is plain GRPO's, W-REINFORCE's is NSR's plus 0.1 PSR's, and dropping a sign changes it (the
    control: NSR's gradient is not GRPO's). No optimizer step is taken here."""
    ro, scores, _ = _group_batch(task, tiny_policy, R)

    def grad(**knobs):
        policy = copy.deepcopy(tiny_policy)
        algo = _algo(policy, **knobs)
        batch = algo.prepare(ro, scores)
        loss, _ = algo.loss(batch, torch.arange(4))
        policy.zero_grad()
        loss.backward()
        return torch.cat([p.grad.flatten() for p in policy.parameters() if p.grad is not None])

    g_both, g_neg, g_pos, g_w = (
        grad(),
        grad(advantage_sign="negative"),
        grad(advantage_sign="positive"),
        grad(positive_weight=0.1),
    )
    assert torch.allclose(g_neg + g_pos, g_both, atol=1e-6)  # the two signs add up to GRPO's gradient
    assert torch.allclose(g_neg + 0.1 * g_pos, g_w, atol=1e-6)  # W-REINFORCE: lambda on the right answers
    assert not torch.allclose(g_neg, g_both, atol=1e-6)  # control: dropping a sign changes the gradient


def test_the_knobs_are_flags(monkeypatch):
    import grpo_edu.warmstart.reference as ref
    from grpo_edu import TinyGPT
    from grpo_edu.train import History

    seen = {}

    def train_from_preset(algo, task, reference, policy, preset, steps, progress, callback):
        seen["config"] = algo.config
        h = History(algo.name)
        h.evals = [{"step": 0, "samples": 0, "seconds": 0.0, "accuracy": 0.5}]
        return h

    monkeypatch.setattr(ref, "train_from_preset", train_from_preset)
    monkeypatch.setattr(ref, "reference_policy", lambda preset, task, progress: TinyGPT(preset.model))
    argv = ["train", "--preset", "cpu", "--steps", "1", "--quiet"]
    knobs = ["--reward_signal", "random", "--random_reward_p", "0.3", "--advantage_sign", "negative"]
    assert main([*argv, *knobs, "--positive_weight", "0.1"]) == 0
    cfg = seen["config"]
    assert (cfg.reward_signal, cfg.random_reward_p, cfg.advantage_sign, cfg.positive_weight) == (
        "random", 0.3, "negative", 0.1
    )  # fmt: skip
    assert main(argv) == 0 and seen["config"].reward_signal == "true"  # control: the defaults
    with pytest.raises(SystemExit):
        main([*argv, "--reward_signal", "noise"])


def _tiny_ref():
    from grpo_edu import ModelConfig, TinyGPT

    torch.manual_seed(0)
    return TinyGPT(ModelConfig(d_model=16, n_layers=1, n_heads=2, max_seq_len=12))


def test_the_regimes_run_tiny_and_draw(tmp_path):
    """Both regimes end to end at their "tiny" size: every claim has a verdict of the one rule and names
    the variant it tests, the measurements are in range, the figures are drawn; a bad size or run name is
    refused first."""
    from grpo_edu import get_preset
    from grpo_edu.measure.verdicts import VERDICTS
    from grpo_edu.studies import regimes
    from grpo_edu.studies.regimes import negative_samples as NS
    from grpo_edu.studies.regimes import spurious_rewards as SR

    preset, ref = get_preset("cpu", sequences_per_step=64), _tiny_ref()
    spur = SR.run_spurious(ref, preset, seeds=(0, 1), size="tiny", progress=False)
    neg = NS.run_negative_samples(ref, preset, seeds=(0, 1), size="tiny", references={"spread": ref}, progress=False)
    for name, res, runs in (("spurious_rewards", spur, SR.SIZES["tiny"]["runs"]), ("negative_samples", neg, NS.RUNS)):
        assert list(res["runs"]) == list(runs) and all(len(v) == 2 for v in res["runs"].values())
        assert res["claims"] and all(c["verdict"] in VERDICTS for c in res["claims"])
        refs = res["reference"] if isinstance(res["reference"], list) else sum(res["reference"].values(), [])
        for r in [*refs, *(x for v in res["runs"].values() for x in v)]:
            assert 0 <= r["greedy"] <= 1 and all(0 <= p <= 1 for p in r["pass"].values())
        assert (tmp_path / f"{name}.png").name in regimes.plot_regime(name, res, tmp_path / f"{name}.png")
    assert all(("world]" in c["claim"]) for c in spur["claims"])  # each says which world it tests
    nsr = [c["claim"] for c in neg["claims"] if c["claim"].startswith("NSR (")]
    assert len(nsr) == 2 and NS.PAPER in nsr[0] and NS.CENTRED in nsr[1]  # each NSR verdict names its variant
    assert spur["labels"]["default"][0]["prompts"] > 0 and spur["labels"]["default"][0]["left_out"] == 0
    part = SR.run_spurious(ref, preset, seeds=(0,), size="tiny", runs=("random, several",), progress=False)
    assert list(part["runs"]) == ["random, several"] and "claims" not in part  # a subset: no claims
    with pytest.raises(ValueError, match="size must be one of"):
        SR.run_spurious(ref, preset, size="huge")
    with pytest.raises(ValueError, match="unknown runs"):
        SR.run_spurious(ref, preset, runs=("random, twice",))
    with pytest.raises(ValueError, match="unknown runs"):
        NS.run_negative_samples(ref, preset, runs=("NSR, twice",), references={"spread": ref})


# ------------------------------------------------------------------ Zhu et al.'s own form: no baseline

R_PM = torch.tensor([1.0, -1.0, -1.0, -1.0])  # rewards (-1, +1): one right answer, three wrong


@pytest.mark.parametrize(
    "name, rewards, advantages",
    [
        ("NSR", R_PM, [0.0, -1.0, -1.0, -1.0]),  # every wrong answer pushed down by 1
        ("NSR", -torch.ones(4), [-1.0, -1.0, -1.0, -1.0]),  # ... in an all-wrong group too
        ("NSR, group-centred", -torch.ones(4), [0.0, 0.0, 0.0, 0.0]),  # control: the group baseline gives 0 there
        ("NSR, group-centred", R_PM, [0.0, A_WRONG, A_WRONG, A_WRONG]),
        ("PSR", R_PM, [1.0, 0.0, 0.0, 0.0]),
        ("PSR", torch.ones(4), [1.0, 1.0, 1.0, 1.0]),  # an all-right group pulled up too
        ("W-REINFORCE", R_PM, [0.1, -1.0, -1.0, -1.0]),  # lambda = 0.1 on the right answers
        ("GRPO", R_PM, [A_RIGHT, A_WRONG, A_WRONG, A_WRONG]),
    ],
)
def test_negative_samples_advantages_by_hand(task, tiny_policy, name, rewards, advantages):
    """Each run's advantages on one group, as Zhu et al.'s code computes them from the 0/1 score s (PSR s,
    NSR s - 1, W-REINFORCE 0.1 s or s - 1) for their form, and GRPO's z-score with one sign for the
    group-centred variant."""
    from grpo_edu.studies.regimes import negative_samples as NS

    algo = NS.algorithm(name)
    algo.config.group_size = 4
    algo.setup(tiny_policy, copy.deepcopy(tiny_policy), generator=torch.Generator().manual_seed(0))
    ro, scores, _ = _group_batch(task, tiny_policy, rewards)
    assert algo.config.beta == 0.0
    assert algo.prepare(ro, scores).advantages.tolist() == pytest.approx(advantages, abs=1e-3)


def test_reward_as_advantage_keeps_the_groups_statistics():
    from grpo_edu.studies.regimes.negative_samples import reward_as_advantage

    r = torch.tensor([1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0])
    adv, stats = reward_as_advantage(r, 4)
    lib_adv, lib_stats = Fn.group_advantages(r, 4)
    assert torch.equal(adv, r) and adv.data_ptr() != r.data_ptr()  # the reward itself, a copy
    assert stats["frac_zero_std"] == lib_stats["frac_zero_std"] == 0.5 and torch.equal(stats["mean"], lib_stats["mean"])
    assert not torch.allclose(lib_adv, r)  # control: the library's advantage is centred


# ------------------------------------------------------------------ Shao et al.'s incorrect label


def _labels(task, policy, votes=16, seed=0):
    from grpo_edu.studies.regimes.spurious_rewards import IncorrectLabels

    return IncorrectLabels(task, policy, votes=votes, seed=seed)


def test_incorrect_labels_are_the_references_most_frequent_wrong_answer(task, tiny_policy, monkeypatch):
    """The label of a prompt is the most frequent wrong answer among the votes (ties: the smaller string),
    never the right one even when the right one wins the vote; fixed once drawn; the relabelled task pays
    an answer that matches the label and not the right answer (the control), while its held-out problems
    are the task's own."""
    lab = _labels(task, tiny_policy)
    p, q = task.sample(2, 3)
    votes = {p.answer: [p.answer] * 5 + ["12"] * 3 + ["21"] * 3 + [None] * 5,  # the right answer wins the vote
             q.answer: ["77"] * 2 + ["7"] * 9 + [q.answer] * 5}  # fmt: skip
    monkeypatch.setattr(lab, "_answers", lambda probs: [votes[x.answer] for x in probs])
    lab.label([p, q, p])
    assert lab.labels[lab.key(p)] == "12" and lab.labels[lab.key(q)] == "7"
    assert lab.stats["prompts"] == 2 and lab.stats["vote wrong"] == 1  # q's vote is wrong: there the paper's label
    assert lab.label_share == pytest.approx((3 / 16 + 9 / 16) / 2)
    monkeypatch.setattr(lab, "_answers", lambda probs: pytest.fail("a labelled prompt was voted on again"))
    lab.label([q])
    relabelled = dataclasses.replace(q, answer=lab.labels[lab.key(q)])
    written = [task.target_ids(relabelled), task.target_ids(q)]  # the label, then the right answer, each + <eos>
    ids = torch.tensor([(w + [0] * 4)[:4] for w in written])
    mask = (torch.arange(4)[None] < torch.tensor([[len(w)] for w in written])).float()
    assert task.token_scores([relabelled] * 2, ids, mask).sum(1).tolist() == [1.0, 0.0]
    assert lab.eval_problems() == task.eval_problems() and lab.max_answer_length == task.max_answer_length


def test_incorrect_labels_sample_leaves_out_prompts_without_a_wrong_answer(task, tiny_policy, monkeypatch):
    lab = _labels(task, tiny_policy)
    right = lambda probs: [[x.answer] * 16 if x.a % 2 else ["0"] * 16 for x in probs]  # noqa: E731
    monkeypatch.setattr(lab, "_answers", right)
    probs = lab.sample(8, np.random.default_rng(0))
    assert len(probs) == 8 and all(x.a % 2 == 0 and x.answer == "0" for x in probs)
    assert lab.stats["left out"] > 0 and lab.stats["prompts"] == lab.stats["left out"] + len(
        {lab.key(x) for x in probs}
    )
    monkeypatch.setattr(lab, "_answers", lambda probs: [[x.answer] * 16 for x in probs])
    with pytest.raises(RuntimeError, match="no incorrect labels"):
        lab.sample(4, np.random.default_rng(1))


def test_incorrect_labels_vote_with_the_references_samples(task, tiny_policy):
    """Real votes of a (tiny, untrained) reference: every label is an answer the reference wrote and is
    wrong; the same seed draws the same labels."""
    a, b, c = (_labels(task, tiny_policy, seed=4) for _ in range(3))
    probs = task.sample(6, 9)
    a.label(probs)
    b.label(probs)
    answers = c._answers(probs)  # the votes a and b drew
    assert a.labels == b.labels
    for p, votes in zip(probs, answers, strict=True):
        label = a.labels[a.key(p)]
        assert label is None or (label != p.answer and label in votes)
    with pytest.raises(ValueError, match="votes must be a positive int"):
        _labels(task, tiny_policy, votes=0)


def test_clip_condition_counts_tokens_above_the_threshold(task, tiny_policy):
    """clip_condition: shares in [0, 1]; with eps_high so large that the threshold is ~0 every token is
    above it, with eps_high ~0 (threshold ~1) none (the control)."""
    from grpo_edu import get_preset
    from grpo_edu.studies.regimes.spurious_rewards import clip_condition

    preset = get_preset("cpu")
    c = clip_condition(tiny_policy, task, preset, seed=0, prompts=4)
    assert c["threshold"] == pytest.approx(1 / 1.2) and c["tokens"] > 0
    shares = (
        "above",
        "digits_above",
        "eos_above",
        "open",
        "above_open",
        "right_above",
        "right_below",
        "above_after_wrong",
    )
    assert all(0.0 <= c[k] <= 1.0 for k in shares)
    assert clip_condition(tiny_policy, task, preset, seed=0, prompts=4, eps_high=1e9)["above"] == 1.0
    assert clip_condition(tiny_policy, task, preset, seed=0, prompts=4, eps_high=1e-9)["above"] == 0.0


def test_clip_condition_reads_the_condition_after_a_right_prefix(task, tiny_policy, monkeypatch):
    """clip_condition by hand on eight made-up answers to one prompt (the target's L tokens, <eos> included,
    and one masked pad): rows 0-2 the target, every token at p = 0.9 (confident); row 3 the target, its first
    token at 0.5; rows 4-6 a wrong first token at 0.9, then 0.5, <eos> at 0.9; row 7 the same with its first
    token at 0.5. Open (after a right prefix): rows 0-3 whole, rows 4-7 their first token only, so the
    confident tokens after a wrong one (rows 4-7's <eos>) count as neither right nor wrong there."""
    import types

    import grpo_edu.rollout
    from grpo_edu import get_preset
    from grpo_edu.algorithms import make_algorithm
    from grpo_edu.studies.regimes.spurious_rewards import clip_condition

    assert make_algorithm("grpo").config.group_size == 8
    made = {}

    def fake_generate(policy, prompts, group_size, **kw):
        t = made["target"]
        L = len(t)
        wrong = next(i for i in task.tokenizer.stoi.values() if 3 <= i != t[0])
        ids = torch.tensor([t + [0]] * 4 + [[wrong] + t[1:] + [0]] * 4)
        p = torch.full((8, L + 1), 0.5)
        p[:, -1] = 1.0  # the pad: masked, however likely
        p[:3, :L] = 0.9
        p[3, 1:L] = 0.9
        p[4:7, 0] = 0.9
        p[4:, L - 1] = 0.9
        mask = torch.ones(8, L + 1)
        mask[:, -1] = 0
        return types.SimpleNamespace(completion_ids=ids, mask=mask, logprobs=p.log())

    real_sample = task.sample

    def sample(n, rng):
        probs = real_sample(n, rng)
        made["target"] = task.target_ids(probs[0])
        return probs

    monkeypatch.setattr(grpo_edu.rollout, "generate", fake_generate)
    monkeypatch.setattr(task, "sample", sample)
    c = clip_condition(tiny_policy, task, get_preset("cpu"), seed=0, prompts=1)
    L = len(made["target"])
    assert L >= 2 and c["tokens"] == 8 * L
    assert c["open"] == pytest.approx((4 * L + 4) / (8 * L))
    assert c["above_open"] == pytest.approx((4 * L + 2) / (4 * L + 4))
    assert c["right_above"] == pytest.approx((4 * L - 1) / (4 * L + 2))  # all but rows 4-6's first token
    assert c["right_below"] == pytest.approx(1 / 2)  # row 3's first token right, row 7's wrong
    assert c["above"] == pytest.approx((4 * L + 6) / (8 * L))
    assert c["above_after_wrong"] == pytest.approx(4 / (4 * L + 6))
    assert c["eos_above"] == 1.0 and c["sampled"] == pytest.approx(0.5)


def test_wrong_in_tied_groups_at_an_untrained_policy(task, tiny_policy):
    from grpo_edu import get_preset
    from grpo_edu.studies.regimes.negative_samples import wrong_in_tied_groups

    t = wrong_in_tied_groups(tiny_policy, task, get_preset("cpu"), seed=0, prompts=8)
    assert t["sampled_accuracy"] == 0.0 and t["all_wrong_groups"] == 1.0 and t["wrong_in_all_wrong_groups"] == 1.0


def test_clip_bias_one_update_has_no_clip(monkeypatch):
    """SR.clip_bias on a tiny batch: one update per batch never clips (the ratio is 1 at its only step);
    several updates with the clip off never clip either; with a clip range narrow enough for the tiny
    model's steps several updates do clip (the control); every draw is measured."""
    from grpo_edu import get_preset, make_task
    from grpo_edu.studies.regimes import spurious_rewards as SR

    preset = get_preset("cpu")
    b = SR.clip_bias(_tiny_ref(), make_task(preset), preset, seed=0, draws=2, prompts=4)
    assert set(b["schedules"]) == {*SR.SCHEDULES, "one update, true reward", "several, true reward"}
    assert all(len(v["dH"]) == 2 and len(v["kl"]) == 2 for v in b["schedules"].values())
    assert all(x >= -1e-6 for v in b["schedules"].values() for x in v["kl"])  # KL(pi_old || pi_new) >= 0
    for name in ("one update", "several, no clip", "one update, true reward"):
        assert b["schedules"][name]["clip_high"] == [0.0, 0.0] and b["schedules"][name]["clip_low"] == [0.0, 0.0]
    # the control: several updates do clip once the range is narrow enough for this tiny model's small steps
    monkeypatch.setitem(SR.SCHEDULES, "several", dict(epochs=4, minibatches=4, eps_low=1e-4, eps_high=1e-4))
    narrow = SR.clip_bias(_tiny_ref(), make_task(preset), preset, seed=0, draws=2, prompts=4)["schedules"]
    assert sum(narrow["several"]["clip_high"]) + sum(narrow["several"]["clip_low"]) > 0
    assert narrow["one update"]["clip_high"] == [0.0, 0.0] and narrow["one update"]["clip_low"] == [0.0, 0.0]
