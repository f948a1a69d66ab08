"""Reference solutions, written in plain torch (independently of grpo_edu.functional)."""
