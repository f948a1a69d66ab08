"""The policy-gradient warm-up: REINFORCE on the robot-in-a-maze, with a table for a policy.

Before the transformer, the same gradient on a world small enough to see whole:

    pi_theta(a | s) = softmax(theta[s])             a logits table, one row per cell
    G_t             = sum_k gamma^k r_{t+k}         Fn.discounted_returns
    A_t             = G_t  |  G_t - V(s_t)          "reinforce" | "baseline"
    loss            = -A_t log pi(a_t | s_t)        Fn.policy_gradient_loss, summed over t

The functions are those of `grpo_edu.functional`, looked up through the module (so
``grpo_edu.plug`` swaps them here too). The maze is where ``gamma < 1`` earns its keep:
with a per-step cost or a discount, a shorter path to the same goal is worth more.

    history = train_maze(algorithm="reinforce", gamma=0.95)
    greedy_path_length(history["env"], history["policy"])   # 8, the shortest path
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn

from .. import functional as Fn

MAZE_ALGORITHMS = ("reinforce", "baseline")  # the maze's two estimators (the ladder's: algorithms.ALGORITHMS)


class TabularPolicy(nn.Module):
    """A softmax policy with one row of logits per state: ``pi(a | s) = softmax(theta[s])_a``.

    Starts uniform (all logits 0), so that the first episodes are a random walk.
    """

    def __init__(self, n_states: int, n_actions: int):
        super().__init__()
        for name, n in (("n_states", n_states), ("n_actions", n_actions)):
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise ValueError(f"{name} must be a positive int, got {n!r}")
        self.n_states, self.n_actions = n_states, n_actions
        self.logits = nn.Parameter(torch.zeros(n_states, n_actions))  # theta [S, A]

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        """states: integer tensor of any shape ``[...]`` -> logits ``[..., n_actions]``."""
        return self.logits[states.long()]

    def probs(self) -> torch.Tensor:
        """The whole policy as a table ``[n_states, n_actions]`` (no gradient)."""
        with torch.no_grad():
            return torch.softmax(self.logits, dim=-1)

    @torch.no_grad()
    def act(self, state: int, generator: torch.Generator | None = None) -> int:
        """Sample ``a ~ pi(. | state)``."""
        p = torch.softmax(self.logits[int(state)], dim=-1)
        return int(torch.multinomial(p, 1, generator=generator))

    def greedy(self, state: int) -> int:
        """``argmax_a pi(a | state)`` (ties go to the lowest action index)."""
        return int(self.logits[int(state)].argmax())


@dataclass
class Episodes:
    """A batch of ``N`` episodes padded to ``T``, the longest of the batch.

    ``mask`` is 1 on the steps of an episode and 0 on padding (padding states and actions
    are 0 and rewards 0, so every value is finite).
    """

    states: torch.Tensor  # [N, T] long, s_t
    actions: torch.Tensor  # [N, T] long, a_t
    rewards: torch.Tensor  # [N, T] float, r_t (received after a_t)
    mask: torch.Tensor  # [N, T] float
    returns: torch.Tensor  # [N] float, undiscounted return sum_t r_t
    lengths: torch.Tensor  # [N] long, steps taken
    success: torch.Tensor  # [N] bool, reached the goal (not truncated)


def _check_int(name: str, value, lo: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise ValueError(f"{name} must be an int >= {lo}, got {value!r}")


def _check_policy(env, policy) -> None:
    shape = (int(env.observation_space.n), int(env.action_space.n))
    if tuple(policy.logits.shape) != shape:
        raise ValueError(
            f"policy must have a logits table [n_states, n_actions] = {list(shape)} for this env, "
            f"got {list(policy.logits.shape)}"
        )


def run_episodes(
    env, policy: TabularPolicy, n_episodes: int, seed: int | None = None,
    generator: torch.Generator | None = None,
) -> Episodes:  # fmt: skip
    """Play ``n_episodes`` episodes with actions sampled from ``policy``.

    Randomness comes only from ``generator`` (or a new one seeded with ``seed``; 0 if
    both are None): same seed, same episodes.
    """
    _check_int("n_episodes", n_episodes)
    _check_policy(env, policy)
    if generator is None:
        generator = torch.Generator().manual_seed(0 if seed is None else int(seed))
    # The policy does not change during collection: build its table once, and sample
    # a ~ pi(.|s) by inverting its CDF at uniforms drawn up front (one per possible step):
    # the same distribution as torch.multinomial, without a torch call per step.
    cdf = policy.probs().double().cumsum(-1)[:, :-1].numpy()  # [S, A-1]
    uniforms = torch.rand(n_episodes, env.max_steps, generator=generator, dtype=torch.float64)
    uniforms = uniforms.numpy()
    rows = []
    for i in range(n_episodes):
        state, _ = env.reset()
        s_list, a_list, r_list, done, terminated = [], [], [], False, False
        while not done:
            action = int(np.searchsorted(cdf[state], uniforms[i, len(s_list)], side="right"))
            next_state, reward, terminated, truncated, _ = env.step(action)
            s_list.append(state)
            a_list.append(action)
            r_list.append(reward)
            state, done = next_state, terminated or truncated
        rows.append((s_list, a_list, r_list, terminated))

    N, T = n_episodes, max(len(r[0]) for r in rows)
    states = torch.zeros(N, T, dtype=torch.long)
    actions = torch.zeros(N, T, dtype=torch.long)
    rewards = torch.zeros(N, T)
    mask = torch.zeros(N, T)
    for i, (s, a, r, _) in enumerate(rows):
        n = len(s)
        states[i, :n], actions[i, :n] = torch.tensor(s), torch.tensor(a)
        rewards[i, :n], mask[i, :n] = torch.tensor(r, dtype=torch.float32), 1.0
    return Episodes(
        states=states, actions=actions, rewards=rewards, mask=mask,
        returns=rewards.sum(1), lengths=mask.sum(1).long(),
        success=torch.tensor([r[3] for r in rows], dtype=torch.bool),
    )  # fmt: skip


def greedy_path(env, policy: TabularPolicy) -> list[int]:
    """The states visited by the greedy policy from the start, at most ``env.max_steps``
    moves (it stops at the goal or when it revisits a state: a deterministic loop)."""
    _check_policy(env, policy)
    state, path = env.start, [env.start]
    for _ in range(env.max_steps):
        state = env.move(state, policy.greedy(state))
        if state in path:  # stuck in a loop (or bumping a wall): never reaches the goal
            path.append(state)
            break
        path.append(state)
        if state == env.goal:
            break
    return path


def greedy_path_length(env, policy: TabularPolicy) -> int | None:
    """Steps the greedy policy takes from the start to the goal, or None if it never gets
    there (compare with ``env.shortest_path_length()``)."""
    path = greedy_path(env, policy)
    return len(path) - 1 if path[-1] == env.goal else None


def _check_maze_args(algorithm, gamma, episodes_per_step, steps, lr, value_lr, seed) -> None:
    if algorithm not in MAZE_ALGORITHMS:
        raise ValueError(f"algorithm must be one of {MAZE_ALGORITHMS}, got {algorithm!r}")
    if not (isinstance(gamma, (int, float)) and 0.0 <= gamma <= 1.0):
        raise ValueError(f"gamma must be in [0, 1], got {gamma!r}")
    _check_int("episodes_per_step", episodes_per_step)
    _check_int("steps", steps, lo=0)
    for name, v in (("lr", lr), ("value_lr", value_lr)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
    _check_int("seed", seed, lo=0)


def _maze_update(env, policy, optimizer, ep, gamma, value=None, critic_opt=None) -> torch.Tensor:
    """One policy-gradient step on the episodes ``ep`` (and one step of the V table, if any).
    Returns the reward-to-go G_t [N, T]."""
    returns = Fn.discounted_returns(ep.rewards, ep.mask, gamma)  # [N, T] reward-to-go G_t
    adv = returns
    if value is not None:
        v = value[ep.states]  # [N, T]
        adv = Fn.baseline_advantages(returns, v, ep.mask)  # A_t = G_t - V(s_t): what we expected from s_t
        critic_opt.zero_grad()
        Fn.value_loss(v, returns, ep.mask).backward()
        critic_opt.step()
    logp = Fn.token_logprobs(policy(ep.states), ep.actions)  # log pi(a_t | s_t), [N, T]
    per_token = Fn.policy_gradient_loss(logp, adv)  # -A_t log pi(a_t | s_t)
    loss = Fn.aggregate_loss(per_token, ep.mask, mode="constant", max_length=env.max_steps)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return returns


def train_maze(
    env=None,
    algorithm: str = "reinforce",
    gamma: float = 0.95,
    episodes_per_step: int = 16,
    steps: int = 150,
    lr: float = 0.1,
    seed: int = 0,
    progress: bool = True,
    value_lr: float = 0.1,
) -> dict:
    """REINFORCE (``"reinforce"``) or REINFORCE with a learned state value (``"baseline"``)
    on the maze, Adam on the logits table.

    Each step plays ``episodes_per_step`` episodes and takes one gradient step on

        loss = 1/N sum_i sum_t -A_{i,t} log pi(a_{i,t} | s_{i,t}) * (1 / max_steps)

    (``Fn.aggregate_loss(mode="constant")``: the plain policy-gradient sum, scaled by a
    constant). ``A_t = G_t`` for "reinforce"; for "baseline" ``A_t = G_t - V(s_t)`` with
    ``V`` a table regressed on ``G_t`` (``Fn.value_loss``, Adam with ``value_lr``).

    Returns a dict of per-step lists ``step``, ``episodes`` (played so far), ``seconds``
    (training wall time), ``return`` (mean undiscounted return), ``discounted_return``
    (mean G_0), ``length`` (mean episode length), ``success`` (fraction reaching the goal)
    and ``greedy_length`` (the greedy path's length, NaN when it does not reach the goal);
    plus ``policy`` (the trained `TabularPolicy`), ``value`` (the V table [n_states] or
    None), ``env``, ``config`` and ``shortest`` (the shortest path length).
    """
    from envs.maze import MazeEnv

    env = MazeEnv() if env is None else env
    _check_maze_args(algorithm, gamma, episodes_per_step, steps, lr, value_lr, seed)
    from ..progress import progress_bar as tqdm

    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    env.reset(seed=seed)
    policy = TabularPolicy(int(env.observation_space.n), int(env.action_space.n))
    optimizer = torch.optim.Adam(policy.parameters(), lr=lr)
    value = critic_opt = None
    if algorithm == "baseline":
        value = nn.Parameter(torch.zeros(int(env.observation_space.n)))  # V(s), one entry per cell
        critic_opt = torch.optim.Adam([value], lr=value_lr)

    keys = ("step", "episodes", "seconds", "return", "discounted_return", "length", "success",
            "greedy_length")  # fmt: skip
    hist: dict = {k: [] for k in keys}
    t_train = 0.0
    for step in tqdm(range(1, steps + 1), desc=f"maze {algorithm}", disable=not progress, leave=False):
        t0 = time.perf_counter()
        ep = run_episodes(env, policy, episodes_per_step, generator=generator)
        returns = _maze_update(env, policy, optimizer, ep, gamma, value, critic_opt)
        t_train += time.perf_counter() - t0

        greedy = greedy_path_length(env, policy)
        record = {
            "step": step,
            "episodes": step * episodes_per_step,
            "seconds": t_train,
            "return": float(ep.returns.mean()),
            "discounted_return": float(returns[:, 0].mean()),
            "length": float(ep.lengths.float().mean()),
            "success": float(ep.success.float().mean()),
            "greedy_length": math.nan if greedy is None else float(greedy),
        }
        for k in keys:
            hist[k].append(record[k])

    hist.update(
        policy=policy,
        value=None if value is None else value.detach().clone(),
        env=env,
        shortest=env.shortest_path_length(),
        config=dict(algorithm=algorithm, gamma=gamma, episodes_per_step=episodes_per_step,
                    steps=steps, lr=lr, value_lr=value_lr, seed=seed),
    )  # fmt: skip
    return hist
