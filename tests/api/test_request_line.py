"""#30.6: a long request line reaches the API under the web server bin/run starts (gunicorn with
evalsite/gunicorn_conf.py), so a script hears JSON, not gunicorn's HTML "Bad Request" page
(its default refused request lines over 4094 bytes before Django saw them)."""

import http.client
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.base import ROOT, free_port
from tests.scripts import script_env

pytestmark = pytest.mark.slow


def _get(port: int, path: str) -> tuple[int, str, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("GET", path)
        answer = connection.getresponse()
        return answer.status, answer.getheader("Content-Type", ""), answer.read().decode()
    finally:
        connection.close()


def _wait_for_port(port: int, process: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "gunicorn exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"gunicorn did not listen on {port} in {timeout} s")


def test_a_long_request_line_is_answered_by_the_api_in_json(tmp_path: Path):
    port = free_port()
    env = script_env(EVALSITE_DATA_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="evalsite.settings")
    gunicorn = Path(sys.executable).parent / "gunicorn"
    process = subprocess.Popen(
        [
            str(gunicorn),
            "evalsite.wsgi:application",
            "--config",
            "python:evalsite.gunicorn_conf",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "1",
            "--graceful-timeout",
            "2",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_port(port, process)
        for length in (5_000, 60_000):
            path = "/api/v1/no-such-call/" + "x" * length
            status, kind, text = _get(port, path)
            assert (status, kind) == (404, "application/json; charset=utf-8"), text[:200]
            assert json.loads(text)["detail"].startswith("There is no API call at /api/v1/")
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
