"""gunicorn's settings for bin/run (`--config python:evalsite.gunicorn_conf`).

gunicorn refuses a request line over 4094 bytes with its own HTML page before Django sees
it: a board query with many weights, or a long tag, then reached an API script as HTML.
0 lifts gunicorn's check (its parser still stops at 1 MiB); Django answers the rest, in JSON
under /api/ (tests/api/test_request_line.py)."""

limit_request_line = 0
