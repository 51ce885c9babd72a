"""gunicorn's settings for bin/run (`--config python:evalsite.gunicorn_conf`).

gunicorn refuses a request line over 4094 bytes with its own HTML page before Django sees
it: a board query with many weights, or a long tag, then reached an API script as HTML.
0 lifts gunicorn's check (its parser still stops at 1 MiB); Django answers the rest, in JSON
under /api/ (tests/api/test_request_line.py).

At start, before any worker serves, the upload temporary files a crashed server left behind
(settings.FILE_UPLOAD_TEMP_DIR: Django deletes its own when a request ends, a killed process
cannot) are swept."""

import time
from pathlib import Path
from typing import Any

from django.conf import settings

limit_request_line = 0

# A file written to this recently may be another server's upload in progress (two servers
# on one data directory); anything older belongs to no live request.
SWEEP_AFTER_SECONDS = 60


def sweep_upload_temp(now: float | None = None) -> int:
    """Delete stale upload temporary files; the number deleted."""
    cutoff = (now if now is not None else time.time()) - SWEEP_AFTER_SECONDS
    swept = 0
    for path in Path(settings.FILE_UPLOAD_TEMP_DIR).iterdir():
        try:
            if path.is_file() and path.stat().st_mtime < cutoff:
                path.unlink()
                swept += 1
        except FileNotFoundError:
            pass
    return swept


def on_starting(server: Any) -> None:
    swept = sweep_upload_temp()
    if swept:
        server.log.info("removed %d upload temporary file(s) left by an earlier server", swept)
