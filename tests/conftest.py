"""Test harness: a real Redis, real RQ workers, real Chromium. See tests/base.py for helpers."""

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

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


# ---- The install stage ---------------------------------------------------------------
INSTALL_STAGE = Path(__file__).resolve().parent / "install"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """tests/install drives one bin/run for the whole folder and does not depend on the test
    database: bin/test runs it once, as its own stage, not in each database's run. It is
    collected only when named: `pytest tests/install`."""
    if collection_path != INSTALL_STAGE:
        return None
    named = (Path(arg.split("::")[0]).resolve() for arg in config.args)
    return not any(path == INSTALL_STAGE or INSTALL_STAGE in path.parents for path in named)


# ---- Redis -------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def redis_server() -> Iterator[str]:
    """A private redis-server on loopback for the whole session (or $TEST_REDIS_URL)."""
    if url := os.environ.get("TEST_REDIS_URL"):
        yield url
        return
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed: run `apt-get install -y redis-server`.")
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="evalsite-redis-")
    proc = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            workdir,
            "--protected-mode",
            "yes",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    import redis

    client = redis.Redis.from_url(url)
    for _ in range(100):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(autouse=True)
def _redis_settings(redis_server: str, settings) -> Iterator[None]:
    """Every test talks to the private Redis, emptied before it starts."""
    settings.RQ_QUEUES = {"default": {"URL": redis_server, "DEFAULT_TIMEOUT": 600}}
    settings.REDIS_URL = redis_server
    import redis

    redis.Redis.from_url(redis_server).flushdb()
    yield


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
