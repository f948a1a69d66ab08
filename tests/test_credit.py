"""The critic's value per token (issue 32): EV_t by position and the credit on a wrong answer's
first wrong token, each formula checked by hand on tiny tensors, with its controls."""

import numpy as np
import pytest
import torch

from envs import ArithmeticTask, ScratchpadTask
from grpo_edu.measure import credit as C
from grpo_edu.rollout import Rollout


# ------------------------------------------------------------------ EV_t by position
def test_ev_by_position_by_hand():
    R = torch.tensor([1.0, 0.0, 1.0, 0.0])
    V = torch.tensor([[0.5, 0.5], [0.5, 0.5], [1.0, 0.5], [0.0, 0.5]])
    out = C.ev_by_position(V, R, torch.ones(4, 2))
    # Var(R) = .25. t = 0: R - V = (.5, -.5, 0, 0), variance .125 -> EV .5; t = 1: R - V = +-.5, variance .25 -> 0
    assert out["ev"] == pytest.approx([0.5, 0.0]) and out["n"].tolist() == [4, 4]


def test_ev_by_position_counts_only_the_rows_still_running():
    R = torch.tensor([1.0, 0.0, 1.0, 0.0])
    V = torch.tensor([[0.5, 1.0], [0.5, 0.0], [0.5, 9.0], [0.5, 9.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 1.0], [1.0, 0.0], [1.0, 0.0]])
    out = C.ev_by_position(V, R, mask)
    # t = 1: only rows 0 and 1 run, and V = R there (the 9s are padding): EV 1
    assert out["ev"] == pytest.approx([0.0, 1.0]) and out["n"].tolist() == [4, 2]
    # one row left, or rewards that do not vary: no EV (NaN), not a number made up
    assert np.isnan(C.ev_by_position(V, R, torch.tensor([[1.0, 1.0], [1.0, 0.0], [1.0, 0.0], [1.0, 0.0]]))["ev"][1])
    assert np.isnan(C.ev_by_position(V, torch.ones(4), torch.ones(4, 2))["ev"]).all()


def test_ev_by_position_control_a_prompt_only_critic_is_the_same_at_every_position():
    # the per-prompt constant (what a critic that reads only the prompt can say): EV_t equal at every t,
    # and, with V = p_q exactly, equal to the prompt-level ceiling EV_max = Var_q(p) / Var(R)
    rng = np.random.default_rng(0)
    p = np.repeat(rng.uniform(size=64), 32)
    R = torch.tensor(rng.uniform(size=p.size) < p, dtype=torch.float32)
    V = torch.tensor(p, dtype=torch.float32)[:, None].repeat(1, 4)
    ev = C.ev_by_position(V, R, torch.ones_like(V))["ev"]
    assert ev == pytest.approx(np.full(4, ev[0]), abs=1e-12)
    r, v = R.double().numpy(), V[:, 0].double().numpy()
    assert ev[0] == pytest.approx(1 - (r - v).var() / r.var(), abs=1e-9)
    # the sampled ceiling: Var_q(p) / Var(R), up to the draw's noise
    assert ev[0] == pytest.approx(p.var() / r.var(), abs=0.05)


def test_ev_by_position_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="rewards"):
        C.ev_by_position(torch.zeros(4, 2), torch.zeros(3), torch.ones(4, 2))


# ------------------------------------------------------------------ the first wrong token
def _ids(task, texts, T=4):
    tok = task.tokenizer
    rows = [tok.encode(t, add_eos=True) for t in texts]
    ids = torch.zeros(len(rows), T, dtype=torch.long)
    mask = torch.zeros(len(rows), T)
    for i, r in enumerate(rows):
        ids[i, : len(r)], mask[i, : len(r)] = torch.tensor(r[:T]), 1.0
    return ids, mask


def test_first_wrong_position_reads_the_reversed_answer():
    task = ArithmeticTask()
    p = task.make_problem(23, 58)  # 81, written reversed: "18" then <eos>
    assert p.answer == "18"
    ids, mask = _ids(task, ["18", "28", "1", "189", "81"])
    first = C.first_wrong_position(task, [p] * 5, ids, mask)
    # right; the first digit wrong; <eos> where 8 belongs; 9 where <eos> belongs; the unreversed answer
    assert first.tolist() == [-1, 0, 1, 2, 0]
    # a right answer is exactly one with no wrong token (the task's own reward)
    assert ((first < 0).float() == task.rewards_from_ids([p] * 5, ids)).all()


def test_first_wrong_position_refuses_a_task_without_one_target_per_token():
    for task in (ArithmeticTask(filler=2), ScratchpadTask(digits=1)):
        with pytest.raises(ValueError, match="one target token per position"):
            C.first_wrong_position(task, [], torch.zeros(0, 3, dtype=torch.long), torch.zeros(0, 3))


# ------------------------------------------------------------------ where the advantage puts its weight
def test_token_advantages_by_hand():
    V = torch.tensor([[0.5, 0.5, 0.0], [0.2, 0.4, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    R = torch.tensor([0.0, 1.0])
    # lambda = 1: A_t = R - V(s_t) on the answer's tokens
    assert C.token_advantages(V, R, mask, 1.0) == pytest.approx(torch.tensor([[-0.5, -0.5, 0.0], [0.8, 0.6, 0.0]]))
    # lambda = 0: V(s_{t+1}) - V(s_t), and R - V(s_t) at the last token
    assert C.token_advantages(V, R, mask, 0.0) == pytest.approx(torch.tensor([[0.0, -0.5, 0.0], [0.2, 0.6, 0.0]]))


def test_credit_on_error_by_hand_and_its_controls():
    mask, R, w = torch.ones(1, 3), torch.zeros(1), torch.tensor([1])  # a wrong answer of 3 tokens, wrong at t = 1
    # control: a critic that reads only the prompt (V constant) gives every token the same |A|: GRPO's 1/L
    flat = C.credit_on_error(C.token_advantages(torch.full((1, 3), 0.5), R, mask), mask, w)
    assert flat["share"] == pytest.approx(1 / 3) and flat["flat"] == pytest.approx(1 / 3) and flat["n"] == 1
    # a critic that knows the answer is wrong once the wrong digit is written: V = .5, .5, then 0
    knows = torch.tensor([[0.5, 0.5, 0.0]])
    one_step = C.credit_on_error(C.token_advantages(knows, R, mask, 0.0), mask, w)
    assert (one_step["share"], one_step["before"], one_step["after"]) == pytest.approx((1.0, 0.0, 0.0))  # all of it
    # with lambda = 1 (A_t = R - V(s_t)) it takes the weight off the tokens after the error: -.5, -.5, 0
    mc = C.credit_on_error(C.token_advantages(knows, R, mask, 1.0), mask, w)
    assert (mc["share"], mc["before"], mc["after"]) == pytest.approx((0.5, 0.5, 0.0))
    # ... and when the first token is the wrong one, all of it lands there too: -.5, 0, 0
    mc0 = C.credit_on_error(C.token_advantages(torch.tensor([[0.5, 0.0, 0.0]]), R, mask, 1.0), mask, torch.tensor([0]))
    assert mc0["share"] == pytest.approx(1.0)
    # right answers (w = -1) do not count
    assert C.credit_on_error(torch.ones(2, 3), torch.ones(2, 3), torch.tensor([-1, -1]))["n"] == 0


class _Uniform(torch.nn.Module):
    """A policy that gives every token of the vocabulary the same probability."""

    def __init__(self, vocab):
        super().__init__()
        self.vocab, self.w = vocab, torch.nn.Parameter(torch.zeros(1))

    def forward(self, ids, cache=None):
        return torch.zeros(*ids.shape, self.vocab)


def test_oracle_values_by_hand():
    task = ArithmeticTask()
    p = task.make_problem(23, 58)
    ids, mask = _ids(task, ["18", "28", "1"], T=3)
    prompts = task.encode_prompts([p] * 3)
    ro = Rollout(prompts, ids, mask, torch.zeros(3, 3), torch.arange(3), torch.zeros(3, dtype=torch.bool), [""] * 3)
    v = 1 / len(task.tokenizer.vocab)
    V = C.oracle_values(_Uniform(len(task.tokenizer.vocab)), task, ro, [p] * 3)
    # right so far: the chance of writing the rest of "18<eos>", v^3, v^2, v^1; after a wrong token: 0
    expect = torch.tensor([[v**3, v**2, v], [v**3, 0.0, 0.0], [v**3, v**2, 0.0]])
    assert V == pytest.approx(expect, rel=1e-5)
    # the oracle that knows: with lambda = 1 the weight on the wrong token is V(s_w) / sum_{t <= w} V(s_t)
    R = torch.tensor([1.0, 0.0, 0.0])
    w = C.first_wrong_position(task, [p] * 3, ids, mask)
    share = C.credit_on_error(C.token_advantages(V, R, mask), mask, w)["share"]
    assert share == pytest.approx((1.0 + v**2 / (v**3 + v**2)) / 2, rel=1e-5)


def test_plot_ev_by_position_draws_a_panel_per_world_with_alt_text():
    from grpo_edu.figures.credit import plot_ev_by_position
    from grpo_edu.figures.plotstyle import alt_text

    results = {"default": {"ev": [0.0, 0.01, 0.0], "oracle_ev": [0.01, 0.3, 0.95]}, "scratchpad": {"ev": [0.4, 0.5]}}
    fig = plot_ev_by_position(results, {"default": 0.017, "scratchpad": 0.49}, steps=40)
    assert len(fig.axes) == 2 and alt_text(fig)
    # the learned critic, the exact V* (where there is one), the EV_max line and 0 in each panel
    assert [len(ax.get_lines()) for ax in fig.axes] == [4, 3]
    from test_legends import legends_on_data  # the legend sits below the panels, off the data

    assert legends_on_data(fig) == []
    with pytest.raises(ValueError):
        plot_ev_by_position({}, {})


# ------------------------------------------------------------------ the junk world and the exact critic
def test_junk_puts_one_junk_token_inside_that_share_of_the_demonstrations():
    task = ArithmeticTask(junk=0.5)
    problems = task.sample(4000, 0)
    demos = [task.demonstration(p) for p in problems]
    junky = [d for d in demos if "=" in d]
    assert 0.45 < len(junky) / len(demos) < 0.55  # the share, by a hash of the problem
    assert all(d.count("=") == 1 for d in junky)
    assert all(
        d.replace("=", "") == p.answer for d, p in zip(demos, problems, strict=True)
    )  # the answer, one '=' inside
    assert {d.index("=") for d in junky} == {0, 1, 2, 3}  # before the first digit .. after the last
    assert task.max_answer_length == ArithmeticTask().max_answer_length + 1 and task.config["junk"] == 0.5
    assert "junk" not in ArithmeticTask().config  # the default task's config (and its reference's cache key) unchanged
    # control: junk=0 writes the bare answers
    assert all("=" not in ArithmeticTask().demonstration(p) for p in problems[:200])


def test_junk_is_wrong_to_the_checker_and_bad_values_are_one_line():
    task = ArithmeticTask(junk=0.5)
    p = task.make_problem(23, 58)  # "18"
    assert task.outcome_reward(p, "18") == 1.0 and task.outcome_reward(p, "1=8") == 0.0
    ids, mask = _ids(task, ["18", "1=8", "=18"], T=4)
    assert task.rewards_from_ids([p] * 3, ids).tolist() == [1.0, 0.0, 0.0]
    assert C.first_wrong_position(task, [p] * 3, ids, mask).tolist() == [-1, 1, 0]  # the junk is the first wrong token
    for bad in (-0.1, 1.5, True, "0.5"):
        with pytest.raises(ValueError, match=r"junk must be a share in \[0, 1\]"):
            ArithmeticTask(junk=bad)
    with pytest.raises(ValueError, match="junk needs filler=0"):
        ArithmeticTask(junk=0.5, filler=2)


def test_problems_from_prompts_reads_back_what_encode_prompts_wrote():
    for task in (ArithmeticTask(), ArithmeticTask(digits=3, ops=("+", "-", "*"))):
        problems = task.sample(50, 1)
        back = C.problems_from_prompts(task, task.encode_prompts(problems))
        assert [(q.a, q.op, q.b) for q in back] == [(q.a, q.op, q.b) for q in problems]
    with pytest.raises(ValueError, match="not a prompt"):
        C.problems_from_prompts(ArithmeticTask(), torch.tensor([ArithmeticTask().tokenizer.encode("12", add_bos=True)]))


def test_exact_critic_is_the_oracle_and_its_prompt_only_control_is_flat():
    task = ArithmeticTask()
    p = task.make_problem(23, 58)
    ids, mask = _ids(task, ["18", "28", "1"], T=3)
    ro = Rollout(task.encode_prompts([p] * 3), ids, mask, torch.zeros(3, 3), torch.arange(3),
                 torch.zeros(3, dtype=torch.bool), [""] * 3)  # fmt: skip
    policy = _Uniform(len(task.tokenizer.vocab))
    V = C.ExactCritic(task, policy).values(ro)
    assert V == pytest.approx(C.oracle_values(policy, task, ro, [p] * 3))
    V0 = C.ExactCritic(task, policy, prompt_only=True).values(ro)
    assert V0 == pytest.approx(V[:, :1] * mask)  # p_q at every token of the answer
    # lambda = 0 with the exact values: each token's own credit. The row that wrote "2" first: that token
    # gets V*(s_1) - V*(s_0) = -v^3 and the tokens after it 0; a per-prompt value cannot do that (control)
    A = C.token_advantages(V, torch.tensor([1.0, 0.0, 0.0]), mask, 0.0)
    assert A[1, 0] == pytest.approx(-float(V[1, 0])) and A[1, 1:].abs().max() == 0
    assert C.token_advantages(V0, torch.zeros(3), mask, 0.0)[1, 0] == 0  # flat: no credit moves to the error
    assert C.ExactCritic(task, policy).step() == 0.0
    with pytest.raises(ValueError, match="one target token per position"):
        C.ExactCritic(ArithmeticTask(filler=2), policy)
