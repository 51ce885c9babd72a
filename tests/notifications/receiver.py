"""A webhook receiver on loopback for the tests: a real HTTP server (in a thread) that checks
each request's signature as a receiver would, with the Standard Webhooks reference library and
with the spec's HMAC computed by hand, and keeps what it got.

`status` is what it answers (500: a receiver that is broken); `stop()` takes it off the port (a
receiver that is down: connections are refused) and `start()` puts it back on the same port.
"""

import base64
import hashlib
import hmac
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook as Verifier

from tests.base import free_port


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    verified: bool  # by the reference library and by hand, both
    why: str = ""

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def event(self) -> str:
        return self.headers.get("x-evalsite-event", "")


def signed_by_hand(secret: str, headers: dict[str, str], body: bytes) -> bool:
    """The spec's check written out: HMAC-SHA256 of "<id>.<timestamp>.<body>" under the key
    (base64 after whsec_), sent base64 after "v1,"."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    sent = [s.split(",", 1)[1] for s in headers["webhook-signature"].split() if s.startswith("v1,")]
    return any(hmac.compare_digest(expected, s) for s in sent)


@dataclass
class Receiver:
    secret: str
    status: int = 204
    port: int = field(default_factory=free_port)
    got: list[Received] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/evalsite"

    def start(self) -> "Receiver":
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                receiver.got.append(receiver.check(headers, body))
                self.send_response(receiver.status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def check(self, headers: dict[str, str], body: bytes) -> Received:
        try:
            Verifier(self.secret).verify(body, headers)
        except Exception as exc:  # the library's verification error, or missing headers
            return Received(headers, body, False, f"library: {exc}")
        if not signed_by_hand(self.secret, headers, body):
            return Received(headers, body, False, "by hand: the HMAC differs")
        return Received(headers, body, True)
