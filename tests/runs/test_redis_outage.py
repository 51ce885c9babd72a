"""Redis going away mid-run, and runs Redis does not know: real redis-server, real worker
processes, the loopback LLM server. No resume, no operator: the run finishes by itself."""

import contextlib
import math
import operator
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import django_rq
import pytest
import redis
import rq
from django.db import transaction
from django.utils import timezone

from apps.runs.engine.launch import launch
from apps.runs.engine.recovery import lost_runs, recover, recover_lost_runs
from apps.runs.engine.redis_keys import LIVE_KEY, jobs_key, live_field, todo_key
from apps.runs.engine.tuning import RECOVER_AFTER
from apps.runs.models import Response, Run
from tests.base import free_port, wait_for
from tests.factories import make_qa_dataset
from tests.runs.test_engine import assert_every_item_once, snapshot

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


class RedisServer:
    """A redis-server of this test's own on a fixed port, which the test kills and restarts.
    No dump and no AOF, as in the tests' own Redis: a restart comes back empty."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is not installed"
        args = ["--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly"]
        args += ["no", "--dir", str(self.workdir), "--logfile", str(self.workdir / "redis.log")]
        self.proc = subprocess.Popen(
            [binary, *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url, socket_connect_timeout=2)

        def answers() -> bool:
            assert self.proc is not None and self.proc.poll() is None, "redis-server exited"
            with contextlib.suppress(redis.ConnectionError):
                return bool(client.ping())
            return False

        wait_for(answers, 30, "redis-server to answer")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()  # SIGKILL: no save, no goodbye to its clients
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


@pytest.fixture
def own_redis(tmp_path: Path, settings) -> Iterator[RedisServer]:
    """This test's own Redis (the session's must stay up for the other tests); the workers
    this test starts get its URL through settings.RQ_QUEUES (tests.base.subprocess_env)."""
    server = RedisServer(tmp_path)
    server.start()
    settings.RQ_QUEUES = {
        name: {"URL": server.url, "DEFAULT_TIMEOUT": 600} for name in settings.RQ_QUEUES
    }
    settings.REDIS_URL = server.url
    try:
        yield server
    finally:
        server.stop()


def test_kill_9_of_redis_mid_run_the_run_completes_by_itself_exactly_once(
    own_redis, start, task, endpoint, llm_server, workers
):
    dataset = make_qa_dataset(task, 300, name="outage")
    endpoint.concurrency_limit = 8
    endpoint.save()
    llm_server.configure(latency=0.2)
    run = start(dataset=dataset, chunk_size=50, logging_mode="none")
    first, second = workers(), workers()
    wait_for(lambda: Run.objects.get(pk=run.pk).done >= 40, what="the run under way")

    own_redis.kill()
    killed = time.monotonic()
    at_kill = snapshot(run)
    assert 40 <= len(at_kill) < 300, "the kill must land mid-run"
    time.sleep(5)
    own_redis.start()  # same port, empty: the queue, the work list and the leases are gone
    back = time.monotonic()

    wait_for(
        lambda: Run.objects.get(pk=run.pk).status == Run.Status.COMPLETED,
        300,
        "the run to complete without anyone's help",
    )
    print(
        f"Redis killed, back after {back - killed:.1f} s; "
        f"run completed {time.monotonic() - killed:.1f} s after the kill"
    )
    # Both workers rode the outage out, and the run is the same launch, not a resume.
    assert first.poll() is None and second.poll() is None
    run.refresh_from_db()
    assert run.launch == 1 and not run.error
    assert_every_item_once(run, at_kill, llm_server, 300)


def test_a_run_whose_jobs_never_reached_redis_is_started_by_the_watchdog(
    start, llm_server, redis_conn, workers
):
    with transaction.atomic():
        run = start()
    # As if the web process died between its commit and the push to Redis: the database says
    # queued, Redis knows nothing of the run.
    redis_conn.flushdb()
    assert run.status == Run.Status.QUEUED and run.launch == 1
    Run.objects.filter(pk=run.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=RECOVER_AFTER + 1)
    )
    workers()
    wait_for(
        lambda: Run.objects.get(pk=run.pk).status == Run.Status.COMPLETED,
        240,
        "the watchdog's recovery to start and finish the run",
    )
    run.refresh_from_db()
    assert (run.launch, run.done, run.failed, run.total) == (1, 30, 0, 30)
    assert Response.objects.filter(run=run).values("item").distinct().count() == 30
    assert Response.objects.filter(run=run).count() == 30


def test_recovery_opens_a_lost_launch_once_with_only_its_pending_units(start, redis_conn):
    run = start(chunk_size=8)  # 30 items
    old = timezone.now() - timedelta(seconds=RECOVER_AFTER + 1)
    for item in run.dataset.items.order_by("position")[:10]:
        Response.objects.create(run=run, item=item, status="ok", text="before", launch=1)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, heartbeat_at=old)
    # Redis knows the launch: nothing to do (the reaper's business).
    assert lost_runs(redis_conn) == []
    redis_conn.flushdb()  # Redis restarted empty
    # Fresh signs of life, or an interrupted run (resume is a person's choice): left alone.
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now())
    assert lost_runs(redis_conn) == []
    Run.objects.filter(pk=run.pk).update(heartbeat_at=old, interrupted_at=timezone.now())
    assert lost_runs(redis_conn) == []
    Run.objects.filter(pk=run.pk).update(interrupted_at=None)
    assert [r.pk for r in lost_runs(redis_conn)] == [run.pk]

    assert recover_lost_runs() == [run.pk]
    # Opened once: a second recovery (another worker's, or the next tick) finds it known.
    assert recover_lost_runs() == []
    stale = Run.objects.get(pk=run.pk)
    assert recover(stale, redis_conn) is False
    todo = [k.decode() for k in redis_conn.lrange(todo_key(run.pk, 1), 0, -1)]
    pending = [str(i.pk) for i in run.dataset.items.order_by("position")[10:]]
    assert [k.split(":")[0] for k in todo] == pending
    assert redis_conn.hexists(LIVE_KEY, live_field(run.pk, 1))
    chunks = [j for j in django_rq.get_queue("runs").job_ids if j.startswith(f"run-{run.pk}-")]
    assert len(chunks) == math.ceil(20 / 8)
    assert all(int(j.rsplit("-", 1)[1]) >= 1 for j in chunks)


def test_recovery_settles_a_lost_run_with_nothing_pending(start, redis_conn):
    run = start()
    for item in run.dataset.items.all():
        Response.objects.create(run=run, item=item, status="ok", text="done", launch=1)
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING,
        heartbeat_at=timezone.now() - timedelta(seconds=RECOVER_AFTER + 1),
    )
    redis_conn.flushdb()
    assert recover_lost_runs() == [run.pk]
    run.refresh_from_db()
    assert (run.status, run.done, run.failed) == (Run.Status.COMPLETED, 30, 0)
    assert not [j for j in django_rq.get_queue("runs").job_ids if j.startswith("run-")]


def test_a_resumed_run_is_not_recovered_in_its_old_launch(start, redis_conn):
    run = start()
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING,
        heartbeat_at=timezone.now() - timedelta(seconds=RECOVER_AFTER + 1),
    )
    redis_conn.flushdb()
    stale = Run.objects.get(pk=run.pk)
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    with transaction.atomic():
        launch(Run.objects.get(pk=run.pk))  # a person resumed it meanwhile
    assert recover(stale, redis_conn) is False
    assert not redis_conn.hexists(LIVE_KEY, live_field(run.pk, 1))


def test_a_known_launch_whose_chunk_jobs_were_lost_gets_a_chunk_again(start, redis_conn):
    run = start(chunk_size=8)
    old = timezone.now() - timedelta(seconds=RECOVER_AFTER + 1)
    Run.objects.filter(pk=run.pk).update(heartbeat_at=old)
    queue = django_rq.get_queue("runs")
    # Its chunk jobs are still queued: waiting for a worker is not being lost.
    assert recover_lost_runs() == []
    queue.empty()  # Redis came back from a file older than their enqueueing
    assert recover_lost_runs() == [run.pk]
    assert queue.job_ids == [f"run-{run.pk}-l1-chunk-4"]  # after chunks 0-3 of the launch
    assert recover_lost_runs() == []  # queued now
    # A launch with a registered chunk is the reaper's; one with empty lists is finishing.
    queue.empty()
    redis_conn.zadd(jobs_key(run.pk, 1), {"run-x": 1})
    assert recover_lost_runs() == []
    redis_conn.delete(jobs_key(run.pk, 1), todo_key(run.pk, 1))
    assert recover_lost_runs() == []


def test_a_worker_started_while_redis_is_away_waits_for_it_and_serves(own_redis, workers):
    # bin/run starts a worker again just as Redis restarts: RQ's own worker exits at once
    # ("Connection refused") when its first command finds no Redis.
    own_redis.kill()
    worker = workers()
    said: list[str] = []
    threading.Thread(target=lambda: said.extend(worker.stdout), daemon=True).start()

    def waiting() -> bool:
        assert worker.poll() is None, "the worker exited:\n" + "".join(said)
        return any("waiting for it" in line for line in said)

    wait_for(waiting, 120, "the worker to wait")
    time.sleep(2)
    assert worker.poll() is None, "".join(said)
    own_redis.start()
    conn = redis.Redis.from_url(own_redis.url)
    wait_for(lambda: len(rq.Worker.all(connection=conn)) == 1, 120, "the worker to register")
    job = django_rq.get_queue("default").enqueue(operator.add, 2, 3)
    wait_for(lambda: job.get_status(refresh=True) == "finished", 120, "the worker to serve")
    assert job.return_value() == 5 and worker.poll() is None
    assert any("Redis is back; starting" in line for line in said)
