"""``python -m course.checks COMMAND``: the registry of the notebooks' checks, from the shell.

- ``table [--write]``: the registry as the testing page's table (``--write``: into
  course/site/testing.md, between its markers; ``tests/test_checks.py`` checks the page matches);
- ``stats [NOTEBOOK ...]``: each check's calibration (mean, sd, the bound's distance in sd) and
  held-out draws, for setting a bound;
- ``draw --role calibration|held-out --runs SHIFT:KERNEL,... NOTEBOOK ...``: execute each notebook at
  each seed shift and kernel (``native``, ``default``, ``avx2``, ...), each with a fresh reference
  cache, and file the draws its check cell writes;
- ``add --role calibration|held-out PATH ...``: file draws written elsewhere (a folder that
  ``$GRPO_EDU_CHECKS_RECORD`` named during ``grpo-edu check-notebooks``, say);
- ``--replace --why "..."`` (``draw`` and ``add``): a held-out draw is filed once; replacing one at the
  same notebook, shift and kernel is refused without these, and logged with them
  (``records/held_out_replaced.jsonl``, shown on the testing page);
- ``rebound NOTEBOOK CHECK QUANTITY BOUND``: set a bound from the calibration's spread, in the records
  (then write the same number in the check's code); refused once the check has a held-out draw.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from course import checks as C

ROOT = C.HERE.parents[1]
PAGE = ROOT / "course" / "site" / "testing.md"


def _stats(notebooks) -> str:
    lines = []
    for nb in notebooks:
        for c in C.checks_of(nb):
            lines.append(f"{nb}.{c.name} ({'asserted' if c.asserted else 'printed'}{', exact' if c.exact else ''})")
            for m in C._latest(nb, c.name):
                cal = C.calibration(nb, c.name, m["quantity"])
                if cal["n"]:
                    vals = ", ".join(f"{v:.4g}" for v in cal["values"])
                    lines.append(
                        f"    {m['quantity']} {m['op']} {m['bound']:.4g}: [{vals}] at {cal['shifts']} "
                        f"{cal['capabilities']}; mean {cal['mean']:.4g} sd {cal['sd']:.3g} ({cal['scale']}), "
                        f"{cal['sd_from_bound']:.1f} sd"
                    )
                else:
                    lines.append(f"    {m['quantity']}: no calibration draw")
            for r in C.held_out(nb, c.name):
                vals = ", ".join(f"{m['value']:.4g}" for m in r["measured"])
                lines.append(
                    f"    held out {r['shift']} {r['kernel']} ({r['capability']}): {'pass' if r['ok'] else 'FAIL'} [{vals}]"
                )
    return "\n".join(lines)


def _draw(notebooks, runs, role: str, timeout: int, replace: bool = False, why: str = "") -> int:
    pairs = [run.split(":") for run in runs.split(",")]
    # refused before anything is executed, not after minutes of it
    C.refuse_held_out([(Path(nb).stem, int(s), k) for nb in notebooks for s, k in pairs], replace, why)
    status = 0
    for run in runs.split(","):
        shift, kernel = run.split(":")
        with tempfile.TemporaryDirectory(prefix="grpo-edu-draw-") as tmp:
            env = dict(os.environ, GRPO_EDU_SEED_SHIFT=shift, OMP_NUM_THREADS="1", GRPO_EDU_CACHE=f"{tmp}/cache")
            env["GRPO_EDU_LIVE"] = "1"  # the stored runs trained too (grpo_edu.studies.stored_runs)
            env[C.RECORD_ENV] = f"{tmp}/draws"
            env.pop(C.KERNEL_ENV, None)
            if kernel != "native":
                env[C.KERNEL_ENV] = kernel
            for nb in notebooks:
                cmd = ["jupyter", "nbconvert", "--to", "notebook", "--execute", "--allow-errors", "--output-dir", tmp]
                cmd += [f"--ExecutePreprocessor.timeout={timeout}", str(nb)]
                r = subprocess.run(cmd, env=env, capture_output=True, text=True)
                print(f"shift {shift} {kernel} {Path(nb).name}: nbconvert exit {r.returncode}", flush=True)
                status |= r.returncode
            if Path(f"{tmp}/draws").exists():
                print("\n".join(C.add_draws([Path(f"{tmp}/draws")], role, replace, why)), flush=True)
            else:
                print(f"shift {shift} {kernel}: no draw written (did the check cell run?)", flush=True)
                status = 1
    return status


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course.checks", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("table", help="the registry as the testing page's table")
    t.add_argument("--write", action="store_true", help=f"write it into {PAGE.relative_to(ROOT)}")
    s = sub.add_parser("stats", help="calibration and held-out draws of each check")
    s.add_argument("notebooks", nargs="*", default=list(C.CONVERTED))
    d = sub.add_parser("draw", help="execute notebooks at seed shifts and kernels, and file their draws")
    d.add_argument("--role", choices=C.ROLES, required=True)
    d.add_argument("--runs", required=True, help="SHIFT:KERNEL,... e.g. 0:native,1:native or 21:native,22:default")
    d.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
    d.add_argument("notebooks", nargs="+")
    a = sub.add_parser("add", help="file draws written by check cells")
    a.add_argument("--role", choices=C.ROLES, required=True)
    a.add_argument("paths", nargs="+", type=Path)
    for p in (d, a):
        p.add_argument("--replace", action="store_true", help="replace a held-out draw already filed (needs --why)")
        p.add_argument("--why", default="", help="why a held-out draw is replaced (logged; the testing page shows it)")
    r = sub.add_parser("rebound", help="set a bound in the calibration draws (before any held-out draw)")
    r.add_argument("notebook")
    r.add_argument("check")
    r.add_argument("quantity")
    r.add_argument("bound", type=float)
    args = parser.parse_args(argv)
    if args.command == "table":
        if args.write:
            PAGE.write_text(C.page_with_table(PAGE.read_text()))
            print(f"wrote the table into {PAGE.relative_to(ROOT)}")
        else:
            print(C.table(), end="")
    elif args.command == "stats":
        print(_stats(args.notebooks))
    elif args.command == "draw":
        try:
            return _draw(args.notebooks, args.runs, args.role, args.timeout, args.replace, args.why)
        except ValueError as err:
            print(f"python -m course.checks draw: {err}", file=sys.stderr)
            return 2
    elif args.command == "rebound":
        n = C.rebound(args.notebook, args.check, args.quantity, args.bound)
        print(f"{args.notebook}.{args.check} {args.quantity!r}: bound {args.bound:g} in {n} draws")
    elif args.command == "add":
        try:
            print("\n".join(C.add_draws(args.paths, args.role, args.replace, args.why)))
        except ValueError as err:
            print(f"python -m course.checks add: {err}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
