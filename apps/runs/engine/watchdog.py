"""The runs watchdog: a daemon thread in every RQ worker process that hands the units of dead
chunks to live workers (see apps.runs.engine.reap), so a run whose worker was killed finishes
by itself while any worker lives.

It runs in the worker's main process, not in a work horse: when the horse running a chunk is
killed, the worker process that forked it lives on (and RQ there marks the job failed); when
the whole worker process is killed, another worker's watchdog sees the chunk's lease run out.
It touches only Redis (never the database), so forking work horses from this process stays
safe. One tick every WATCHDOG_TICK seconds across all workers (a Redis lock), not one per worker.
Runs the database says are going but Redis does not know are found by a job it enqueues every
RECOVER_EVERY seconds (apps.runs.engine.recovery), which may read the database. While Redis is
away the ticks fail (logged once) and the watchdog keeps trying: it carries on when Redis is back.
"""

import logging
import sys
import threading
import time
from typing import Any

import django_rq
import redis

from apps.runs.engine.batch import enqueue_due_batch_polls
from apps.runs.engine.limits import KEY_PREFIX
from apps.runs.engine.reaper import reap
from apps.runs.engine.recovery import RECOVER_CLAIM, RECOVER_JOB_ID, RECOVER_KEY, recover_job
from apps.runs.engine.tuning import WATCHDOG_TICK
from evalsite.enqueue import enqueue_now

LOCK_KEY = f"{KEY_PREFIX}:runs:watchdog"
WORKER_COMMANDS = ("rqworker", "rqworker-pool")

logger = logging.getLogger(__name__)
_started: threading.Thread | None = None
_lock = threading.Lock()


def is_worker_process(argv: list[str] | None = None) -> bool:
    """`manage.py rqworker …` (bin/run, tests) or `rqworker-pool`: the processes that fork
    work horses and so outlive them."""
    argv = sys.argv if argv is None else argv
    return len(argv) > 1 and argv[1] in WORKER_COMMANDS


def start() -> threading.Thread:
    """Start this process's watchdog once; later calls return the running one."""
    global _started
    with _lock:
        if _started is None or not _started.is_alive():
            _started = threading.Thread(target=_watch, name="runs-watchdog", daemon=True)
            _started.start()
        return _started


def _watch() -> None:
    conn = django_rq.get_connection("default")
    failing = False
    while True:
        time.sleep(WATCHDOG_TICK)
        try:
            # The lock lapses just before the next tick, so some worker always takes it.
            if conn.set(LOCK_KEY, "1", nx=True, px=int(WATCHDOG_TICK * 1000) - 200):
                reap(conn)
                enqueue_due_batch_polls(conn)
                enqueue_recovery(conn)
            failing = False
        except (redis.ConnectionError, redis.TimeoutError) as error:
            if not failing:  # an outage the workers ride out: a line, not a traceback
                logger.warning("runs watchdog: Redis is away (%s); checking again later", error)
            failing = True
        except Exception:
            if not failing:  # once per outage, not every tick
                logger.exception("runs watchdog: could not check for dead chunks")
            failing = True


def enqueue_recovery(conn: Any) -> bool:
    """Enqueue the recovery job unless one is queued or ran within RECOVER_EVERY s."""
    if not conn.set(RECOVER_KEY, "1", nx=True, ex=RECOVER_CLAIM):
        return False
    enqueue_now(recover_job, queue="default", job_id=RECOVER_JOB_ID, timeout=600)
    return True
