"""The `grpo-edu` command: its parser and verbs, its config files, what it prints.

    cli.py        the verbs and their flags, one function a verb (`main`)
    config_io.py  every config field a flag, and config files (.toml, .yaml, .json) of flag = value
    reports.py    the text tables the verbs print, and the files `grpo-edu compare` writes

The jobs behind the verbs are `grpo_edu.studies` (and `grpo_edu.measure`); the folder a kept run
writes (``grpo-edu train --out DIR``) is `grpo_edu.warmstart.run_dir`, below both the command and the
studies, which write one too. The command parses, runs one job, and prints it.
"""
