"""Background work for leaderboards (functions of ids, safe to run twice)."""

from apps.leaderboards import summaries
from apps.runs.models import Run


def refresh_summary(run_id: int) -> None:
    """Build a judge run's board summary now, so the first board view after the run finished
    does not pay for it. The judging engine may enqueue this when a run ends; boards also
    rebuild stale summaries themselves, so it is an optimisation, never a requirement."""
    run = Run.objects.filter(pk=run_id, kind=Run.Kind.JUDGE).first()
    if run is not None:
        summaries.compute(run)
