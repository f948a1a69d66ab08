"""The course's progress bar, one for every loop of grpo_edu that takes a while (the ladder's and the lab's).

    for _ in progress_bar(range(n), desc="fit critic", disable=not progress): ...

Where the text goes decides how it is drawn:

- a terminal: tqdm's text bar, redrawn in place (``leave`` as asked);
- a Jupyter kernel: the same text as a display updated in place and kept at its end. ``tqdm.auto``
  draws a widget instead, whose progress lives in the widget's state, not in the cell's output: a
  notebook executed by nbconvert (or nbval) and committed keeps only the text the widget started
  with, ``0%| | 0/4``;
- anything else (a file, a pipe: ``grpo-edu compare > log 2>&1``): one plain line per update, at most
  one every `LOG_SECONDS`, and the bar's last state when it closes; no carriage returns, so the log
  reads line by line (a terminal's redraws would make one line of every frame).
"""

from __future__ import annotations

import sys

LOG_SECONDS = 30.0  # a bar writing to a file or a pipe writes a line at most this often (and one at its end)


def progress_bar(iterable=None, *, desc=None, total=None, disable=False, leave=False, **kwargs):
    """A tqdm bar drawn for where it writes: a terminal, a Jupyter kernel, or a log (see above)."""
    from tqdm.std import tqdm

    if _in_kernel():
        return _kernel_bar(tqdm)(iterable, desc=desc, total=total, disable=disable, leave=True, file=_Discard(),
                                 **{"ascii": False, **kwargs})  # fmt: skip
    stream = kwargs.pop("file", None) or sys.stderr
    if _is_terminal(stream):
        return tqdm(iterable, desc=desc, total=total, disable=disable, leave=leave, file=stream, **kwargs)
    kwargs.setdefault("mininterval", LOG_SECONDS)
    return _log_bar(tqdm)(iterable, desc=desc, total=total, disable=disable, leave=True, file=_Lines(stream),
                          **kwargs)  # fmt: skip


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class _Discard:
    """A stream that keeps nothing: the kernel bar's own writes (a clear, a newline at close)."""

    def write(self, s):
        return len(s)

    def flush(self):
        pass


class _Lines:
    """A stream for the log bar: it passes whole lines and drops tqdm's clears and bare newlines."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, s):
        if s.strip():
            self.stream.write(s)
        return len(s)

    def flush(self):
        self.stream.flush()


def _kernel_bar(tqdm):
    class TextBarInKernel(tqdm):
        def display(self, msg=None, pos=None):
            from IPython.display import display

            data = {"text/plain": self.__str__() if msg is None else msg}
            if getattr(self, "_handle", None) is None:
                self._handle = display(data, raw=True, display_id=True)
            else:
                self._handle.update(data, raw=True)
            return True

    return TextBarInKernel


def _log_bar(tqdm):
    class LineBar(tqdm):
        def display(self, msg=None, pos=None):
            line = self.__str__() if msg is None else msg
            if self.n and line.strip() and line != getattr(self, "_last_line", None):  # not the 0% line
                self.fp.write(line.rstrip() + "\n")
                self.fp.flush()
                self._last_line = line
            return True

    return LineBar


def _in_kernel() -> bool:
    """True inside a Jupyter kernel (a notebook open in a frontend, or executed by nbconvert)."""
    if "IPython" not in sys.modules:  # a kernel has imported it; a script need not pay for it
        return False
    from IPython import get_ipython

    shell = get_ipython()
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})
