"""TEMPORARY: grpo_edu.cli moved to grpo_edu.experiments.cli; this alias (the same module object) goes once the notebooks import the new path."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("grpo_edu.experiments.cli")
