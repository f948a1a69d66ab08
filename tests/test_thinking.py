"""Tests of the thinking world: ScratchpadTask (its checker and demonstrations, by hand), the
property that the scratchpad's content never changes the reward, bad input, and a tiny seeded
run of the thinking regime."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from envs import ArithmeticTask, ScratchpadTask
from grpo_edu import ModelConfig, TinyGPT, evaluate, sample_batch
from grpo_edu.warmstart.reference import reference_config
from grpo_edu.warmstart.sft import SFTConfig, sft_batch

EOS = 2


@pytest.fixture(scope="module")
def task():
    return ScratchpadTask()


def ids(task, text, eos=True):
    return task.tokenizer.encode(text, add_eos=eos)


def id_reward(task, problem, text, eos=True, width=None):
    """The id-level reward of one completion (mask up to and including <eos>, padded to width)."""
    row = ids(task, text, eos)
    width = width or max(len(row), 1)
    x = torch.zeros(1, width, dtype=torch.long)
    m = torch.zeros(1, width)
    x[0, : len(row)] = torch.tensor(row, dtype=torch.long)
    m[0, : len(row)] = 1
    return float(task.token_scores([problem], x, m).sum())


# ------------------------------------------------------------------ by hand
def test_problems_and_scratchpads_by_hand(task):
    p = task.make_problem(123, 4)
    assert (p.prompt, p.answer, p.value) == ("123*4=", "294", 492)
    # 3*4 = 12: digit 2, carry 1; 2*4 + 1 = 9: digit 9, carry 0; 1*4 + 0 = 4: digit 4, carry 0
    assert task.scratchpad(p) == "*21*90*40"
    q = task.make_problem(850, 2)  # 0*2 = 0; 5*2 = 10: 0 carry 1; 8*2 + 1 = 17: 7 carry 1 -> 1700
    assert (q.prompt, q.answer, task.scratchpad(q)) == ("850*2=", "0071", "*00*01*71")
    z = task.make_problem(5, 0)
    assert (z.prompt, z.answer, task.scratchpad(z)) == ("005*0=", "0", "*00*00*00")
    n = task.make_problem(999, 9)  # 8991: every digit carries
    assert (n.answer, task.scratchpad(n)) == ("1998", "*18*98*98")
    assert ScratchpadTask(scratchpad="blank").scratchpad(p) == "*--*--*--"
    assert ScratchpadTask(digits=2).make_problem(57, 3).prompt == "57*3="
    assert (task.prompt_length, task.direct_length, task.scratchpad_length, task.max_answer_length) == (7, 5, 15, 15)
    assert task.difficulty(z) == "easy" and task.difficulty(task.make_problem(7, 1)) == "easy"
    assert task.difficulty(p) == "hard"


def test_demonstrations_by_hand(task):
    p = task.make_problem(123, 4)
    demo = task.demonstration(p)
    assert demo == ("*21*90*40=294" if task.uses_scratchpad(p) else "294")
    assert ScratchpadTask(scratchpad_share=1.0).demonstration(p) == "*21*90*40=294"
    assert ScratchpadTask(scratchpad_share=0.0).demonstration(p) == "294"
    assert ScratchpadTask(scratchpad="blank", scratchpad_share=1.0).demonstration(p) == "*--*--*--=294"
    # every demonstration is right by the checker, in both forms
    for q in task.sample(300, 0):
        d = task.demonstration(q)
        assert task.outcome_reward(q, d) == 1.0 and id_reward(task, q, d) == 1.0
        assert task.form(d) == ("scratchpad" if task.uses_scratchpad(q) else "direct")
    # which form: a hash of the problem, about half of them; the same problem, the same form
    share = np.mean([task.uses_scratchpad(q) for q in task.sample(4000, 1)])
    assert 0.45 < share < 0.55, share
    assert [task.uses_scratchpad(q) for q in task.sample(50, 3)] == [
        task.uses_scratchpad(q) for q in task.sample(50, 3)
    ]


def test_sft_targets_by_hand():
    t = ScratchpadTask(scratchpad_share=1.0)
    p = t.make_problem(123, 4)
    x, y = sft_batch(t, [p])
    seq = t.tokenizer.encode("123*4=", add_bos=True) + ids(t, "*21*90*40=294")
    assert x[0].tolist() == seq
    P = t.prompt_length
    assert y[0, : P - 1].tolist() == [-100] * (P - 1)  # no loss on the prompt
    assert y[0, P - 1 :].tolist() == seq[P:] + [-100]  # the working, '=', the answer, <eos>


def test_checker_by_hand(task):
    p = task.make_problem(123, 4)
    right = ["294", "*21*90*40=294", "=294", "*55*55*55=294", "*21*90*40==294", "9=9=294", "+-*=294"]
    wrong = ["295", "*21*90*40=295", "*21*90*40=", "294=", "2940", "0294", "", "*21*90*40", "29=4"]
    for text in right:
        assert task.outcome_reward(p, text) == 1.0 and id_reward(task, p, text) == 1.0, text
    for text in wrong:
        assert task.outcome_reward(p, text) == 0.0 and id_reward(task, p, text) == 0.0, text
    assert task.outcome_reward(p, "294", terminated=False) == 0.0  # no <eos>: truncated, wrong
    assert id_reward(task, p, "294", eos=False) == 0.0
    assert task.outcome_reward(p, "*21*90*40=294<eos>junk") == 1.0  # text after <eos> is cut
    # a stray special token before <eos> is a mistake at the id level
    row = [task.tokenizer.bos_id] + ids(task, "294")
    x, m = torch.tensor([row]), torch.ones(1, len(row))
    assert float(task.token_scores([p], x, m).sum()) == 0.0
    # the reward sits on the last masked token, mapped to reward_values
    t = ScratchpadTask(reward_values=(-1.0, 2.0))
    s = t.token_scores([p, p], torch.tensor([ids(t, "294") + [0, 0], ids(t, "1=295")]), torch.tensor(
        [[1.0] * 4 + [0, 0], [1.0] * 6]))  # fmt: skip
    assert s.tolist() == [[0, 0, 0, 2.0, 0, 0], [0, 0, 0, 0, 0, -1.0]]
    assert task.final_answer("*21*90*40=294") == "294" and task.form("294") == "direct"
    assert t.rewards_from_ids([p], torch.tensor([ids(t, "*21*90*40=294")])).tolist() == [1.0]


def test_budget_truncates(task):
    short = ScratchpadTask(budget=14)
    assert short.max_answer_length == 14 and short.config["budget"] == 14 and "budget" not in task.config
    p = short.make_problem(999, 9)  # the scratchpad answer needs 15 tokens
    text = short.scratchpad(p) + "=" + p.answer
    assert len(ids(short, text)) == 15
    row = ids(short, text)[:14]  # what a generation of 14 tokens keeps: no <eos>, wrong
    assert float(short.token_scores([p], torch.tensor([row]), torch.ones(1, 14)).sum()) == 0.0
    assert ScratchpadTask(budget=5).max_answer_length == 5  # room for every direct answer


def test_held_out_split(task):
    ev = task.eval_problems()
    assert len(ev) == 500 and len({(p.a, p.b) for p in ev}) == 500
    assert all(task.is_heldout(p) for p in ev) and ev == ScratchpadTask().eval_problems()
    train = task.sample(3000, 0)
    assert not any(task.is_heldout(p) for p in train) and {p.b for p in train} == set(range(10))
    assert 0.15 < np.mean([task.difficulty(p) == "easy" for p in ev]) < 0.25


def test_cache_key_includes_the_task(task):
    m, s = ModelConfig(max_seq_len=22), SFTConfig()
    keys = [reference_config(t, m, s)["task"] for t in (task, ScratchpadTask(scratchpad="blank"),
            ScratchpadTask(scratchpad_share=0.25), ScratchpadTask(digits=2), ArithmeticTask(digits=3, ops=("*",)))]  # fmt: skip
    assert all(keys[i] != keys[j] for i in range(len(keys)) for j in range(i))
    assert reference_config(ScratchpadTask(reward_values=(-1.0, 1.0)), m, s) == reference_config(task, m, s)


def test_the_library_runs_it(task):
    torch.manual_seed(0)
    policy = TinyGPT(ModelConfig(d_model=16, n_layers=1, n_heads=2, max_seq_len=task.prompt_length + 15))
    ro, scores, problems = sample_batch(policy, task, 4, 2, 0, torch.Generator().manual_seed(0))
    assert ro.completion_ids.shape[1] <= 15 and scores.shape == ro.mask.shape and len(problems) == 8
    assert 0.0 <= evaluate(policy, task, task.eval_problems()[:20]) <= 1.0


# ------------------------------------------------------------------ the property
CHARS = "0123456789+-*="


@settings(max_examples=300, deadline=None)
@given(
    a=st.integers(0, 999),
    b=st.integers(0, 9),
    pad=st.text(alphabet=CHARS, max_size=12),
    tail=st.text(alphabet="0123456789+-*", max_size=5),
    use_answer=st.booleans(),
)
def test_scratchpad_content_never_changes_the_reward(a, b, pad, tail, use_answer):
    task = ScratchpadTask()
    p = task.make_problem(a, b)
    final = p.answer if use_answer else tail  # the right answer half the time, anything else otherwise
    with_pad, bare = pad + "=" + final, final
    expected = 1.0 if final == p.answer else 0.0
    assert task.outcome_reward(p, with_pad) == task.outcome_reward(p, bare) == expected
    assert id_reward(task, p, with_pad, width=20) == id_reward(task, p, bare, width=20) == expected
    # and the same true working as the demonstration writes it changes nothing either
    assert task.outcome_reward(p, task.scratchpad(p) + "=" + final) == expected


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(ops=("+",)), "a scratchpad needs a task that can have one"),
        (dict(ops=("*", "+")), "a scratchpad needs a task that can have one"),
        (dict(reverse=False), "a scratchpad needs a task that can have one"),
        (dict(filler=2), "a scratchpad needs a task that can have one"),
        (dict(mixed_digits=(1, 3)), "a scratchpad needs a task that can have one"),
        (dict(budget=4), "budget must be None or an integer in 5..15"),
        (dict(budget=0), "too small|budget must be"),
        (dict(budget=16), "budget must be None or an integer in 5..15"),
        (dict(budget=10.0), "budget must be"),
        (dict(digits=2, budget=3), r"budget must be None or an integer in 4\.\.11"),
        (dict(scratchpad="thoughts"), "scratchpad must be one of"),
        (dict(scratchpad_share=1.5), r"scratchpad_share must be a number in \[0, 1\]"),
        (dict(scratchpad_share=True), "scratchpad_share must be"),
        (dict(digits=5), "digits must be an integer in 1..4"),
    ],
)
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ScratchpadTask(**kwargs)


def test_bad_input_elsewhere(task):
    with pytest.raises(TypeError, match="unexpected keyword argument 'carries'"):
        ScratchpadTask(carries=True)
    with pytest.raises(ValueError, match="b must be an integer in 0..9"):
        task.make_problem(123, 12)
    with pytest.raises(ValueError, match="op must be"):
        task.make_problem(12, 3, "+")
    x = torch.tensor([ids(task, "294")])
    with pytest.raises(ValueError, match="kind='process' needs a fixed target per token"):
        task.token_scores([task.make_problem(123, 4)], x, torch.ones_like(x, dtype=torch.float), kind="process")


# ------------------------------------------------------------------ the regime's pieces, and a tiny run
def test_summarize_by_hand():
    from grpo_edu.studies.regimes.thinking import summarize

    # two groups of 2: a hard prompt (a long right answer, a short wrong one), an easy one (two short right ones)
    s = summarize([True, True, False, False], [True, False, False, False], [14, 4, 2, 2], [1, 0, 1, 1], group_size=2)
    assert s["hard"] == {"n": 2, "p_scratchpad": 0.5, "length": 9.0, "accuracy": 0.5, "acc_scratchpad": 1.0,
                         "acc_direct": 0.0, "len_wrong": 4.0, "len_right": 14.0, "truncated": 0.0}  # fmt: skip
    assert s["easy"]["p_scratchpad"] == 0.0 and np.isnan(s["easy"]["acc_scratchpad"]) and s["all"]["n"] == 4
    assert s["corr"] == pytest.approx(1.0) and s["corr_hard"] == pytest.approx(1.0)  # long = right, within groups


def test_direct_only_writes_digits(task):
    from grpo_edu.rollout import generate
    from grpo_edu.studies.regimes.thinking import DirectOnly

    torch.manual_seed(0)
    policy = TinyGPT(ModelConfig(d_model=16, n_layers=1, n_heads=2, max_seq_len=22))
    prompts = task.encode_prompts(task.sample(8, 0))
    ro = generate(
        DirectOnly(policy, task), prompts, 4, task.max_answer_length, 1.0, generator=torch.Generator().manual_seed(0)
    )
    written = ro.completion_ids[ro.mask > 0]
    assert bool(((written >= 3) & (written <= 12) | (written == EOS)).all())  # digits and <eos> only


def test_the_watcher_changes_nothing():
    """run_one records every batch through train's callback and every evaluation through its
    on_evaluate; the run's numbers are a plain train()'s (control), and its greedy records score what
    train's evaluations scored (the first and the last included)."""
    from dataclasses import replace

    from grpo_edu import make_algorithm, train
    from grpo_edu.studies.regimes.thinking import run_one, thinking_setup

    task, fit = thinking_setup("cpu", tiny=True)
    fit = replace(fit, eval_every=1)
    torch.manual_seed(0)
    policy = TinyGPT(fit.model)
    h = train(make_algorithm("grpo"), task, reference=policy, preset=fit, steps=2, seed=0, progress=False)
    run = run_one(task, policy, fit, steps=2, seed=0, name="watched")
    assert run["accuracy"] == h.eval_series().tolist() and run["entropy"] == h.series("entropy").tolist()
    assert len(run["batches"]) == 2 and len(run["evals"]) == 3  # one summary per step, one per evaluation (0, 1, 2)
    assert [e["all"]["accuracy"] for e in run["evals"]] == pytest.approx(run["accuracy"])


def test_bad_parts_and_a_reference_of_the_wrong_task(tmp_path, monkeypatch):
    from grpo_edu.studies.regimes.thinking import run_thinking

    monkeypatch.setenv("GRPO_EDU_CACHE", str(tmp_path))
    with pytest.raises(ValueError, match="unknown parts"):
        run_thinking(tiny=True, parts=("curve", "vibes"), progress=False)
    with pytest.raises(ValueError, match="arm_steps"):
        run_thinking(steps=20, arm_steps=30, parts=("bias",), progress=False)
    # the default task's reference (what run_regimes hands every regime) cannot hold a scratchpad: not used
    short = TinyGPT(ModelConfig(max_seq_len=12))
    a = run_thinking(short, tiny=True, seeds=(0,), parts=("curve",), progress=False)
    b = run_thinking(None, tiny=True, seeds=(0,), parts=("curve",), progress=False)
    assert a["runs"]["token_mean"][0]["batches"] == b["runs"]["token_mean"][0]["batches"]


def test_a_tiny_seeded_run(tmp_path, monkeypatch):
    from grpo_edu.measure.verdicts import VERDICTS
    from grpo_edu.studies.regimes.thinking import PARTS, run_thinking

    monkeypatch.setenv("GRPO_EDU_CACHE", str(tmp_path))
    res = run_thinking(seeds=(0,), tiny=True, parts=PARTS, progress=False)
    assert set(res["runs"]) == {"token_mean", "sequence_mean", "constant", "blank sequence_mean", "blank constant", "budget",
                                "budget, masked", "clip-higher"}  # fmt: skip
    assert all(len(v) == 1 and len(v[0]["batches"]) == 4 for v in res["runs"].values())
    assert len(res["claims"]) == 18 and all(c["verdict"] in VERDICTS for c in res["claims"])
    assert res["budget"] == 14 and res["runs"]["budget"][0]["batches"][0]["all"]["truncated"] >= 0
    again = run_thinking(seeds=(0,), tiny=True, parts=("curve",), progress=False)  # seeded: the same numbers
    assert again["runs"]["token_mean"][0]["batches"] == res["runs"]["token_mean"][0]["batches"]
    assert again["reference"]["carries"][0]["hard"] == res["reference"]["carries"][0]["hard"]
