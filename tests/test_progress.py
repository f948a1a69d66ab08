"""The course's progress bars leave their last state in an executed notebook (grpo_edu.train.progress_bar).

tqdm.auto's widget saved only its first text ("0%| | 0/4") in a notebook executed by nbconvert and
committed; the text bar shown with a display id is saved as it ended. Control: tqdm.auto's bar, in
the same notebook, is saved at 0%."""

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
            "from grpo_edu.train import progress_bar as tqdm\nfor _ in tqdm(range(4), desc='long run'): pass\nprint('after')",
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


def test_in_a_terminal_it_is_tqdm_text_bar(capsys):
    from tqdm.std import tqdm as std

    from grpo_edu.train import progress_bar as tqdm

    bar = tqdm(range(2), desc="x", mininterval=0)
    assert type(bar) is std and not bar.leave  # leave=False: a terminal's bar is cleared at the end
    list(bar)
    err = capsys.readouterr().err
    assert "x: 100%" in err and err.endswith("\r")
