"""The README's commands as a person runs them: bin/run serves the demo and stops clean,
bin/test fails when a test fails or when no test ran."""

import http.cookiejar
import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.base import ROOT, free_port
from tests.scripts import START_TIMEOUT, Script, script_env, server_processes, wait_until_gone


def test_descendants_reads_whole_command_lines_whatever_the_terminal_width(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # CI sets COLUMNS=80, and plain `ps` then cut "…/.venv/bin/gunicorn" short in a long checkout.
    monkeypatch.setenv("COLUMNS", "40")
    marker = "gunicorn-" + "x" * 100
    child = f"{sys.executable} -c 'import time; time.sleep(30)' {marker}"
    script = Script(["bash", "-c", f"{child}; true"], dict(os.environ))
    try:
        deadline = time.monotonic() + 10
        while not (found := script.descendants()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert any(args.endswith(marker) for args in found.values()), found
    finally:
        script.kill_leftovers()


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
def test_bin_run_stops_everything_when_one_server_dies(bin_run):
    script, web_port, redis_port = bin_run
    script.wait_for(r"evalsite is running at")
    servers = server_processes(script)
    pids = list(script.descendants())

    os.kill(servers["rqworker"], signal.SIGKILL)
    assert script.proc.wait(timeout=60) != 0
    script.wait_for(r"rqworker exited; stopping the others", timeout=10, after_exit=True)
    wait_until_gone(pids, [web_port, redis_port])


# ---- bin/test judges pytest's outcome ----------------------------------------------------
def run_bin_test(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(ROOT / "bin" / "test"), *args],
        cwd=ROOT,
        env=script_env(EVALSITE_TEST_DBS="sqlite", EVALSITE_TEST_LINT="0"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture
def sample_tests(tmp_path: Path) -> Path:
    path = tmp_path / "test_sample.py"
    path.write_text("def test_passes():\n    assert 1 + 1 == 2\n")
    return path


@pytest.mark.slow
def test_bin_test_passes_and_counts_when_tests_pass(sample_tests):
    result = run_bin_test(str(sample_tests), "-q")  # counted at any verbosity
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == "sqlite: 1 passed, 0 failed"


@pytest.mark.slow
def test_bin_test_fails_when_a_test_fails(sample_tests):
    with sample_tests.open("a") as handle:
        handle.write("\n\ndef test_fails():\n    assert 1 + 1 == 3\n")
    result = run_bin_test(str(sample_tests))
    assert result.returncode != 0
    assert result.stdout.splitlines()[-1] == "sqlite: 1 passed, 1 failed"


@pytest.mark.slow
def test_bin_test_fails_when_no_test_ran(sample_tests):
    result = run_bin_test(str(sample_tests), "-k", "no_such_test")
    assert result.returncode != 0
    assert "no test ran" in result.stderr
    assert result.stdout.splitlines()[-1] == "sqlite: 0 passed, 0 failed"
