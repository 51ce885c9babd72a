"""Committing results: a kind's rows, the attempt logs and the run's counters in one
transaction (chunks and batch mode both write here)."""

import logging
from typing import Any

from django.db import transaction

from apps.runs.engine import cache
from apps.runs.engine.contract import Progress, Result, RunExecutor
from apps.runs.engine.llm import Attempt
from apps.runs.models import AttemptLog, LoggingMode, Run
from apps.runs.signals import results_written

logger = logging.getLogger(__name__)


# ---- writing results ----------------------------------------------------------------------------
def write_results(
    run: Run,
    plugin: RunExecutor,
    ctx: Any,
    results: list[Result],
    stray_attempts: list[Attempt] | None = None,
) -> Progress:
    """Commit `results` in one transaction: the plug-in's rows (exactly once), the attempt logs
    per the run's logging mode, and the run's counters. Chunks and batch mode both write here."""
    with transaction.atomic():
        progress = plugin.persist(run, ctx, results) if results else Progress()
        logs = [a for r in results for a in r.attempts] + list(stray_attempts or [])
        write_logs(run, logs)
        # Good replies for the cache: a reply a judge could not score is a failed attempt by
        # now, and failures are never stored.
        cache.store([a.cache_entry for a in logs if a.ok and a.cache_entry is not None])
        run.add_progress(
            done=progress.done,
            failed=progress.failed,
            prompt_tokens=progress.prompt_tokens,
            completion_tokens=progress.completion_tokens,
            cost=progress.cost,
            cached=sum(a.cached for a in logs),
            sent=sum(a.sent for a in logs),
            saved=sum(a.saved for a in logs),
        )
    if results:
        # Once committed, later apps may look at the results (and stop the run: see the signal).
        transaction.on_commit(lambda: announce(run, progress))
    return progress


def announce(run: Run, progress: Progress) -> None:
    for receiver, error in results_written.send_robust(sender=Run, run=run, progress=progress):
        if isinstance(error, Exception):
            logger.error(
                "results_written receiver %s failed on run #%s: %r", receiver, run.pk, error
            )


def write_logs(run: Run, attempts: list[Attempt]) -> None:
    if run.logging_mode == LoggingMode.NONE:
        return
    if run.logging_mode == LoggingMode.FAILED:
        attempts = [a for a in attempts if not a.ok]
    if attempts:
        AttemptLog.objects.bulk_create(
            [
                AttemptLog(
                    run_id=run.pk,
                    item_id=a.item_id or None,
                    unit=a.unit,
                    round=a.round,
                    epoch=a.epoch,
                    attempt=a.attempt,
                    ok=a.ok,
                    request_messages=a.request_messages,
                    raw_reply=a.raw_reply,
                    error_kind=a.error_kind,
                    error=a.error,
                    traceback=a.traceback,
                    latency_ms=a.latency_ms,
                    prompt_tokens=a.prompt_tokens,
                    completion_tokens=a.completion_tokens,
                    cost=a.cost,
                    cached=a.cached,
                )
                for a in attempts
                if a.item_id or a.unit is not None
            ]
        )
