"""The end of a run's launch: cancel, fail, and settle it with exact counts once no chunk is
left (`finalize`); a completed run tells later apps (`run_finished`)."""

import contextlib
import logging

from apps.runs.engine.contract import RunExecutor, executor_for
from apps.runs.engine.polls import poll_batches_in
from apps.runs.engine.redis_keys import (
    LIVE_KEY,
    again_key,
    jobs_key,
    live_field,
    live_jobs,
    redis_connection,
    seq_key,
    stop_key,
    todo_key,
)
from apps.runs.engine.tuning import KEY_TTL
from apps.runs.models import Run
from apps.runs.signals import run_finished

logger = logging.getLogger(__name__)


def cancel(run: Run) -> None:
    """Stop asking the endpoint within seconds; what is answered stays, resume does the rest."""
    run.request_cancel()
    if run.batch:
        # The next poll cancels the batches at the provider, writes what they answered by
        # then, and ends the run cancelled (a run not sent yet was cancelled above; the poll
        # still cancels batches it took over from an earlier launch).
        poll_batches_in(run.pk, run.launch, 0)
        run.refresh_from_db()
        return
    conn = redis_connection()
    conn.set(stop_key(run.pk), "cancel", ex=KEY_TTL)
    conn.delete(todo_key(run.pk, run.launch), again_key(run.pk, run.launch))
    run.refresh_from_db()
    if run.status == Run.Status.RUNNING and live_jobs(run.pk, run.launch) == 0:
        finalize(run.pk, run.launch)
    run.refresh_from_db()


def stop_itself(run: Run, reason: str) -> bool:
    """End the run like a cancel, for `reason` (`Run.stop_by_itself`), from any process: its
    chunks stop within a second and take no more work; in batch mode the next poll cancels
    the batches. False when it was not going or already stopping. For rules of later apps
    that watch a run's results (`results_written`)."""
    if not run.stop_by_itself(reason):
        return False
    if run.batch:
        return True  # the poll that sees cancel_requested cancels the batches and settles
    conn = redis_connection()
    conn.set(stop_key(run.pk), "stopped", ex=KEY_TTL)
    conn.delete(todo_key(run.pk, run.launch), again_key(run.pk, run.launch))
    if run.status == Run.Status.RUNNING and live_jobs(run.pk, run.launch) == 0:
        finalize(run.pk, run.launch)
    run.refresh_from_db()
    return True


def fail(run_id: int, message: str) -> None:
    """The run itself broke: every chunk stops at its next check."""
    with contextlib.suppress(Exception):
        redis_connection().set(stop_key(run_id), "failed", ex=KEY_TTL)
    run = Run.objects.filter(pk=run_id).first()
    if run is not None:
        run.mark_failed(message)


def finalize(run_id: int, launch: int) -> None:
    """Settle the run once no chunk of `launch` is left: exact counts and the final status."""
    run = Run.objects.select_related("endpoint").get(pk=run_id)
    if run.launch != launch:
        return  # a newer launch owns the run now
    settle(run, executor_for(run))
    with contextlib.suppress(Exception):
        conn = redis_connection()
        conn.delete(
            todo_key(run_id, launch),
            jobs_key(run_id, launch),
            again_key(run_id, launch),
            seq_key(run_id, launch),
        )
        conn.hdel(LIVE_KEY, live_field(run_id, launch))


def settle(run: Run, plugin: RunExecutor) -> None:
    done, failed = plugin.settled_counts(run, run.mode)
    if not run.is_active:
        Run.objects.filter(pk=run.pk).update(done=done, failed=failed)
        run.refresh_from_db()
        return
    if run.cancel_requested:
        run.finish(Run.Status.CANCELLED, done=done, failed=failed)
        return
    if plugin.pending_count(run, run.mode) > 0:
        Run.objects.filter(pk=run.pk).update(done=done, failed=failed)
        run.mark_interrupted()
        run.refresh_from_db()
        return
    status = Run.Status.COMPLETED_WITH_FAILURES if failed else Run.Status.COMPLETED
    if run.finish(status, done=done, failed=failed):
        # Later apps react (auto-judging, leaderboard summaries); a receiver that breaks is
        # logged and never fails the run, whose work is done.
        for receiver, error in run_finished.send_robust(sender=Run, run=run):
            if isinstance(error, Exception):
                logger.error(
                    "run_finished receiver %s failed on run #%s: %r", receiver, run.pk, error
                )
