"""Why each op sits where it does, for runs and predictions: the ``how`` and ``reason`` columns.

:mod:`.rules` says each placer rule once; :class:`~.run.Explainer` picks the rule for the ops of
a run, and a prediction's reasons (``_analyses/predict/reasons.py``) for the simulated placer's.
"""

from .rules import HOW_VALUES
from .run import Explainer

__all__ = ["HOW_VALUES", "Explainer"]
