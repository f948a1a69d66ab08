"""TEMPORARY: grpo_edu.maze_pg moved to grpo_edu.demos.maze_pg; this alias (the same module object) goes once the notebooks import the new path."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("grpo_edu.demos.maze_pg")
