"""The course as a static website (Sphinx + myst-nb), built offline: ``python -m course.site build``."""
