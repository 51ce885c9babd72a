"""Runs the database says are queued or running but Redis does not know: put them back.

The database is the truth about a run; Redis only holds its launch's work list, its chunks'
leases and RQ's queue. Those can be lost while the run's row says it is going: Redis restarted
empty (killed, no dump) or from a dump older than the launch, or the launch's jobs never
reached Redis (the web process died, or Redis was down, between the commit and the push). The
reaper (apps.runs.engine.reaper) reads only Redis, so such a run stayed "Queued" or "Running"
for ever. So did a launch Redis knows, with work in its lists, whose chunk jobs were lost (Redis
came back from a file written just before they were enqueued): it gets one more chunk. `recover_job`, enqueued by the watchdog every RECOVER_EVERY seconds, finds them and
opens the same launch again from the database: its pending units (those without a result of
this launch, exactly what the launch still has to do) go to a new work list and chunk jobs are
enqueued, or the run is settled when nothing is pending.

Safe to run twice and from any number of workers at once: a launch is opened in Redis in one
Lua step only while Redis does not know it (`OPEN`), and results are written once (unique
rows). A run is touched only once its last sign of life (`Run.heartbeat_at`: the launch's
start, a chunk's heartbeat, a commit) is RECOVER_AFTER old, so neither a launch whose push is
on its way nor a chunk still finishing its units after Redis came back is doubled.
Interrupted runs are left to the person who resumes them.
"""

import logging
from datetime import timedelta
from typing import Any

import django_rq
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.runs.engine.batch import submit_job
from apps.runs.engine.budget import start_spend
from apps.runs.engine.chunk import chunk_job, chunk_jobs, chunk_timeout
from apps.runs.engine.contract import executor_for, is_registered
from apps.runs.engine.lifecycle import finalize
from apps.runs.engine.limits import KEY_PREFIX
from apps.runs.engine.polls import poll_batches_in
from apps.runs.engine.redis_keys import (
    BATCH_DUE_KEY,
    LIVE_KEY,
    OPEN,
    again_key,
    batch_job_id,
    batch_submitting_key,
    job_id,
    jobs_key,
    launch_key,
    live_field,
    redis_connection,
    seq_key,
    stop_key,
    todo_key,
)
from apps.runs.engine.tuning import (
    BATCH_SUBMIT_TIMEOUT,
    CHUNK_TIMEOUT_MIN,
    KEY_TTL,
    RECOVER_AFTER,
    RECOVER_EVERY,
)
from apps.runs.models import Run
from evalsite.enqueue import enqueue_now

logger = logging.getLogger(__name__)

# Held while a recovery job is queued or at work (at most RECOVER_CLAIM s: a lost job is
# replaced), then for RECOVER_EVERY s after it started (apps.runs.engine.watchdog enqueues one
# only while it is not there).
RECOVER_KEY = f"{KEY_PREFIX}:runs:recover"
RECOVER_CLAIM = 120
# One id for every recovery job: RQ's registries hold one entry, not one per tick.
RECOVER_JOB_ID = "runs-recover"


def recover_job() -> str:
    """The job the watchdog enqueues: recover every lost run (see the module docstring)."""
    # The next one may be enqueued RECOVER_EVERY from now (the watchdog holds off while the
    # key is there; it was set, for longer, when this job was enqueued).
    redis_connection().set(RECOVER_KEY, "1", px=int(RECOVER_EVERY * 1000))
    recovered = recover_lost_runs()
    return f"{len(recovered)} runs recovered" if recovered else "nothing lost"


def quiet_runs() -> list[Run]:
    """Active runs of registered kinds with no sign of life for RECOVER_AFTER."""
    quiet = timezone.now() - timedelta(seconds=RECOVER_AFTER)
    runs = Run.objects.active().filter(
        launch__gt=0, interrupted_at__isnull=True, heartbeat_at__lt=quiet
    )
    return [run for run in runs if is_registered(run.kind)]


def lost_runs(conn: Any = None) -> list[Run]:
    """Active runs, quiet for RECOVER_AFTER, whose launch Redis does not know."""
    conn = conn if conn is not None else redis_connection()
    candidates = quiet_runs()
    if not candidates:
        return []
    live = {_text(field) for field in conn.hkeys(LIVE_KEY)}
    due = {_text(member) for member in conn.zrange(BATCH_DUE_KEY, 0, -1)}
    lost = []
    for run in candidates:
        field = live_field(run.pk, run.launch)
        if run.batch:
            if field in due or conn.exists(batch_submitting_key(run.pk, run.launch)):
                continue
        elif field in live:
            continue
        lost.append(run)
    return lost


def orphaned_runs(conn: Any = None) -> list[Run]:
    """Active runs, quiet for RECOVER_AFTER, whose launch Redis knows with work left in its
    lists but no chunk to do it: none registered, none queued or starting in RQ (their jobs
    were lost, e.g. Redis came back from a file a moment older than their enqueueing)."""
    conn = conn if conn is not None else redis_connection()
    candidates = [run for run in quiet_runs() if not run.batch]
    if not candidates:
        return []
    live = {_text(field) for field in conn.hkeys(LIVE_KEY)}
    candidates = [run for run in candidates if live_field(run.pk, run.launch) in live]
    if not candidates:
        return []
    chunks = _jobs_in_rq()
    orphaned = []
    for run in candidates:
        number = run.launch
        if conn.zcard(jobs_key(run.pk, number)):
            continue  # registered chunks: alive, or the reaper's to hand on
        if not conn.llen(todo_key(run.pk, number)) + conn.llen(again_key(run.pk, number)):
            continue
        if any(name.startswith(f"run-{run.pk}-l{number}-chunk-") for name in chunks):
            continue  # waiting for a worker
        orphaned.append(run)
    return orphaned


def _jobs_in_rq() -> set[str]:
    """Ids of the jobs RQ holds queued or started, in every queue."""
    ids: set[str] = set()
    for name in settings.RQ_QUEUES:
        queue = django_rq.get_queue(name)
        ids.update(queue.get_job_ids())
        ids.update(queue.started_job_registry.get_job_ids())
    return ids


def hand_on(run: Run, conn: Any = None) -> str:
    """Enqueue one more chunk for a launch whose chunks were lost; returns its job id. A chunk
    too many does no harm: chunks take their keys from the lists one step at a time."""
    conn = conn if conn is not None else redis_connection()
    number = run.launch
    timeout = int(conn.hget(LIVE_KEY, live_field(run.pk, number)) or CHUNK_TIMEOUT_MIN)
    n = int(conn.incr(seq_key(run.pk, number)))
    conn.expire(seq_key(run.pk, number), KEY_TTL)
    name = job_id(run.pk, number, n)
    enqueue_now(chunk_job, run.pk, number, n, queue="runs", job_id=name, timeout=timeout)
    logger.warning(
        "run %s launch %s: work left and no chunk to do it; enqueued %s", run.pk, number, name
    )
    return name


def recover_lost_runs() -> list[int]:
    """Put every lost or orphaned run back on its way; returns their ids."""
    conn = redis_connection()
    recovered = []
    for run in lost_runs(conn):
        if recover(run, conn):
            recovered.append(run.pk)
    for run in orphaned_runs(conn):
        hand_on(run, conn)
        recovered.append(run.pk)
    return recovered


def recover(run: Run, conn: Any = None) -> bool:
    """Open `run`'s current launch again from the database (or settle it when nothing is
    pending); False when something else got there first."""
    conn = conn if conn is not None else redis_connection()
    number = run.launch
    with transaction.atomic():
        # A resume or cancel clicked meanwhile waits for us (or we see its result).
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.launch != number or not locked.is_active or locked.interrupted_at:
            return False
        if locked.cancel_requested:
            keys: list[str] = []
        elif locked.batch:
            return _recover_batch(locked, conn)
        else:
            plugin = executor_for(locked)
            keys = plugin.pending_keys(locked, locked.mode)
            lanes = max(1, plugin.lanes(locked))
            n_jobs = chunk_jobs(len(keys), locked.chunk_size)
            timeout = chunk_timeout(locked, lanes, len(keys))
        if keys:
            first = int(
                conn.register_script(OPEN)(
                    keys=[
                        LIVE_KEY,
                        todo_key(run.pk, number),
                        again_key(run.pk, number),
                        seq_key(run.pk, number),
                        launch_key(run.pk),
                        stop_key(run.pk),
                    ],
                    args=[live_field(run.pk, number), timeout, KEY_TTL, number, n_jobs, *keys],
                )
            )
            if first < 0:
                return False  # Redis knows the launch again: another recovery opened it
            pipe = conn.pipeline()
            start_spend(pipe, run.pk, locked.cost)
            pipe.execute()
    if not keys:
        # Cancelled, or every unit has its result: settle with exact counts.
        finalize(run.pk, number)
        logger.warning(
            "run %s launch %s: lost by Redis with nothing pending; settled", run.pk, number
        )
        return True
    for n in range(first, first + n_jobs):
        enqueue_now(
            chunk_job,
            run.pk,
            number,
            n,
            queue="runs",
            job_id=job_id(run.pk, number, n),
            timeout=timeout,
        )
    logger.warning(
        "run %s launch %s: Redis did not know it; %s pending units went to %s new chunks",
        run.pk,
        number,
        len(keys),
        n_jobs,
    )
    return True


def _recover_batch(run: Run, conn: Any) -> bool:
    """A batch-mode launch: submit again if its files were never made (the submit job sends
    only what no batch holds), else have its batches polled at once."""
    number = run.launch
    if run.batches.filter(launch=number).exists():
        poll_batches_in(run.pk, number, 0)
    else:
        conn.set(batch_submitting_key(run.pk, number), 1, ex=KEY_TTL)
        enqueue_now(
            submit_job,
            run.pk,
            number,
            queue="runs",
            job_id=batch_job_id(run.pk, number, "submit"),
            timeout=BATCH_SUBMIT_TIMEOUT,
        )
    logger.warning(
        "run %s launch %s: Redis did not know its batches; polling again", run.pk, number
    )
    return True


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
