"""#30.6: a long request line reaches the API under the web server bin/run starts (gunicorn with
evalsite/gunicorn_conf.py), so a script hears JSON, not gunicorn's HTML "Bad Request" page
(its default refused request lines over 4094 bytes before Django saw them)."""

import http.client
import json
from pathlib import Path

import pytest

from tests.scripts import gunicorn

pytestmark = pytest.mark.slow


def _get(port: int, path: str) -> tuple[int, str, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("GET", path)
        answer = connection.getresponse()
        return answer.status, answer.getheader("Content-Type", ""), answer.read().decode()
    finally:
        connection.close()


def test_a_long_request_line_is_answered_by_the_api_in_json(tmp_path: Path):
    with gunicorn(tmp_path) as port:
        for length in (5_000, 60_000):
            path = "/api/v1/no-such-call/" + "x" * length
            status, kind, text = _get(port, path)
            assert (status, kind) == (404, "application/json; charset=utf-8"), text[:200]
            assert json.loads(text)["detail"].startswith("There is no API call at /api/v1/")
