"""The loopback OpenAI-compatible server, driven through the real openai SDK."""

import asyncio
import contextlib
import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI

from tests.llm_server import ConfigError, LLMServer


def client(server: LLMServer, max_retries: int = 0, timeout: float = 10) -> AsyncOpenAI:
    return AsyncOpenAI(
        base_url=server.base_url, api_key="test-key-1234", max_retries=max_retries, timeout=timeout
    )


def ask(api: AsyncOpenAI, prompt: str, **params: Any) -> Awaitable[Any]:
    return api.chat.completions.create(
        model="test-model", messages=[{"role": "user", "content": prompt}], **params
    )


def run(
    server: LLMServer,
    work: Callable[[AsyncOpenAI], Awaitable[Any]],
    max_retries: int = 0,
    timeout: float = 10,
) -> Any:
    """Run `work(api)` in a fresh event loop with a client that is closed before the loop ends."""

    async def go() -> Any:
        async with client(server, max_retries=max_retries, timeout=timeout) as api:
            return await work(api)

    return asyncio.run(go())


def ask_once(server: LLMServer, prompt: str, max_retries: int = 0, timeout: float = 10) -> Any:
    return run(server, lambda api: ask(api, prompt), max_retries=max_retries, timeout=timeout)


def wait_idle(server: LLMServer) -> dict[str, Any]:
    """Stats once the server has finished every request (a hung-up client ends asynchronously)."""
    deadline = time.monotonic() + 10
    while (stats := server.stats())["in_flight"] and time.monotonic() < deadline:
        time.sleep(0.02)
    return stats


def test_scripted_replies_and_usage(llm_server: LLMServer) -> None:
    llm_server.configure(
        script={"capital of France": "Paris", "2 + 2": '{"answer": 4}'},
        default_reply="echo: {last_user}",
    )

    async def go(api: AsyncOpenAI) -> list[Any]:
        return [
            await ask(api, "What is the capital of France?", temperature=0.2, max_tokens=50),
            await ask(api, "What is 2 + 2?", response_format={"type": "json_object"}),
            await ask(api, "anything else"),
        ]

    france, sums, other = run(llm_server, go)
    assert france.choices[0].message.content == "Paris"
    assert sums.choices[0].message.content == '{"answer": 4}'
    assert other.choices[0].message.content == "echo: anything else"
    assert france.choices[0].finish_reason == "stop"
    assert france.model == "test-model"
    assert france.usage.prompt_tokens == 6
    assert france.usage.completion_tokens == 1
    assert france.usage.total_tokens == 7

    stats = llm_server.stats()
    assert stats["requests"] == 3
    assert stats["by_status"] == {"200": 3}
    first, second, _ = stats["log"]
    assert first["messages"] == [{"role": "user", "content": "What is the capital of France?"}]
    assert first["params"]["temperature"] == 0.2
    assert first["params"]["max_tokens"] == 50
    assert "response_format" not in first["params"]
    assert second["params"]["response_format"] == {"type": "json_object"}
    assert first["had_key"] is True
    assert first["key_last4"] == "1234"
    assert "test-key-1234" not in json.dumps(stats)


def test_rules_first_k_times_regex_scope_and_model(llm_server: LLMServer) -> None:
    llm_server.configure(
        retry_after=0.01,
        script=[
            {"match": "item 3", "status": 503, "times": 2},
            {"match": "item 3", "reply": "C"},
            {"regex": r"item \d+$", "scope": "any", "model": "judge", "reply": "judged"},
            {"match": "SYSTEM-ONLY", "scope": "any", "reply": "saw the system prompt"},
        ],
    )

    async def go(api: AsyncOpenAI) -> list[str]:
        replies = []
        for prompt in ("item 1", "item 3", "item 2"):
            answer = await ask(api, prompt)
            replies.append(answer.choices[0].message.content)
        judged = await api.chat.completions.create(
            model="judge", messages=[{"role": "user", "content": "item 9"}]
        )
        system = await api.chat.completions.create(
            model="test-model",
            messages=[
                {"role": "system", "content": "SYSTEM-ONLY"},
                {"role": "user", "content": "hi"},
            ],
        )
        return [*replies, judged.choices[0].message.content, system.choices[0].message.content]

    assert run(llm_server, go, max_retries=3) == [
        "echo: item 1",
        "C",
        "echo: item 2",
        "judged",
        "saw the system prompt",
    ]
    log = llm_server.stats()["log"]
    item3 = [e for e in log if e["messages"][-1]["content"] == "item 3"]
    assert [e["status"] for e in item3] == [503, 503, 200]
    assert [e["retry_count"] for e in item3] == [0, 1, 2]


def test_429_with_retry_after_is_retried(llm_server: LLMServer) -> None:
    # 0.6 s is longer than the SDK's own first backoff (at most 0.5 s), so only a client that
    # read Retry-After waits this long.
    llm_server.configure(fail_first_n=1, fail_first_status=429, retry_after=0.6)

    answer = ask_once(llm_server, "hello", max_retries=2)

    assert answer.choices[0].message.content == "echo: hello"
    stats = llm_server.stats()
    assert stats["requests"] == 2
    assert stats["by_status"] == {"429": 1, "200": 1}
    refused, accepted = stats["log"]
    assert accepted["retry_count"] == 1
    # The SDK honoured Retry-After: the retry arrived only after the 0.6 s the server asked for.
    assert accepted["time"] - refused["end"] >= 0.55


def test_429_exhausted_raises_rate_limit_error(llm_server: LLMServer) -> None:
    llm_server.configure(error_rate={"429": 1.0}, retry_after=0.01)

    with pytest.raises(openai.RateLimitError) as caught:
        ask_once(llm_server, "hello", max_retries=2)

    assert caught.value.status_code == 429
    assert caught.value.response.headers["retry-after"] == "0.01"
    assert llm_server.stats()["by_status"] == {"429": 3}


def test_hang_raises_api_timeout_error(llm_server: LLMServer) -> None:
    llm_server.configure(timeout_rate=1.0)

    with pytest.raises(openai.APITimeoutError):
        ask_once(llm_server, "hello", timeout=0.3)

    stats = wait_idle(llm_server)
    assert stats["in_flight"] == 0
    assert stats["by_status"] == {"closed": 1}
    assert stats["by_outcome"] == {"hang": 1}


def test_garbage_body(llm_server: LLMServer) -> None:
    # A 200 claiming JSON but holding HTML: the SDK raises json's own decode error, which is a
    # ValueError and NOT an openai.OpenAIError; callers must catch it themselves.
    llm_server.configure(garbage_rate=1.0)
    with pytest.raises(json.JSONDecodeError):
        ask_once(llm_server, "hello", max_retries=2)
    assert llm_server.stats()["requests"] == 1  # not retried

    # A 200 with a non-JSON content type: the SDK does not raise at all, it returns the text.
    llm_server.configure(garbage_content_type="text/html", garbage_body="<h1>oops</h1>")
    answer = ask_once(llm_server, "hello")
    assert answer == "<h1>oops</h1>"
    assert llm_server.stats()["by_outcome"] == {"garbage": 2}


def test_500_counted_and_retried(llm_server: LLMServer) -> None:
    llm_server.configure(error_rate={500: 1.0})

    with pytest.raises(openai.InternalServerError):
        ask_once(llm_server, "hello", max_retries=1)

    assert llm_server.stats()["by_status"] == {"500": 2}


def test_seeded_error_rate_is_reproducible(llm_server: LLMServer) -> None:
    async def burst(api: AsyncOpenAI) -> None:
        gate = asyncio.Semaphore(16)

        async def one(i: int) -> None:
            async with gate:
                with contextlib.suppress(openai.APIStatusError):
                    await ask(api, f"item {i}")

        await asyncio.gather(*(one(i) for i in range(200)))

    counts = []
    for _ in range(2):
        llm_server.reset()
        llm_server.configure(seed=42, error_rate={"500": 0.2, "429": 0.1}, retry_after=None)
        run(llm_server, burst)
        counts.append(llm_server.stats(log=False)["by_status"])
    assert counts[0] == counts[1]
    assert sum(counts[0].values()) == 200
    assert 20 <= counts[0]["500"] <= 60
    assert 5 <= counts[0]["429"] <= 35

    llm_server.reset()
    llm_server.configure(seed=43, error_rate={"500": 0.2, "429": 0.1})
    run(llm_server, burst)
    assert llm_server.stats(log=False)["by_status"] != counts[0]


def test_peak_concurrency(llm_server: LLMServer) -> None:
    llm_server.configure(latency=0.2)

    async def fire(api: AsyncOpenAI, limit: int | None) -> None:
        gate = asyncio.Semaphore(limit or 1000)

        async def one(i: int) -> None:
            async with gate:
                await ask(api, f"item {i}")

        await asyncio.gather(*(one(i) for i in range(20)))

    run(llm_server, lambda api: fire(api, None))
    stats = wait_idle(llm_server)
    assert stats["peak_concurrency"] == 20
    assert stats["in_flight"] == 0

    llm_server.reset(stats_only=True)
    run(llm_server, lambda api: fire(api, 5))
    stats = llm_server.stats(log=False)
    assert stats["requests"] == 20
    assert stats["peak_concurrency"] == 5
    assert llm_server.config()["latency"] == 0.2  # stats_only kept the knobs


def test_models_auth_and_bad_requests(llm_server: LLMServer) -> None:
    llm_server.configure(models=["a", "b"], require_key="test-key-1234")

    async def go(api: AsyncOpenAI) -> None:
        listed = await api.models.list()
        assert [m.id for m in listed.data] == ["a", "b"]
        async with AsyncOpenAI(
            base_url=llm_server.base_url, api_key="other-key", max_retries=0
        ) as wrong:
            with pytest.raises(openai.AuthenticationError):
                await ask(wrong, "hello")

    run(llm_server, go)
    request = urllib.request.Request(
        llm_server.base_url + "/chat/completions", data=b"{not json", method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=5)
    caught.value.close()
    assert caught.value.code == 400
    assert llm_server.stats()["by_status"] == {"401": 1, "400": 1}


def test_bad_configuration_is_refused_whole(llm_server: LLMServer) -> None:
    with pytest.raises(ConfigError, match="unknown knob"):
        llm_server.configure(latencyy=1)
    with pytest.raises(ConfigError, match="> 1"):
        llm_server.configure(latency=5, error_rate={"500": 0.7}, garbage_rate=0.5)
    with pytest.raises(ConfigError, match=r"script\[0\]"):
        llm_server.configure(script=[{"match": "x", "reply": "a", "status": 500}])
    assert llm_server.config()["latency"] == 0.0


def test_thread_mode_leaves_no_thread() -> None:
    with LLMServer() as server:
        thread = server._thread
        assert thread is not None and thread.is_alive()
        ask_once(server, "hi")
    assert not thread.is_alive()
    assert thread not in threading.enumerate()


def test_subprocess_mode() -> None:
    with LLMServer.spawn() as server:
        pid = server.pid
        assert pid is not None and pid != os.getpid()
        server.configure(script={"ping": "pong"}, latency=0.05)
        answer = ask_once(server, "ping?")
        assert answer.choices[0].message.content == "pong"
        stats = server.stats()
        assert stats["requests"] == 1
        assert stats["log"][0]["messages"][0]["content"] == "ping?"
        with pytest.raises(ConfigError, match="unknown knob"):
            server.configure(nope=1)
        server.reset()
        assert server.stats()["requests"] == 0
    assert not server.running
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


# ---- the completions API with prompt log-probabilities -------------------------------------------
def complete(api: AsyncOpenAI, prompt: str | list[str], **params: Any) -> Awaitable[Any]:
    return api.completions.create(model="test-model", prompt=prompt, **params)


def test_completions_echo_logprobs_by_hand(llm_server: LLMServer) -> None:
    """Tokens are words with the whitespace before them; scripted words get their value, the
    rest -(1 + 0.25 len(word)); the first token of each prompt has none."""
    llm_server.configure(word_logprobs={"Mars": -0.5, "Venus": -3})

    reply = run(
        llm_server,
        lambda api: complete(
            api, ["Planet: Mars", "Planet:\n Venus rocks"], echo=True, logprobs=1, max_tokens=0
        ),
    )
    first, second = reply.choices
    assert (first.index, second.index) == (0, 1)
    assert first.text == "Planet: Mars"
    assert first.logprobs.tokens == ["Planet:", " Mars"]
    assert first.logprobs.text_offset == [0, 7]
    assert first.logprobs.token_logprobs == [None, -0.5]
    assert second.logprobs.tokens == ["Planet:", "\n Venus", " rocks"]
    assert second.logprobs.text_offset == [0, 7, 14]
    # "rocks": 5 characters, -(1 + 1.25).
    assert second.logprobs.token_logprobs == [None, -3.0, -2.25]
    assert second.logprobs.top_logprobs[2] == {" rocks": -2.25}
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (5, 0)
    entry = llm_server.stats()["log"][-1]
    assert entry["api"] == "completions"
    assert entry["params"] == {"echo": True, "logprobs": 1, "max_tokens": 0}


def test_completions_without_echo_generate_and_count(llm_server: LLMServer) -> None:
    reply = run(llm_server, lambda api: complete(api, "Say", max_tokens=2, logprobs=1))
    choice = reply.choices[0]
    assert choice.text == " ok ok"
    assert choice.logprobs.tokens == [" ok", " ok"]
    assert choice.logprobs.text_offset == [3, 6]  # after the prompt, as the API counts them
    assert choice.logprobs.token_logprobs == [-1.5, -1.5]
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (1, 2)
    plain = run(llm_server, lambda api: complete(api, "Say", max_tokens=1))
    assert plain.choices[0].logprobs is None


def test_completions_chat_only_zero_and_null_modes(llm_server: LLMServer) -> None:
    llm_server.configure(completions="absent")
    with pytest.raises(openai.NotFoundError, match="serves chat only"):
        run(llm_server, lambda api: complete(api, "a b", echo=True, logprobs=1, max_tokens=0))
    # The chat API is untouched by the completions knobs.
    assert ask_once(llm_server, "still here").choices[0].message.content == "echo: still here"

    llm_server.configure(completions="zero")
    zero = run(llm_server, lambda api: complete(api, "a b c", echo=True, logprobs=1, max_tokens=0))
    assert zero.choices[0].logprobs.token_logprobs == [0.0, 0.0, 0.0]

    llm_server.configure(completions="null")
    null = run(llm_server, lambda api: complete(api, "a b c", echo=True, logprobs=1, max_tokens=0))
    assert null.choices[0].logprobs is None
    assert null.choices[0].text == "a b c"
    assert llm_server.stats()["by_status"] == {"404": 1, "200": 3}


def test_completions_faults_and_bad_requests(llm_server: LLMServer) -> None:
    llm_server.configure(fail_first_n=1, fail_first_status=503, retry_after=0)
    reply = run(
        llm_server,
        lambda api: complete(api, "a b", echo=True, logprobs=1, max_tokens=0),
        max_retries=1,
    )
    assert reply.choices[0].logprobs.token_logprobs == [None, -1.25]
    assert llm_server.stats()["by_status"] == {"503": 1, "200": 1}
    with pytest.raises(openai.BadRequestError, match="only allowed with echo"):
        run(llm_server, lambda api: complete(api, "a b", max_tokens=0))
    with pytest.raises(ConfigError, match="completions must be one of"):
        llm_server.configure(completions="maybe")
    with pytest.raises(ConfigError, match="word_logprobs"):
        llm_server.configure(word_logprobs={"a": 0.5})


# ---- rpm / tpm: OpenAI's limits over a sliding minute --------------------------------------
def _raw(api: AsyncOpenAI, prompt: str, **params: Any) -> Awaitable[Any]:
    return api.chat.completions.with_raw_response.create(
        model="test-model", messages=[{"role": "user", "content": prompt}], **params
    )


def _send(server: LLMServer, prompts: list[str], **params: Any) -> list[tuple[int, dict]]:
    """(status, headers) of each prompt, one after the other."""

    async def work(api: AsyncOpenAI) -> list[tuple[int, dict]]:
        out = []
        for prompt in prompts:
            try:
                response = await _raw(api, prompt, **params)
                out.append((response.status_code, dict(response.headers)))
            except openai.RateLimitError as exc:
                out.append((429, dict(exc.response.headers)))
        return out

    return run(server, work)


def test_without_rate_knobs_no_ratelimit_headers_are_sent(llm_server: LLMServer) -> None:
    [(status, headers)] = _send(llm_server, ["hello"])
    assert status == 200
    assert not [name for name in headers if name.startswith("x-ratelimit")]
    assert llm_server.stats()["rate_limited"] == 0


def test_rpm_refuses_the_request_over_the_minute_with_retry_after(llm_server: LLMServer) -> None:
    llm_server.configure(rpm=3)
    replies = _send(llm_server, ["a", "b", "c", "d"])
    assert [status for status, _ in replies] == [200, 200, 200, 429]
    assert [h["x-ratelimit-remaining-requests"] for _, h in replies] == ["2", "1", "0", "0"]
    assert all(h["x-ratelimit-limit-requests"] == "3" for _, h in replies)
    # The first request leaves the window 60 s after it came: that is when "d" fits.
    retry = float(replies[3][1]["retry-after"])
    assert 55 < retry <= 60 and int(replies[3][1]["retry-after-ms"]) >= retry * 1000
    assert replies[0][1]["x-ratelimit-reset-requests"].endswith("s")  # e.g. "59.998s"
    stats = llm_server.stats()
    assert stats["rate_limited"] == 1 and stats["by_status"] == {"200": 3, "429": 1}
    assert stats["by_outcome"]["rate_limited"] == 1
    assert stats["rate"]["admitted"] == 3 and stats["rate"]["window_requests"] == 3


def test_limits_can_be_kept_without_a_word_but_retry_after(llm_server: LLMServer) -> None:
    llm_server.configure(rpm=2, rate_headers=False)
    replies = _send(llm_server, ["a", "b", "c"])
    assert [status for status, _ in replies] == [200, 200, 429]
    assert not [name for _, h in replies for name in h if name.startswith("x-ratelimit")]
    assert 55 < float(replies[2][1]["retry-after"]) <= 60


def test_tpm_counts_the_prompt_plus_max_tokens_at_request_time(llm_server: LLMServer) -> None:
    llm_server.configure(tpm=30)
    # 5 words of prompt + max_tokens 10 = 15 tokens each, however short the reply.
    replies = _send(llm_server, ["one two three four five"] * 3, max_tokens=10)
    assert [status for status, _ in replies] == [200, 200, 429]
    assert [h["x-ratelimit-remaining-tokens"] for _, h in replies] == ["15", "0", "0"]
    assert "x-ratelimit-limit-requests" not in replies[0][1]  # only the limits that are set
    assert llm_server.stats()["rate"]["admitted_tokens"] == 30


def test_tpm_counts_the_completion_when_no_max_tokens_is_set(llm_server: LLMServer) -> None:
    llm_server.configure(tpm=30)
    # Each: 5 words reserved when it comes, then its reply "echo: one … five" (6 words) when
    # answered: 11 a request. In: 5, 16, 27 (each fits); the fourth would make 38 > 30.
    replies = _send(llm_server, ["one two three four five"] * 4)
    assert [status for status, _ in replies] == [200, 200, 200, 429]
    assert [h["x-ratelimit-remaining-tokens"] for _, h in replies] == ["25", "14", "3", "0"]
    assert llm_server.stats()["rate"]["window_tokens"] == 33


def test_rate_knobs_are_validated_and_reset(llm_server: LLMServer) -> None:
    for bad in (0, -5, 1.5, "600", True):
        with pytest.raises(ConfigError, match="rpm must be a positive int"):
            llm_server.configure(rpm=bad)
    llm_server.configure(rpm=600, tpm=60000)
    assert llm_server.config()["rpm"] == 600
    llm_server.reset()
    assert llm_server.config()["rpm"] is None and llm_server.config()["tpm"] is None


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (0.02, "20ms"),
        (0.0015, "1.5ms"),
        (1, "1s"),
        (1.5, "1.5s"),
        (360, "6m0s"),
        (59.612, "59.612s"),
        (3723.5, "1h2m3.5s"),
    ],
)
def test_reset_durations_are_written_like_openai(seconds: float, text: str) -> None:
    from tests.llm_server import go_duration

    assert go_duration(seconds) == text
