"""The robot in a maze: the small grid world of the policy-gradient story.

The robot starts on ``S`` and must reach ``G``. Each step costs ``step_cost``; reaching
the goal pays ``goal_reward`` and ends the episode. Walls (``#``) and the border block a
move (the robot stays put, and still pays the step). This is the world where discounted
returns with ``gamma < 1`` matter: the same goal is worth more by a shorter path.

The default maze has two routes to the goal, 8 steps over the top and 12 along the
bottom::

    S....
    .###.
    .#G..
    .###.
    .....

States are cell indices ``row * width + col`` (walls included, they are never visited);
actions are 0 up, 1 right, 2 down, 3 left.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces

DEFAULT_LAYOUT = (
    "S....",
    ".###.",
    ".#G..",
    ".###.",
    ".....",
)
ACTIONS = ("up", "right", "down", "left")
DELTAS = ((-1, 0), (0, 1), (1, 0), (0, -1))  # (d_row, d_col) per action
CELL_CHARS = "SG.#"


def _parse_layout(layout: str | Sequence[str] | None) -> tuple[str, ...]:
    if layout is None:
        return DEFAULT_LAYOUT
    rows = tuple(layout.split()) if isinstance(layout, str) else tuple(layout)
    if not rows or not all(isinstance(r, str) and r for r in rows):
        raise ValueError(f"layout must be a non-empty list of non-empty strings, got {layout!r}")
    for i, row in enumerate(rows):
        if len(row) != len(rows[0]):
            raise ValueError(
                f"layout rows must all have the same width: row 0 has {len(rows[0])} cells, "
                f"row {i} ({row!r}) has {len(row)}"
            )
        for j, ch in enumerate(row):
            if ch not in CELL_CHARS:
                raise ValueError(
                    f"layout has unknown character {ch!r} at row {i}, col {j}; "
                    f"allowed: {CELL_CHARS!r} (start, goal, free, wall)"
                )
    for ch, name in (("S", "start"), ("G", "goal")):
        count = sum(row.count(ch) for row in rows)
        if count != 1:
            raise ValueError(f"layout must have exactly one {ch!r} ({name}), found {count}")
    return rows


class MazeEnv(gym.Env):
    """A grid maze: ``Discrete(n_states)`` observations, ``Discrete(4)`` actions.

    Args:
        layout: rows of ``S`` (start), ``G`` (goal), ``.`` (free), ``#`` (wall), as a list
            of strings or one whitespace-separated string; ``None`` for ``DEFAULT_LAYOUT``.
        step_cost: paid (as ``-step_cost``) on every step that does not reach the goal (>= 0).
        goal_reward: paid on reaching the goal, which ends the episode.
        max_steps: the episode is truncated after this many steps (>= 1).
    """

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 4}

    def __init__(
        self,
        layout: str | Sequence[str] | None = None,
        step_cost: float = 0.01,
        goal_reward: float = 1.0,
        max_steps: int = 50,
        render_mode: str | None = None,
    ):
        self.layout = _parse_layout(layout)
        if not (isinstance(step_cost, (int, float)) and math.isfinite(step_cost) and step_cost >= 0):
            raise ValueError(f"step_cost must be a finite number >= 0, got {step_cost!r}")
        if not (isinstance(goal_reward, (int, float)) and math.isfinite(goal_reward)):
            raise ValueError(f"goal_reward must be a finite number, got {goal_reward!r}")
        if not isinstance(max_steps, (int, np.integer)) or isinstance(max_steps, bool) or max_steps < 1:
            raise ValueError(f"max_steps must be an integer >= 1, got {max_steps!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.step_cost, self.goal_reward = float(step_cost), float(goal_reward)
        self.max_steps, self.render_mode = int(max_steps), render_mode
        self.height, self.width = len(self.layout), len(self.layout[0])
        self.n_states, self.n_actions = self.height * self.width, len(ACTIONS)
        cells = [(self.cell(r, c), ch) for r, row in enumerate(self.layout) for c, ch in enumerate(row)]
        self.start = next(s for s, ch in cells if ch == "S")
        self.goal = next(s for s, ch in cells if ch == "G")
        self.walls = frozenset(s for s, ch in cells if ch == "#")
        if self.shortest_path_length() is None:
            raise ValueError(f"layout: the goal cannot be reached from the start in {self.layout}")
        self.observation_space = spaces.Discrete(self.n_states)
        self.action_space = spaces.Discrete(self.n_actions)
        self.state, self.steps, self._done = self.start, 0, True

    # ---------------------------------------------------------------- geometry
    def cell(self, row: int, col: int) -> int:
        """The state index of a cell: ``row * width + col``."""
        return row * self.width + col

    def position(self, state: int) -> tuple[int, int]:
        """``(row, col)`` of a state index."""
        return divmod(int(state), self.width)

    def move(self, state: int, action: int) -> int:
        """The deterministic dynamics: where ``action`` takes the robot from ``state``."""
        row, col = self.position(state)
        dr, dc = DELTAS[int(action)]
        r, c = row + dr, col + dc
        if not (0 <= r < self.height and 0 <= c < self.width) or self.cell(r, c) in self.walls:
            return int(state)  # bumped into the border or a wall
        return self.cell(r, c)

    def shortest_path_length(self, start: int | None = None) -> int | None:
        """Fewest steps from ``start`` (default: ``S``) to the goal, by breadth-first
        search; ``None`` when the goal cannot be reached."""
        start = self.start if start is None else int(start)
        dist, queue = {start: 0}, deque([start])
        while queue:
            s = queue.popleft()
            if s == self.goal:
                return dist[s]
            for a in range(len(ACTIONS)):
                nxt = self.move(s, a)
                if nxt not in dist:
                    dist[nxt] = dist[s] + 1
                    queue.append(nxt)
        return None

    def optimal_return(self, gamma: float = 1.0) -> float:
        """The discounted return ``sum_t gamma^t r_t`` of a shortest path from ``S``:
        ``n - 1`` step costs then the goal reward (a policy can do no better). When the
        path is longer than ``max_steps``, every policy pays ``max_steps`` step costs."""
        n = self.shortest_path_length()
        if n > self.max_steps:
            return -self.step_cost * sum(gamma**t for t in range(self.max_steps))
        return -self.step_cost * sum(gamma**t for t in range(n - 1)) + gamma ** (n - 1) * self.goal_reward

    # ---------------------------------------------------------------- gymnasium API
    def _info(self) -> dict:
        return {"position": self.position(self.state), "steps": self.steps}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Put the robot on ``S``, or on ``options["start"]`` (a state index or ``(row, col)``)."""
        super().reset(seed=seed)
        start = (options or {}).get("start", self.start)
        if isinstance(start, tuple):
            start = self.cell(*start)
        if not (0 <= start < self.n_states) or start in self.walls or start == self.goal:
            raise ValueError(f"options['start'] must be a free cell other than the goal, got {start!r}")
        self.state, self.steps, self._done = int(start), 0, False
        return self.state, self._info()

    def step(self, action):
        if isinstance(action, (bool, np.bool_)) or not self.action_space.contains(action):
            raise ValueError(f"action {action!r} is not in the action space {self.action_space}")
        if self._done:
            raise RuntimeError("the episode has ended (or never started): call reset()")
        self.state = self.move(self.state, action)
        self.steps += 1
        terminated = self.state == self.goal
        reward = self.goal_reward if terminated else -self.step_cost
        truncated = not terminated and self.steps >= self.max_steps
        self._done = terminated or truncated
        if self.render_mode == "human":
            self.render()
        return self.state, reward, terminated, truncated, self._info()

    def render(self):
        """The grid as text with the robot drawn as ``A``."""
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode; use 'ansi' or 'human'")
            return None
        grid = [list(row) for row in self.layout]
        r, c = self.position(self.state)
        grid[r][c] = "A"
        text = "\n".join("".join(row) for row in grid)
        if self.render_mode == "ansi":
            return text
        print(text + "\n")
