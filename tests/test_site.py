"""The course website (course/site): built offline with warnings as errors, then read in a real browser.

The site is built once (``python -m course.site build``, the documented command) and every
page is opened in headless Chromium, driven over the Chrome DevTools protocol, from a server
on 127.0.0.1 (the search page needs http, not file://). On every page: math is typeset by
the local MathJax (every ``.math`` element holds MathJax output, no raw ``$$`` is left),
every image has loaded, and no request went anywhere but 127.0.0.1. The navigation lists the
notebooks in course order, and the search page finds ``group_advantages``. A screenshot of
a notebook page is kept under the build folder (a CI artifact).

Skips, with the reason, without the ``[docs]`` extra or without /usr/bin/chromium.
"""

from __future__ import annotations

import base64
import functools
import http.server
import json
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


def _mini_build(tmp_path: Path, body: str, page: str = "index.rst") -> tuple[int, str]:
    """A one-page Sphinx project with the site's extension; (exit status, warnings)."""
    from sphinx.cmd.build import build_main

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
    status = build_main(["-q", "-W", "-b", "html", "-w", str(warnings), str(src), str(tmp_path / "out")])
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
  };
})()"""


def _pages(site: Path) -> list[str]:
    """Every page but the top-level redirect to course/site/index.html."""
    pages = (p.relative_to(site).as_posix() for p in site.rglob("*.html"))
    return sorted(p for p in pages if not p.startswith(("_static/", "_sources/", "_images/")) and p != "index.html")


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


def test_navigation_lists_the_notebooks_in_course_order(site, browser):
    cdp, base = browser
    cdp.goto(base)  # the top of the build redirects to the start page: a second load
    cdp.wait_event("Page.loadEventFired", timeout=15)
    assert cdp.eval("location.pathname") == "/course/site/index.html"
    cdp.goto(base + "course/site/index.html")
    hrefs = cdp.eval(
        "[...document.querySelectorAll('nav.bd-docs-nav a.reference.internal')].map(a => a.href)", timeout=10
    )
    order = [h.rsplit("/", 1)[-1].removesuffix(".html") for h in hrefs if "/notebooks/" in h]
    assert order == NOTEBOOKS
    assert NOTEBOOKS[:7] == [
        "00_arithmetic_world",
        "01_reinforce",
        "02_baseline",
        "03_ppo",
        "04_grpo",
        "05_side_by_side",
        "06_graduate_to_trl",
    ]


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


def test_screenshot_of_a_notebook_page(site, browser):
    """The CI artifact: notebook 04 as a reader sees it, first screen (a look, not a pixel test)."""
    cdp, base = browser
    cdp.goto(base + "notebooks/04_grpo.html")
    cdp.eval(_SETTLE, timeout=30)
    folder = site.parent / "screenshots"
    folder.mkdir(exist_ok=True)
    top = folder / "04_grpo.png"
    top.write_bytes(base64.b64decode(cdp.send("Page.captureScreenshot", format="png")["data"]))
    # then the first figure with the text around it (a notebook output, with math nearby)
    assert cdp.eval(
        "(() => { const i = document.querySelector('.cell_output img'); if (!i) return false; "
        "i.scrollIntoView({block: 'center'}); return true; })()"
    )
    time.sleep(0.3)
    figure = folder / "04_grpo_figure.png"
    figure.write_bytes(base64.b64decode(cdp.send("Page.captureScreenshot", format="png")["data"]))
    for png in (top, figure):
        assert png.stat().st_size > 20_000  # a blank page is a few kB


def test_a_markdown_link_to_a_missing_notebook_fails_the_build(tmp_path):
    status, warnings = _mini_build(tmp_path, "# Page\n\nAs [notebook 09](09_missing.ipynb) shows.\n", page="index.md")
    assert status != 0
    assert "09_missing.ipynb" in warnings
