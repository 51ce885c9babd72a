"""Handing the units of dead chunks to live workers (run by the watchdog thread)."""

import logging
from typing import Any

from apps.runs.engine.chunk import chunk_job
from apps.runs.engine.redis_keys import (
    FORGET,
    LIVE_KEY,
    REAP,
    again_key,
    held_key,
    job_id,
    jobs_key,
    launch_key,
    redis_connection,
    seq_key,
    stop_key,
    todo_key,
)
from apps.runs.engine.tuning import KEY_TTL
from evalsite.enqueue import enqueue_now

logger = logging.getLogger(__name__)


# ---- handing a dead chunk's units to live workers ------------------------------------------------
def _job_running(conn: Any, name: str) -> bool:
    """RQ's view of chunk job `name`: False once its work horse died (RQ's worker marks the job
    failed the moment its horse exits badly) or the job is gone."""
    from rq.exceptions import InvalidJobOperation
    from rq.job import Job, JobStatus

    try:
        return Job(name, connection=conn).get_status() == JobStatus.STARTED
    except InvalidJobOperation:
        return False


def reap(conn: Any = None) -> list[str]:
    """Hand the units of every dead chunk back and enqueue a replacement chunk for each;
    returns the replacement job ids. Run by the watchdog thread of every worker process
    (apps.runs.engine.watchdog); any number may run at once (each hand-back is one Lua call).

    A chunk is dead when its lease ran out (its process, machine or network is gone: nothing
    renewed it for JOB_LEASE_SECONDS) or, at once, when RQ no longer runs its job (the work
    horse was killed and its worker recorded the failure). Its held keys go to the launch's
    `again` list, which live chunks take before the todo list, and which the replacement
    chunk takes if no live chunk is left. Keys the dead chunk had already committed are
    dropped there (`RunExecutor.unsettled_keys`); unique constraints keep a unit written once even
    if a chunk was wrongly given up for dead.
    """
    conn = conn if conn is not None else redis_connection()
    reap_script = conn.register_script(REAP)
    forget = conn.register_script(FORGET)
    seconds, micros = conn.time()
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    started = []
    for field_raw, timeout_raw in conn.hgetall(LIVE_KEY).items():
        field_name = field_raw.decode() if isinstance(field_raw, bytes) else str(field_raw)
        run_id, launch = (int(part) for part in field_name.split(":"))
        jobs = jobs_key(run_id, launch)
        holders = conn.zrange(jobs, 0, -1, withscores=True)
        if not holders:
            forget(
                keys=[LIVE_KEY, jobs, todo_key(run_id, launch), again_key(run_id, launch)],
                args=[field_name],
            )
            continue
        stop, current = conn.mget(stop_key(run_id), launch_key(run_id))
        # A cancelled, failed or relaunched launch only needs its dead chunks forgotten.
        requeue = not stop and current is not None and int(current) == launch
        for member, expiry in holders:
            name = member.decode() if isinstance(member, bytes) else str(member)
            expired = expiry <= now_ms
            if not expired and _job_running(conn, name):
                continue
            n = int(
                reap_script(
                    keys=[
                        jobs,
                        held_key(run_id, launch, name),
                        again_key(run_id, launch),
                        seq_key(run_id, launch),
                    ],
                    args=[name, "expired" if expired else "ended", int(requeue), KEY_TTL],
                )
            )
            if n <= 0:
                continue
            replacement = job_id(run_id, launch, n)
            enqueue_now(
                chunk_job,
                run_id,
                launch,
                n,
                queue="runs",
                job_id=replacement,
                timeout=int(timeout_raw),
            )
            logger.warning(
                "run %s launch %s: chunk %s died (%s); its units went to %s",
                run_id,
                launch,
                name,
                "lease ran out" if expired else "its job ended",
                replacement,
            )
            started.append(replacement)
    return started
