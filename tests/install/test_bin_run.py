"""bin/run as a person runs it: it serves the demo, Ctrl-C stops all of it, a worker that dies
is started again, and when the web server dies the others are stopped too. Part of the install
stage (own bin/run each)."""

import http.cookiejar
import os
import re
import signal
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.base import ROOT, free_port
from tests.scripts import START_TIMEOUT, Script, script_env, server_processes, wait_until_gone


@pytest.fixture
def bin_run(tmp_path: Path) -> Iterator[tuple[Script, int, int]]:
    web_port, redis_port = free_port(), free_port()
    env = script_env(
        PORT=str(web_port),
        EVALSITE_REDIS_PORT=str(redis_port),
        EVALSITE_DATA_DIR=str(tmp_path / "data"),
    )
    script = Script([str(ROOT / "bin" / "run")], env)
    try:
        yield script, web_port, redis_port
    finally:
        script.kill_leftovers()


def get(opener: urllib.request.OpenerDirector, url: str, data: dict | None = None) -> str:
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    with opener.open(url, data=body, timeout=30) as response:
        assert response.status == 200, url
        return response.read().decode()


def wait_for_page(opener: urllib.request.OpenerDirector, url: str) -> str:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            return get(opener, url)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@pytest.mark.slow
def test_bin_run_serves_the_demo_and_ctrl_c_leaves_nothing_behind(bin_run):
    script, web_port, redis_port = bin_run
    url = script.wait_for(r"evalsite is running at (http://\S+)").group(1)
    assert url == f"http://127.0.0.1:{web_port}/"
    assert re.search(r"admin\s+/ demo-admin", script.output)
    assert re.search(r"viewer\s+/ demo-viewer", script.output)
    # Redis talks to its log file, not over bin/run's own lines (its start-up banner and
    # the kernel overcommit warning flooded them).
    assert "Redis is starting" not in script.output
    redis_log = Path(script.env["EVALSITE_DATA_DIR"]) / "redis" / "redis.log"
    assert "Redis is starting" in redis_log.read_text()

    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )
    login_page = wait_for_page(opener, url)  # / → /tasks/ → the login page
    assert "Log in" in login_page
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login_page).group(1)
    tasks_page = get(
        opener,
        f"{url}accounts/login/",
        {"csrfmiddlewaretoken": token, "username": "admin", "password": "demo-admin"},
    )
    assert "demo-mcq" in tasks_page
    assert "Demo: multiple choice" in get(opener, f"{url}tasks/")

    servers = server_processes(script)
    assert set(servers) == {"redis-server", "rqworker", "gunicorn"}, script.descendants()
    pids = list(script.descendants())

    os.killpg(script.proc.pid, signal.SIGINT)  # what Ctrl-C in its terminal does
    assert script.proc.wait(timeout=30) == 130, script.output
    wait_until_gone(pids, [web_port, redis_port])


@pytest.mark.slow
def test_bin_run_restarts_a_dead_worker_or_redis_and_stops_everything_when_the_web_server_dies(
    bin_run,
):
    script, web_port, redis_port = bin_run
    script.wait_for(r"evalsite is running at")
    servers = server_processes(script)

    os.kill(servers["rqworker"], signal.SIGKILL)
    script.wait_for(r"rqworker exited \(status \d+\)", timeout=30)
    script.wait_for(r"starting worker again in \d+ s", timeout=30)
    deadline = time.monotonic() + START_TIMEOUT
    while server_processes(script).get("rqworker") in (None, servers["rqworker"]):
        assert time.monotonic() < deadline, f"no new worker:\n{script.output}"
        assert script.proc.poll() is None, f"bin/run exited:\n{script.output}"
        time.sleep(0.2)
    assert script.proc.poll() is None  # the stack kept serving
    assert server_processes(script)["gunicorn"] == servers["gunicorn"]

    # Redis killed outright: started again on its port, with what it had a second before.
    worker = server_processes(script)["rqworker"]
    probe = redis.Redis(port=redis_port, socket_connect_timeout=5)
    probe.set("evalsite:test:probe", "kept")
    time.sleep(2)  # its append-only file is written every second
    os.kill(servers["redis-server"], signal.SIGKILL)
    script.wait_for(r"redis-server exited \(status \d+\)", timeout=30)
    deadline = time.monotonic() + START_TIMEOUT
    while server_processes(script).get("redis-server") in (None, servers["redis-server"]):
        assert time.monotonic() < deadline, f"no new redis-server:\n{script.output}"
        time.sleep(0.2)
    wait_for_redis = time.monotonic() + START_TIMEOUT
    while True:
        try:
            assert probe.get("evalsite:test:probe") == b"kept"
            break
        except redis.ConnectionError:
            assert time.monotonic() < wait_for_redis, f"Redis did not come back:\n{script.output}"
            time.sleep(0.2)
    # The worker waited for Redis, whether it was serving or still starting when Redis died
    # (evalsite.worker; a worker that started while Redis was away used to exit).
    time.sleep(3)
    assert server_processes(script).get("rqworker") == worker, script.output
    assert "rqworker exited" not in script.output.split("redis-server exited")[-1]
    pids = list(script.descendants())

    os.kill(server_processes(script)["gunicorn"], signal.SIGKILL)
    assert script.proc.wait(timeout=60) != 0
    script.wait_for(r"gunicorn exited; stopping the others", timeout=10, after_exit=True)
    wait_until_gone(pids, [web_port, redis_port])
