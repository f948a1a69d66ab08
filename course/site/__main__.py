"""Build the course website: ``python -m course.site build [--out DIR] [--open]``.

Renders README.md, course/README.md, the homework handouts, notebooks/NN_*.ipynb (from their
committed outputs, nothing is executed) and the API reference to ``course/site/_build/html``,
offline, with every warning an error (a broken cross-reference fails the build). Needs the
``[docs]`` extra: ``pip install -e ".[docs]"``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

SITE = Path(__file__).resolve().parent
ROOT = SITE.parents[1]
DEFAULT_OUT = SITE / "_build" / "html"


def build(out: Path = DEFAULT_OUT, quiet: bool = True) -> int:
    """Build the site into ``out``; returns Sphinx's exit status (0: no warning)."""
    try:
        from sphinx.cmd.build import build_main
    except ImportError:
        print('the site needs the [docs] extra: pip install -e ".[docs]"', file=sys.stderr)
        return 2
    args = ["-b", "html", "-c", str(SITE), "-W", "--keep-going", "-E", "-j", "1"]
    args += ["-q"] if quiet else []
    args += ["-d", str(out.parent / "doctrees"), str(ROOT), str(out)]
    return build_main(args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course.site", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the website (warnings are errors)")
    b.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: %(default)s)")
    b.add_argument("--verbose", action="store_true", help="print Sphinx's progress")
    args = parser.parse_args(argv)
    status = build(args.out.resolve(), quiet=not args.verbose)
    if status == 0:
        print(
            f"built: {args.out / 'index.html'}  (open it in a browser, or serve it: python -m http.server -d {args.out})"
        )
    return status


if __name__ == "__main__":
    sys.exit(main())
