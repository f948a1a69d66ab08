"""Gymnasium environments of the course and the tasks behind them.

- ``ArithmeticTask`` / ``Problem``: the arithmetic world (problems, held-out split,
  rewards) that the training loop uses directly.
- ``ArithmeticEnv`` (``"grpo_edu/Arithmetic-v0"``): the same world as a token-level MDP.
- ``MazeEnv`` (``"grpo_edu/Maze-v0"``): the robot in a maze of the policy-gradient story.

    >>> import gymnasium, envs
    >>> env = gymnasium.make("grpo_edu/Maze-v0")
"""

import gymnasium

from envs.arithmetic import ArithmeticTask, Problem
from envs.maze import MazeEnv
from envs.scratchpad import ScratchpadTask
from envs.token_mdp import ArithmeticEnv

__all__ = ["ArithmeticTask", "Problem", "ScratchpadTask", "ArithmeticEnv", "MazeEnv", "ARITHMETIC_ID", "MAZE_ID"]

ARITHMETIC_ID = "grpo_edu/Arithmetic-v0"
MAZE_ID = "grpo_edu/Maze-v0"

# Registering an id twice makes gymnasium warn, so only register what is not there yet.
for _id, _entry_point in (
    (ARITHMETIC_ID, "envs.token_mdp:ArithmeticEnv"),
    (MAZE_ID, "envs.maze:MazeEnv"),
):
    if _id not in gymnasium.registry:
        gymnasium.register(id=_id, entry_point=_entry_point)
