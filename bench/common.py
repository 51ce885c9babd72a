"""What the throughput benchmarks share: a private Redis, a migrated SQLite database, the
loopback LLM server in its own process and one RQ worker that is up and waiting, as in
production; and the wait for a run to end."""

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def start_redis(workdir: Path) -> tuple[subprocess.Popen, str]:
    import redis

    from tests.base import free_port

    port = free_port()
    proc = subprocess.Popen(
        [
            shutil.which("redis-server") or "redis-server",
            *("--port", str(port), "--bind", "127.0.0.1"),
            *("--save", "", "--appendonly", "no", "--dir", str(workdir)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    for _ in range(100):
        try:
            redis.Redis.from_url(url).ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    return proc, url


def wait_for_worker(timeout: float = 60, count: int = 1) -> None:
    import django_rq
    from rq import Worker

    connection = django_rq.get_connection("default")
    deadline = time.monotonic() + timeout
    while len(Worker.all(connection=connection)) < count:
        if time.monotonic() > deadline:
            raise SystemExit("the worker did not start")
        time.sleep(0.1)
    time.sleep(0.5)


@contextlib.contextmanager
def live_stack(prefix: str, *, workers: int = 1, **server_config: Any) -> Iterator[Any]:
    """Django set up on a fresh database, with Redis, `workers` waiting worker processes and
    the LLM server (configured with `server_config`), which this yields; everything is
    stopped afterwards."""
    tmp = Path(tempfile.mkdtemp(prefix=f"evalsite-bench-{prefix}-"))
    redis_proc, redis_url = start_redis(tmp)
    started: list[subprocess.Popen] = []
    server = None
    try:
        os.environ.update(
            EVALSITE_DATA_DIR=str(tmp),
            DATABASE_URL=f"sqlite:///{tmp / 'bench.sqlite3'}",
            REDIS_URL=redis_url,
            DJANGO_SETTINGS_MODULE="evalsite.settings",
            LOG_LEVEL="WARNING",
        )
        import django

        django.setup()
        from django.conf import settings
        from django.core.management import call_command

        from tests.llm_server import LLMServer

        call_command("migrate", verbosity=0)
        server = LLMServer.spawn()
        server.configure(log_size=10, **server_config)
        for _ in range(workers):
            started.append(
                subprocess.Popen(
                    [sys.executable, "manage.py", "rqworker", *settings.RQ_QUEUES],
                    cwd=ROOT,
                    env=dict(os.environ),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        wait_for_worker(count=workers)
        yield server
    finally:
        for worker in started:
            worker.terminate()
        for worker in started:
            worker.wait(timeout=30)
        if server is not None:
            server.stop()
        redis_proc.terminate()
        redis_proc.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)


def bench_dataset(items: int, *, answered: bool = False, slug: str = "bench") -> tuple[Any, Any]:
    """Task `slug` with a dataset of `items` arithmetic questions; `answered` adds the
    reference ("gold") and a response column to judge."""
    from apps.datasets.models import Dataset, Item, Task

    mapping: dict[str, Any] = {"input_columns": ["question"]}
    if answered:
        mapping.update(reference_column="gold", response_columns=["response"])
    task = Task.objects.create(slug=slug, name=slug.title())
    dataset = Dataset.objects.create(
        task=task,
        name="bench",
        format="csv",
        status="ready",
        row_count=items,
        columns=["question", "gold", "response"] if answered else ["question"],
        mapping=mapping,
    )

    def fields(i: int) -> dict[str, str]:
        question = {"question": f"Question {i}: what is {i} times {i}?"}
        if not answered:
            return question
        return {
            **question,
            "gold": str(i * i),
            "response": f"It is {i * i}, since {i} times {i} is {i * i}.",
        }

    Item.objects.bulk_create(
        Item(
            dataset=dataset,
            position=i,
            key=str(i),
            fields=fields(i),
            reference=str(i * i) if answered else "",
        )
        for i in range(items)
    )
    return task, dataset


def fresh_endpoint(server: Any, name: str, inflight: int) -> Any:
    """An endpoint on the LLM server allowing `inflight` requests at once; the server's
    counters (peak concurrency) start again from zero."""
    from apps.runs.models import Endpoint

    server.reset(stats_only=True)
    return Endpoint.objects.create(
        name=name,
        base_url=server.base_url,
        model="test-model",
        concurrency_limit=inflight,
        timeout_seconds=30,
        api_key_secret="sk-bench",
    )


def wait_for_run(run: Any, poll: float = 0.05) -> float:
    """Block until the run ends; refuse anything but a clean completion. Returns when it landed
    (time.monotonic), for timings that include RQ handing the job over."""
    from apps.runs.models import Run

    while not Run.objects.get(pk=run.pk).is_terminal:
        time.sleep(poll)
    landed = time.monotonic()
    run.refresh_from_db()
    if run.status != Run.Status.COMPLETED:
        raise SystemExit(f"run ended {run.status}: {run.error[-2000:]}")
    return landed
