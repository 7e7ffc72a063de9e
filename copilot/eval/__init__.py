"""AcademicEval-style evaluation: Thought-Retriever against retrieval and long-context baselines.

``python -m copilot.eval`` runs it (``--help`` lists the options); ``list_runs`` and
``self_evolution_points`` read stored runs back for the dashboard.
"""

from copilot.eval.runs import list_runs, record_run, self_evolution_points

__all__ = ["list_runs", "record_run", "self_evolution_points"]
