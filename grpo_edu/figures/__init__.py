"""The lab: the figures (they draw numbers computed elsewhere, in the ladder or in `grpo_edu.measure`).

    plots.py          the figures of measurements the notebooks show (and every concept figure)
    concept_plots.py  the figures of equations: clipping, the KL estimators, group advantages
    plotstyle.py      the course's style, colours, alt text and saving

`plots` re-exports every concept figure, so each figure is `grpo_edu.figures.plots.<name>`.
"""
