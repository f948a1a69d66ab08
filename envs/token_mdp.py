"""The arithmetic world as a token-level MDP (gymnasium).

State: the prompt and the answer tokens so far; action: the next token; reward 0 until
the episode ends, then the outcome reward (or the dense process credit per token).
This is the MDP the policy gradient is derived on; training uses the batched
`ArithmeticTask` directly, which is the same world without the per-step loop.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envs.arithmetic import ArithmeticTask, Problem


class ArithmeticEnv(gym.Env):
    """The token-level MDP: the state is the prompt plus the tokens written so far, an
    action is the next token, and the episode ends at EOS (``terminated``) or after
    ``max_answer_length`` tokens without one (``truncated``).

    Rewards (``reward_kind``): "outcome" gives 0 until the end, then the outcome reward
    (1 for an exact answer, 0 otherwise, 0 when truncated); "process" gives each token its
    process credit (``1/K`` while the prefix is right, see ``token_scores``).
    The observation is the token ids so far, padded with ``<pad>`` to
    ``prompt_length + max_answer_length``.
    """

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 4}

    def __init__(
        self,
        task: ArithmeticTask | None = None,
        render_mode: str | None = None,
        reward_kind: str = "outcome",
        **task_kwargs,
    ):
        if task is None:
            task = ArithmeticTask(**task_kwargs)
        elif task_kwargs:
            raise ValueError(f"pass either task or task keyword arguments, not both: {task_kwargs}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}")
        if reward_kind not in ("outcome", "process"):
            raise ValueError(f"reward_kind must be 'outcome' or 'process', got {reward_kind!r}")
        if getattr(task, "filler", 0):
            raise ValueError(f"TokenMDP checks answers token by token and needs a task without filler, got {task!r}")
        self.task, self.render_mode, self.reward_kind = task, render_mode, reward_kind
        self.tokenizer = task.tokenizer
        V = self.tokenizer.vocab_size
        self.obs_length = task.prompt_length + task.max_answer_length
        self.observation_space = spaces.Box(0, V - 1, shape=(self.obs_length,), dtype=np.int64)
        self.action_space = spaces.Discrete(V)
        self.problem: Problem | None = None
        self._prompt_ids: list[int] = []
        self._target: list[int] = []
        self._completion: list[int] = []
        self._prefix_ok = True
        self._done = True

    def _obs(self) -> np.ndarray:
        obs = np.full(self.obs_length, self.tokenizer.pad_id, dtype=np.int64)
        ids = self._prompt_ids + self._completion
        obs[: len(ids)] = ids
        return obs

    def _info(self) -> dict:
        return {
            "prompt": self.problem.prompt,
            "answer": self.problem.answer,
            "completion": self.tokenizer.decode(self._completion),
            "problem": self.problem,
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        problem = (options or {}).get("problem")
        if problem is None:
            problem = self.task.sample(1, self.np_random)[0]
        elif not isinstance(problem, Problem):
            raise TypeError(f"options['problem'] must be a Problem, got {problem!r}")
        elif len(problem.prompt) + 1 != self.task.prompt_length or len(problem.answer) >= self.task.max_answer_length:
            raise ValueError(f"problem {problem.prompt!r} does not fit {self.task!r}")
        self.problem = problem
        self._prompt_ids = self.tokenizer.encode(problem.prompt, add_bos=True)
        self._target = self.task.target_ids(problem)
        self._completion, self._prefix_ok, self._done = [], True, False
        return self._obs(), self._info()

    def step(self, action):
        if isinstance(action, (bool, np.bool_)) or not self.action_space.contains(action):
            raise ValueError(f"action {action!r} is not in the action space {self.action_space}")
        if self._done:
            raise RuntimeError("the episode has ended (or never started): call reset()")
        action, t = int(action), len(self._completion)
        self._completion.append(action)
        self._prefix_ok = self._prefix_ok and t < len(self._target) and self._target[t] == action
        terminated = action == self.tokenizer.eos_id
        truncated = not terminated and len(self._completion) >= self.task.max_answer_length
        self._done = terminated or truncated
        if self.reward_kind == "process":
            reward = 1.0 / len(self._target) if self._prefix_ok else 0.0
        else:
            reward = 1.0 if terminated and self._prefix_ok else 0.0
        if self.render_mode == "human":
            self.render()
        return self._obs(), reward, terminated, truncated, self._info()

    def render(self):
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode; use 'ansi' or 'human'")
            return None
        text = "" if self.problem is None else self.problem.prompt + self._info()["completion"]
        if self.render_mode == "ansi":
            return text
        print(text)
