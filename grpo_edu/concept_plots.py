"""TEMPORARY: grpo_edu.concept_plots moved to grpo_edu.figures.concept_plots; this alias (the same module object) goes once the notebooks import the new path."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("grpo_edu.figures.concept_plots")
