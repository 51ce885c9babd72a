"""Test harness: a real Redis, real RQ workers, real Chromium. See tests/base.py for helpers."""

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.core.handlers.wsgi import WSGIHandler
from playwright.sync_api import expect

# Playwright's sync API keeps an event loop on the main thread; Django must still let
# tests touch the database from it.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
os.environ.setdefault("EVALSITE_TESTING", "1")

from tests.base import PASSWORD, free_port, make_user, start_worker

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


# ---- The install and tools stages ---------------------------------------------------------
INSTALL_STAGE = Path(__file__).resolve().parent / "install"
TOOLS_STAGE = Path(__file__).resolve().parent / "interop" / "real"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """tests/install drives one bin/run for the whole folder and does not depend on the test
    database; tests/interop/real runs the evaluation tools themselves (lm-eval, promptfoo),
    whose installs take minutes. bin/test runs each once, as a stage of its own, not in each
    database's run. They are collected only when named: `pytest tests/install`."""
    if collection_path not in (INSTALL_STAGE, TOOLS_STAGE):
        return None
    named = (Path(arg.split("::")[0]).resolve() for arg in config.args)
    return not any(path == collection_path or collection_path in path.parents for path in named)


# ---- Test databases ----------------------------------------------------------------------
# Each xdist worker has a test database of its own. Migrating one costs ~7 s of CPU (91
# migrations); a stage's workers migrate one template database (the first to get there, under
# a lock) and each copies it: a file copy on SQLite, CREATE DATABASE … TEMPLATE on PostgreSQL.
# A run without xdist makes its database as pytest-django does.
MIGRATIONS = sorted((Path(__file__).resolve().parent.parent / "apps").glob("*/migrations/*.py"))


def _template_key() -> str:
    import hashlib

    import django

    digest = hashlib.sha256(django.__version__.encode())
    for path in MIGRATIONS:
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:12]


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    import fcntl

    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _database_from_template(verbosity: int) -> list:
    """This worker's test database, copied from the stage's migrated template (made first
    when missing); the old-config list Django's teardown_databases takes."""
    from django.conf import settings
    from django.db import connections

    connection = connections["default"]
    creation = connection.creation
    old_name = connection.settings_dict["NAME"]
    test_name = creation._get_test_db_name()
    key = _template_key()
    sqlite = connection.vendor == "sqlite"
    data = Path(settings.DATA_DIR)
    data.mkdir(parents=True, exist_ok=True)
    template = str(data / f"test-template-{key}.sqlite3") if sqlite else f"test_template_{key}"
    done = data / f"test-template-{key}-{connection.vendor}.done"
    with _file_lock(data / f"test-template-{key}.lock"):
        if not done.exists():
            test_settings = connection.settings_dict["TEST"]
            saved = test_settings.get("NAME")
            test_settings["NAME"] = template
            try:
                creation.create_test_db(verbosity=verbosity, autoclobber=True, keepdb=False)
            finally:
                test_settings["NAME"] = saved
                connection.close()
                connection.settings_dict["NAME"] = old_name
                settings.DATABASES["default"]["NAME"] = old_name
            done.write_text("")
        if sqlite:
            import sqlite3

            Path(test_name).unlink(missing_ok=True)
            source, target = sqlite3.connect(template), sqlite3.connect(test_name)
            try:
                source.backup(target)
            finally:
                source.close()
                target.close()
        else:
            quote = connection.ops.quote_name
            with creation._nodb_cursor() as cursor:
                cursor.execute(f"DROP DATABASE IF EXISTS {quote(test_name)}")
                cursor.execute(f"CREATE DATABASE {quote(test_name)} TEMPLATE {quote(template)}")
    connection.close()
    settings.DATABASES["default"]["NAME"] = test_name
    connection.settings_dict["NAME"] = test_name
    connection.ensure_connection()
    return [(connection, old_name, True)]


@pytest.fixture(scope="session")
def django_db_setup(
    request: pytest.FixtureRequest,
    django_test_environment: None,
    django_db_blocker,
    django_db_modify_db_settings: None,
) -> Iterator[None]:
    from django.db import connections
    from django.test.utils import setup_databases, teardown_databases

    verbosity = request.config.option.verbose
    with django_db_blocker.unblock():
        if xdist_worker_name() == "main" or set(connections) != {"default"}:
            config = setup_databases(verbosity=verbosity, interactive=False)
        else:
            config = _database_from_template(verbosity)
    yield
    with django_db_blocker.unblock():
        teardown_databases(config, verbosity=verbosity)


# ---- Redis -------------------------------------------------------------------------------
# Each test process (each pytest-xdist worker, each database stage of bin/test) has a Redis
# database of its own: RQ workers started by a test take every job of the queues they listen
# to, so two test processes on one database take each other's jobs and leave runs "queued".
# Each process starts its own redis-server; with $TEST_REDIS_URL (a Redis of the developer's),
# worker gwN takes database N + 1 of it, and a claim key refuses a second process on one database.
REDIS_CLAIM_KEY = "evalsite:test:claimed-by"
REDIS_START_ATTEMPTS = 5


def xdist_worker_name() -> str:
    """This test process as people read it: the xdist worker (gw0, gw1, ...) or "main"."""
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


def shared_redis_url(base: str, worker: str) -> str:
    """The database of a Redis given by URL that `worker` uses: gwN takes N + 1; a run without
    xdist keeps the URL's own."""
    if not worker.startswith("gw"):
        return base
    scheme, _, rest = base.partition("://")
    host = rest.split("/", 1)[0]
    return f"{scheme}://{host}/{int(worker[2:]) + 1}"


def start_redis_server(workdir: Path) -> tuple[subprocess.Popen, str]:
    """A redis-server on a free loopback port. A port can be taken between free_port() and
    redis-server's bind (other test processes pick ports too): then it exits, and we try
    another port; after REDIS_START_ATTEMPTS, fail with the end of its log."""
    import redis

    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed: run `apt-get install -y redis-server`.")
    log = workdir / "redis.log"
    for _ in range(REDIS_START_ATTEMPTS):
        port = free_port()
        proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--protected-mode",
                "yes",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(workdir),
                "--logfile",
                str(log),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"redis://127.0.0.1:{port}/0"
        client = redis.Redis.from_url(url, socket_connect_timeout=2)
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                client.ping()
                return proc, url
            except redis.ConnectionError:
                time.sleep(0.05)
        proc.kill()
        proc.wait(timeout=10)
    tail = log.read_text(errors="replace")[-1500:] if log.exists() else "(no log)"
    pytest.fail(
        f"redis-server did not start in {REDIS_START_ATTEMPTS} attempts; its log ends:\n{tail}"
    )


class RedisClaim:
    """Marks a Redis database as this test process's: a second process on it fails loudly
    instead of silently taking this one's jobs (see the comment at the top of this section)."""

    def __init__(self, url: str) -> None:
        import redis

        self.url = url
        self.client = redis.Redis.from_url(url)
        self.token = f"{socket.gethostname()}:{os.getpid()}:{xdist_worker_name()}"

    def check(self) -> None:
        held = self.client.get(REDIS_CLAIM_KEY)
        if held is not None and held.decode() != self.token:
            pytest.fail(
                f"Redis database {self.url} is used by another test process ({held.decode()}; "
                f"this is {self.token}): each test process needs a database of its own."
            )

    def reset(self) -> None:
        """Empty the database for the next test, keeping (or taking) the claim."""
        self.check()
        self.client.flushdb()
        # Expires, so that a crashed session's claim does not refuse the next run for ever.
        self.client.set(REDIS_CLAIM_KEY, self.token, ex=3600)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[str]:
    """This test process's own Redis database (see the comment at the top of this section)."""
    if base := os.environ.get("TEST_REDIS_URL"):
        yield shared_redis_url(base, xdist_worker_name())
        return
    workdir = Path(tempfile.mkdtemp(prefix="evalsite-redis-"))
    proc, url = start_redis_server(workdir)
    try:
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_claim(redis_server: str) -> RedisClaim:
    return RedisClaim(redis_server)


@pytest.fixture(autouse=True)
def _redis_settings(redis_claim: RedisClaim, settings) -> Iterator[None]:
    """Every test talks to this process's Redis, emptied before it starts."""
    settings.RQ_QUEUES = {
        name: {"URL": redis_claim.url, "DEFAULT_TIMEOUT": 600} for name in settings.RQ_QUEUES
    }
    settings.REDIS_URL = redis_claim.url
    redis_claim.reset()
    yield
    # A test whose workers shared the database with another process would have lost jobs to
    # it; say so here, at the test that saw it, not only at the next one.
    redis_claim.check()


@pytest.fixture
def redis_conn(redis_server: str):
    import django_rq

    return django_rq.get_connection("default")


# ---- Users -------------------------------------------------------------------------------
@pytest.fixture
def admin_user(db):
    return make_user("admin")


@pytest.fixture
def reviewer_user(db):
    return make_user("reviewer")


@pytest.fixture
def viewer_user(db):
    return make_user("viewer")


@pytest.fixture
def admin_client(client, admin_user):
    client.force_login(admin_user)
    return client


@pytest.fixture
def reviewer_client(client, reviewer_user):
    client.force_login(reviewer_user)
    return client


@pytest.fixture
def viewer_client(client, viewer_user):
    client.force_login(viewer_user)
    return client


# ---- Browser -----------------------------------------------------------------------------
PLAYWRIGHT_FIXTURES = {"page", "context", "browser", "playwright", "live_server_page"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Browser tests run last: from its first use to the end of the session, Playwright's sync
    API keeps an event loop running on the main thread, and asyncio.run() fails in any later
    test (the whole suite showed it; one file alone does not)."""
    items.sort(
        key=lambda item: (
            item.get_closest_marker("browser") is not None
            or not PLAYWRIGHT_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))
        )
    )


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict) -> dict:
    """Debian's chromium, never a downloaded browser (this machine has no internet)."""
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        pytest.fail("chromium is not installed: run `apt-get install -y chromium`.")
    return {**browser_type_launch_args, "executable_path": executable, "args": CHROMIUM_ARGS}


# Generous waits (each ends as soon as its condition holds): at load 20-30, with several test
# processes each driving a Chromium, a page that takes 100 ms alone can take 10 s.
BROWSER_TIMEOUT_MS = 60_000
NAVIGATION_TIMEOUT_MS = 90_000
EXPECT_TIMEOUT_MS = 30_000


@pytest.fixture
def context(context):
    """pytest-playwright's context, with timeouts for a loaded machine (see above)."""
    context.set_default_timeout(BROWSER_TIMEOUT_MS)
    context.set_default_navigation_timeout(NAVIGATION_TIMEOUT_MS)
    return context


expect.set_options(timeout=EXPECT_TIMEOUT_MS)


class _InFlight:
    """Requests the live server is handling. A browser test's page keeps polling (the review
    page renews its lock, run pages poll their progress); a request still inside its view when
    the test ends holds row locks that PostgreSQL's flush of the test database then waits on,
    and the flush or the view dies of a deadlock: an error at teardown of a test that passed."""

    def __init__(self) -> None:
        self.count = 0
        self.lock = threading.Lock()

    def wrap(self, call: Callable) -> Callable:
        def counted(handler: object, environ: dict, start_response: Callable) -> object:
            with self.lock:
                self.count += 1
            try:
                return call(handler, environ, start_response)
            finally:
                with self.lock:
                    self.count -= 1

        return counted

    def wait_idle(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while self.count and time.monotonic() < deadline:
            time.sleep(0.05)


_in_flight = _InFlight()
WSGIHandler.__call__ = _in_flight.wrap(WSGIHandler.__call__)  # type: ignore[method-assign]


@pytest.fixture
def page(page):
    """pytest-playwright's page; at the end it stops polling (about:blank) and the live server
    finishes what it was handling before the database is flushed (see _InFlight)."""
    yield page
    with contextlib.suppress(Exception):  # a crashed page has nothing left in flight
        page.goto("about:blank", timeout=10_000)
    _in_flight.wait_idle(30)


@pytest.fixture
def login(live_server, page):
    """Log `page` in through the real login form as `user`; returns the page."""

    def _login(user, path: str = "/"):
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("input[name=username]", user.username)
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(lambda url: "/accounts/login/" not in url)
        if path != "/":
            page.goto(f"{live_server.url}{path}")
        return page

    return _login


# ---- Loopback OpenAI-compatible server ---------------------------------------------------
from tests.llm_server import LLMServer  # noqa: E402


@pytest.fixture(scope="session")
def _llm_server_process() -> Iterator[LLMServer]:
    """One in-thread test LLM server for the whole session (see tests/llm_server.py)."""
    with LLMServer() as server:
        yield server


@pytest.fixture
def llm_server(_llm_server_process: LLMServer) -> LLMServer:
    """The session's test LLM server with default knobs and empty stats for this test."""
    _llm_server_process.reset()
    return _llm_server_process


# ---- Workers -----------------------------------------------------------------------------
@pytest.fixture
def workers() -> Iterator[Callable[..., subprocess.Popen]]:
    """Start long-running worker processes; every one still alive is stopped at the end."""
    started: list[subprocess.Popen] = []

    def _start(**env: str) -> subprocess.Popen:
        proc = start_worker(**env)
        started.append(proc)
        return proc

    yield _start
    for proc in started:
        if proc.poll() is None:
            proc.terminate()
    for proc in started:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
