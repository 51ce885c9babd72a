"""Talking to OpenAI-compatible chat endpoints: one `AsyncOpenAI` client per chunk.

`LLM.chat(messages, ...)` sends one chat completion with everything the engine promises:
a slot of the endpoint's shared concurrency limit for each request (`SlotPool`), the
shared requests- and tokens-per-minute limits (its tokens estimated before sending, then
settled from the reply's usage), the provider's own word on its limits (`x-ratelimit-*`
headers saying the budget is spent, or a 429, pause every worker on the endpoint, see
apps.runs.engine.limits), a per-request timeout, retries with exponential backoff
and jitter on 429, 5xx, timeouts, connection errors and garbage bodies (honouring
Retry-After), and no retry on 401/403/404, which raise `LLMError(fatal=True)` so the run
stops with a plain message instead of failing every item the same way. Every attempt is
appended to the caller's list as an `Attempt` (what was sent, the raw reply, the error,
latency, tokens); the engine stores them according to the run's logging mode.
`LLM.prompt_logprobs(prompts, ...)` asks the completions API for the prompts' token
log-probabilities (echo + logprobs, for log-likelihood choice scoring) the same way. A
`json_schema` response format the server refuses is asked again as `json_object` with the
schema (`_send_chat`), as llama-cpp-python's server takes it.

Speed (see bench/bench_generation.py): the client uses the SDK's aiohttp transport and the
SDK's low-level `post` with a raw response, and the reply JSON is read as a dict; the SDK's
typed request transform and pydantic parsing cost three times more CPU than the request.

Before anything is sent, an identical request already answered (same base URL, model,
parameters, messages and sample: `cache_key`) is answered from the cache when the run allows
it (`apps.runs.engine.cache`), at $0 and without a slot or a turn of the rate limit; and a run with
a budget reserves the request's estimated price first (`apps.runs.engine.budget`), so it stops
before a request could cross the cap (`OverBudget`), with the rate limits' token estimate
(`estimate_prompt_tokens` = `limits.prompt_tokens`, which the start forms' price uses too).

The API key never leaves this module in text, whatever a server echoes back (OpenAI's 401
quotes it masked, gateways echo the Authorization header): `Scrubber` cleans every string
that leaves, errors at one exit (`LLM._failed`), replies where `chat` returns them.
"""

import asyncio
import contextlib
import functools
import hashlib
import itertools
import json
import random
import ssl
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx2
import openai
from redis.exceptions import RedisError

from apps.runs.engine.errors import API_NAMES, RAW_LIMIT, LLMError, OverBudget, Stopped, classify
from apps.runs.engine.limits import (
    RateLimiter,
    completion_budget,
    prompt_tokens,
    request_tokens,
    spent_for,
)
from apps.runs.engine.scrub import NO_KEY, Scrubber, known_keys
from apps.runs.engine.slots import SlotPool
from apps.runs.engine.tuning import (
    BACKOFF_BASE,
    BACKOFF_CAP,
    COMPLETION_TOKENS_GUESS,
    RETRY_AFTER_CAP,
)
from apps.runs.models import Endpoint, ErrorKind


@dataclass(slots=True)
class Attempt:
    """One request (or, for rule-based judges, one evaluation) for the attempt log."""

    item_id: int
    attempt: int
    ok: bool
    request_messages: list[dict[str, str]]
    round: int | None = None
    epoch: int = 0  # which response of the item (Response.epoch)
    unit: int | None = None  # a dataset generation unit (AttemptLog.unit), not an item
    raw_reply: str = ""
    error_kind: str = ""
    error: str = ""
    traceback: str = ""
    latency_ms: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    sent: bool = False  # a request went to the endpoint (not a cache hit, not a rule)
    cached: bool = False  # answered from the cache: nothing sent, nothing spent
    saved: float = 0.0  # a cache hit's price at the endpoint's price today
    # A good reply to store in the cache (`CachedReply` fields); the engine stores it only if
    # the attempt is still ok when the result is written (a judge may reject the reply).
    cache_entry: dict[str, Any] | None = None


@dataclass(slots=True)
class Reply:
    text: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: int
    cost: float
    raw: str
    attempts: int  # requests sent for it; 0 when it came from the cache
    data: dict[str, Any] = field(default_factory=dict)
    cached: bool = False


# ---- the size and identity of a request ---------------------------------------------------------
def estimate_prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """The prompt's tokens as the rate limits estimate them (`limits.prompt_tokens`: about
    characters / 4 + 4 per message + 3), for budgets and the start forms' price."""
    return prompt_tokens(messages)


def completion_allowance(body: dict[str, Any]) -> int:
    """The most a reply to `body` may take: its max_tokens, else `COMPLETION_TOKENS_GUESS`."""
    return completion_budget(body) or COMPLETION_TOKENS_GUESS


def cache_key(
    endpoint: Endpoint, body: dict[str, Any], *, epoch: int = 0, round: int | None = None
) -> str:
    """sha256 of the request's canonical JSON: base URL, the whole body (model, parameters,
    messages) and which sample it is (epoch, judge round or pairwise order), so samples of a
    run are never collapsed into one. The API key is not part of it: one provider answers
    the same whoever pays."""
    identity = {
        "base_url": (endpoint.effective_base_url() or "https://api.openai.com/v1").rstrip("/"),
        "body": body,
        "epoch": epoch,
        "round": round,
    }
    canonical = json.dumps(
        identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def schema_refused(error: LLMError) -> bool:
    """Whether a server's error refuses a request's json_schema response format: a 400 or 422
    (a refused parameter, a FastAPI validation error), or any answer whose message names it
    (llama-cpp-python's server answers 500 quoting its validation error: "Input should be
    'text' or 'json_object'")."""
    if error.status in (400, 422):
        return True
    named = "json_schema" in error.message or "response_format" in error.message
    return error.status is not None and named


def json_object_body(body: dict[str, Any]) -> dict[str, Any] | None:
    """`body` asking for a JSON object with the same schema (`{"type": "json_object",
    "schema": …}`, which llama-cpp-python's server and others enforce with a grammar) where it
    asks for OpenAI's `json_schema`; None when it does not."""
    wanted = body.get("response_format")
    if not isinstance(wanted, dict) or wanted.get("type") != "json_schema":
        return None
    spec = wanted.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, dict) else None
    fallback: dict[str, Any] = {"type": "json_object"}
    if isinstance(schema, dict):
        fallback["schema"] = schema
    return {**body, "response_format": fallback}


class Budget(Protocol):
    """A run's spending cap, shared by every chunk (apps.runs.engine.budget.RunBudget): `reserve`
    answers 1 (reserved), 0 (it would pass the budget: stop) or -1 (wait for requests in
    flight to end)."""

    async def reserve(self, amount: float) -> int: ...

    async def settle(self, reserved: float, spent: float) -> None: ...


# A cache lookup: the stored reply's fields (CachedReply) or None.
CacheLookup = Callable[[str], Awaitable[dict[str, Any] | None]]


def parse_completion(raw: bytes, endpoint: Endpoint) -> tuple[dict[str, Any], str, str, int, int]:
    """(data, text, finish_reason, prompt_tokens, completion_tokens) of a chat completion body."""
    text_body = raw.decode("utf-8", errors="replace")
    try:
        data = json.loads(text_body)
    except ValueError:
        snippet = text_body[:200] or "(empty)"
        raise LLMError(
            ErrorKind.API_ERROR,
            f"the endpoint answered with a body that is not JSON: {snippet}",
            retryable=True,
            raw=text_body[:RAW_LIMIT],
        ) from None
    try:
        choice = data["choices"][0]
        message = choice.get("message") or {}
        content = message.get("content")
        if content is None:
            content = message.get("refusal") or ""
        if not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False)
        usage = data.get("usage") or {}
        return (
            data,
            content,
            str(choice.get("finish_reason") or ""),
            int(usage.get("prompt_tokens") or 0),
            int(usage.get("completion_tokens") or 0),
        )
    except (KeyError, IndexError, TypeError, AttributeError, ValueError):
        raise LLMError(
            ErrorKind.API_ERROR,
            f"the endpoint's reply is not a chat completion: {text_body[:200]}",
            retryable=True,
            raw=text_body[:RAW_LIMIT],
        ) from None


@dataclass(slots=True)
class PromptLogprobs:
    """One echoed prompt: its tokens, where each starts in the prompt, and each token's
    log-probability (None where the server gives none, as for the first token)."""

    text: str
    tokens: list[str]
    logprobs: list[float | None]
    offsets: list[int]


@dataclass(slots=True)
class Echo:
    """The completions API's answer to `LLM.prompt_logprobs`: one entry per prompt, in order."""

    prompts: list[PromptLogprobs]
    prompt_tokens: int
    completion_tokens: int
    cost: float = 0.0
    latency_ms: int = 0
    attempts: int = 0


def parse_echo(raw: bytes, endpoint: Endpoint, count: int) -> Echo:
    """An echo + logprobs completions body for `count` prompts. A body that is not JSON may be a
    passing fault (retried); a reply without log-probabilities is the server's way, so it is
    an error at once, never a score of 0."""
    text_body = raw.decode("utf-8", errors="replace")
    try:
        data = json.loads(text_body)
    except ValueError:
        raise LLMError(
            ErrorKind.API_ERROR,
            f"the endpoint answered with a body that is not JSON: {text_body[:200] or '(empty)'}",
            retryable=True,
            raw=text_body[:RAW_LIMIT],
        ) from None
    try:
        choices = sorted(data["choices"], key=lambda choice: int(choice.get("index") or 0))
        usage = data.get("usage") or {}
        prompts = []
        for choice in choices:
            found = choice.get("logprobs")
            if not isinstance(found, dict) or not found.get("token_logprobs"):
                raise LLMError(
                    ErrorKind.API_ERROR,
                    "the completions API returned no log-probabilities for the prompt "
                    "(it does not support echo with logprobs)",
                    raw=text_body[:RAW_LIMIT],
                )
            tokens = [str(token) for token in found["tokens"]]
            values = [None if v is None else float(v) for v in found["token_logprobs"]]
            offsets = [int(offset) for offset in found["text_offset"]]
            if not len(tokens) == len(values) == len(offsets):
                raise ValueError("tokens, token_logprobs and text_offset differ in length")
            prompts.append(PromptLogprobs(str(choice.get("text") or ""), tokens, values, offsets))
        if len(prompts) != count:
            raise LLMError(
                ErrorKind.API_ERROR,
                f"the completions API answered {len(prompts)} choices for {count} prompts",
                raw=text_body[:RAW_LIMIT],
            )
        return Echo(
            prompts,
            int(usage.get("prompt_tokens") or 0),
            int(usage.get("completion_tokens") or 0),
        )
    except (KeyError, IndexError, TypeError, AttributeError, ValueError):
        raise LLMError(
            ErrorKind.API_ERROR,
            f"the endpoint's reply is not a completion with log-probabilities: {text_body[:200]}",
            retryable=True,
            raw=text_body[:RAW_LIMIT],
        ) from None


def _usage(parsed: Any) -> tuple[int, int]:
    """(prompt, completion) tokens of a parsed reply: a chat completion's tuple or an Echo."""
    if isinstance(parsed, Echo):
        return parsed.prompt_tokens, parsed.completion_tokens
    return int(parsed[3]), int(parsed[4])


# ---- the client ---------------------------------------------------------------------------------
@functools.cache
def tls_context() -> ssl.SSLContext:
    """Loading the CA bundle costs ~30 ms: once per process, not once per chunk."""
    return httpx2.create_ssl_context()


def _sdk_platform() -> Any:
    """The SDK works out the OS on each client's first request, in a thread per request in
    flight (128 threads × 10 ms of `platform.platform()` at the start of every chunk)."""
    try:
        from openai._base_client import get_platform

        return get_platform()
    except Exception:  # a newer SDK: let it do its own thing
        return None


# Made at import, so an RQ worker has them before it forks a work horse for each job.
tls_context()
SDK_PLATFORM = _sdk_platform()


def make_client(endpoint: Endpoint, connections: int) -> openai.AsyncOpenAI:
    """One AsyncOpenAI client whose connection pool matches the concurrency it will use."""
    timeout = float(endpoint.timeout_seconds)
    limits = httpx2.Limits(max_connections=connections, max_keepalive_connections=connections)
    http = openai.DefaultAioHttpClient(
        limits=limits,
        timeout=httpx2.Timeout(timeout, connect=min(timeout, 10.0)),
        verify=tls_context(),
    )
    client = openai.AsyncOpenAI(
        api_key=endpoint.api_key() or NO_KEY,
        base_url=endpoint.effective_base_url(),
        max_retries=0,  # ours: shared limits, jitter, logs, and fatal errors stop the run
        timeout=timeout,
        http_client=http,
    )
    if SDK_PLATFORM is not None and getattr(client, "_platform", "") is None:
        client._platform = SDK_PLATFORM
    return client


def sampling_params(endpoint: Endpoint) -> dict[str, Any]:
    """The endpoint's sampling parameters that are set (sent in every request body)."""
    return {
        k: v
        for k, v in {
            "temperature": endpoint.temperature,
            "top_p": endpoint.top_p,
            "max_tokens": endpoint.max_tokens,
            "seed": endpoint.seed,
        }.items()
        if v is not None
    }


def chat_body(endpoint: Endpoint, messages: list[dict[str, str]], **params: Any) -> dict[str, Any]:
    """The body of a chat completion request, exactly as `LLM.chat` sends it (batch mode
    writes these into its JSONL files)."""
    body = {
        **(endpoint.extra_params or {}),
        **sampling_params(endpoint),
        **params,
        "model": endpoint.model,
    }
    body["messages"] = messages
    return body


class LLM:
    """Chat requests to one endpoint for one chunk, within the shared limits."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        slots: SlotPool | None,
        rate: RateLimiter | None,
        stop: asyncio.Event,
        connections: int | None = None,
        max_retries: int | None = None,
        cache: CacheLookup | None = None,
        budget: Budget | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.cache = cache  # None: no reuse (the run said so, or an overwrite)
        self.budget = budget
        self.slots = slots
        self.rate = rate
        self.stop = stop
        self.timeout = float(endpoint.timeout_seconds)
        self.max_retries = endpoint.max_retries if max_retries is None else max_retries
        self.client = make_client(endpoint, connections or endpoint.concurrency_limit)
        self.scrub = Scrubber(known_keys(endpoint))
        self._params = sampling_params(endpoint)
        self._extra = dict(endpoint.extra_params or {})
        self._price = endpoint.price_per_million()
        # The server refused a json_schema response format: ask for json_object (see _send_chat).
        self._json_object_only = False
        # Our own idempotency keys: the SDK would draw one from os.urandom per request.
        self._request_ids = (f"evalsite-{uuid.uuid4().hex}-{n}" for n in itertools.count())

    async def close(self) -> None:
        await self.client.close()

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self._price[0] + completion_tokens * self._price[1]) / 1_000_000

    async def chat(
        self,
        messages: list[dict[str, str]],
        *,
        log: list[Attempt],
        item_id: int,
        round: int | None = None,
        epoch: int = 0,
        **params: Any,
    ) -> Reply:
        """One chat completion with retries; raises `LLMError` (or `Stopped`) when it gives up.
        An identical request answered before comes from the cache when allowed (`cache`)."""
        body = {
            **self._extra,
            **self._params,
            **params,
            "model": self.endpoint.model,
            "messages": messages,
        }
        key = cache_key(self.endpoint, body, epoch=epoch, round=round)
        if self.cache is not None:
            hit = await self.cache(key)
            if hit is not None:
                return self._cached(hit, messages, log, item_id, round, epoch)
        reserved = 0.0
        if self.budget is not None:
            reserved = self.estimate_cost(body)
            await self._reserve(self.budget, reserved)
        spent = 0.0
        try:
            raw, parsed, attempt, latency = await self._send_chat(
                body, messages, log, item_id, round, epoch
            )
            data, text, finish, ptok, ctok = parsed
            cost = spent = self.cost(ptok, ctok)
            text = self.scrub(text)
            entry = {
                "key": key,
                "model": self.endpoint.model,
                "content": text,
                "finish_reason": finish[:32],
                "prompt_tokens": ptok,
                "completion_tokens": ctok,
                "cost": cost,
            }
            raw_text = self._log_ok(
                raw, messages, log, item_id, round, epoch, attempt, latency, ptok, ctok, entry
            )
            return Reply(text, finish, ptok, ctok, latency, cost, raw_text, attempt, data)
        finally:
            if self.budget is not None:
                await self.budget.settle(reserved, spent)

    async def _send_chat(
        self,
        body: dict[str, Any],
        messages: list[dict[str, str]],
        log: list[Attempt],
        item_id: int,
        round: int | None,
        epoch: int,
    ) -> tuple[bytes, Any, int, int]:
        """`_send` of a chat body; a `json_schema` response format the server refuses
        (`schema_refused`: llama-cpp-python's server knows only `json_object`, which takes the
        schema beside it) is sent again at once as `json_object` with the same schema, and once
        that is answered, so is every later request of this client."""
        fallback = json_object_body(body)
        if fallback is not None and self._json_object_only:
            body, fallback = fallback, None
        try:
            return await self._send(
                "/chat/completions", body, messages, parse_completion, log, item_id, round, epoch,
                give_up=schema_refused if fallback is not None else None,
            )  # fmt: skip
        except LLMError as exc:
            if fallback is None or not schema_refused(exc):
                raise
        answer = await self._send(
            "/chat/completions", fallback, messages, parse_completion, log, item_id, round, epoch
        )
        self._json_object_only = True
        return answer

    async def _reserve(self, budget: Budget, amount: float) -> None:
        """Reserve `amount` of the budget, waiting while requests in flight hold it; a
        reservation a dead worker left behind is waited out for as long as one request of
        this endpoint may take, then counted as spent."""
        patience = (self.timeout + 5) * (self.max_retries + 1) + BACKOFF_CAP * self.max_retries
        deadline = time.monotonic() + patience
        delay = 0.02
        while True:
            if self.stop.is_set():
                raise Stopped
            answer = await budget.reserve(amount)
            if answer > 0:
                return
            if answer == 0 or time.monotonic() > deadline:
                raise OverBudget
            await asyncio.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 1.5, 0.25)

    def estimate_cost(self, body: dict[str, Any]) -> float:
        """The most this request is expected to cost: its estimated prompt and its whole
        completion allowance."""
        return self.cost(estimate_prompt_tokens(body["messages"]), completion_allowance(body))

    def _cached(
        self,
        hit: dict[str, Any],
        messages: list[dict[str, str]],
        log: list[Attempt],
        item_id: int,
        round: int | None,
        epoch: int,
    ) -> Reply:
        """The stored reply as the plug-in would have got it, costing nothing now; its
        attempt records what it saved (at today's price) and spends no tokens."""
        ptok, ctok = int(hit["prompt_tokens"]), int(hit["completion_tokens"])
        text = hit["content"]
        log.append(
            Attempt(
                item_id=item_id,
                round=round,
                epoch=epoch,
                attempt=1,
                ok=True,
                request_messages=messages,
                raw_reply=text[:RAW_LIMIT],
                cached=True,
                saved=self.cost(ptok, ctok),
            )
        )
        return Reply(text, hit["finish_reason"], ptok, ctok, 0, 0.0, text, 0, cached=True)

    async def prompt_logprobs(
        self, prompts: list[str], *, log: list[Attempt], item_id: int, max_tokens: int = 0
    ) -> "Echo":
        """The log-probability of every token of each prompt, from the completions API asked to
        echo the prompts and generate nothing (`echo`, `logprobs=1`, `max_tokens=0`; 1 for a
        server that reads 0 as "no limit": the token it makes is not part of the prompt), all
        prompts in one request. Same limits, retries and logs as `chat`; only the endpoint's
        `extra_params` go along (sampling settings mean nothing here)."""
        body = {
            **self._extra,
            "model": self.endpoint.model,
            "prompt": prompts,
            "echo": True,
            "logprobs": 1,
            "max_tokens": max_tokens,
        }
        shown = [{"role": "prompt", "content": prompt} for prompt in prompts]
        parse = functools.partial(parse_echo, count=len(prompts))
        raw, echo, attempt, latency = await self._send(
            "/completions", body, shown, parse, log, item_id, None, 0
        )
        echo.cost = self.cost(echo.prompt_tokens, echo.completion_tokens)
        echo.latency_ms, echo.attempts = latency, attempt
        self._log_ok(
            raw, shown, log, item_id, None, 0, attempt, latency, echo.prompt_tokens,
            echo.completion_tokens,
        )  # fmt: skip
        return echo

    def _log_ok(
        self,
        raw: bytes,
        messages: list[dict[str, str]],
        log: list[Attempt],
        item_id: int,
        round: int | None,
        epoch: int,
        attempt: int,
        latency: int,
        ptok: int,
        ctok: int,
        cache_entry: dict[str, Any] | None = None,
    ) -> str:
        raw_text = self.scrub(raw.decode("utf-8", errors="replace")[:RAW_LIMIT])
        log.append(
            Attempt(
                item_id=item_id,
                round=round,
                epoch=epoch,
                attempt=attempt,
                ok=True,
                request_messages=messages,
                raw_reply=raw_text,
                latency_ms=latency,
                prompt_tokens=ptok,
                completion_tokens=ctok,
                cost=self.cost(ptok, ctok),
                sent=True,
                cache_entry=cache_entry,
            )
        )
        return raw_text

    async def _send(
        self,
        path: str,
        body: dict[str, Any],
        messages: list[dict[str, str]],
        parse: Callable[[bytes, Endpoint], Any],
        log: list[Attempt],
        item_id: int,
        round: int | None,
        epoch: int,
        give_up: Callable[[LLMError], bool] | None = None,
    ) -> tuple[bytes, Any, int, int]:
        """Post `body` to `path` until it is answered and `parse` accepts the reply, within the
        shared limits (requests and tokens) and with backoff; returns (raw, parsed, attempt
        number, latency ms). Failed attempts are logged here, the good one by the caller. An
        error for which `give_up` says so is raised at once, retryable or not."""
        max_tokens = completion_budget(body)
        tokens = request_tokens(messages, max_tokens)
        attempt = 0
        while True:
            attempt += 1
            if self.stop.is_set():
                raise Stopped
            if self.rate is not None and not await self.rate.wait(self.stop, tokens):
                raise Stopped
            # The AIMD pace this request goes out at: a 429 to it cuts the pace only if no
            # other 429 has since (see RateLimiter.cut).
            epoch = 0
            if self.rate is not None:
                epoch = self.rate.epoch
                self.rate.note_sent()
            # Outside the try: a Redis failure here is the chunk's problem, not the item's.
            lease = await self.slots.acquire() if self.slots is not None else None
            started = time.perf_counter()
            error: LLMError | None = None
            headers: Any = None
            try:
                try:
                    raw, headers = await self._post(body, path)
                finally:
                    if lease is not None:
                        self.slots.release(lease)  # type: ignore[union-attr]
                latency = int((time.perf_counter() - started) * 1000)
                parsed = parse(raw, self.endpoint)
            except Exception as exc:
                latency = int((time.perf_counter() - started) * 1000)
                if headers is None and isinstance(exc, openai.APIStatusError):
                    headers = exc.response.headers
                failed = Attempt(
                    item_id,
                    attempt,
                    False,
                    messages,
                    round=round,
                    epoch=epoch,
                    latency_ms=latency,
                    sent=True,
                )
                error = self._failed(exc, failed, path)
                log.append(failed)
            if error is not None:
                if self.rate is not None:
                    await self._rate_limited(error, headers, tokens, attempt, epoch)
                # Raised out here, not in the except block: the SDK's exception, with the text
                # the server sent, does not ride along as the scrubbed error's __context__.
                if error.fatal or not error.retryable or attempt > self.max_retries:
                    raise error
                if give_up is not None and give_up(error):
                    raise error
                await self._backoff(attempt, error.retry_after)
                continue
            if self.rate is not None:
                ptok, ctok = _usage(parsed)
                await self._spent(headers, tokens, ptok, ctok, max_tokens)
            return raw, parsed, attempt, latency

    async def _spent(
        self, headers: Any, tokens: int, ptok: int, ctok: int, max_tokens: int | None
    ) -> None:
        """After an answer: settle the token budget to what the provider counts (the real
        prompt, plus max_tokens, which it reserves whatever the reply uses, or the real
        completion when none was set) and pause everyone if it says its budget is spent."""
        assert self.rate is not None
        # The answer is in hand: a Redis blip here must not fail the item (the budget is off
        # by one request's correction at worst).
        with contextlib.suppress(RedisError, OSError):
            if headers is not None:
                await self.rate.learn(headers)
            if ptok > 0:
                await self.rate.settle(tokens, ptok + (max_tokens or ctok))
            if headers is not None and (wait := spent_for(headers, tokens)) > 0:
                await self.rate.pause(wait)

    async def _rate_limited(
        self, error: LLMError, headers: Any, tokens: int, attempt: int, epoch: int
    ) -> None:
        """A 429 stops every worker on the account for its Retry-After (or as long as the
        headers say the budget needs, or one backoff step), not only this request, and cuts
        the AIMD pace; the provider did not count the refused request, so its tokens come
        back."""
        assert self.rate is not None
        if not error.rate_limited:
            return
        self.rate.note_sent(refused=True)
        wait = error.retry_after
        if wait is None and headers is not None:
            wait = spent_for(headers, tokens) or None
        if wait is None:
            wait = min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1))
        # This chunk's lanes stop at once, before any Redis round trip: a provider that
        # refuses at once would refuse each lane's next request too meanwhile.
        self.rate.note_pause(int(min(wait, RETRY_AFTER_CAP) * 1000))
        await self.rate.pause(min(wait, RETRY_AFTER_CAP))
        await self.rate.cut(epoch, min(wait, RETRY_AFTER_CAP))
        if headers is not None:
            await self.rate.learn(headers)
        await self.rate.settle(tokens, 0)

    def _failed(
        self, exc: Exception, attempt: Attempt, path: str = "/chat/completions"
    ) -> LLMError:
        """The only way error text leaves the client: classified, then scrubbed, so what the
        engine stores (Run.error, Response.error, judge rounds, attempt logs), shows, exports
        or logs cannot carry a key the server quoted back. Fills in the failed attempt."""
        found = classify(exc, self.endpoint, self.timeout, api=API_NAMES.get(path, "chat"))
        error = LLMError(
            found.kind,
            self.scrub.error(found.message),
            retryable=found.retryable,
            fatal=found.fatal,
            retry_after=found.retry_after,
            raw=self.scrub.error(found.raw),
            attempts=attempt.attempt,
            rate_limited=found.rate_limited,
            status=found.status,
        )
        attempt.raw_reply, attempt.error_kind, attempt.error = error.raw, error.kind, error.message
        attempt.traceback = self.scrub.error("".join(traceback.format_exception(exc)))
        return error

    async def _post(
        self, body: dict[str, Any], path: str = "/chat/completions"
    ) -> tuple[bytes, Any]:
        # A hard bound over the SDK's own timeout: aiohttp's read timeout is per read,
        # so a server trickling bytes could otherwise hold a request forever.
        async with asyncio.timeout(self.timeout + 5):
            response = await self.client.post(
                path,
                body=body,
                cast_to=httpx2.Response,
                options={"idempotency_key": next(self._request_ids)},
            )
            return await response.aread(), response.headers

    async def _backoff(self, attempt: int, retry_after: float | None) -> None:
        delay = min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1))
        delay = delay / 2 + random.random() * delay / 2  # "equal jitter": never zero
        if retry_after is not None:
            delay = max(delay, min(retry_after, RETRY_AFTER_CAP) * (1 + random.random() * 0.1))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stop.wait(), timeout=delay)
        if self.stop.is_set():
            raise Stopped


# ---- test connection --------------------------------------------------------------------------
@dataclass
class ConnectionCheck:
    ok: bool
    message: str
    latency_ms: int = 0


async def _check(endpoint: Endpoint) -> ConnectionCheck:
    stop = asyncio.Event()
    llm = LLM(endpoint, slots=None, rate=None, stop=stop, connections=1, max_retries=0)
    llm.timeout = min(llm.timeout, 20.0)
    log: list[Attempt] = []
    try:
        reply = await llm.chat(
            [{"role": "user", "content": "Reply with the single word OK."}],
            log=log,
            item_id=0,
            max_tokens=5,
        )
    except LLMError as exc:
        return ConnectionCheck(False, exc.message)  # scrubbed by the client, like the reply
    finally:
        await llm.close()
    shown = reply.text.strip()[:200] or "(an empty reply)"
    note = "" if endpoint.api_key() else " (no API key is set; it answered without one)"
    return ConnectionCheck(
        True,
        f"Connected: {endpoint.model} answered “{shown}” in {reply.latency_ms} ms{note}.",
        reply.latency_ms,
    )


# A probe waits this long at most for an answer (less if the endpoint's own timeout is less):
# long enough for a CPU server to read a few prompts, short enough that a form does not hang.
PROBE_TIMEOUT = 60.0


def probe_client(endpoint: Endpoint) -> LLM:
    """A client for asking an endpoint once before a run: one connection, no retries (a probe
    says what is wrong at once), no shared limits, and no longer than `PROBE_TIMEOUT` a request."""
    llm = LLM(endpoint, slots=None, rate=None, stop=asyncio.Event(), connections=1, max_retries=0)
    llm.timeout = min(llm.timeout, PROBE_TIMEOUT)
    return llm


def run_async[T](coro: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run` from sync code, even where this thread already runs an event loop
    (an ASGI server's, Playwright's in tests): then in a thread of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="run-async") as pool:
        return pool.submit(asyncio.run, coro).result()


def test_connection(endpoint: Endpoint) -> ConnectionCheck:
    """One tiny request, no retries; the answer or the error in plain words."""
    return run_async(_check(endpoint))


test_connection.__test__ = False  # type: ignore[attr-defined]  # not a pytest test
