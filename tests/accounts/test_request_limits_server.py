"""#32.6 under the web server bin/run starts: a 1 GiB upload and a 300 MB anonymous multipart
body are refused from their headers alone (the client sends no byte of either body and gets
its answer), and upload temporary files a crashed server left are swept when it starts."""

import json
import os
import socket
import time
from pathlib import Path

import pytest

from tests.scripts import gunicorn

pytestmark = pytest.mark.slow

MULTIPART = "multipart/form-data; boundary=----evalsite"


def headers_only(port: int, path: str, length: int) -> tuple[int, dict[str, str], bytes]:
    """POST `path` announcing `length` bytes of multipart body, send none, read the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {MULTIPART}\r\n"
            f"Content-Length: {length}\r\n\r\n"
        )
        sock.sendall(head.encode())
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = sock.recv(65536)
            assert chunk, "the server closed the connection without an answer"
            received += chunk
        top, _, body = received.partition(b"\r\n\r\n")
        status_line, *lines = top.decode().split("\r\n")
        fields = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
        while len(body) < int(fields.get("content-length", 0)):
            body += sock.recv(65536)
        return int(status_line.split()[1]), fields, body


def test_big_and_anonymous_bodies_are_refused_before_they_are_sent(tmp_path: Path):
    spill = tmp_path / "upload-tmp"
    spill.mkdir()
    stale = spill / "tmpcrash.upload"
    stale.write_bytes(b"x" * 1000)
    os.utime(stale, (time.time() - 3600, time.time() - 3600))

    with gunicorn(tmp_path, DATASET_MAX_UPLOAD_BYTES=str(512 * 2**20)) as port:
        assert not stale.exists(), "gunicorn's start did not sweep a crashed server's upload"

        status, fields, body = headers_only(port, "/api/v1/tasks/t/datasets/", 2**30)
        assert (status, fields["content-type"]) == (413, "application/json; charset=utf-8")
        assert json.loads(body)["detail"].startswith("The request body is 1.0 GB; the limit is")

        status, fields, body = headers_only(port, "/tasks/t/upload/", 2**30)
        assert status == 413 and b"The request body is 1.0 GB" in body

        status, fields, body = headers_only(port, "/api/v1/tasks/t/datasets/", 300 * 2**20)
        assert status == 401 and json.loads(body)["detail"].startswith("Sign in first")

        status, fields, _ = headers_only(port, "/tasks/t/upload/", 300 * 2**20)
        assert status == 302 and fields["location"].startswith("/accounts/login/")
    assert list(spill.iterdir()) == []
