"""The loopback server's Batch API (tests/llm_batches.py), driven through the real openai SDK."""

import io
import json
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests.llm_server import LLMServer


@pytest.fixture
def server() -> Iterator[LLMServer]:
    with LLMServer() as found:
        yield found


def sdk(server: LLMServer, key: str = "test-key-1234") -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=key, max_retries=0, timeout=10)


def jsonl(prompts: list[str], **extra: Any) -> bytes:
    lines = [
        {
            "custom_id": f"item-{n}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": "test-model", "messages": [{"role": "user", "content": p}], **extra},
        }
        for n, p in enumerate(prompts)
    ]
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def wait_status(api: openai.OpenAI, batch_id: str, wanted: set[str], timeout: float = 10) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = api.batches.retrieve(batch_id)
        if found.status in wanted:
            return found
        time.sleep(0.02)
    raise AssertionError(f"batch never reached {wanted}; last {found.status}")


def lines_of(api: openai.OpenAI, file_id: str | None) -> dict[str, dict[str, Any]]:
    if not file_id:
        return {}
    text = api.files.content(file_id).content.decode()
    return {json.loads(x)["custom_id"]: json.loads(x) for x in text.splitlines() if x.strip()}


def test_a_batch_answers_each_line_through_the_chat_logic(server: LLMServer) -> None:
    server.configure(
        script=[{"match": "boom", "status": 500}, {"match": "capital", "reply": "Paris"}]
    )
    server.batches(validate_seconds=0.2, lines_per_second=20)
    api = sdk(server)
    upload = api.files.create(
        file=(
            "in.jsonl",
            io.BytesIO(jsonl(["capital?", "boom", "hello there"])),
            "application/jsonl",
        ),
        purpose="batch",
    )
    assert upload.filename == "in.jsonl" and upload.purpose == "batch"
    assert [f.id for f in api.files.list(purpose="batch")] == [upload.id]
    batch = api.batches.create(
        input_file_id=upload.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"run": "7"},
    )
    assert batch.status == "validating" and batch.metadata == {"run": "7"}
    seen = wait_status(api, batch.id, {"in_progress"})
    assert seen.request_counts.total == 3
    done = wait_status(api, batch.id, {"completed"})
    assert (done.request_counts.completed, done.request_counts.failed) == (2, 1)
    out, err = lines_of(api, done.output_file_id), lines_of(api, done.error_file_id)
    assert set(out) == {"item-0", "item-2"} and set(err) == {"item-1"}
    body = out["item-0"]["response"]["body"]
    assert body["choices"][0]["message"]["content"] == "Paris"
    assert body["usage"] == {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    assert out["item-2"]["response"]["body"]["choices"][0]["message"]["content"] == (
        "echo: hello there"
    )
    assert err["item-1"]["response"]["status_code"] == 500
    assert err["item-1"]["response"]["body"]["error"]["message"] == "Simulated HTTP 500."
    # Counted like chat requests, each with its batch and custom_id.
    log = server.stats()["log"]
    assert [(e["batch_id"], e["custom_id"], e["status"]) for e in log] == [
        (batch.id, "item-0", 200),
        (batch.id, "item-1", 500),
        (batch.id, "item-2", 200),
    ]
    assert [b.id for b in api.batches.list()] == [batch.id]


def test_cancel_mid_way_keeps_the_lines_done(server: LLMServer) -> None:
    server.batches(lines_per_second=10, cancel_seconds=0.3)
    api = sdk(server)
    upload = api.files.create(
        file=("in.jsonl", io.BytesIO(jsonl([f"q{n}" for n in range(50)])), "application/jsonl"),
        purpose="batch",
    )
    batch = api.batches.create(
        input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    deadline = time.monotonic() + 10
    while api.batches.retrieve(batch.id).request_counts.completed < 3:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert api.batches.cancel(batch.id).status == "cancelling"
    done = wait_status(api, batch.id, {"cancelled"})
    out = lines_of(api, done.output_file_id)
    assert 3 <= len(out) < 50 and len(out) == done.request_counts.completed
    assert server.batches()["cancel_requests"] == 1


def test_validation_failure_expiry_and_keys(server: LLMServer) -> None:
    api = sdk(server)
    bad = api.files.create(
        file=("bad.jsonl", io.BytesIO(b'{"custom_id": "x"}\nnot json\n'), "application/jsonl"),
        purpose="batch",
    )
    failed = api.batches.create(
        input_file_id=bad.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    failed = wait_status(api, failed.id, {"failed"})
    assert [e.line for e in failed.errors.data] == [1, 2]
    server.batches(expire_after=2)
    good = api.files.create(
        file=("in.jsonl", io.BytesIO(jsonl(["a", "b", "c", "d"])), "application/jsonl"),
        purpose="batch",
    )
    expired = api.batches.create(
        input_file_id=good.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    expired = wait_status(api, expired.id, {"expired"})
    assert set(lines_of(api, expired.output_file_id)) == {"item-0", "item-1"}
    late = lines_of(api, expired.error_file_id)
    assert {k: v["error"]["code"] for k, v in late.items()} == {
        "item-2": "batch_expired",
        "item-3": "batch_expired",
    }
    server.configure(require_key="right-key")
    with pytest.raises(openai.AuthenticationError):
        sdk(server, key="wrong-key").batches.retrieve(expired.id)
    # A reset forgets files and batches.
    server.reset()
    assert server.batches()["batches"] == [] and server.batches()["files"] == []
