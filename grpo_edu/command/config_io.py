"""Every field of an algorithm's config as a flag and as a config-file key, under the same name.

    grpo-edu train --algo grpo --beta 0.1 --loss_type dr_grpo       # flags
    grpo-edu train --config run.toml --lr 1e-4                      # a file (TOML, YAML or JSON), a flag beats it

The flags are generated from the config dataclass (`add_config_flags`): its fields, their types
read from the annotations, their help from the field's comment (``beta: float = 0.04  # KL ...``)
or its attribute docstring (a string on the line after the field), both read from the source with
`ast`, and TRL's name from `grpo_edu.hf.knobs.KNOB_MAP`. A value of the wrong type is refused
by `parse_value` (one line naming the field); the range is the config's own ``__post_init__``.
A kept run's config.toml (`grpo_edu.warmstart.run_dir.write_config`) is such a file: ``--config`` reads it back.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import io
import json
import textwrap
import tokenize
from dataclasses import MISSING, fields
from pathlib import Path

BOOLS = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}


class ConfigFileError(ValueError):
    """A config file that cannot be read, or a key or value in it that is wrong (one line)."""


def field_docs(cls) -> dict[str, str]:
    """Each field's help: its attribute docstring (a string literal on the line after it), else
    its trailing ``# comment``, read from the class source (so both forms work)."""
    src = textwrap.dedent(inspect.getsource(cls))
    comments = {
        t.start[0]: t.string.lstrip("#").strip()
        for t in tokenize.generate_tokens(io.StringIO(src).readline)
        if t.type == tokenize.COMMENT
    }
    body = ast.parse(src).body[0].body
    docs = {}
    for node, after in zip(body, [*body[1:], None]):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
            docs[node.target.id] = " ".join(inspect.cleandoc(after.value.value).split())
        else:
            trailing = [comments[i] for i in range(node.lineno, node.end_lineno + 1) if i in comments]
            if trailing:
                docs[node.target.id] = trailing[-1]
    return docs


def field_kind(f) -> tuple[str, bool]:
    """``(base type name, None allowed)`` from a field's annotation: "int", "float", "str", "bool"
    or "tuple", and whether ``X | None``."""
    names = [p.strip() for p in str(getattr(f.type, "__name__", f.type)).split("|")]
    optional = "None" in names
    base = [n for n in names if n != "None"]
    base = base[0].split("[")[0] if len(base) == 1 else "str"
    return (base if base in ("int", "float", "str", "bool", "tuple") else "str"), optional


def parse_value(where: str, f, value):
    """``value`` (a flag's text, or what a config file holds) as field ``f``'s type; a wrong type
    raises ``ValueError`` in one line naming ``where`` and what it takes."""
    kind, optional = field_kind(f)
    if optional and (value is None or (isinstance(value, str) and value.strip().lower() == "none")):
        return None
    wants = {"int": "an integer", "float": "a number", "str": "a string", "bool": "true or false"}
    wants["tuple"] = "numbers, comma-separated (0.9,0.999)"

    def bad():
        raise ValueError(f"{where} takes {wants[kind]}{' or none' if optional else ''}, got {value!r}")

    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in BOOLS:
            return BOOLS[value.strip().lower()]
        bad()
    if kind == "str":
        return value if isinstance(value, str) else bad()
    if kind == "tuple":
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)):
            bad()
        try:
            return tuple(_number(x, float) for x in items)
        except ValueError:
            bad()
    try:
        return _number(value, int if kind == "int" else float)
    except ValueError:
        bad()


def _number(value, kind):
    if isinstance(value, str):
        return kind(value.strip())
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError
    if kind is int and isinstance(value, float) and not value.is_integer():
        raise ValueError
    return kind(value)


def default_of(f):
    return f.default if f.default is not MISSING else f.default_factory()


def show(value) -> str:
    """A value as a flag takes it."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return str(value)


def _trl_names() -> dict:
    from ..hf.knobs import KNOB_MAP

    return {ours: trl for ours, trl, _ in KNOB_MAP if trl != "-"}


def add_config_flags(parser, configs: dict, reserved=()) -> list[str]:
    """Add ``--<field>`` for every field of the config classes ``configs`` (algorithm name ->
    its Config class) to ``parser``, in one group; a field several classes share is one flag,
    set on each that has it. A flag absent from the command line is absent from the parsed
    namespace (`argparse.SUPPRESS`): only what was set overrides the config's defaults.
    Returns the field names."""
    trl, one = _trl_names(), len(configs) == 1
    by_name: dict = {}
    for algo, cls in configs.items():
        docs = field_docs(cls)
        for f in fields(cls):
            entry = by_name.setdefault(f.name, {"field": f, "doc": docs.get(f.name, ""), "in": [], "defaults": {}})
            entry["in"].append(algo)
            entry["defaults"][algo] = show(default_of(f))
    clash = sorted(set(by_name) & set(reserved))
    if clash:
        raise ValueError(f"config fields {clash} have the same name as a flag of the verb")
    names = "".join(c.__name__ for c in configs.values()) if one else "the algorithms' configs"
    group = parser.add_argument_group(
        f"{names} (each field also a key of --config FILE, under the same name)"
        if one
        else "config fields (also --config keys), set on each algorithm that has one"
    )
    for name, e in by_name.items():
        f = e["field"]
        kind, optional = field_kind(f)
        meta = {"int": "INT", "float": "FLOAT", "str": "STR", "bool": "true|false", "tuple": "A,B"}[kind]
        meta += "|none" if optional else ""
        help_ = e["doc"].replace("%", "%%")
        if name in trl and "grpo" in e["in"] and trl[name] not in help_:
            help_ += f" [TRL: {trl[name]}]"
        d = e["defaults"]
        shown = next(iter(d.values())) if len(set(d.values())) == 1 and len(d) == len(configs) else None
        shown = shown or ", ".join(f"{a} {v}" for a, v in d.items())
        if "(default" not in help_:  # a comment that already says what its default means
            help_ += f" (default: {shown})"
        group.add_argument(
            f"--{name}",
            dest=name,
            default=argparse.SUPPRESS,
            metavar=meta,
            nargs="?" if kind == "bool" else None,
            const=True if kind == "bool" else None,
            help=help_,
        )  # no type=: the text is parsed with the others (parse_value), so that each error is one line
    return list(by_name)


def read_config_file(path) -> dict:
    """A flat mapping of key -> value from a .toml, .yaml/.yml or .json file."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".yaml", ".yml", ".json"):
        raise ConfigFileError(
            f"{path}: the file must end in .toml, .yaml, .yml or .json, got {suffix or 'no suffix'!r}"
        )
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        if suffix == ".toml":
            try:
                import tomllib
            except ImportError:  # Python 3.10
                import tomli as tomllib
            data = tomllib.loads(text)
        elif suffix == ".json":
            data = json.loads(text)
        else:
            try:
                import yaml
            except ImportError:
                raise ConfigFileError(f"{path}: reading YAML needs PyYAML (pip install pyyaml); or use .toml") from None
            data = yaml.safe_load(text) or {}
    except ConfigFileError:
        raise
    except Exception as exc:  # tomllib.TOMLDecodeError, json.JSONDecodeError, yaml.YAMLError
        raise ConfigFileError(f"{path}: not valid {suffix[1:].upper()} ({' '.join(str(exc).split())})") from None
    if not isinstance(data, dict):
        raise ConfigFileError(f"{path}: expected key = value pairs at the top level, got {type(data).__name__}")
    nested = [k for k, v in data.items() if isinstance(v, dict)]
    if nested:
        raise ConfigFileError(f"{path}: the file is flat (key = value), but {nested[0]!r} is a table")
    return data
