"""Sphinx configuration of the course website (built by ``python -m course.site build``).

The source directory is the repository root, so that README.md, course/README.md, the
homework handouts and notebooks/*.ipynb are rendered where they live and their relative
links resolve as they do on disk; this folder holds the configuration, the index and the
API reference pages. Everything is offline: MathJax comes from the sphinx-mathjax-offline
package (copied into _static/), the theme ships its own assets, and nothing is executed.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))  # grpo_edu and envs, also without an editable install
sys.path.insert(0, str(HERE))  # the local extensions beside this file

project = "grpo-edu"
author = "grpo-edu"
copyright = "grpo-edu authors"

root_doc = "course/site/index"
# Only the course's own files are pages; everything else in the repository is not a source.
include_patterns = [
    "README.md",
    "course/README.md",
    "course/hw*/README.md",
    "notebooks/[0-9][0-9]_*.ipynb",
    "course/site/*.md",
    "course/site/api/*.md",
]
exclude_patterns = ["**/_build", "**/.ipynb_checkpoints", ".venv", ".ci", ".git", "**/__pycache__"]

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # MathJax 3 from a PyPI package: no CDN at view time
    "site_ext",  # plain-text docstring equations -> math; code names -> checked links
]

# --- notebooks: rendered from their committed (nbval-checked) outputs, never executed
nb_execution_mode = "off"
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath"]
# text inside math (\text{...}) reads LaTeX's text-mode escapes: \_ is "_", not a backslash and "_"
mathjax3_config = {"loader": {"load": ["[tex]/textmacros"]}, "tex": {"packages": {"[+]": ["textmacros"]}}}
myst_heading_anchors = 3

# --- cross-references: a broken one is a warning, and -W makes it an error
nitpicky = True
# names of a previous version, named on purpose (course/site/changes.md, "What moved in the version before")
nitpick_ignore = [("py:obj", "grpo_edu.measure.run_bench"), ("py:obj", "grpo_edu.algorithms.base.Batch")]
nitpick_ignore_regex = [
    # types from other libraries: there is no offline inventory to link them to
    (r"py:.*", r"(torch|np|numpy|gym|gymnasium|matplotlib|plt|collections|typing|pathlib|datetime|tqdm)(\..*)?"),
    (r"py:.*", r"(Tensor|Path|Callable|Iterable|Iterator|Sequence|Mapping|Any|Generator|Figure|Axes)"),
    (r"py:.*", r"(optional|callable|default.*)"),
]

# --- API reference
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"undoc-members": False, "no-value": True}  # no 40-row tuple in a signature
default_role = "code"  # the docstrings write `name` for code, as Markdown does
autodoc_inherit_docstrings = False  # gymnasium's Env.step/reset docs are not this course's
autodoc_mock_imports = ["trl", "transformers", "datasets", "accelerate"]  # grpo_edu.hf without the [trl] extra
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# --- HTML
html_theme = "sphinx_book_theme"
html_title = "grpo-edu"
# the README's first entry in the navigation: its title is written for GitHub's front page
site_nav_titles = {"README": "Start here"}
html_extra_path = ["_extra"]  # index.html at the top of the build: a page that links to this index
html_static_path = ["_static"]
html_css_files = ["site.css"]  # the layout: every printed number and figure fits its column
# a display wider than its column is set smaller to fit; after the MathJax configuration (500)
html_js_files = [("site.js", {"priority": 501})]
html_theme_options = {
    "show_toc_level": 2,
    "use_download_button": True,
    "use_fullscreen_button": False,
    "use_repository_button": False,
    "use_issues_button": False,
    "use_edit_page_button": False,
    # one search box, the sidebar's: without this the theme adds a header bar holding a second one
    "navbar_persistent": [],
}
html_last_updated_fmt = None
html_copy_source = True
