"""Sphinx extension of the course site: plain-text docstrings -> math, code names -> links.

The library's docstrings are written to be read in a terminal (``help(Fn.gae)``): equations
in plain text (``G_t = sum_{k>=0} gamma^k r_{t+k}``), displays as indented blocks. On the
site they should read as math, without rewriting them in LaTeX in the source. Two hooks:

- ``autodoc-process-docstring``: an indented block whose every line is an equation becomes
  a typeset display (an aligned ``.. math::``); any other indented block becomes a literal
  block (as it reads in the terminal); an inline literal that is an equation becomes
  ``:math:``; ``|`` outside literals is escaped (``|o_i|`` is not a substitution).
- a transform on every page (README, handouts, notebooks, API pages): an inline literal that
  names a notebook (``notebooks/04_grpo.ipynb``) or a library object (``Fn.group_advantages``,
  ``grpo_edu.functional.gae``, ``grpo_edu.train``) becomes a cross-reference. With
  ``nitpicky`` and ``-W`` a name that does not resolve fails the build: a README or notebook
  that names a function the library no longer has is caught.

The translation (``to_latex``) is deliberately small: the notation of the course (greek
letters by name, ``x_t`` subscripts, ``sum_t``, ``log``, ``pi_theta``); an expression it
does not recognise as math stays a literal, as written.
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import re

from docutils import nodes
from sphinx import addnodes
from sphinx.transforms import SphinxTransform

GREEK = {
    "alpha", "beta", "gamma", "delta", "epsilon", "eps", "zeta", "eta", "theta", "kappa",
    "lambda", "lam", "mu", "nu", "xi", "pi", "rho", "sigma", "tau", "phi", "chi", "psi",
    "omega", "Delta", "Gamma", "Sigma", "Pi", "Phi", "Omega",
}  # fmt: skip
GREEK_TEX = {"eps": r"\epsilon", "lam": r"\lambda", "epsilon": r"\epsilon"}
OPERATORS = {
    "log": r"\log", "exp": r"\exp", "min": r"\min", "max": r"\max", "sum": r"\sum",
    "clip": r"\operatorname{clip}", "clamp": r"\operatorname{clamp}", "mean": r"\operatorname{mean}",
    "std": r"\operatorname{std}", "KL": r"\mathrm{KL}", "softmax": r"\operatorname{softmax}",
    "log_softmax": r"\operatorname{log\_softmax}", "E": r"\mathbb{E}", "grad": r"\nabla",
    "masked_mean": r"\operatorname{masked\_mean}", "if": r"\ \text{if}\ ", "else": r"\ \text{else}\ ",
}  # fmt: skip
SUBSCRIPT_WORDS = {"ref", "old", "low", "high", "clip", "new", "min", "max"}

_TOKEN = re.compile(r"\s+|[A-Za-z][A-Za-z0-9]*(?:_(?:\{[^{}]*\}|[A-Za-z0-9]+))*|\d+(?:\.\d+)?|<-|>=|<=|!=|~=|=>|\|\||.")
_SHAPE = re.compile(r"^\[[A-Z](, ?[A-Z])*\]$")
_CODE = re.compile(r"[\"'`]|\w=\w|\w\.\w|\.\(|^\.|\bNone\b|\bTrue\b|\bFalse\b|==|\bimport\b|\bfor\b|\bwith\b|@|#")
_MATH_SIGNAL = re.compile(
    r"(?<![\w.])[A-Za-z]_[A-Za-z0-9{]|\bsum_|\^| = | <- |>=|<=|\|\||\b(" + "|".join(sorted(GREEK)) + r")\b"
)
_LABEL = re.compile(r'^(?P<label>(?:"[^"]*"|[A-Za-z]\w*)(?:\s+\([^)]*\))?):\s+(?P<rest>.*)$')


def looks_like_math(text: str) -> bool:
    """True for an expression in the course's plain-text notation, False for code or words."""
    s = text.strip()
    if not s or _SHAPE.match(s) or _CODE.search(s) or len(s) > 160:
        return False
    if not _MATH_SIGNAL.search(s):
        return False
    if s.startswith("[") and s.endswith("]"):
        return False  # a shape: [..., n_actions]
    if not re.search(r"[=<>+\-*/^|]", s) and any(_is_code_name(t) for t in re.findall(r"[A-Za-z]\w*", s)):
        return False  # a parameter name alone (n_examples, Discrete(n_states)): code, not a symbol
    # words that are not symbols of the notation mean prose: "the", "fraction with"...
    words = re.findall(r"(?<![\w\\])[a-z]{4,}\b", s)
    known = GREEK | set(OPERATORS) | {"decay", "value", "constant", "max_length", "masked", "softmax"}
    return all(w in known for w in words)


def _is_code_name(name: str) -> bool:
    """n_examples, group_size: a name from the code, not a symbol with a subscript (x_t, pi_ref)."""
    parts = name.split("_")
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9]*(_[A-Za-z0-9]+)+", name) or parts[0] in GREEK:
        return False
    return any(len(p) >= 4 and p not in GREEK and p not in SUBSCRIPT_WORDS for p in parts[1:])


def _ident(tok: str) -> str:
    base, _, sub = tok.partition("_")
    if tok in OPERATORS:
        return OPERATORS[tok]
    if _is_code_name(tok):
        return r"\mathrm{" + tok.replace("_", r"\_") + "}"
    if base in GREEK:
        head = GREEK_TEX.get(base, "\\" + base)
    elif base in {"sum", "mean", "std", "E", "min", "max", "grad"} and (
        len(sub) <= 2 or sub.startswith("{") or sub in GREEK
    ):
        head = OPERATORS[base]  # sum_t, mean_g, E_pi: an index under the operator
    elif len(base) == 1:
        head = base
    elif re.fullmatch(r"[A-Za-z]\d+", base) and not sub:
        return base[0] + "_{" + base[1:] + "}"  # k1 -> k_1
    else:
        return r"\mathrm{" + tok.replace("_", r"\_") + "}"
    if not sub:
        return head
    if sub.startswith("{") and sub.endswith("}"):
        return head + "_{" + to_latex(sub[1:-1]) + "}"
    if "_" in sub:  # pi_theta_old and the like: keep it readable as a name
        return r"\mathrm{" + tok.replace("_", r"\_") + "}"
    if sub in GREEK:
        return head + "_{" + GREEK_TEX.get(sub, "\\" + sub) + "}"
    if sub in SUBSCRIPT_WORDS or len(sub) > 3:
        return head + r"_{\text{" + sub + "}}"
    return head + "_{" + sub + "}"


_RELATIONS = {
    ">=": r"\ge ",
    "<=": r"\le ",
    "!=": r"\ne ",
    "<-": r"\leftarrow ",
    "~=": r"\approx ",
    "=>": r"\Rightarrow ",
}


def _power(expr: str) -> str | None:
    """``x ** (1/|y|)`` (Python's power) -> ``x^{1/|y|}``; None without a ``**``."""
    m = re.search(r"\s*\*\*\s*", expr)
    if not m:
        return None
    head, rest = expr[: m.start()], expr[m.end() :]
    if rest.startswith("("):
        depths = itertools.accumulate({"(": 1, ")": -1}.get(ch, 0) for ch in rest)
        close = next((k for k, depth in enumerate(depths) if depth == 0), len(rest))
        power, tail = rest[1:close], rest[close + 1 :]
    else:
        word = re.match(r"[\w.]*", rest).group(0)
        power, tail = word, rest[len(word) :]
    space = " " if tail[:1].isspace() else ""
    return to_latex(head) + "^{" + to_latex(power) + "}" + space + to_latex(tail)


def to_latex(expr: str) -> str:
    """Translate one expression of the plain-text notation to LaTeX."""
    powered = _power(expr)
    if powered is not None:
        return powered.strip()
    out: list[str] = []
    tokens = _TOKEN.findall(expr)
    bars = 0
    for i, tok in enumerate(tokens):
        if tok.isspace():
            out.append(" ")
        elif tok == "*":
            out.append(r"\,")
        elif tok in _RELATIONS:
            out.append(_RELATIONS[tok])
        elif tok == "||":
            out.append(r"\,\|\,")
        elif tok == "|":
            # |o_i| (a length) when the bar closes within the next few tokens on a name; else "given"
            nxt = "".join(tokens[i + 1 : i + 3])
            if bars % 2 == 1 or re.fullmatch(r"[A-Za-z]\w*\|", nxt):
                out.append("|")
                bars += 1
            else:
                out.append(r"\mid ")
        elif tok == "~":
            out.append(r"\sim ")
        elif tok in "{}%&#$":
            out.append("\\" + tok)
        elif tok[0].isalpha():
            out.append(_ident(tok))
        else:
            out.append(tok)
    return re.sub(r" {2,}", " ", "".join(out)).strip()


def _equation_line(line: str) -> str | None:
    """One line of an indented display -> an aligned LaTeX row, or None if it is not math."""
    s = re.sub(r"\s{2,}([=:])", r" \1", line.strip())  # alignment spaces before "=" or ":"
    label = ""
    m = _LABEL.match(s)
    if m:
        label, s = m.group("label"), m.group("rest")
    parts = re.split(r"\s{3,}|\s{2,}(?=\()", s, maxsplit=1)  # a note: after 3 spaces, or 2 before "("
    eq, note = parts[0].strip(), (parts[1].strip() if len(parts) > 1 else "")
    if not looks_like_math(eq):
        return None
    tex = to_latex(eq)
    lhs, eqsign, rhs = tex.partition("=")
    row = (lhs + "&=" + rhs) if eqsign else ("&" + tex)
    if label:
        row = _text(label) + r"\quad " + row
    if note:
        row += " && " + _text(note)  # a column of its own: the notes of a display line up
    return row


def _escape_text(s: str) -> str:
    """Text-mode escapes (MathJax's textmacros reads ``\\_`` as ``_``; a bare ``_`` is an error)."""
    return re.sub(r"([_%&#${}])", r"\\\1", s)


_QUOTED_OR_ASSIGNED = re.compile(r"""^(?:"[^"]*"|'[^']*'|[A-Za-z_]\w*=\S+)$""")
_SYMBOL = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:_(?:\{[^{}]*\}|[A-Za-z0-9]+))+")
_RELATION = re.compile(r"\|\||\||\^|[<>]=?|[!~]=|=")


def _has_symbol(core: str) -> bool:
    """A subscripted symbol of the notation (pi_ref, rho_it, s_t, sum_t), not a code name."""
    for tok in _SYMBOL.findall(core):
        base = tok.split("_")[0]
        if not _is_code_name(tok) and (base in GREEK or base in OPERATORS or len(base) == 1):
            return True
    return False


def _word_kind(word: str) -> str:
    """One word of a note: "code" (``"grpo"``, ``loss_type="grpo"``), "math", "weak" or "text".

    "weak" is what is math only next to math (a number, an operator, ``log``, a single
    letter: "a" is also an article); a run of words is typeset only if one of them is "math".
    """
    core = word.strip("()[],;:.")
    if not core:
        return "text"
    if _QUOTED_OR_ASSIGNED.match(core) or _is_code_name(core):
        return "code"
    if _CODE.search(core):
        return "text"
    if core in GREEK or _has_symbol(core) or _RELATION.search(core):
        return "math"
    if re.fullmatch(r"[-+*/]|\d+(\.\d+)?|[A-Za-z]", core) or core in OPERATORS:
        return "weak"
    return "text"


def _split_run(run: str) -> tuple[str, str, str]:
    """Peel what belongs to the prose off a run of math words: a trailing ``,;:.`` and an
    opening or closing bracket with no partner inside the run."""
    head, tail = "", ""
    while True:
        if run and run[-1] in ",;:.":
            run, tail = run[:-1], run[-1] + tail
        elif run and run[-1] in ")]" and run.count(run[-1]) > run.count("(" if run[-1] == ")" else "["):
            run, tail = run[:-1], run[-1] + tail
        elif run and run[0] in "([" and run.count(run[0]) > run.count(")" if run[0] == "(" else "]"):
            head, run = head + run[0], run[1:]
        else:
            return head, run, tail


def _text(s: str) -> str:
    """A label or a note beside a display -> ``\\text{...}`` with its math and code typeset.

    ``unbiased for KL(pi||pi_ref), >= 0`` keeps its words as text and typesets
    ``KL(pi||pi_ref)`` and ``>= 0`` (``$...$`` inside the text); a quoted value or an
    assignment (``TRL loss_type="grpo"``) is code, in a typewriter font with straight quotes.
    """
    words = re.split(r"(\s+)", s.strip())
    out: list[str] = []
    run: list[str] = []

    def flush() -> None:
        if not run:
            return
        text = "".join(run).rstrip()
        space = "".join(run)[len(text) :]
        if any(_word_kind(w) == "math" for w in run if not w.isspace()):
            head, expr, tail = _split_run(text)
            out.append(_escape_text(head) + "$" + to_latex(expr) + "$" + _escape_text(tail) + space)
        else:
            out.append(_escape_text("".join(run)))
        run.clear()

    for w in words:
        if w.isspace() or not w:
            (run if run else out).append(w)
            continue
        kind = _word_kind(w)
        if kind in ("math", "weak"):
            run.append(w)
            if w[-1] in ",;:":  # a comma ends an expression: "KL(pi||pi_ref), >= 0"
                flush()
            continue
        flush()
        if kind == "code":
            lead = re.match(r"^[(\[]*", w).group(0)
            trail = re.search(r"[)\],;:.]*$", w).group(0)
            core = w[len(lead) : len(w) - len(trail)]
            out.append(_escape_text(lead) + r"\texttt{" + _escape_text(core) + "}" + _escape_text(trail))
        else:
            out.append(_escape_text(w))
    flush()
    return r"\text{" + "".join(out) + "}"


_INLINE_LITERAL = re.compile(r"``([^`]+)``")
_RST_START = re.compile(r"^(\.\. |[-*+] |\d+[.)] |:\w[^:]*:|[A-Z][A-Za-z ]*:\s*$)")


_EMPHASIS = re.compile(r"\*\*[^*\s](?:[^*]*[^*\s])?\*\*|\*[^*\s](?:[^*]*[^*\s])?\*(?!\w)")


def _escape_prose(text: str) -> str:
    """What plain text means literally but reST reads as markup, escaped.

    ``|o_i|`` is a length, not a substitution; a ``*`` outside a ``*emphasis*`` / ``**strong**``
    pair (``w * L_t``, ``f(*args)``) is a star; ``name_`` and ``__init__`` are not links.
    """
    out, last = [], 0
    for m in _EMPHASIS.finditer(text):
        out += [_escape_plain(text[last : m.start()]), m.group(0)]
        last = m.end()
    out.append(_escape_plain(text[last:]))
    return "".join(out)


def _escape_plain(text: str) -> str:
    text = re.sub(r"(?<=\w)(__?)(?=\s|$|[.,;:)\]*|])", lambda m: "\\_" * len(m.group(1)), text)
    return re.sub(r"(?<!\\)([|*])", r"\\\1", text)


def _inline(line: str) -> str:
    """Inline literals that are equations -> :math:; a bare | outside literals escaped."""
    parts = re.split(r"(``[^`]+``|`[^`]+`)", line)
    for k, part in enumerate(parts):
        if part.startswith("``") and part.endswith("``"):
            inner = part[2:-2]
            if looks_like_math(inner):
                parts[k] = r":math:`" + to_latex(inner).replace("`", "") + "`"
        elif not part.startswith("`"):
            parts[k] = _escape_prose(part)
    return "".join(parts)


def convert_docstring(lines: list[str]) -> list[str]:
    """The plain-text docstring (already dedented) -> reStructuredText, in place of ``lines``."""
    out: list[str] = []
    i, n = 0, len(lines)
    prev = ""  # the last non-blank line at indent 0
    while i < n:
        line = lines[i]
        if line.strip() and line[0] == " " and prev and not _RST_START.match(prev) and not prev.endswith("::"):
            j = i
            while j < n and (not lines[j].strip() or lines[j][0] == " "):
                j += 1
            while j > i and not lines[j - 1].strip():
                j -= 1
            block = lines[i:j]
            rows = [_equation_line(b) for b in block if b.strip()]
            if out and out[-1].strip():
                out.append("")
            if all(r is not None for r in rows):
                out += [".. math::", "   :nowrap:", "", r"   \[\begin{aligned}"]
                out += ["   " + r + (r" \\" if k < len(rows) - 1 else "") for k, r in enumerate(rows)]
                out += [r"   \end{aligned}\]", ""]
            else:
                out += ["::", ""] + block + [""]
            i = j
            continue
        if line.strip() and line[0] != " ":
            if re.match(r"[-*+] ", line) and out and out[-1].strip() and not re.match(r"[-*+] ", prev):
                out.append("")  # a list right after a paragraph: reST needs the blank line
            prev = line
            # an RST-aware docstring already says what its indented blocks are
            if prev.endswith("::") or _RST_START.match(prev):
                verbatim = prev.endswith("::") or prev.startswith(".. ")
                out.append(line if verbatim else _inline(line))
                i += 1
                while i < n and (not lines[i].strip() or lines[i][0] == " "):
                    out.append(lines[i] if verbatim else _inline(lines[i]))
                    i += 1
                continue
        out.append(_inline(line) if not line.startswith(" ") else line)
        i += 1
    return out


def _process_docstring(app, what, name, obj, options, lines):
    converted = convert_docstring(list(lines))
    if what in ("attribute", "data") and converted and ":" in converted[0]:
        # napoleon reads "text: more" on an attribute's first line as "type: description"; an
        # escaped line end (renders as nothing) takes that first line's place
        converted.insert(0, "\\")
    lines[:] = converted


# ---------------------------------------------------------------- code names -> links

_NOTEBOOK = re.compile(r"^(?:notebooks/)?(\d\d_[\w-]+)\.ipynb$")
_PYNAME = re.compile(r"^(Fn|F|grpo_edu|envs)((?:\.[A-Za-z_]\w*)+)(\(\))?$")


def canonical_name(dotted: str) -> str:
    """``grpo_edu.train`` (re-exported) -> ``grpo_edu.train.train``, where the API pages document it.

    A name that does not import is returned as it is, so that its reference fails.
    """
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        try:
            for attr in parts[k:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return dotted
        if inspect.ismodule(obj):
            return obj.__name__
        module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
        if module and qualname and "<" not in qualname:
            return f"{module}.{qualname}"
        return dotted
    return dotted


class CodeNamesToLinks(SphinxTransform):
    """``notebooks/NN_x.ipynb`` and ``Fn.name`` / ``grpo_edu.x.y`` literals -> checked references."""

    default_priority = 5  # before Sphinx resolves pending references

    def apply(self, **kwargs) -> None:
        for lit in list(self.document.findall(nodes.literal)):
            if isinstance(lit.parent, (nodes.reference, addnodes.pending_xref, nodes.literal_block)):
                continue
            if "xref" in lit.get("classes", []):
                continue
            text = lit.astext()
            m = _NOTEBOOK.match(text)
            if m:
                target, domain, reftype = "/notebooks/" + m.group(1), "std", "doc"
            else:
                m = _PYNAME.match(text)
                if not m:
                    continue
                head, rest = m.group(1), m.group(2)
                module = "grpo_edu.functional" if head in ("Fn", "F") else head
                target, domain, reftype = canonical_name(module + rest), "py", "obj"
            xref = addnodes.pending_xref(
                "",
                refdomain=domain,
                reftype=reftype,
                reftarget=target,
                refexplicit=True,
                refwarn=True,
                refdoc=self.env.docname,
            )
            xref += nodes.literal(text, text, classes=["xref"])
            lit.replace_self(xref)


class TaggedDisplays(SphinxTransform):
    """A ``$$ ... \\tag{1} $$`` display with line breaks is typeset as it is written.

    Sphinx wraps a display that holds ``\\\\`` in ``\\begin{split}``, where MathJax refuses
    ``\\tag`` ("\\tag not allowed in split environment", shown in red on the page); inside a
    plain ``\\[ ... \\]`` the tag is allowed and the ``cases`` or ``aligned`` inside it breaks
    the lines.
    """

    default_priority = 500

    def apply(self, **kwargs) -> None:
        for node in list(self.document.findall(nodes.math_block)):
            latex = node.astext()
            nowrap = node.get("no-wrap", node.get("nowrap", False))  # Sphinx 9's name, then the old one
            if r"\tag" not in latex or r"\\" not in latex or nowrap or node.get("number"):
                continue
            node.children = [nodes.Text(r"\[" + latex + r"\]")]
            node["no-wrap"] = node["nowrap"] = True


def importable(dotted: str) -> bool:
    """True if ``grpo_edu.x.y`` / ``envs.x`` names an object that exists (imports, has the attribute)."""
    if not dotted.startswith(("grpo_edu.", "envs.")) and dotted not in ("grpo_edu", "envs"):
        return False
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        for attr in parts[k:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def _missing_reference(app, env, node, contnode):
    """A library name that exists but has no page of its own: shown as code, without a link.

    Only a name that does not exist (a function the library lost, a typo) stays a warning,
    which ``-W`` turns into a failed build.
    """
    if node.get("refdomain") == "py" and importable(node.get("reftarget", "")):
        return contnode
    return None


def _nav_titles(app, doctree):
    """``site_nav_titles`` (docname -> title): the page's name in the navigation and in every
    toctree, as ``Title <docname>`` in the toctree would set it, whatever the page's own first
    heading says (the README's title is written for GitHub's front page; the page keeps it)."""
    titles = app.config.site_nav_titles
    for toctree in doctree.findall(addnodes.toctree):
        toctree["entries"] = [(titles.get(ref) if title is None else title, ref) for title, ref in toctree["entries"]]


def setup(app):
    app.add_config_value("site_nav_titles", {}, "env", types=frozenset({dict}))
    app.connect("doctree-read", _nav_titles)
    app.connect("autodoc-process-docstring", _process_docstring, priority=400)  # before napoleon (500)
    app.connect("missing-reference", _missing_reference)
    app.add_transform(CodeNamesToLinks)
    app.add_transform(TaggedDisplays)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
