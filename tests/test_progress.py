"""The course's progress bars leave their last state in an executed notebook (grpo_edu.progress.progress_bar).

tqdm.auto's widget saved only its first text ("0%| | 0/4") in a notebook executed by nbconvert and
committed; the text bar shown with a display id is saved as it ended. Control: tqdm.auto's bar, in
the same notebook, is saved at 0%."""

import io

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")


def _run(cells: list[str]) -> list[list[dict]]:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    return [c["outputs"] for c in nb.cells]


def _text(outputs: list[dict]) -> str:
    return "".join(o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in outputs)


def test_an_executed_notebook_keeps_each_bar_at_its_end():
    bar, bars, auto = _run(
        [
            "from grpo_edu.progress import progress_bar as tqdm\nfor _ in tqdm(range(4), desc='long run'): pass\nprint('after')",
            "b = tqdm(total=3, desc='reward models', leave=False)\n"
            "for _ in range(3):\n    b.set_postfix(acc=0.5)\n    b.update(1)\nb.close()",
            "from tqdm.auto import tqdm as auto\nfor _ in auto(range(4), desc='widget'): pass",
        ]
    )
    assert _text(bar).startswith("long run: 100%|") and "4/4" in _text(bar) and _text(bar).endswith("after\n")
    assert all(o["output_type"] != "stream" or o["name"] == "stdout" for o in bar + bars)  # nothing on stderr
    assert _text(bars).startswith("reward models: 100%|") and "3/3" in _text(bars) and "acc=0.5" in _text(bars)
    # the control: tqdm.auto's widget (with ipywidgets installed, as jupyter installs it) is saved at 0%
    pytest.importorskip("ipywidgets")
    assert _text(auto).startswith("widget:   0%|") and "100%" not in _text(auto)


class _Stream(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self):
        return self.tty


def test_in_a_terminal_it_is_tqdm_text_bar():
    from tqdm.std import tqdm as std

    from grpo_edu.progress import progress_bar as tqdm

    out = _Stream(tty=True)
    bar = tqdm(range(2), desc="x", mininterval=0, file=out)
    assert type(bar) is std and not bar.leave  # leave=False: a terminal's bar is cleared at the end
    list(bar)
    assert "x: 100%" in out.getvalue() and out.getvalue().endswith("\r")  # redrawn in place


def test_in_a_log_it_writes_whole_lines_not_frames(monkeypatch):
    """`grpo-edu compare > log 2>&1`: no carriage return, a line per update at most every LOG_SECONDS
    (a few lines, not one per step), and the bar's last state at the end; a terminal's bar, the
    control, writes a frame per update on one line."""
    import grpo_edu.progress as P

    out, tty = _Stream(tty=False), _Stream(tty=True)
    for stream in (out, tty):
        bar = P.progress_bar(total=200, desc="grpo", file=stream, mininterval=0 if stream is tty else 0.05)
        for _ in range(200):
            bar.update(1)
            bar.set_postfix(acc="0.500", refresh=False)
        bar.close()
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue() and out.getvalue().endswith("\n")
    assert 1 <= len(lines) < 20 and lines[-1].startswith("grpo: 100%") and "200/200" in lines[-1]
    assert all(line.startswith("grpo:") and "  0%" not in line for line in lines)  # no empty 0% line
    assert tty.getvalue().count("\r") >= 200 and tty.getvalue().count("\n") == 0  # the control: frames, one line
    assert P.LOG_SECONDS >= 10  # a long job's log gets a line every LOG_SECONDS, not every step
    monkeypatch.setattr(P, "_in_kernel", lambda: False)
    quiet = _Stream(tty=False)
    list(P.progress_bar(range(5), desc="q", disable=True, file=quiet))
    assert quiet.getvalue() == ""  # --quiet: nothing at all
