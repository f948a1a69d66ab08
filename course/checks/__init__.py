"""The course's checks: each claim a notebook makes, with its rule, its control and its record.

A lesson says what was measured, once. Whether that result survives another seed, another CPU, or
a setting where it should not hold is this package's business, so that a learner reads the lesson
without the machinery of checking it. For each converted notebook a module here (`nb02_baseline`
for ``notebooks/02_baseline.ipynb``) registers its checks, each a small function of the notebook's
namespace that returns one or more `Measured` comparisons:

- the **rule**: ``value op bound`` (``op`` is ``">"`` or ``"<"``);
- the **control**: the same quantity where the claim is false (the reference, the untrained model,
  the mechanism switched off, the other world), which must *fail* the rule; a rule its control
  passes tests nothing, and the check fails;
- the **calibration**: the values of the quantity at seed shifts 0-4 (``GRPO_EDU_SEED_SHIFT``:
  every seed of the notebook, its reference's SFT included, moves), recorded in
  ``records/<notebook>.json`` with the CPU kernel each ran on; a bound sits at least three standard
  deviations from their mean (ratios on a log scale): `calibration` computes the distance and
  ``tests/test_checks.py`` holds every bound to it;
- the **held-out draws**: runs at seed shifts and kernels that set no bound, recorded with the bound
  they were judged against. A check that fails one is not re-tuned: it becomes a printed result
  (``asserted=False``), still measured and recorded at every draw, never raised.

One cell at the end of the notebook, tagged ``remove-cell`` (the website leaves it out) and marked
skippable in its first line, runs them all::

    from course_checks import run_checks  # notebooks/course_checks.py puts the repository on the path

    run_checks("02_baseline", globals())

It prints the names of the checks that passed (no number: the same output on every machine) and
raises `AssertionError` naming every check that failed, with its values, so ``pytest --nbval``
fails. With ``$GRPO_EDU_CHECKS_RECORD`` set to a folder, it also writes the draw there (every
value, asserted or printed); ``python -m course.checks add`` files such draws into the records, and
``python -m course.checks table --write`` renders the registry as the testing page's table.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
RECORDS = HERE / "records"
RECORD_ENV = "GRPO_EDU_CHECKS_RECORD"  # a folder: each run of a check cell writes its draw there
SHIFT_ENV = "GRPO_EDU_SEED_SHIFT"
KERNEL_ENV = "ATEN_CPU_CAPABILITY"
CONVERTED = (
    "00_arithmetic_world",
    "01_reinforce",
    "02_baseline",
    "02_baseline_variance",
    "03_ppo",
    "04_grpo",
    "04_grpo_2_estimators",
    "04_grpo_3_variants",
    "05_side_by_side",
    "06_graduate_to_trl",
    "07_where_each_idea_pays",
    "08_easy_and_hard_prompts",
    "08_easy_and_hard_prompts_2_credit",
    "09_thinking_that_pays",
    "10_long_runs_and_overoptimisation",
    "10_long_runs_and_overoptimisation_2_entropy",
    "10_long_runs_and_overoptimisation_3_compute_law",
    "11_silent_bugs",
    "12_what_rl_changes",
    "12_what_rl_changes_2_razor",
    "13_off_the_policy",
    "14_distillation_and_loss_scale",
)  # the notebooks whose checks live here
ROLES = ("calibration", "held-out")
REPLACED = "held_out_replaced.jsonl"  # in RECORDS: one line per held-out draw replaced, appended, never rewritten
MIN_SD = 3.0  # a bound's least distance from its calibration mean, in standard deviations


@dataclass(frozen=True)
class Measured:
    """One comparison of a check: ``value op bound``, and the same quantity at its ``control``.

    ``quantity`` names it (unique within its check: the records key on it); ``scale="log"`` for a
    ratio, whose spread is taken on log10 (value and bound must then be positive); ``control=None``
    where the control is a different quantity (say so in the check's ``control`` text)."""

    quantity: str
    value: float
    op: str
    bound: float
    control: float | None = None
    scale: str = "linear"

    def __post_init__(self):
        if self.op not in (">", "<"):
            raise ValueError(f"Measured.op must be '>' or '<', got {self.op!r}")
        if self.scale not in ("linear", "log"):
            raise ValueError(f"Measured.scale must be 'linear' or 'log', got {self.scale!r}")
        object.__setattr__(self, "value", float(self.value))
        object.__setattr__(self, "bound", float(self.bound))
        if self.control is not None:
            object.__setattr__(self, "control", float(self.control))

    def passes(self, x: float | None = None) -> bool:
        """Whether ``x`` (default: the value) satisfies the rule; NaN never does."""
        x = self.value if x is None else x
        return bool(x > self.bound) if self.op == ">" else bool(x < self.bound)

    @property
    def ok(self) -> bool:
        """The value passes the rule and the control, if any, fails it."""
        return self.passes() and (self.control is None or not self.passes(self.control))

    def rule(self) -> str:
        return f"{self.quantity} {self.op} {_num(self.bound)}"


@dataclass(frozen=True)
class Check:
    """A registered claim of one notebook: see the module docstring."""

    notebook: str
    name: str
    claim: str  # the lesson's sentence that the rule tests
    control: str  # what fails the rule, in words
    fn: Callable[[dict], Measured | list[Measured]]
    asserted: bool = True  # False: a printed result, recorded at every draw, never raised
    why_printed: str = ""  # for a printed result: why it is not asserted
    exact: bool = False  # an identity or a hand-computed value: the same on every seed, no calibration
    preset: str | None = "cpu"  # the preset its bound belongs to (None: any); other presets skip it

    def measure(self, namespace: dict) -> list[Measured]:
        out = self.fn(namespace)
        out = [out] if isinstance(out, Measured) else list(out)
        names = [m.quantity for m in out]
        if not out or len(set(names)) != len(names):
            raise ValueError(f"{self.notebook}.{self.name}: needs one or more comparisons, each named once: {names}")
        return out


_REGISTRY: dict[str, dict[str, Check]] = {}


def check(notebook: str, *, claim: str, control: str, exact: bool = False, preset: str | None = "cpu"):
    """Register the decorated function as an asserted check of ``notebook``."""

    def register(fn):
        _add(Check(notebook, fn.__name__, claim, control, fn, exact=exact, preset=preset))
        return fn

    return register


def printed(notebook: str, *, claim: str, why: str, control: str = "", preset: str | None = "cpu"):
    """Register a result the lesson prints but no rule asserts (``why``: the reason), so that its
    value is recorded at every draw, and the lesson can quote its spread (`seed_range`)."""

    def register(fn):
        _add(Check(notebook, fn.__name__, claim, control, fn, asserted=False, why_printed=why, preset=preset))
        return fn

    return register


def _add(c: Check) -> None:
    if not c.claim.strip() or (c.asserted and not c.control.strip()) or (not c.asserted and not c.why_printed):
        raise ValueError(f"{c.notebook}.{c.name}: a check needs a claim and a control; a printed result, its why")
    _REGISTRY.setdefault(c.notebook, {})[c.name] = c


def module_name(notebook: str) -> str:
    """``"02_baseline"`` -> ``"course.checks.nb02_baseline"``."""
    return f"{__name__}.nb{notebook}"


def checks_of(notebook: str) -> list[Check]:
    """The registered checks of ``notebook`` (its stem), in the order its module defines them."""
    if notebook not in CONVERTED:
        raise ValueError(f"no checks registered for {notebook!r}: the converted notebooks are {list(CONVERTED)}")
    importlib.import_module(module_name(notebook))
    return list(_REGISTRY[notebook].values())


# ------------------------------------------------------------------ running a notebook's checks


@dataclass
class Outcome:
    check: Check
    measured: list[Measured] = field(default_factory=list)
    error: str = ""  # the check's function raised
    skipped: str = ""  # why it did not run here (another preset)

    @property
    def ok(self) -> bool:
        return not self.error and (bool(self.skipped) or all(m.ok for m in self.measured))

    def why_failed(self) -> str:
        if self.error:
            return f"  raised {self.error}"
        lines = []
        for m in self.measured:
            if not m.passes():
                lines.append(f"  {m.quantity} = {m.value:.6g}, the rule wants {m.op} {m.bound:.6g}")
            elif m.control is not None and m.passes(m.control):
                lines.append(f"  its control passes the rule too: {m.quantity} = {m.control:.6g} there (tests nothing)")
        return "\n".join(lines)


def evaluate(c: Check, namespace: dict) -> Outcome:
    preset = namespace.get("preset")
    here = getattr(preset, "name", None)
    if c.preset is not None and here is not None and here != c.preset and not c.exact:
        return Outcome(c, skipped=f"its bound belongs to the {c.preset} preset, this run uses {here}")
    try:
        return Outcome(c, c.measure(namespace))
    except Exception as exc:  # a check that cannot compute its value fails, and says why
        return Outcome(c, error=f"{type(exc).__name__}: {exc}")


def run_checks(notebook: str, namespace: dict, checks: list[Check] | None = None, echo=print) -> list[Outcome]:
    """Run every check of ``notebook`` on the notebook's ``namespace`` (``globals()``); print the
    names that passed; write the draw to ``$GRPO_EDU_CHECKS_RECORD`` when it is set; raise
    `AssertionError` naming each asserted check that failed, with its values, and (for the
    registry's own checks, when not recording) each rule that differs from its calibration."""
    registry = checks is None
    checks = checks_of(notebook) if registry else checks
    outcomes = [evaluate(c, namespace) for c in checks]
    folder = os.environ.get(RECORD_ENV)
    if folder:
        write_draw(Path(folder), notebook, outcomes)
    asserted = [o for o in outcomes if o.check.asserted]
    failed = [o for o in asserted if not o.ok]
    changed = drift(notebook, outcomes) if registry and not folder else []
    passed = [o.check.name for o in asserted if o.ok and not o.skipped]
    echo(f"{notebook}: {len(passed)} of {len(asserted)} checks passed")
    for name in passed:
        echo(f"  pass  {name}")
    for o in asserted:
        if o.skipped:
            echo(f"  skip  {o.check.name} ({o.skipped})")
    echo(f"  and {sum(not o.check.asserted for o in outcomes)} results the lesson prints, measured, not checked")
    if failed or changed:
        raise AssertionError(
            f"{notebook}: {len(failed)} check(s) failed\n"
            + "\n".join(f"{o.check.name}: {o.check.claim}\n{o.why_failed()}" for o in failed)
            + "".join(f"\nnot as calibrated: {line}" for line in changed)
        )
    return outcomes


# ------------------------------------------------------------------ draws and records


def _kernel() -> tuple[str, str]:
    """(the kernel asked for, ``native`` when unset; the capability torch runs with)."""
    try:
        import torch

        capability = str(torch.backends.cpu.get_cpu_capability())
    except Exception:  # no torch, or an old one
        capability = "unknown"
    return os.environ.get(KERNEL_ENV) or "native", capability


def _commit() -> str:
    """The checkout's commit, ``-dirty`` when its files differ from it (others' edits included)."""
    import subprocess

    try:
        cmd = ["git", "describe", "--always", "--dirty", "--abbrev=10"]
        return subprocess.run(cmd, cwd=HERE, capture_output=True, text=True, timeout=30).stdout.strip() or "unknown"
    except Exception:  # no git, or not a checkout
        return "unknown"


def draw_of(notebook: str, outcomes: list[Outcome]) -> dict:
    """One run's values, as the records keep them."""
    kernel, capability = _kernel()
    results = {}
    for o in outcomes:
        results[o.check.name] = {
            "asserted": o.check.asserted,
            "ok": o.ok,
            "error": o.error,
            "skipped": o.skipped,
            "measured": [
                {"quantity": m.quantity, "value": m.value, "op": m.op, "bound": m.bound, "control": m.control}
                | {
                    "scale": m.scale,
                    "passes": m.passes(),
                    "control_passes": None if m.control is None else m.passes(m.control),
                }
                for m in o.measured
            ],
        }
    return {
        "notebook": notebook,
        "shift": int(os.environ.get(SHIFT_ENV) or 0),
        "kernel": kernel,
        "capability": capability,
        "when": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "commit": _commit(),
        "results": results,
    }


def write_draw(folder: Path, notebook: str, outcomes: list[Outcome]) -> Path:
    d = draw_of(notebook, outcomes)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{notebook}__shift{d['shift']}__{d['kernel']}.json"
    path.write_text(json.dumps(d, indent=1) + "\n")
    return path


def records(notebook: str) -> dict:
    """``{"notebook": ..., "draws": [draw + {"role": "calibration" | "held-out"}, ...]}``."""
    path = RECORDS / f"{notebook}.json"
    return json.loads(path.read_text()) if path.exists() else {"notebook": notebook, "draws": []}


def held_out_draw(notebook: str, shift: int, kernel: str) -> dict | None:
    """The held-out draw of ``notebook`` filed at ``shift`` and ``kernel``, or None."""
    for x in records(notebook)["draws"]:
        if x["role"] == "held-out" and (x["shift"], x["kernel"]) == (int(shift), kernel):
            return x
    return None


REPLACE_HINT = 'add --replace --why "what changed since" to replace it (the replacement is logged)'


def refuse_held_out(targets, replace: bool = False, why: str = "") -> None:
    """Raise `ValueError` if any (notebook, shift, kernel) in ``targets`` has a held-out draw filed and
    ``replace`` with a ``why`` was not given: a held-out draw is drawn once, so that a check re-tuned and
    drawn again at the same held-out shift leaves a trace."""
    taken = [(nb, s, k, old) for nb, s, k in targets if (old := held_out_draw(nb, s, k)) is not None]
    if taken and not replace:
        filed = "; ".join(
            f"{nb} shift {s} {k} (filed {old.get('when', '?')}, {old.get('commit', '?')})" for nb, s, k, old in taken
        )
        raise ValueError(f"a held-out draw is filed once, and these are filed already: {filed}. {REPLACE_HINT}")
    if replace and not why.strip():
        raise ValueError('--replace needs --why "...": the reason goes into the log of replaced held-out draws')


def _failed(d: dict) -> list[str]:
    """The asserted checks a draw failed."""
    return sorted(n for n, r in d["results"].items() if r.get("asserted", True) and not r.get("ok", True))


def replaced() -> list[dict]:
    """The log of replaced held-out draws (``records/held_out_replaced.jsonl``), oldest first."""
    path = RECORDS / REPLACED
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def add_draws(paths: list[Path], role: str, replace: bool = False, why: str = "") -> list[str]:
    """File the draws written by check cells (files, or folders of them) under ``role``; a draw of
    the same notebook, shift and kernel replaces the one before, except a held-out draw: that one is
    replaced only with ``replace`` and a ``why`` (`refuse_held_out`), and each such replacement is
    appended to ``records/held_out_replaced.jsonl`` (the notebook, shift and kernel, the old and new
    commits and dates, the asserted checks each failed, why), which the testing page shows. Nothing is
    filed when one is refused. Returns what was filed."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    files = [f for p in map(Path, paths) for f in (sorted(p.glob("*.json")) if p.is_dir() else [p])]
    if not files:
        raise ValueError(f"no draw files in {[str(p) for p in paths]}")
    draws = [json.loads(f.read_text()) | {"role": role} for f in files]
    refuse_held_out([(d["notebook"], d["shift"], d["kernel"]) for d in draws], replace, why)
    filed = []
    for d in draws:
        rec = records(d["notebook"])
        key = (d["shift"], d["kernel"])
        old = held_out_draw(d["notebook"], *key)
        if old is not None:
            entry = {
                "notebook": d["notebook"],
                "shift": d["shift"],
                "kernel": d["kernel"],
                "old_commit": old.get("commit", "?"),
                "old_when": old.get("when", "?"),
                "old_failed": _failed(old),
                "new_commit": d.get("commit", "?"),
                "new_role": role,
                "new_failed": _failed(d),
                "why": " ".join(why.split()),
                "when": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
            }
            RECORDS.mkdir(exist_ok=True)
            with open(RECORDS / REPLACED, "a") as log:
                log.write(json.dumps(entry) + "\n")
        rec["draws"] = [x for x in rec["draws"] if (x["shift"], x["kernel"]) != key] + [d]
        rec["draws"].sort(key=lambda x: (ROLES.index(x["role"]), x["shift"], x["kernel"]))
        RECORDS.mkdir(exist_ok=True)
        (RECORDS / f"{d['notebook']}.json").write_text(json.dumps(rec, indent=1) + "\n")
        filed.append(f"{d['notebook']}: {role} shift {d['shift']} {d['kernel']} ({d['capability']})")
    return filed


def _judge(m: dict, x: float | None) -> bool | None:
    if x is None:
        return None
    return bool(x > m["bound"]) if m["op"] == ">" else bool(x < m["bound"])


def rebound(notebook: str, name: str, quantity: str, bound: float) -> int:
    """Set one comparison's bound in its calibration draws and judge them again: how a bound is set from
    the calibration's spread (then the check's code gets the same number). Refused once the check has a
    held-out draw: a bound moved after one is tuned to pass it. Returns how many draws changed."""
    rec = records(notebook)
    if any(d["role"] == "held-out" and name in d["results"] for d in rec["draws"]):
        raise ValueError(f"{notebook}.{name} has held-out draws: make it a printed result instead of moving its bound")
    changed = 0
    for d in rec["draws"]:
        r = d["results"].get(name)
        for m in r["measured"] if r else []:
            if m["quantity"] == quantity:
                m["bound"], m["passes"], m["control_passes"] = bound, _judge(m, m["value"]), _judge(m, m["control"])
                changed += 1
        if r:
            r["ok"] = not r["error"] and all(m["passes"] and not m["control_passes"] for m in r["measured"])
    if not changed:
        raise ValueError(f"no draw of {notebook}.{name} measured {quantity!r}")
    (RECORDS / f"{notebook}.json").write_text(json.dumps(rec, indent=1) + "\n")
    return changed


def _values(notebook: str, name: str, quantity: str, role: str) -> list[tuple[dict, dict]]:
    """(draw, its comparison) for each draw of ``role`` that measured ``quantity`` of check ``name``."""
    out = []
    for d in records(notebook)["draws"]:
        if d["role"] != role:
            continue
        for m in d["results"].get(name, {}).get("measured", []):
            if m["quantity"] == quantity:
                out.append((d, m))
    return out


def _log(x: float) -> float:
    return math.log10(x) if x > 0 else float("nan")


def calibration(notebook: str, name: str, quantity: str) -> dict:
    """The spread of one comparison over the calibration draws: values, shifts, kernels, mean and
    sd (on log10 for ``scale="log"``), and the bound's distance from the mean in sd, signed
    (positive: the mean is on the side the rule wants)."""
    pairs = _values(notebook, name, quantity, "calibration")
    if not pairs:
        return {"n": 0}
    ms = [m for _, m in pairs]
    log = ms[-1]["scale"] == "log"
    f = _log if log else float
    xs = [f(m["value"]) for m in ms]
    mean = statistics.fmean(xs)
    finite = len(xs) > 1 and all(map(math.isfinite, xs))  # a NaN value (a printed result's 0/0) has no spread
    sd = statistics.stdev(xs) if finite else float("nan")
    bound, op = f(ms[-1]["bound"]), ms[-1]["op"]
    gap = (mean - bound) if op == ">" else (bound - mean)
    return {
        "n": len(xs),
        "values": [m["value"] for m in ms],
        "controls": [m["control"] for m in ms],
        "shifts": [d["shift"] for d, _ in pairs],
        "capabilities": sorted({d["capability"] for d, _ in pairs}),
        "scale": "log10" if log else "linear",
        "mean": mean,
        "sd": sd,
        "bound": ms[-1]["bound"],
        "op": op,
        "sd_from_bound": gap / sd if sd and sd > 0 else float("inf") if gap > 0 else float("-inf"),
    }


def held_out(notebook: str, name: str) -> list[dict]:
    """Each held-out draw of check ``name``: shift, kernel, capability, whether it passed, and the
    bounds it was judged against."""
    out = []
    for d in records(notebook)["draws"]:
        r = d["results"].get(name)
        if d["role"] == "held-out" and r is not None:
            out.append(
                {
                    "shift": d["shift"],
                    "kernel": d["kernel"],
                    "capability": d["capability"],
                    "ok": r["ok"],
                    "measured": r["measured"],
                }
            )
    return out


def seed_range(
    notebook: str, name: str, quantity: str | None = None, here: float | None = None
) -> tuple[float, float, int]:
    """(lowest, highest, how many) of a registered quantity over the calibration draws (seed shifts
    0-4): what a lesson quotes as "from ... to ... over five seeds". With ``here`` (this run's value),
    this run stands in for the recorded draw of its own seed shift, so that the range holds it."""
    if quantity is None:
        quantities = {
            m["quantity"] for d in records(notebook)["draws"] for m in d["results"].get(name, {}).get("measured", [])
        }
        if len(quantities) != 1:
            raise ValueError(f"{notebook}.{name} records {sorted(quantities)}: name the quantity")
        quantity = quantities.pop()
    shift = int(os.environ.get(SHIFT_ENV) or 0)
    pairs = _values(notebook, name, quantity, "calibration")
    values = [m["value"] for d, m in pairs if here is None or d["shift"] != shift] + ([] if here is None else [here])
    if not pairs:
        raise ValueError(f"no calibration draw records {notebook}.{name}: {quantity!r}")
    return min(values), max(values), len(values)


# ------------------------------------------------------------------ the testing page's table


def _num(x: float | None) -> str:
    if x is None:
        return ""
    if x == 0 or 1e-3 <= abs(x) < 1e4:
        return f"{x:.4g}"
    return f"{x:.1e}"


def _kernels(caps: list[str]) -> str:
    return ", ".join(c.lower() if c.upper() == "DEFAULT" else c for c in caps)


def _calibration_cell(notebook: str, c: Check, ms: list[dict]) -> str:
    if c.exact:
        return "exact: the same on every seed"
    parts, where = [], ""
    for m in ms:
        cal = calibration(notebook, c.name, m["quantity"])
        if not cal["n"]:
            parts.append("not calibrated")
            continue
        where = f"shifts {_shifts(cal['shifts'])} ({_kernels(cal['capabilities'])})"
        lo, hi = min(cal["values"]), max(cal["values"])
        span = f"{_num(lo)} to {_num(hi)}"
        if c.asserted:
            log = " (log10)" if cal["scale"] == "log10" else ""
            span += f": mean {_num(cal['mean'])}{log}, sd {_num(cal['sd'])}, bound {cal['sd_from_bound']:.1f} sd away"
        parts.append(span)
    return (f"{where}: " if where else "") + "<br>".join(parts)


def _shifts(shifts: list[int]) -> str:
    s = sorted(set(shifts))
    return f"{s[0]}-{s[-1]}" if s == list(range(s[0], s[-1] + 1)) and len(s) > 2 else ", ".join(map(str, s))


def _held_out_cell(notebook: str, c: Check) -> str:
    runs = held_out(notebook, c.name)
    if not runs:
        return "none yet"
    out = []
    for r in runs:
        kernel = r["kernel"] if r["kernel"] != "native" else f"native ({r['capability']})"
        if c.asserted:
            out.append(f"{r['shift']} {kernel}: {'pass' if r['ok'] else 'FAIL'}")
        else:
            vals = ", ".join(_num(m["value"]) for m in r["measured"])
            out.append(f"{r['shift']} {kernel}: {vals}")
    return "; ".join(out)


def _latest(notebook: str, name: str) -> list[dict]:
    """The comparisons of check ``name`` as last calibrated (or, before any calibration, last drawn)."""
    draws = [d for d in records(notebook)["draws"] if name in d["results"]]
    pick = [d for d in draws if d["role"] == "calibration"] or draws
    return pick[-1]["results"][name]["measured"] if pick else []


def drift(notebook: str, outcomes: list[Outcome]) -> list[str]:
    """Each asserted comparison whose rule differs from the one its calibration recorded (or that has
    none): a bound changed after it was calibrated, or a check never drawn."""
    out = []
    for o in outcomes:
        if not o.check.asserted or o.skipped or o.error:
            continue
        recorded = {m["quantity"]: (m["op"], m["bound"]) for m in _latest(notebook, o.check.name)}
        for m in o.measured:
            if recorded.get(m.quantity) != (m.op, m.bound):
                was = recorded.get(m.quantity)
                before = f"was calibrated as {was[0]} {was[1]:.6g}" if was else "was never calibrated"
                out.append(f"{o.check.name}: {m.rule()} {before} (python -m course.checks draw --role calibration)")
    return out


PIPE = "\\|"  # a "|" inside a table cell


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def summary(notebooks=CONVERTED) -> str:
    """The registry in one paragraph, counted from the checks and the records."""
    checks = {nb: checks_of(nb) for nb in notebooks}
    asserted = [(nb, c) for nb, cs in checks.items() for c in cs if c.asserted]
    exact = sum(c.exact for _, c in asserted)
    n_printed = sum(not c.asserted for cs in checks.values() for c in cs)
    cals = {
        (nb, c.name): [calibration(nb, c.name, m["quantity"]) for m in _latest(nb, c.name)]
        for nb, c in asserted
        if not c.exact
    }
    gaps = [cal["sd_from_bound"] for cs in cals.values() for cal in cs if cal["n"]]
    uncalibrated = sum(not cs or any(cal["n"] == 0 for cal in cs) for cs in cals.values())
    held = [d for nb in notebooks for d in records(nb)["draws"] if d["role"] == "held-out"]
    names = {nb: {c.name for c in cs if c.asserted} for nb, cs in checks.items()}
    failing = sorted({f"`{d['notebook']}.{n}`" for d in held for n in _failed(d) if n in names[d["notebook"]]})
    kernels = sorted({d["kernel"] for d in held})
    closest = f", the closest bound {min(gaps):.1f} sd from its calibration mean" if gaps else ""
    return (
        f"**The registry now:** {len(notebooks)} notebooks, {sum(len(cs) for cs in checks.values())} checks: "
        f"{len(asserted)} asserted ({exact} exact, {len(asserted) - exact - uncalibrated} calibrated{closest}, "
        f"{uncalibrated} not calibrated yet) and {n_printed} printed results. "
        f"{len(held)} held-out draws of {len({d['notebook'] for d in held})} notebooks, on the kernels "
        f"{', '.join(kernels) or 'none yet'}; "
        + (f"asserted checks failing one: {', '.join(failing)}." if failing else "every asserted check passed each.")
    )


def table(notebooks=CONVERTED) -> str:
    """The registry as Markdown: one row per check, asserted ones first, then the printed results."""
    lines = [summary(notebooks), ""]
    for nb in notebooks:
        checks = checks_of(nb)
        lines += [
            f"**notebooks/{nb}.ipynb** ({sum(c.asserted for c in checks)} checks, "
            f"{sum(not c.asserted for c in checks)} printed results; `course/checks/{module_name(nb).rsplit('.', 1)[1]}.py`)",
            "",
            "| check | claim | rule | control (its value at shift 0) | calibration | held-out draws |",
            "|---|---|---|---|---|---|",
        ]
        for c in sorted(checks, key=lambda c: not c.asserted):
            ms = _latest(nb, c.name)
            zero = next(
                (
                    d["results"][c.name]["measured"]
                    for d in records(nb)["draws"]
                    if d["shift"] == 0 and c.name in d["results"]
                ),
                ms,
            )
            rule = "<br>".join(f"`{m['quantity']} {m['op']} {_num(m['bound'])}`" for m in ms).replace("|", "\\|")
            rule = rule or "not yet drawn"
            if not c.asserted:
                rule = f"printed: {_cell(c.why_printed)}"
            ctrl = _cell(c.control)
            vals = [f"{_num(m['control'])}" for m in zero if m["control"] is not None]
            if vals and c.asserted:
                ctrl += f" ({', '.join(vals)})"
            calib = _calibration_cell(nb, c, ms).replace("|", PIPE)
            lines.append(
                f"| `{c.name}` | {_cell(c.claim)} | {rule} | {ctrl} | {calib} | {_cell(_held_out_cell(nb, c))} |"
            )
        lines.append("")
    lines += _replaced_table(notebooks)
    return "\n".join(lines).rstrip() + "\n"


def _replaced_table(notebooks) -> list[str]:
    """The log of replaced held-out draws, as the page shows it."""
    rows = [e for e in replaced() if e["notebook"] in notebooks]
    head = (
        f"**Held-out draws replaced** (`course/checks/records/{REPLACED}`: a held-out draw is filed once; "
        '`python -m course.checks add --role held-out --replace --why "..."` replaces one and appends it here)'
    )
    if not rows:
        return [head, "", "None so far.", ""]
    out = [
        head,
        "",
        "| date | notebook | shift, kernel | commit before, after | asserted checks failed before, after | why |",
        "|---|---|---|---|---|---|",
    ]
    for e in rows:
        failed = f"{', '.join(e['old_failed']) or 'none'}; {', '.join(e['new_failed']) or 'none'}"
        out.append(
            f"| {e['when']} | {e['notebook']} | {e['shift']} {e['kernel']} | {e['old_commit']}, {e['new_commit']} "
            f"| {_cell(failed)} | {_cell(e['why'])} |"
        )
    return out + [""]


BEGIN, END = "<!-- BEGIN checks registry -->", "<!-- END checks registry -->"


def page_with_table(page: str, notebooks=CONVERTED) -> str:
    """``page`` (the testing page's text) with the block between the markers replaced by `table`."""
    if BEGIN not in page or END not in page:
        raise ValueError(f"the page has no {BEGIN} ... {END} block")
    head, rest = page.split(BEGIN, 1)
    return head + BEGIN + "\n" + table(notebooks) + END + rest.split(END, 1)[1]
