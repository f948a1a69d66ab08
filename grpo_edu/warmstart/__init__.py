"""The lab: the warm start every RL run begins from (it imports the ladder, never the reverse).

    presets.py      the "cpu" and "gpu" configurations, the task and the world they build
    sft.py          supervised fine-tuning: the reference pi_ref, a half-trained model
    reference.py    the reference of a preset, built once and cached; `train_from_preset`
    checkpoint.py   checkpoints written atomically and loaded safely

`grpo_edu.get_preset`, `reference_policy`, `train_from_preset` and `SFTConfig` are these.
"""
