"""Shared users, passwords and helpers for every test module."""

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from django.db import connection

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "correct-horse-battery-staple"
ROLES = ("admin", "reviewer", "viewer")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def make_user(role: str, username: str | None = None, project=None):
    """A user with `role`, a member with that role of `project` (default: the default project,
    where tasks made with no project named go)."""
    from apps.accounts.models import Project, User

    user = User.objects.create_user(
        username=username or role, password=PASSWORD, role=role, is_staff=role == "admin"
    )
    (project or Project.default()).add_member(user, role)
    return user


def database_url() -> str:
    """The URL of the database the tests use right now (the test database), for subprocesses."""
    conf = connection.settings_dict
    if conf["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{conf['NAME']}"
    user = conf.get("USER") or ""
    password = f":{conf['PASSWORD']}" if conf.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    return f"postgres://{auth}{conf.get('HOST') or '127.0.0.1'}:{conf.get('PORT') or 5432}/{conf['NAME']}"


def subprocess_env(**extra: str) -> dict[str, str]:
    """Environment for a worker or command in a subprocess: same test database, same Redis."""
    from django.conf import settings

    env = dict(os.environ)
    # The test process allows database calls from async code (live-server tests need it); a
    # user's worker does not, so neither do ours: such a call must fail here as it would there.
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    env.update(
        DJANGO_SETTINGS_MODULE="evalsite.settings",
        DATABASE_URL=database_url(),
        REDIS_URL=settings.RQ_QUEUES["default"]["URL"],
        EVALSITE_TESTING="1",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


def worker_queues() -> list[str]:
    """Every queue, in the order a worker serves them (settings.RQ_QUEUES), as `bin/run`'s
    worker listens."""
    from django.conf import settings

    return list(settings.RQ_QUEUES)


def worker_command() -> list[str]:
    """`manage.py rqworker` of every queue, without Django's system checks: they import every
    view and URL (0.6 s of CPU, a quarter of a worker's start, paid by each of the hundreds of
    workers a database stage starts), what a test asks of a worker is its jobs, and the checks
    run in the suite anyway (`check --deploy` in tests/accounts/test_security.py, and every
    other command a test starts) (#26.7)."""
    return [sys.executable, "manage.py", "rqworker", *worker_queues(), "--skip-checks"]


def run_burst_worker(
    timeout: float = 120, options: tuple[str, ...] = (), **extra_env: str
) -> subprocess.CompletedProcess:
    """Run a real RQ worker process in burst mode: it works the queues empty and exits (or
    stops where `options` such as ("--max-jobs", "1") say)."""
    return subprocess.run(
        [*worker_command(), "--burst", "--with-scheduler", *options],
        cwd=ROOT,
        env=subprocess_env(**extra_env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def start_worker(**extra_env: str) -> subprocess.Popen:
    """Start a long-running real RQ worker process; the caller stops (or kills) it."""
    return subprocess.Popen(
        worker_command(),
        cwd=ROOT,
        env=subprocess_env(**extra_env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def work(timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    """Let a real RQ worker process work the queues empty."""
    result = run_burst_worker(timeout=timeout, **env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def work_here() -> None:
    """Work the queues empty in this process, for tests about what jobs do, not about the
    worker process (#26.7): RQ's SimpleWorker (its way to test jobs) takes each job as `work()`'s
    process would and runs it here instead of in a forked work horse. A worker process costs
    ~1.2 s of CPU to start and, at load 20-30, seconds of waiting for it; what processes do
    (kills, restarts, several workers, a Redis outage) stays tested with real ones."""
    import signal

    import django_rq
    from rq import SimpleWorker

    # RQ's worker takes SIGINT and SIGTERM to stop between jobs: the test process gets its own
    # handlers back when the queues are empty.
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        queues = [django_rq.get_queue(name) for name in worker_queues()]
        SimpleWorker(queues, connection=queues[0].connection).work(burst=True)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def wait_for(predicate: Callable[[], bool], timeout: float = 180, what: str = "condition") -> None:
    # Generous: a worker process that starts (imports Django) on a machine at load 20-30 takes
    # a minute to take its first job; the wait ends as soon as the condition holds.
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
