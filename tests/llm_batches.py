"""The loopback server's Batch API: `/v1/files` and `/v1/batches`, in OpenAI's shapes.

Installed into tests/llm_server.py's app by `install(app, state)`. A batch's lines go through
the same chat logic as `POST /v1/chat/completions` (scripts, error rates, fail-first, keys: one
`State.decide` per line, counted in the server's stats and log with the batch id), at a speed
the tests set, so they can watch a batch in progress and cancel it mid-way:

    validating (validate_seconds) → in_progress (lines_per_second) → finalizing
    (finalize_seconds) → completed; or failed (fail_validation, or a line that is not a
    request), expired (expire_after: lines done before the window "ends"; the rest go to the
    error file as batch_expired), cancelling → cancelled (the output of the lines done).

Control: `POST /_control/batches` merges knobs (BATCH_DEFAULTS), `GET /_control/batches` lists
the files and batches made and the knobs. Everything is forgotten when the server is reset
(`State.generation` moves): batches still running stop without touching the new stats.
Never imports Django.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

if TYPE_CHECKING:
    from tests.llm_server import State

BATCH_DEFAULTS: dict[str, Any] = {
    "validate_seconds": 0.0,
    "lines_per_second": 50.0,
    "finalize_seconds": 0.0,
    "cancel_seconds": 0.2,  # cancelling → cancelled
    "fail_validation": "",  # a message: the batch fails validation with it
    "expire_after": None,  # expire once this many lines are done
    # Stay in_progress once this many lines are done, until the knob is cleared (None): a test
    # can then see the in-progress state however slowly its page polls on a loaded machine.
    "hold_after": None,
}
TERMINAL = ("completed", "failed", "expired", "cancelled")


@dataclass
class Batch:
    id: str
    input_file_id: str
    endpoint: str
    metadata: dict[str, Any]
    created_at: int
    status: str = "validating"
    total: int = 0
    completed: int = 0
    failed: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: list[dict[str, Any]] = field(default_factory=list)
    times: dict[str, int | None] = field(default_factory=dict)
    cancel: bool = False
    authorization: str = ""  # the creating request's header, for echo_auth

    def shape(self) -> dict[str, Any]:
        stamps = (
            "in_progress_at",
            "expires_at",
            "finalizing_at",
            "completed_at",
            "failed_at",
            "expired_at",
            "cancelling_at",
            "cancelled_at",
        )
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "errors": {"object": "list", "data": self.errors} if self.errors else None,
            "input_file_id": self.input_file_id,
            "completion_window": "24h",
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": self.created_at,
            **{name: self.times.get(name) for name in stamps},
            "request_counts": {
                "total": self.total,
                "completed": self.completed,
                "failed": self.failed,
            },
            "metadata": self.metadata,
        }


class Store:
    """Files and batches of one server; emptied when the server's state is reset."""

    def __init__(self, state: State) -> None:
        self.state = state
        self.generation = -1
        self._fresh()

    def _fresh(self) -> None:
        self.generation = self.state.generation
        self.config = dict(BATCH_DEFAULTS)
        self.files: dict[str, dict[str, Any]] = {}
        self.contents: dict[str, bytes] = {}
        self.batches: dict[str, Batch] = {}
        self.cancel_requests = 0
        self.counter = 0

    def current(self) -> Store:
        if self.generation != self.state.generation:
            self._fresh()
        return self

    def next_id(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}-evalsite-{self.generation}-{self.counter}"

    def add_file(self, filename: str, purpose: str, content: bytes) -> dict[str, Any]:
        file_id = self.next_id("file")
        meta = {
            "id": file_id,
            "object": "file",
            "bytes": len(content),
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
        }
        self.files[file_id] = meta
        self.contents[file_id] = content
        return meta

    def describe(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "files": list(self.files.values()),
            "batches": [b.shape() for b in self.batches.values()],
            "cancel_requests": self.cancel_requests,
        }


def _error(status: int, message: str) -> web.Response:
    return web.json_response(
        {"error": {"message": message, "type": "invalid_request_error", "param": None}},
        status=status,
    )


async def _process(store: Store, batch: Batch, lines: list[bytes]) -> None:
    """Run a batch's lines through the chat logic at the configured speed."""
    # Imported here: tests.llm_server imports this module to install it.
    from tests.llm_server import Decision, _parse_body, _respond

    state = store.state
    generation = store.generation

    def gone() -> bool:
        return state.generation != generation

    config = store.config
    await asyncio.sleep(float(config["validate_seconds"]))
    if gone():
        return
    requests: list[tuple[str, dict[str, Any] | None, str]] = []
    for number, raw in enumerate(lines, start=1):
        try:
            line = json.loads(raw)
            custom = line["custom_id"]
            assert isinstance(custom, str)
            assert line.get("url") == batch.endpoint
        except (ValueError, KeyError, AssertionError, TypeError):
            batch.errors.append(
                {"code": "invalid_request", "message": "Not a batch request line.", "line": number}
            )
            continue
        body, problem = _parse_body(json.dumps(line.get("body")).encode())
        requests.append((custom, body, problem))
    if config["fail_validation"] or batch.errors:
        if config["fail_validation"]:
            batch.errors.append({"code": "invalid_file", "message": config["fail_validation"]})
        batch.status, batch.times["failed_at"] = "failed", int(time.time())
        return
    batch.total = len(requests)
    batch.status, batch.times["in_progress_at"] = "in_progress", int(time.time())
    done: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    pace = 1.0 / max(float(config["lines_per_second"]), 1e-6)
    expire_after = config["expire_after"]
    for custom, body, problem in requests:
        if gone():
            return
        if batch.cancel:
            break
        if expire_after is not None and len(done) + len(errors) >= int(expire_after):
            break
        while config["hold_after"] is not None and len(done) + len(errors) >= int(
            config["hold_after"]
        ):
            if gone() or batch.cancel:
                break
            await asyncio.sleep(0.05)
        if gone():
            return
        if batch.cancel:
            break
        # Below a millisecond a timer is all overhead: just let the other handlers run.
        await asyncio.sleep(pace if pace >= 0.001 else 0)
        n, line_generation = state.arrive()
        entry: dict[str, Any] = {
            "n": n,
            "time": time.time(),
            "end": None,
            "model": body["model"] if body else None,
            "messages": body["messages"] if body else None,
            "params": {k: v for k, v in (body or {}).items() if k not in ("model", "messages")},
            "had_key": True,
            "key_last4": None,
            "retry_count": None,
            "status": None,
            "outcome": None,
            "reply": None,
            "batch_id": batch.id,
            "custom_id": custom,
        }
        if body is not None:
            # A hang in a batch only takes time: the line gets the default answer.
            decision = state.decide(entry, line_generation, body, None)
        else:
            state.record(entry, line_generation)
            decision = Decision("bad_request", 400, 0.0, text=problem)
        response = _respond(decision, body, n, entry, state, batch.authorization)
        state.finish(entry, line_generation, response.status, decision.outcome)
        state.depart(line_generation)
        payload = json.loads(response.body) if response.body else None  # type: ignore[arg-type]
        result = {
            "id": f"batch_req_{n}",
            "custom_id": custom,
            "response": {
                "status_code": response.status,
                "request_id": f"req-evalsite-{n}",
                "body": payload,
            },
            "error": None,
        }
        if response.status == 200:
            done.append(result)
            batch.completed += 1
        else:
            errors.append(result)
            batch.failed += 1
    if gone():
        return
    now = int(time.time())
    if batch.cancel:
        batch.status, batch.times["cancelling_at"] = "cancelling", now
        await asyncio.sleep(float(config["cancel_seconds"]))
        final = "cancelled"
    elif expire_after is not None and len(done) + len(errors) < len(requests):
        finished = {r["custom_id"] for r in done + errors}
        for custom, _, _ in requests:
            if custom not in finished:
                errors.append(
                    {
                        "id": f"batch_req_expired_{custom}",
                        "custom_id": custom,
                        "response": None,
                        "error": {
                            "code": "batch_expired",
                            "message": "This request could not be executed before the "
                            "completion window expired.",
                        },
                    }
                )
        final = "expired"
    else:
        batch.status, batch.times["finalizing_at"] = "finalizing", now
        await asyncio.sleep(float(config["finalize_seconds"]))
        final = "completed"
    if gone():
        return
    if done:
        batch.output_file_id = _lines_file(store, batch, "output", done)
    if errors:
        batch.error_file_id = _lines_file(store, batch, "error", errors)
    batch.status = final
    batch.times[f"{final}_at"] = int(time.time())


def _lines_file(store: Store, batch: Batch, what: str, lines: list[dict[str, Any]]) -> str:
    content = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    return store.add_file(f"{batch.id}_{what}.jsonl", "batch_output", content)["id"]


def install(app: web.Application, state: State) -> None:
    """Add the files and batches endpoints (and their control endpoint) to the app."""
    from tests.llm_server import _bearer  # see _process

    root = Store(state)
    tasks: set[asyncio.Task[None]] = set()

    def refused(request: web.Request) -> web.Response | None:
        with state.lock:
            required = state.config["require_key"]
        if required is not None and _bearer(request) != required:
            return _error(401, "Incorrect API key provided.")
        return None

    async def upload(request: web.Request) -> web.Response:
        if (no := refused(request)) is not None:
            return no
        store = root.current()
        form = await request.post()
        file = form.get("file")
        purpose = str(form.get("purpose", ""))
        if file is None or not hasattr(file, "file"):
            return _error(400, "'file' is a required property")
        if purpose != "batch":
            return _error(400, f"'{purpose}' is not a purpose the evalsite test server takes")
        content = file.file.read()
        return web.json_response(store.add_file(file.filename, purpose, content))

    async def list_files(request: web.Request) -> web.Response:
        if (no := refused(request)) is not None:
            return no
        store = root.current()
        purpose = request.query.get("purpose")
        data = [f for f in store.files.values() if purpose is None or f["purpose"] == purpose]
        data.reverse()  # newest first
        return web.json_response({"object": "list", "data": data, "has_more": False})

    async def get_file(request: web.Request) -> web.Response:
        store = root.current()
        found = store.files.get(request.match_info["file_id"])
        if found is None:
            return _error(404, "No such File object")
        return web.json_response(found)

    async def file_content(request: web.Request) -> web.Response:
        if (no := refused(request)) is not None:
            return no
        store = root.current()
        content = store.contents.get(request.match_info["file_id"])
        if content is None:
            return _error(404, "No such File object")
        return web.Response(body=content, content_type="application/octet-stream")

    async def create(request: web.Request) -> web.Response:
        if (no := refused(request)) is not None:
            return no
        store = root.current()
        try:
            body = json.loads(await request.read())
        except ValueError:
            return _error(400, "We could not parse the JSON body of your request.")
        input_id = body.get("input_file_id")
        if input_id not in store.contents:
            return _error(400, f"Invalid 'input_file_id': '{input_id}'.")
        if body.get("endpoint") != "/v1/chat/completions":
            return _error(400, "The evalsite test server batches /v1/chat/completions only.")
        if body.get("completion_window") != "24h":
            return _error(400, "completion_window must be 24h")
        now = int(time.time())
        batch = Batch(
            id=store.next_id("batch"),
            input_file_id=input_id,
            endpoint=body["endpoint"],
            metadata=body.get("metadata") or {},
            created_at=now,
            times={"expires_at": now + 24 * 3600},
            authorization=request.headers.get("Authorization", ""),
        )
        store.batches[batch.id] = batch
        lines = [line for line in store.contents[input_id].splitlines() if line.strip()]
        task = asyncio.get_running_loop().create_task(_process(store, batch, lines))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return web.json_response(batch.shape())

    async def retrieve(request: web.Request) -> web.Response:
        if (no := refused(request)) is not None:
            return no
        found = root.current().batches.get(request.match_info["batch_id"])
        if found is None:
            return _error(404, "No such Batch object")
        return web.json_response(found.shape())

    async def cancel(request: web.Request) -> web.Response:
        if (no := refused(request)) is not None:
            return no
        store = root.current()
        found = store.batches.get(request.match_info["batch_id"])
        if found is None:
            return _error(404, "No such Batch object")
        store.cancel_requests += 1
        if found.status in ("validating", "in_progress"):
            found.cancel = True
            found.status = "cancelling"
            found.times["cancelling_at"] = int(time.time())
        return web.json_response(found.shape())

    async def list_batches(request: web.Request) -> web.Response:
        if (no := refused(request)) is not None:
            return no
        data = [b.shape() for b in reversed(root.current().batches.values())]
        return web.json_response({"object": "list", "data": data, "has_more": False})

    async def get_control(request: web.Request) -> web.Response:
        return web.json_response(root.current().describe())

    async def post_control(request: web.Request) -> web.Response:
        store = root.current()
        knobs = json.loads(await request.read() or b"{}")
        unknown = set(knobs) - set(BATCH_DEFAULTS)
        if unknown:
            return web.json_response(
                {"error": f"unknown batch knob(s) {sorted(unknown)}"}, status=400
            )
        store.config.update(knobs)
        return web.json_response(store.describe())

    app.router.add_post("/v1/files", upload)
    app.router.add_get("/v1/files", list_files)
    app.router.add_get("/v1/files/{file_id}", get_file)
    app.router.add_get("/v1/files/{file_id}/content", file_content)
    app.router.add_post("/v1/batches", create)
    app.router.add_get("/v1/batches", list_batches)
    app.router.add_get("/v1/batches/{batch_id}", retrieve)
    app.router.add_post("/v1/batches/{batch_id}/cancel", cancel)
    app.router.add_get("/_control/batches", get_control)
    app.router.add_post("/_control/batches", post_control)
