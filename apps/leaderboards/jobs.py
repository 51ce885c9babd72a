"""Background work for leaderboards (functions of ids, safe to run twice)."""

from typing import Any

from apps.leaderboards import items, summaries
from apps.runs.models import Run
from evalsite.enqueue import enqueue


def on_run_finished(sender: Any, run: Run, **kwargs: Any) -> None:
    """`run_finished`: build a judge run's board summary in the worker, so the first board view
    after the run finished is fast."""
    if run.kind == Run.Kind.JUDGE:
        enqueue(
            refresh_summary,
            run.pk,
            queue="default",
            job_id=f"board-summary-{run.pk}-l{run.launch}",
            timeout=1800,
        )


def refresh_summary(run_id: int) -> None:
    """Build a judge run's board summary and its per-item arrays now. Boards also rebuild
    stale ones themselves, so this is an optimisation, never a requirement."""
    run = Run.objects.filter(pk=run_id, kind=Run.Kind.JUDGE).first()
    if run is not None:
        summaries.compute(run)
        # Stored for the grid and regressions: a fresh web process reads them, not the scores.
        items.judge_arrays(run)
