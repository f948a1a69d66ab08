"""The `grpo-edu` command: its parser and verbs, its config files, its run folders, what it prints.

    cli.py        the verbs and their flags, one function a verb (`main`)
    config_io.py  config files (.toml, .yaml, .json) of flag = value, read and written
    run_dir.py    the folder of a kept run (`grpo-edu train --out DIR`) and sampling from it
    reports.py    the text tables the verbs print, and the files `grpo-edu compare` writes

The jobs behind the verbs are `grpo_edu.studies`; the command parses, runs one, and prints it.
"""
