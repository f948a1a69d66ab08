"""The lab: the figures (they draw numbers computed elsewhere, in the ladder or in `grpo_edu.measure`).

    plots.py          the figures of measurements the notebooks show (and every concept figure)
    concept_plots.py  the figures of equations: clipping, the KL estimators, group advantages
    plotstyle.py      the course's style, colours, alt text and saving
    credit.py         the critic's value per token by position (notebook 08 part 2)
    silent_bugs.py    each silent bug's signature beside the healthy run (notebook 11)

`plots` re-exports every concept figure, so each figure of plots.py and concept_plots.py is
`grpo_edu.figures.plots.<name>`; the regimes draw their own (`grpo_edu.studies.regimes`, one module each).
"""
