"""Tests of the environments: the arithmetic task, its rewards, the token MDP, the maze."""

import importlib
import json
import warnings

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st

import envs
from envs import ArithmeticEnv, ArithmeticTask, MazeEnv, Problem

EOS = 2


def D(d):
    """Token id of digit d (ids: <pad> <bos> <eos> 0 1 ... 9 + - * =)."""
    return 3 + d


def quiet_check_env(env):
    # Without a spec (an env built directly) check_env warns that it cannot try the other
    # render modes; that is expected. Everything else must be silent.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message=".*not having a spec")
        check_env(env)


# ------------------------------------------------------------------ the task
@pytest.fixture(scope="module")
def add2():
    return ArithmeticTask()


def test_answers_by_hand():
    rev = ArithmeticTask(ops=("+", "-", "*"))
    fwd = ArithmeticTask(ops=("+", "-", "*"), reverse=False)
    assert rev.make_problem(23, 58).answer == "18" and fwd.make_problem(23, 58).answer == "81"
    assert rev.make_problem(99, 99).answer == "891" and fwd.make_problem(99, 99).answer == "198"
    assert rev.make_problem(7, 3, "-").answer == "4" and fwd.make_problem(7, 3, "-").answer == "4"
    assert rev.make_problem(12, 12, "*").answer == "441" and fwd.make_problem(12, 12, "*").answer == "144"
    assert rev.make_problem(50, 50).answer == "001"  # reversed 100: no *leading* zeros in 100
    p = rev.make_problem(3, 58)
    assert p == Problem(3, 58, "+", "03+58=", "16", 61)
    assert rev.make_problem(7, 3, "-").prompt == "07-03="


def test_lengths_and_config(add2):
    assert (add2.max_digits, add2.prompt_length, add2.max_answer_length) == (2, 7, 4)
    mul = ArithmeticTask(digits=3, ops=("+", "*"))
    assert (mul.prompt_length, mul.max_answer_length) == (9, 7)
    assert ArithmeticTask(ops=("-",)).max_answer_length == 3
    assert json.loads(json.dumps(add2.config)) == add2.config
    mixed = ArithmeticTask(mixed_digits=(1, 3), ops=("+", "-"))
    assert ArithmeticTask(**json.loads(json.dumps(mixed.config))).config == mixed.config


def test_encode_prompts(add2):
    ids = add2.encode_prompts([add2.make_problem(23, 58), add2.make_problem(3, 5)])
    assert ids.dtype == torch.long and ids.shape == (2, add2.prompt_length)
    assert ids[0].tolist() == [1, D(2), D(3), 13, D(5), D(8), 16]
    assert ids[1].tolist() == [1, D(0), D(3), 13, D(0), D(5), 16]


def test_sample_is_deterministic(add2):
    assert add2.sample(200, 7) == add2.sample(200, 7)
    assert add2.sample(200, np.random.default_rng(7)) == add2.sample(200, 7)
    assert add2.sample(200, 7) != add2.sample(200, 8)
    rng = np.random.default_rng(0)
    assert add2.sample(10, rng) != add2.sample(10, rng)  # a Generator advances
    assert add2.sample(0, 1) == []


def test_training_never_sees_heldout(add2):
    train = add2.sample(20_000, 0)
    assert not any(add2.is_heldout(p) for p in train)
    evals = add2.eval_problems()
    assert len(evals) == add2.eval_size == len(set(evals))
    assert all(add2.is_heldout(p) for p in evals)
    assert not set(evals) & set(train)
    assert evals == ArithmeticTask().eval_problems()  # fixed, whatever the training seed


def test_heldout_is_the_hash():
    task = ArithmeticTask(digits=1, heldout_per_mille=300)
    import zlib

    expected = {(a, b) for a in range(10) for b in range(10) if zlib.crc32(f"{a}+{b}".encode()) % 1000 < 300}
    # the held-out space (~30) is smaller than eval_size: all of it comes back
    assert {(p.a, p.b) for p in task.eval_problems()} == expected


@pytest.mark.parametrize(
    "kwargs",
    [dict(digits=3, ops=("+", "-", "*")), dict(mixed_digits=(1, 4), ops=("-",)), dict(digits=6)],
)
def test_eval_problems_other_tasks(kwargs):
    task = ArithmeticTask(**kwargs)
    evals = task.eval_problems()
    assert len(set(evals)) == task.eval_size and all(task.is_heldout(p) for p in evals)
    assert not set(evals) & set(task.sample(2000, 0))


def test_subtraction_is_never_negative():
    task = ArithmeticTask(ops=("-",), mixed_digits=(1, 2))
    problems = task.sample(2000, 3) + task.eval_problems()
    assert all(p.a >= p.b and p.value == p.a - p.b >= 0 for p in problems)


def test_mixed_digits():
    task = ArithmeticTask(mixed_digits=(1, 3))
    problems = task.sample(2000, 0)
    assert {len(str(p.a)) for p in problems} == {1, 2, 3}
    assert {len(p.prompt) for p in problems} == {task.prompt_length - 1} == {8}
    assert task.encode_prompts(problems).shape == (2000, 9)
    # each length is about equally likely, so 1-digit operands are common
    assert 0.25 < np.mean([p.a < 10 for p in problems]) < 0.42


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(digits=0), "digits"),
        (dict(digits=7), "digits"),
        (dict(digits=2.0), "digits"),
        (dict(ops=("/",)), "ops"),
        (dict(ops=()), "ops"),
        (dict(ops=("+", "+")), "ops"),
        (dict(reverse="yes"), "reverse"),
        (dict(mixed_digits=(3, 2)), "mixed_digits"),
        (dict(mixed_digits=(0, 2)), "mixed_digits"),
        (dict(mixed_digits=(1, 7)), "mixed_digits"),
        (dict(mixed_digits=3), "mixed_digits"),
        (dict(eval_size=0), "eval_size"),
        (dict(heldout_per_mille=0), "heldout_per_mille"),
        (dict(heldout_per_mille=1000), "heldout_per_mille"),
    ],
)
def test_bad_config_names_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        ArithmeticTask(**kwargs)


def test_bad_problems(add2):
    with pytest.raises(ValueError, match="op"):
        add2.make_problem(1, 2, "*")
    with pytest.raises(ValueError, match="a must"):
        add2.make_problem(100, 2)
    with pytest.raises(ValueError, match="a must be >= b"):
        ArithmeticTask(ops=("-",)).make_problem(3, 7, "-")


# ------------------------------------------------------------------ rewards
def test_outcome_reward(add2):
    p = add2.make_problem(23, 58)  # 81, reversed "18"
    assert add2.outcome_reward(p, "18") == 1.0
    assert add2.outcome_reward(p, "18<eos>") == 1.0
    for wrong in ["81", "19", "1", "180", "018", "0018", "", "1+", "=18", "18 ", "<eos>18"]:
        assert add2.outcome_reward(p, wrong) == 0.0, wrong
    assert add2.outcome_reward(p, "18", terminated=False) == 0.0
    q = add2.make_problem(99, 99)
    r = add2.rewards([p, p, q, q], ["18", "81", "891", "891"], terminated=[True, True, True, False])
    assert r.dtype == torch.float32 and r.tolist() == [1.0, 0.0, 1.0, 0.0]
    assert add2.rewards([p], ["18"]).tolist() == [1.0]
    with pytest.raises(ValueError, match="same length"):
        add2.rewards([p, q], ["18"])


def hand_batch(task):
    p, q = task.make_problem(23, 58), task.make_problem(99, 99)  # targets 1 8 <eos>, 8 9 1 <eos>
    problems = [p, q, p, p, q, p]
    ids = torch.tensor(
        [
            [D(1), D(8), EOS, 0, 0],  # right
            [D(8), D(9), D(2), EOS, 0],  # last digit wrong
            [D(1), D(8), D(1), D(1), D(1)],  # right digits, never stops (truncated)
            [0, 0, 0, 0, 0],  # empty row (all-zero mask)
            [D(8), D(9), D(1), EOS, 0],  # right
            [D(1), D(8), D(0), EOS, 0],  # an extra digit
        ]
    )
    mask = torch.tensor(
        [
            [1, 1, 1, 0, 0],
            [1, 1, 1, 1, 0],
            [1, 1, 1, 1, 1],
            [0, 0, 0, 0, 0],
            [1, 1, 1, 1, 0],
            [1, 1, 1, 1, 0],
        ],
        dtype=torch.float32,
    )
    return problems, ids, mask


def test_token_scores_outcome(add2):
    problems, ids, mask = hand_batch(add2)
    expected = torch.tensor(
        [
            [0, 0, 1, 0, 0],
            [0, 0, 0, 0, 0],
            [0, 0, 0, 0, 0],
            [0, 0, 0, 0, 0],
            [0, 0, 0, 1, 0],
            [0, 0, 0, 0, 0],
        ],
        dtype=torch.float32,
    )
    got = add2.token_scores(problems, ids, mask, kind="outcome")
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, expected)
    assert add2.rewards_from_ids(problems, ids).tolist() == [1, 0, 0, 0, 1, 0]


def test_token_scores_process(add2):
    problems, ids, mask = hand_batch(add2)
    t, f = 1 / 3, 1 / 4
    expected = torch.tensor(
        [
            [t, t, t, 0, 0],
            [f, f, 0, 0, 0],
            [t, t, 0, 0, 0],
            [0, 0, 0, 0, 0],
            [f, f, f, f, 0],
            [t, t, 0, 0, 0],
        ]
    )
    got = add2.token_scores(problems, ids, mask, kind="process")
    torch.testing.assert_close(got, expected)
    outcome = add2.token_scores(problems, ids, mask).sum(1)
    assert torch.equal(torch.isclose(got.sum(1), torch.tensor(1.0)), outcome == 1)


def test_token_scores_checks_its_inputs(add2):
    problems, ids, mask = hand_batch(add2)
    with pytest.raises(ValueError, match="kind"):
        add2.token_scores(problems, ids, mask, kind="dense")
    with pytest.raises(ValueError, match="mask"):
        add2.token_scores(problems, ids, mask[:, :3])
    with pytest.raises(ValueError, match="problems"):
        add2.token_scores(problems[:2], ids, mask)


@settings(max_examples=60, deadline=None)
@given(
    a=st.integers(0, 999),
    b=st.integers(0, 999),
    op=st.sampled_from(["+", "-", "*"]),
    reverse=st.booleans(),
)
def test_the_answer_is_always_rewarded(a, b, op, reverse):
    task = ArithmeticTask(digits=3, ops=("+", "-", "*"), reverse=reverse)
    if op == "-":
        a, b = max(a, b), min(a, b)
    p = task.make_problem(a, b, op)
    assert int(p.answer[::-1] if reverse else p.answer) == p.value == eval(f"{a}{op}{b}")
    assert len(p.answer) < task.max_answer_length
    assert task.outcome_reward(p, p.answer) == 1.0
    ids = torch.tensor([task.target_ids(p) + [0] * 3])
    mask = (torch.arange(ids.shape[1]) < len(p.answer) + 1).float()[None]
    assert task.rewards_from_ids([p], ids).item() == 1.0
    assert task.token_scores([p], ids, mask, "process").sum().item() == pytest.approx(1.0)


# ------------------------------------------------------------------ the token MDP
def test_check_env_arithmetic():
    quiet_check_env(ArithmeticEnv())
    quiet_check_env(ArithmeticEnv(digits=3, ops=("+", "*"), reward_kind="process", render_mode="ansi"))
    for kwargs in [{}, {"mixed_digits": (1, 2)}]:
        env = gymnasium.make("grpo_edu/Arithmetic-v0", **kwargs)
        quiet_check_env(env.unwrapped)
        obs, info = env.reset(seed=0)
        assert obs.shape == env.observation_space.shape and set(info) >= {
            "prompt",
            "answer",
            "completion",
        }


def run(env, tokens):
    out = [env.step(a) for a in tokens]
    return [o[1] for o in out], out[-1]


def test_env_by_hand():
    env = ArithmeticEnv(render_mode="ansi")
    p = env.task.make_problem(23, 58)
    obs, info = env.reset(options={"problem": p})
    assert obs.tolist() == [1, D(2), D(3), 13, D(5), D(8), 16, 0, 0, 0, 0]
    assert (info["prompt"], info["answer"], info["completion"]) == ("23+58=", "18", "")
    rewards, (obs, _, terminated, truncated, info) = run(env, [D(1), D(8), EOS])
    assert rewards == [0.0, 0.0, 1.0] and terminated and not truncated
    assert obs.tolist()[-4:] == [D(1), D(8), EOS, 0] and info["completion"] == "18"
    assert env.render() == "23+58=18"
    with pytest.raises(RuntimeError, match="reset"):
        env.step(EOS)

    env.reset(options={"problem": p})
    rewards, (_, _, terminated, truncated, _) = run(env, [D(8), D(1), EOS])
    assert rewards == [0.0, 0.0, 0.0] and terminated and not truncated

    env.reset(options={"problem": p})
    rewards, (_, _, terminated, truncated, info) = run(env, [D(1), D(8), D(1), D(1)])
    assert rewards == [0.0] * 4 and truncated and not terminated and info["completion"] == "1811"


def test_env_process_reward():
    env = ArithmeticEnv(reward_kind="process")
    p = env.task.make_problem(99, 99)  # 8 9 1 <eos>
    env.reset(options={"problem": p})
    assert run(env, [D(8), D(9), D(1), EOS])[0] == [0.25] * 4
    env.reset(options={"problem": p})
    assert run(env, [D(8), D(0), D(1), EOS])[0] == [0.25, 0, 0, 0]


def test_env_invalid_action():
    env = ArithmeticEnv()
    env.reset(seed=0)
    for bad in [17, -1, 1.5, "3", True]:
        with pytest.raises(ValueError, match="action"):
            env.step(bad)
    env.step(np.int64(D(1)))  # numpy integers are fine


def test_env_reset_is_seeded():
    env = ArithmeticEnv()
    assert env.reset(seed=3)[1]["problem"] == env.reset(seed=3)[1]["problem"]
    problems = [env.reset()[1]["problem"] for _ in range(200)]
    assert not any(env.task.is_heldout(p) for p in problems)


def test_reimport_registers_once():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        importlib.reload(envs)
    assert "grpo_edu/Maze-v0" in gymnasium.registry


# ------------------------------------------------------------------ the maze
RIGHT, DOWN, LEFT, UP = 1, 2, 3, 0
SHORTEST = [RIGHT] * 4 + [DOWN] * 2 + [LEFT] * 2


def test_check_env_maze():
    quiet_check_env(MazeEnv())
    quiet_check_env(MazeEnv(render_mode="ansi"))
    quiet_check_env(gymnasium.make("grpo_edu/Maze-v0").unwrapped)


def test_maze_shortest_path_and_goal():
    env = MazeEnv()
    assert (env.n_states, env.n_actions) == (25, 4)
    assert env.shortest_path_length() == 8
    assert env.shortest_path_length(start=env.cell(4, 0)) == 8  # (4,0) -> bottom, up, left
    state, _ = env.reset(seed=0)
    assert state == env.start == 0
    rewards, (state, _, terminated, truncated, info) = run(env, SHORTEST)
    assert rewards == [-0.01] * 7 + [1.0] and terminated and not truncated
    assert state == env.goal == env.cell(2, 2) and info["steps"] == 8
    gamma = 0.9
    assert env.optimal_return(gamma) == pytest.approx(sum(gamma**t * r for t, r in enumerate(rewards)))
    # the long way round is worth less
    env.reset()
    long_way = run(env, [DOWN] * 4 + [RIGHT] * 4 + [UP] * 2 + [LEFT] * 2)[0]
    assert sum(gamma**t * r for t, r in enumerate(long_way)) < env.optimal_return(gamma)


def test_maze_walls_and_border_block():
    env = MazeEnv(render_mode="ansi")
    env.reset()
    state, reward, *_ = env.step(UP)  # border
    assert state == 0 and reward == -0.01
    assert env.step(LEFT)[0] == 0  # border
    assert env.step(DOWN)[0] == env.cell(1, 0)
    assert env.step(RIGHT)[0] == env.cell(1, 0)  # wall at (1, 1)
    assert env.render().splitlines()[1] == "A###."
    assert env.move(env.cell(2, 3), LEFT) == env.goal


def test_maze_truncation():
    env = MazeEnv(max_steps=3, step_cost=0.5)
    env.reset()
    rewards, (_, _, terminated, truncated, _) = run(env, [UP, UP, UP])
    assert rewards == [-0.5] * 3 and truncated and not terminated
    with pytest.raises(RuntimeError):
        env.step(UP)
    with pytest.raises(ValueError, match="action"):
        MazeEnv().step(4)


def test_maze_custom_layout_and_start():
    env = MazeEnv(["S.G"], goal_reward=5.0)
    env.reset()
    assert run(env, [RIGHT, RIGHT])[0] == [-0.01, 5.0]
    env = MazeEnv("S#.\n..G")
    assert env.shortest_path_length() == 3
    assert env.reset(options={"start": (1, 1)})[0] == env.cell(1, 1)


@pytest.mark.parametrize(
    "layout, message",
    [
        (["S..", "..."], "exactly one 'G'"),
        (["S.G", "S.."], "exactly one 'S'"),
        (["S..", ".G"], "same width"),
        (["S.x", "..G"], "unknown character"),
        (["S#.", "#.G"], "cannot be reached"),
        ([], "non-empty"),
    ],
)
def test_maze_bad_layouts(layout, message):
    with pytest.raises(ValueError, match=message):
        MazeEnv(layout)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(step_cost=-1), "step_cost"),
        (dict(max_steps=0), "max_steps"),
        (dict(goal_reward=float("nan")), "goal_reward"),
    ],
)
def test_maze_bad_parameters(kwargs, field):
    with pytest.raises(ValueError, match=field):
        MazeEnv(**kwargs)


def test_reward_values_map_the_training_reward_not_the_accuracy():
    task = ArithmeticTask(digits=2, reward_values=(-1.0, 1.0))
    p = task.make_problem(23, 58)  # answer "18"
    tok = task.tokenizer
    ids = torch.tensor([tok.encode("18", add_eos=True), tok.encode("17", add_eos=True)])
    mask = torch.ones(2, 3)
    scores = task.token_scores([p, p], ids, mask)
    assert scores.tolist() == [[0.0, 0.0, 1.0], [0.0, 0.0, -1.0]]
    assert task.rewards([p, p], ["18", "17"]).tolist() == [1.0, 0.0]  # accuracy stays 0/1
    assert task.rewards_from_ids([p, p], ids).tolist() == [1.0, 0.0]
    assert task.config["reward_values"] == [-1.0, 1.0]
    with pytest.raises(ValueError, match="reward_values"):
        ArithmeticTask(reward_values=(1.0, 0.0))


# ------------------------------------------------------------------ free length (filler)
def test_filler_frees_the_length_and_rewards_the_final_answer_only():
    task = ArithmeticTask(filler=3)
    assert task.max_answer_length == ArithmeticTask().max_answer_length + 3
    assert task.config["filler"] == 3
    assert "filler" not in ArithmeticTask().config  # the default task's cache key is unchanged
    p = task.make_problem(23, 58)  # 81, written 18
    texts = ["18", "18===", "=18", "1=8", "18=1", "81==", "==="]
    assert [task.outcome_reward(p, c) for c in texts] == [1, 1, 1, 1, 0, 0, 0]
    ids, mask = task.tokenizer.batch_encode(texts, add_eos=True, padding_side="right")
    assert task.rewards_from_ids([p] * len(texts), ids).tolist() == [1, 1, 1, 1, 0, 0, 0]
    scores = task.token_scores([p] * len(texts), ids, mask.float())
    last = mask.sum(1) - 1  # paid at <eos>, however long the filler made the answer
    assert scores.sum(1).tolist() == [1, 1, 1, 1, 0, 0, 0]
    assert scores[torch.arange(len(texts)), last].tolist() == [1, 1, 1, 1, 0, 0, 0]
    with pytest.raises(ValueError, match="process"):
        task.token_scores([p], ids[:1], mask[:1].float(), kind="process")
    with pytest.raises(ValueError, match="filler"):
        ArithmeticEnv(task=task)


def test_filler_demonstrations_vary_in_length_and_are_right():
    task = ArithmeticTask(filler=3)
    problems = task.sample(400, 0)
    demos = [task.demonstration(p) for p in problems]
    assert all(d.rstrip("=") == p.answer and task.outcome_reward(p, d) == 1 for d, p in zip(demos, problems))
    counts = np.bincount([len(d) - len(p.answer) for d, p in zip(demos, problems)], minlength=4)
    assert len(counts) == 4 and counts.min() > 70  # 0..3 fillers, each about a quarter of the time
    assert demos == [task.demonstration(p) for p in problems]  # a hash of the problem, not luck
    assert ArithmeticTask().demonstration(problems[0]) == problems[0].answer


@pytest.mark.parametrize("bad", [-1, 17, 1.5, True])
def test_bad_filler_names_the_field(bad):
    with pytest.raises(ValueError, match="filler"):
        ArithmeticTask(filler=bad)
    with pytest.raises(ValueError, match="filler_budget"):
        ArithmeticTask(filler=3, filler_budget=bad if bad != 1.5 else 4)


def test_filler_budget_truncates_long_answers_and_keeps_the_reference():
    from grpo_edu.model import ModelConfig
    from grpo_edu.warmstart.reference import reference_config
    from grpo_edu.warmstart.sft import SFTConfig

    free, tight = ArithmeticTask(filler=4), ArithmeticTask(filler=4, filler_budget=1)
    assert tight.max_answer_length == free.max_answer_length - 3 and tight.config["filler_budget"] == 1
    assert "filler_budget" not in free.config and ArithmeticTask(filler=4, filler_budget=4).config == free.config
    p = tight.make_problem(23, 58)
    assert [tight.demonstration(q) for q in (p,)] == [free.demonstration(p)]  # the same SFT targets ...
    cfg = ModelConfig()
    assert reference_config(tight, cfg, SFTConfig()) == reference_config(free, cfg, SFTConfig())  # ... one pi_ref


@settings(max_examples=50, deadline=None)
@given(
    a=st.integers(0, 99),
    b=st.integers(0, 99),
    text=st.text("0123456789", max_size=4),
    where=st.lists(st.integers(0, 4), max_size=4),
)
def test_fillers_never_change_the_reward(a, b, text, where):
    task = ArithmeticTask(filler=4)
    p = task.make_problem(a, b)
    padded = text
    for k in where:  # '=' inserted anywhere, up to the filler budget
        padded = padded[: min(k, len(padded))] + "=" + padded[min(k, len(padded)) :]
    for completion in (text, padded, p.answer, p.answer + "=" * len(where)):
        clean = completion.replace("=", "")
        assert task.outcome_reward(p, completion) == (clean == p.answer)
        ids, mask = task.tokenizer.batch_encode([completion], add_eos=True, padding_side="right")
        assert task.rewards_from_ids([p], ids).item() == (clean == p.answer)
