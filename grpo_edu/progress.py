"""The course's progress bars: tqdm's text bar, which a committed notebook keeps as it ended.

``tqdm.auto`` draws a Jupyter widget in a notebook. A widget's progress lives in the widget's
state, not in the cell's output: a notebook executed by ``jupyter nbconvert`` (or nbval) and
committed keeps only the text the widget was created with, ``0%| | 0/4``, frozen. Here, in a
Jupyter kernel, the bar is one line of text shown with a display id and updated in place: a
live frontend shows it moving, and the saved notebook holds its last state (``100%| 4/4
[02:10<00:00, 32.5s/it]``), kept after the loop (``leave`` is on in a kernel). In a terminal it
is tqdm's own bar on stderr, ``leave`` as the caller asks.
"""

from __future__ import annotations

from tqdm.std import tqdm as _std_tqdm

__all__ = ["tqdm", "in_kernel"]


def in_kernel() -> bool:
    """True inside a Jupyter kernel (a notebook open in a frontend, or executed by nbconvert)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


class _Discard:
    """Where the text bar's own writes go (a newline at close, a clear): nowhere."""

    def write(self, s: str) -> int:
        return len(s)

    def flush(self) -> None:
        pass


class TextBarInKernel(_std_tqdm):
    """tqdm's text bar as a display that is updated in place, so its last state is saved."""

    def __init__(self, *args, **kwargs):
        self._handle = None
        kwargs["file"] = _Discard()
        kwargs.setdefault("ascii", False)  # the block characters, as tqdm draws them on a UTF-8 terminal
        super().__init__(*args, **kwargs)

    def display(self, msg=None, pos=None):
        from IPython.display import display

        data = {"text/plain": self.__str__() if msg is None else msg}
        if self._handle is None:
            self._handle = display(data, raw=True, display_id=True)
        else:
            self._handle.update(data, raw=True)
        return True


def tqdm(iterable=None, *, desc: str | None = None, total=None, disable: bool = False, leave: bool = False, **kwargs):
    """A progress bar over ``iterable`` (or ``total`` steps): text in a terminal and in a notebook."""
    if in_kernel():
        return TextBarInKernel(iterable, desc=desc, total=total, disable=disable, leave=True, **kwargs)
    return _std_tqdm(iterable, desc=desc, total=total, disable=disable, leave=leave, **kwargs)
