"""The lab: the warm start every RL run begins from, and what a run keeps (it imports the ladder, never the reverse).

    presets.py      the "cpu" and "gpu" configurations, the task and the world they build
    sft.py          supervised fine-tuning: the reference pi_ref, a half-trained model
    reference.py    the reference of a preset, built once and cached; `train_from_preset`
    checkpoint.py   checkpoints written atomically and loaded safely
    run_dir.py      a kept run's folder (config.toml, metrics.jsonl, evals.jsonl, policy.pt), written as it trains

`grpo_edu.get_preset`, `reference_policy`, `train_from_preset` and `SFTConfig` are these.
"""
