"""The RQ worker of every `manage.py rqworker` (settings.RQ["WORKER_CLASS"]): RQ's own, except
that it rides out a Redis outage instead of exiting.

RQ's worker retries only while it waits for a job; a Redis that goes away while a job runs (the
worker sends heartbeats, records the job's end) or between jobs ends the worker with "found an
unhandled exception, quitting", and with it every run it served. Here the worker's own Redis
client retries every command with exponential backoff for as long as Redis is away, so the
worker simply carries on when it is back; its work horse meanwhile finishes or stops its job by
itself (a run's chunk commits what it has and leaves its units to the watchdog:
apps.runs.engine.chunk). A Redis that came back empty has forgotten the worker: it registers
again at its next heartbeat, so RQ's pages and `Worker.all` list it.

A worker started while Redis is away (`bin/run` starts one again just as Redis restarts) waits for
it too, before it has begun, instead of exiting with "Connection refused".

Only the worker's main loop retries like this: horses, the web process and commands use their
own clients with redis-py's few default retries, and a worker asked to stop (SIGTERM, Ctrl-C)
stops retrying at once so that it can exit.
"""

import logging
import time
from collections.abc import Callable
from typing import Any

import redis
import rq
from redis.backoff import ExponentialWithJitterBackoff
from redis.retry import Retry
from rq import worker_registration

logger = logging.getLogger(__name__)

# Backoff between tries while Redis is away (s): from OUTAGE_BACKOFF_BASE doubling, with jitter,
# to OUTAGE_BACKOFF_CAP, so a worker is back within a few seconds of Redis and dozens of
# workers do not knock at once.
OUTAGE_BACKOFF_BASE = 0.25
OUTAGE_BACKOFF_CAP = 5.0


class OutageRetry(Retry):
    """Retry forever while Redis is away, unless the worker is asked to stop; say once when
    Redis went away and once when it is back."""

    def __init__(self, worker: "Worker") -> None:
        super().__init__(ExponentialWithJitterBackoff(OUTAGE_BACKOFF_CAP, OUTAGE_BACKOFF_BASE), -1)
        self.worker = worker
        self.away = False

    def __deepcopy__(self, memo: dict[int, Any]) -> "OutageRetry":
        # redis-py copies the retry policy into each connection it makes; ours refers to
        # the worker (locks and all), and one policy per worker is what is meant anyway.
        return self

    def call_with_retry(
        self,
        do: Callable[[], Any],
        fail: Callable[..., Any],
        is_retryable: Callable[[Exception], bool] | None = None,
        with_failure_count: bool = False,
    ) -> Any:
        def retryable(error: Exception) -> bool:
            if self.worker.stopping:
                return False
            if not self.away:
                self.away = True
                logger.warning(
                    "Worker %s: Redis went away (%s); waiting for it", self.worker.name, error
                )
            return is_retryable(error) if is_retryable is not None else True

        result = super().call_with_retry(do, fail, retryable, with_failure_count)
        if self.away:
            self.away = False
            logger.warning("Worker %s: Redis is back; carrying on", self.worker.name)
        return result


class Worker(rq.Worker):
    @property
    def stopping(self) -> bool:
        return self._stop_requested or self._shutdown_requested_date is not None

    def _set_ip_address(self, connection: Any) -> None:
        # RQ calls this only when building a worker that is to work (not one made to be
        # listed), and it is the first command such a worker sends.
        backoff = ExponentialWithJitterBackoff(OUTAGE_BACKOFF_CAP, OUTAGE_BACKOFF_BASE)
        failures = 0
        while True:
            try:
                super()._set_ip_address(connection)
                break
            except (redis.ConnectionError, redis.TimeoutError) as error:
                if not failures:
                    logger.warning(
                        "Worker %s: Redis is away (%s); waiting for it", self.name, error
                    )
                failures += 1
                time.sleep(backoff.compute(failures))
        if failures:
            logger.warning("Worker %s: Redis is back; starting", self.name)

    def work(self, *args: Any, **kwargs: Any) -> bool:
        # Set here, not in __init__: RQ builds Worker objects to list workers (web pages,
        # `Worker.all`), and those must not make their caller's client wait for ever.
        retry = OutageRetry(self)
        clients = {id(c): c for c in [self.connection, *(q.connection for q in self.queues)]}
        for client in clients.values():
            client.set_retry(retry)
        return super().work(*args, **kwargs)

    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        super().heartbeat(timeout, pipeline)
        if pipeline is None and not self.stopping:
            key = worker_registration.REDIS_WORKER_KEYS
            if not self.connection.sismember(key, self.key):
                self._register_again()

    def _register_again(self) -> None:
        """Redis restarted without us (empty, or from an older dump): be listed again."""
        with self.connection.pipeline() as pipe:
            pipe.hset(self.key, mapping=self.serialize())
            pipe.hset(self.key, "state", str(self.get_state()))
            worker_registration.register(self, pipe)
            pipe.expire(self.key, self.worker_ttl + 60)
            pipe.execute()
        logger.warning("Worker %s: registered again (Redis had forgotten it)", self.name)
