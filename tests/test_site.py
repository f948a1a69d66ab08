"""The course website (course/site): built offline with warnings as errors, then read in a real browser.

The site is built once (``python -m course.site build``, the documented command) and every
page is opened in headless Chromium, driven over the Chrome DevTools protocol, from a server
on 127.0.0.1 (the search page needs http, not file://). On every page: math is typeset by
the local MathJax (every ``.math`` element holds MathJax output, no raw ``$$`` is left, no
backslash in the typeset text, no MathJax error), every image has loaded, and no request went
anywhere but 127.0.0.1. At 1280 and 1920 px no code or output block and no display is wider
than its column and every figure is shown large enough to read (FIGURE_SCALE_MIN). The top of
the build is a page that links to the start page; there is one search box; the navigation
lists the notebooks in course order, "Next" walks the syllabus (each week's notebooks, then its
homework handout, then the reference pages), and the search page finds ``group_advantages``.
Screenshots of notebooks 04 and 07 and an API page at both widths are kept under the build
folder (CI artifacts).

Skips, with the reason, without the ``[docs]`` extra or without /usr/bin/chromium.
"""

from __future__ import annotations

import base64
import functools
import http.server
import json
import re
import shutil
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "course" / "site"
CHROMIUM = Path("/usr/bin/chromium")
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

pytestmark = pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # Sphinx 11's, inside Sphinx

pytest.importorskip("myst_nb", reason='the site needs the [docs] extra: pip install -e ".[docs]"')
pytest.importorskip("sphinx_book_theme", reason='the site needs the [docs] extra: pip install -e ".[docs]"')

sys.path.insert(0, str(SITE))
import site_ext  # noqa: E402  (course/site/site_ext.py: the docstring -> math translation)

from course.site.__main__ import DEFAULT_OUT  # noqa: E402

# ------------------------------------------------------------------ no browser needed


@pytest.mark.parametrize(
    "text, latex",
    [
        ("G_t = sum_{k>=0} gamma^k r_{t+k}", r"G_{t} = \sum_{k\ge 0} \gamma^k r_{t+k}"),
        ("A_i = (r_i - mean_g(r)) / (s + eps)", r"A_{i} = (r_{i} - \operatorname{mean}_{g}(r)) / (s + \epsilon)"),
        ("k3 = r - 1 - log r", r"k_{3} = r - 1 - \log r"),
        ("log pi_theta(a_t | s_t)", r"\log \pi_{\theta}(a_{t} \mid s_{t})"),
        ("KL(pi||pi_ref)", r"\mathrm{KL}(\pi\,\|\,\pi_{\text{ref}})"),
        ("grad J(theta) ~= g", r"\nabla J(\theta) \approx g"),
        ("B = n_prompts * group_size", r"B = \mathrm{n\_prompts} \, \mathrm{group\_size}"),
        ("r_{i,t} = r_phi(q, a_{i,<=t})", r"r_{i,t} = r_{\phi}(q, a_{i,\le t})"),
        ("s_i = (pi_theta / pi_old) ** (1/|y_i|)", r"s_{i} = (\pi_{\theta} / \pi_{\text{old}})^{1/|y_{i}|}"),
    ],
)
def test_plain_text_equations_become_latex(text, latex):
    assert site_ext.looks_like_math(text)
    assert site_ext.to_latex(text) == latex


@pytest.mark.parametrize(
    "code",
    ["shift_mean=False", 'kind="k1"', "[B, T]", "[..., n_actions]", "n_examples", "policy_gradient_loss", "dim"],
)
def test_code_stays_code(code):
    assert not site_ext.looks_like_math(code)


@pytest.mark.parametrize(
    "prose, rst",
    [
        ("w * L_t and **bold** and *emph*.", r"w \* L_t and **bold** and *emph*."),
        ("f(*args) on __init__ and name_.", r"f(\*args) on __init\_\_ and name\_."),
        ("|o_i| tokens, ``x * y`` code", r"\|o_i\| tokens, ``x * y`` code"),
        ("critic_* alike", r"critic\_\* alike"),
    ],
)
def test_plain_text_that_rst_would_misread_is_escaped(prose, rst):
    assert site_ext._inline(prose) == rst


@pytest.mark.parametrize(
    "note, latex",
    [
        # prose stays text, the math in it is typeset inside the text ($...$)
        (
            "unbiased for KL(pi||pi_ref), >= 0",
            r"\text{unbiased for $\mathrm{KL}(\pi\,\|\,\pi_{\text{ref}})$, $\ge 0$}",
        ),
        ("(optionally clipped around V_old)", r"\text{(optionally clipped around $V_{\text{old}}$)}"),
        ("E[b(s_t) grad log pi] = 0, so", r"\text{$\mathbb{E}[b(s_{t}) \nabla \log \pi] = 0$, so}"),
        # a quoted value or an assignment is code: typewriter, straight quotes, \_ for _
        ('GRPO paper; TRL loss_type="grpo"', r'\text{GRPO paper; TRL \texttt{loss\_type="grpo"}}'),
        ('"sequence_mean"', r'\text{\texttt{"sequence\_mean"}}'),
        # words that are not math stay words ("a" is an article, "/" a slash)
        ("(drop a token / the sequence)", r"\text{(drop a token / the sequence)}"),
    ],
)
def test_a_note_beside_a_display_is_text_with_its_math_typeset(note, latex):
    assert site_ext._text(note) == latex


def test_a_note_after_two_spaces_before_a_parenthesis_is_text():
    row = site_ext._equation_line("sequence:  log r_i  = sum_t m_it log w_it  (no 1/|y_i|)")
    assert row == r"\text{sequence}\quad \log r_{i} &= \sum_{t} m_{it} \log w_{it} && \text{(no $1/|y_{i}|$)}"


def test_a_display_row_types_its_label_and_note_as_text_and_code():
    """A bare ``_`` in text mode is a MathJax error; textmacros reads ``\\_`` inside ``\\text``."""
    row = site_ext._equation_line('"sequence_mean": 1/B sum_i 1/|o_i| sum_t L_it    GRPO paper; TRL loss_type="grpo"')
    label, _, rest = row.partition(r"\quad ")
    equation, _, note = rest.partition(" && ")
    assert label == r'\text{\texttt{"sequence\_mean"}}'
    assert equation == r"&1/B \sum_{i} 1/|o_{i}| \sum_{t} L_{it}"
    assert note == r'\text{GRPO paper; TRL \texttt{loss\_type="grpo"}}'


def _mini_build(tmp_path: Path, body: str, page: str = "index.rst") -> tuple[int, str]:
    """A one-page Sphinx project with the site's extension; (exit status, warnings). Built in a
    process of its own: an earlier build in this process (the site's, with myst-nb) leaves
    Sphinx's parser registry pointing Markdown at myst-nb, which this project does not load."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(
        textwrap.dedent(f"""
        import sys
        sys.path[:0] = [{str(SITE)!r}, {str(ROOT)!r}]
        extensions = ["myst_parser", "sphinx.ext.autodoc", "site_ext"]
        nitpicky = True
        autodoc_typehints = "none"
        """)
    )
    (src / page).write_text(body)
    warnings = tmp_path / "warnings.txt"
    args = ["-q", "-W", "-b", "html", "-w", str(warnings), str(src), str(tmp_path / "out")]
    status = subprocess.run([sys.executable, "-m", "sphinx", *args], capture_output=True, text=True).returncode
    return status, warnings.read_text()


def test_a_code_name_that_resolves_is_a_link(tmp_path):
    status, warnings = _mini_build(
        tmp_path,
        "Page\n====\n\nSee ``Fn.group_advantages``.\n\n.. autofunction:: grpo_edu.functional.group_advantages\n",
    )
    assert status == 0, warnings
    html = (tmp_path / "out" / "index.html").read_text()
    assert 'href="#grpo_edu.functional.group_advantages"' in html


def test_a_name_that_exists_without_a_page_is_code_not_an_error(tmp_path):
    status, warnings = _mini_build(tmp_path, "Page\n====\n\nSee ``Fn.gae`` and ``grpo_edu.rollout``.\n")
    assert status == 0, warnings
    assert "href" not in (tmp_path / "out" / "index.html").read_text().split("See", 1)[1].split("</p>", 1)[0]


def test_a_broken_code_name_fails_the_build(tmp_path):
    body = "Page\n====\n\nSee ``Fn.no_such_function`` and ``notebooks/99_missing.ipynb``.\n"
    status, warnings = _mini_build(tmp_path, body)
    assert status != 0
    assert "grpo_edu.functional.no_such_function" in warnings
    assert "notebooks/99_missing" in warnings


# ------------------------------------------------------------------ the real site


@pytest.fixture(scope="module")
def site() -> Path:
    """The whole site, built by the documented command (warnings are errors)."""
    # in its own process: autodoc imports every module (grpo_edu.hf with TRL mocked when it is
    # absent), which must not leak into the modules the other tests import
    t0 = time.perf_counter()
    run = subprocess.run(
        [sys.executable, "-m", "course.site", "build"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, f"python -m course.site build failed:\n{run.stdout}\n{run.stderr}"
    print(f"site built in {time.perf_counter() - t0:.1f} s")
    return DEFAULT_OUT


def test_build_is_complete_and_offline(site):
    pages = {p.relative_to(site).as_posix() for p in site.rglob("*.html")}
    for stem in NOTEBOOKS:
        assert f"notebooks/{stem}.html" in pages
    for page in ["README.html", "course/README.html", "course/site/api/functional.html", "search.html"]:
        assert page in pages
    assert (site / "_static" / "mathjax" / "tex-chtml.js").is_file()
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        for attr in ('src="http', 'src="//', 'rel="stylesheet" href="http'):
            assert attr not in text, f"{page}: an external resource ({attr})"


def test_next_walks_the_syllabus(site):
    """From the site's index, "Next" leads to the start page, the syllabus, then each week's notebooks
    followed by the homework handed out that week (the syllabus's order, tests/test_syllabus.py),
    then the reference pages."""
    from test_syllabus import REFERENCE, START, SYLLABUS, course_order

    expected = [d.lstrip("/") for d in START + course_order(SYLLABUS.read_text())]
    expected += [f"course/site/{r}" for r in REFERENCE]
    root, page, walked = site.resolve(), site.resolve() / "course" / "site" / "index.html", []
    while len(walked) < len(expected):
        found = re.search(r'<a class="right-next"\s+href="([^"#]+)', page.read_text(encoding="utf-8"))
        if not found:
            break
        page = (page.parent / found.group(1)).resolve()
        walked.append(page.relative_to(root).as_posix().removesuffix(".html"))
    assert walked == expected


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class _Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):  # a page left mid-load
            super().handle_error(request, client_address)


class CDP:
    """The few Chrome DevTools protocol calls the test needs, over one websocket."""

    def __init__(self, ws_url: str):
        import websocket  # websocket-client, in the [docs] extra

        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict] = []

    def send(self, method: str, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_event(self, method: str, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        for k, ev in enumerate(self.events):
            if ev.get("method") == method:
                return self.events.pop(k)
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            if msg.get("method") == method:
                return msg
            self.events.append(msg)
        raise TimeoutError(method)

    def eval(self, expression: str, timeout: float = 20.0):
        res = self.send(
            "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True, timeout=timeout * 1000
        )
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression[:80]}...: {res['exceptionDetails']}")
        return res["result"].get("value")

    def goto(self, url: str) -> None:
        self.send("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired")


@pytest.fixture(scope="module")
def browser(site, tmp_path_factory):
    if not CHROMIUM.exists():
        pytest.skip("no /usr/bin/chromium: apt-get install chromium (see .ci/run)")
    pytest.importorskip("websocket", reason='websocket-client drives Chromium: pip install -e ".[docs]"')
    server = _Server(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    profile = tmp_path_factory.mktemp("chromium-profile")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"]
    flags += ["--disable-background-networking", "--disable-component-update", "--disable-sync"]
    flags += ["--disable-default-apps", "--disable-extensions", "--no-default-browser-check", "--mute-audio"]
    flags += [f"--user-data-dir={profile}", "--remote-debugging-port=0", "--remote-allow-origins=*"]
    flags += ["--window-size=1280,900", "about:blank"]
    proc = subprocess.Popen([str(CHROMIUM), *flags], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()) and time.monotonic() < deadline:
            assert proc.poll() is None, "chromium exited at start"
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            page = next(t for t in json.load(r) if t["type"] == "page")
        cdp = CDP(page["webSocketDebuggerUrl"])
        cdp.send("Page.enable")
        cdp.send("Network.enable")
        cdp.send("Emulation.setDeviceMetricsOverride", width=1280, height=900, deviceScaleFactor=1, mobile=False)
        yield cdp, base
        cdp.ws.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        server.shutdown()
        shutil.rmtree(profile, ignore_errors=True)


# every image loaded once lazy ones are asked for; MathJax finished (its startup promise)
_SETTLE = """(async () => {
  const imgs = [...document.images];
  imgs.forEach(i => { i.loading = 'eager'; });
  await Promise.all(imgs.map(i => i.complete ? null : new Promise(r => { i.onload = i.onerror = r; setTimeout(r, 10000); })));
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  const article = document.querySelector('article') || document.body;
  const prose = article.cloneNode(true);
  prose.querySelectorAll('pre, code, script, style, mjx-container').forEach(e => e.remove());
  return {
    broken_images: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src')),
    n_images: imgs.length,
    math: document.querySelectorAll('.math').length,
    untypeset: [...document.querySelectorAll('.math')].filter(e => !e.querySelector('mjx-container'))
                 .map(e => e.textContent.slice(0, 60)),
    typeset: document.querySelectorAll('mjx-container').length,
    raw_dollars: prose.textContent.includes('$$'),
    // what MathJax typeset, as text (its MathML): a backslash there is TeX that was not read
    raw_tex: [...document.querySelectorAll('mjx-container')]
               .map(m => (m.querySelector('mjx-assistive-mml') || m).textContent)
               .filter(t => t.includes(String.fromCharCode(92))).map(t => t.slice(0, 80)),
    math_errors: [...document.querySelectorAll('mjx-container')].filter(m => m.querySelector('merror, mjx-merror'))
                   .map(m => m.querySelector('merror, mjx-merror').textContent.slice(0, 80)),
  };
})()"""


def _pages(site: Path) -> list[str]:
    """Every page of the build (the top-level index.html is a small page that links to the start page)."""
    pages = (p.relative_to(site).as_posix() for p in site.rglob("*.html"))
    return sorted(p for p in pages if not p.startswith(("_static/", "_sources/", "_images/")))


def test_every_page_reads_in_a_browser(site, browser):
    cdp, base = browser
    pages = _pages(site)
    assert len(pages) >= len(NOTEBOOKS) + 8
    problems, typeset = [], {}
    for page in pages:
        cdp.events.clear()
        cdp.goto(base + page)
        state = cdp.eval(_SETTLE, timeout=30)
        typeset[page] = state["typeset"]
        if state["broken_images"]:
            problems.append(f"{page}: images not loaded: {state['broken_images']}")
        if state["untypeset"]:
            problems.append(f"{page}: math not typeset: {state['untypeset'][:3]}")
        if state["raw_dollars"]:
            problems.append(f"{page}: a raw $$ in the text")
        if state["raw_tex"]:
            problems.append(f"{page}: a backslash left in typeset math: {state['raw_tex'][:3]}")
        if state["math_errors"]:
            problems.append(f"{page}: MathJax could not typeset: {state['math_errors'][:3]}")
        for ev in cdp.events:
            if ev.get("method") == "Network.requestWillBeSent":
                url = ev["params"]["request"]["url"]
                if not url.startswith((base, "data:", "blob:", "about:")):
                    problems.append(f"{page}: a request left the machine: {url}")
            if ev.get("method") == "Network.responseReceived":
                resp = ev["params"]["response"]
                if resp["status"] >= 400 and not resp["url"].endswith("favicon.ico"):
                    problems.append(f"{page}: {resp['status']} for {resp['url']}")
    assert not problems, "\n".join(problems)
    # math where the course writes math: the notebooks, and the functional core's docstrings
    assert typeset["course/site/api/functional.html"] >= 20, typeset
    for stem in ["01_reinforce", "03_ppo", "04_grpo"]:
        assert typeset[f"notebooks/{stem}.html"] >= 10, typeset


def test_the_top_of_the_build_is_a_page_that_links_to_the_course(site, browser):
    """No redirect (a meta refresh kept a headless screenshot from finishing): a page that loads
    within its time budget, and whose links lead to the start page and the rest of the course."""
    cdp, base = browser
    cdp.send("Page.navigate", url=base)
    cdp.wait_event("Page.loadEventFired", timeout=10)
    state = cdp.eval(
        "({path: location.pathname, refresh: !!document.querySelector('meta[http-equiv=refresh]'),"
        " links: [...document.links].map(a => a.getAttribute('href'))})"
    )
    assert state["path"] == "/" and not state["refresh"], state
    assert state["links"][0] == "course/site/index.html", state
    for href in state["links"]:
        assert (site / href).is_file(), href
    # and a plain headless screenshot of it ends, within a budget, with a picture
    png = site.parent / "screenshots" / "root.png"
    png.parent.mkdir(exist_ok=True)
    png.unlink(missing_ok=True)
    profile = site.parent / "chromium-root-profile"
    run = subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}", "--timeout=10000"]
        + ["--window-size=1280,900", f"--screenshot={png}", base],
        capture_output=True,
        timeout=60,
    )
    shutil.rmtree(profile, ignore_errors=True)
    assert run.returncode == 0 and png.stat().st_size > 5_000, run.stderr[-2000:]


def test_navigation_lists_the_notebooks_in_course_order(site, browser):
    cdp, base = browser
    cdp.goto(base + "course/site/index.html")
    hrefs = cdp.eval(
        "[...document.querySelectorAll('nav.bd-docs-nav a.reference.internal')].map(a => a.href)", timeout=10
    )
    order = [h.rsplit("/", 1)[-1].removesuffix(".html") for h in hrefs if "/notebooks/" in h]
    assert order == NOTEBOOKS
    # the README's entry is named by conf.py's site_nav_titles, not by its heading (once "grpo-edu")
    first = cdp.eval("document.querySelector('nav.bd-docs-nav a.reference.internal').textContent.trim()")
    assert first == "Start here", first
    assert hrefs[0].endswith("/README.html"), hrefs[:2]
    assert NOTEBOOKS[:10] == [
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
    ]


WIDTHS = [1280, 1920]  # common desktop widths: a laptop and a full-HD screen
# A figure's text must be readable as shown: the notebooks draw at 100 dpi with 10-pt text
# (grpo_edu/figures/plotstyle.py), 10 / 72 * 100 = 13.9 px in the image; shown at >= 0.65 of its
# natural width, that text is >= 9 px on the screen.
FIGURE_SCALE_MIN = 0.65

_LAYOUT = """(() => {
  const article = document.querySelector('article.bd-article') || document.body;
  const visible = e => e.getClientRects().length > 0;
  const text = e => (e.querySelector('mjx-assistive-mml') || e).textContent.trim().replace(/\\s+/g, ' ').slice(0, 60);
  return {
    column: article.clientWidth,
    page: document.documentElement.scrollWidth - document.documentElement.clientWidth,
    blocks: [...article.querySelectorAll('pre, div.highlight, div.cell_output, div.output')]
      .filter(e => visible(e) && e.scrollWidth > e.clientWidth + 1)
      .map(e => `${e.scrollWidth} px in ${e.clientWidth} px: ${text(e)}`),
    figures: [...article.querySelectorAll('img')].filter(i => visible(i) && i.naturalWidth > 100)
      .map(i => [i.getBoundingClientRect().width, i.naturalWidth, (i.alt || i.getAttribute('src')).slice(0, 50)])
      .filter(([shown, natural]) => shown < FIGURE_SCALE_MIN * natural)
      .map(([shown, natural, name]) => `${natural} px shown at ${Math.round(shown)} px: ${name}`),
    displays: [...article.querySelectorAll('mjx-container[display="true"]')].filter(visible)
      .map(m => [m.querySelector('mjx-math').getBoundingClientRect().width, m.clientWidth, text(m)])
      .filter(([wide, room]) => wide > room + 1)
      .map(([wide, room, t]) => `${Math.round(wide)} px in ${room} px: ${t}`),
  };
})()""".replace("FIGURE_SCALE_MIN", str(FIGURE_SCALE_MIN))


def _viewport(cdp: CDP, width: int) -> None:
    cdp.send("Emulation.setDeviceMetricsOverride", width=width, height=900, deviceScaleFactor=1, mobile=False)


@pytest.mark.parametrize("width", WIDTHS)
def test_every_printed_number_and_figure_fits_its_column(site, browser, width):
    """At 1280 and 1920 px, on every page: no code or output block wider than its column (a
    long line wraps instead of hiding its end behind a sideways scroll), no display wider than
    its column, no page that scrolls sideways, every figure shown at >= FIGURE_SCALE_MIN."""
    cdp, base = browser
    _viewport(cdp, width)
    problems, columns = [], {}
    try:
        for page in _pages(site):
            cdp.goto(base + page)
            cdp.eval(_SETTLE, timeout=30)
            state = cdp.eval(_LAYOUT, timeout=20)
            columns[page] = state["column"]
            problems += [f"{page}: a block scrolls sideways, {b}" for b in state["blocks"]]
            problems += [f"{page}: a display is wider than its column, {d}" for d in state["displays"]]
            problems += [f"{page}: a figure is too small to read, {f}" for f in state["figures"]]
            if state["page"] > 1:
                problems.append(f"{page}: the page scrolls sideways by {state['page']} px")
    finally:
        _viewport(cdp, 1280)
    assert not problems, "\n".join(problems)
    # the article is the page's widest part: at 1280 px a 1560 px figure still fits the rule
    assert columns["notebooks/04_grpo.html"] >= {1280: 1015, 1920: 1200}[width], columns["notebooks/04_grpo.html"]


@pytest.mark.parametrize("width", WIDTHS)
def test_one_search_box_and_the_page_contents_at_hand(site, browser, width):
    """One search field (the sidebar's); the page's contents beside the article at 1920 px and,
    at 1280 px where the article needs the room, behind the article header's list button."""
    cdp, base = browser
    _viewport(cdp, width)
    try:
        cdp.goto(base + "notebooks/04_grpo_3_variants.html")
        visible = "(e => !!e && e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden')"
        state = cdp.eval(f"""(() => {{ const vis = {visible};
          return {{search: [...document.querySelectorAll('.search-button__button, form.bd-search')].filter(vis).length,
                  aside: vis(document.querySelector('#pst-secondary-sidebar')),
                  toggle: vis(document.querySelector('.bd-header-article button.secondary-toggle'))}}; }})()""")
        assert state["search"] == 1, state
        if width >= 1600:
            assert state["aside"], state
            return
        assert not state["aside"] and state["toggle"], state
        links = cdp.eval(f"""(async () => {{ const vis = {visible};
          document.querySelector('.bd-header-article button.secondary-toggle').click();
          await new Promise(r => setTimeout(r, 300));
          const dialog = document.querySelector('#pst-secondary-sidebar-modal');
          if (!dialog || !dialog.open) return null;
          return [...dialog.querySelectorAll('nav.page-toc a')].filter(vis)
                   .filter(a => a.getBoundingClientRect().right <= innerWidth).length; }})()""")
        assert links and links >= 10, links  # 04's third part has a dozen sections and more
    finally:
        _viewport(cdp, 1280)


def test_search_finds_group_advantages(site, browser):
    cdp, base = browser
    cdp.goto(base + "search.html?q=group_advantages")
    found = cdp.eval(
        """new Promise(resolve => {
          const t0 = Date.now();
          const poll = () => {
            const links = [...document.querySelectorAll('#search-results a')].map(a => a.getAttribute('href'));
            const summary = document.querySelector('#search-results .search-summary');
            const done = summary && /found|did not match/i.test(summary.textContent);
            if (done || Date.now() - t0 > 15000) resolve(links); else setTimeout(poll, 100);
          };
          poll();
        })""",
        timeout=20,
    )
    assert any("api/functional.html" in h and "group_advantages" in h for h in found), found
    assert any(h.startswith("notebooks/04_grpo.html") for h in found), found


SCREENSHOTS = ["notebooks/04_grpo.html", "notebooks/07_where_each_idea_pays.html", "course/site/api/functional.html"]


@pytest.mark.parametrize("width", WIDTHS)
def test_screenshots(site, browser, width):
    """The CI artifacts: notebooks 04 and 07 and the functional core's API page as a reader
    sees them at 1280 and 1920 px (first screen, then the first figure with the text around
    it): a look, not a pixel test."""
    cdp, base = browser
    folder = site.parent / "screenshots"
    folder.mkdir(exist_ok=True)
    _viewport(cdp, width)
    shots = []
    try:
        for page in SCREENSHOTS:
            cdp.goto(base + page)
            cdp.eval(_SETTLE, timeout=30)
            stem = f"{Path(page).stem}_{width}"
            shots.append(folder / f"{stem}.png")
            shots[-1].write_bytes(base64.b64decode(cdp.send("Page.captureScreenshot", format="png")["data"]))
            if cdp.eval(
                "(() => { const i = document.querySelector('.cell_output img'); if (!i) return false; "
                "i.scrollIntoView({block: 'center'}); return true; })()"
            ):
                time.sleep(0.3)
                shots.append(folder / f"{stem}_figure.png")
                shots[-1].write_bytes(base64.b64decode(cdp.send("Page.captureScreenshot", format="png")["data"]))
    finally:
        _viewport(cdp, 1280)
    assert len(shots) == 5  # two notebooks with figures, an API page without
    for png in shots:
        assert png.stat().st_size > 20_000, png  # a blank page is a few kB


def test_a_tagged_display_with_line_breaks_is_not_wrapped_in_split(tmp_path):
    """Sphinx wraps a display holding ``\\\\`` in ``split``, where MathJax refuses ``\\tag``."""
    body = "Page\n====\n\n.. math::\n\n   a &= b \\\\\n   c &= d \\tag{1}\n\n.. math::\n\n   e &= f \\\\\n   g &= h\n"
    status, warnings = _mini_build(tmp_path, body)
    assert status == 0, warnings
    html = (tmp_path / "out" / "index.html").read_text()
    tagged, untagged = re.findall(r'<div class="math[^"]*">(.*?)</div>', html, re.S)
    assert tagged.strip().startswith(r"\[a &amp;= b") and r"\tag{1}\]" in tagged and "split" not in tagged
    assert r"\begin{split}" in untagged  # without a tag Sphinx's wrapping stays


def test_a_markdown_link_to_a_missing_notebook_fails_the_build(tmp_path):
    status, warnings = _mini_build(tmp_path, "# Page\n\nAs [notebook 09](09_missing.ipynb) shows.\n", page="index.md")
    assert status != 0
    assert "09_missing.ipynb" in warnings
