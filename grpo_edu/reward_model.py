"""TEMPORARY: grpo_edu.reward_model moved to grpo_edu.demos.reward_model; this alias (the same module object) goes once the notebooks import the new path."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("grpo_edu.demos.reward_model")
