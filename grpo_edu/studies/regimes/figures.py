"""What the regimes' figures share, in the course's style (grpo_edu.figures.plotstyle): each regime
module draws its own figure (its ``figure(res)``, from the numbers its runner returned) and the
table in ``__init__.py`` names it; this file holds only the pieces they have in common."""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

PERCENT = PercentFormatter(xmax=1.0, decimals=0)


def new_figure(size=(7.5, 4.2)):
    """``(figure, axes)``: one plot, laid out by matplotlib's constrained layout."""
    fig = Figure(figsize=size, layout="constrained")
    return fig, fig.subplots()
