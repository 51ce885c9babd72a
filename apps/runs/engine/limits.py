"""Limits shared by every chunk on every worker, kept in Redis.

- `EndpointSemaphore`: at most `limit` requests in flight to one endpoint. A ZSET of lease
  ids scored by their expiry (Redis server time, so machines' clocks do not matter);
  acquiring is one Lua script (drop expired leases, add ours if there is room). Holders renew
  their leases while alive (`renew`), so a worker killed with SIGKILL frees its slots when
  its leases expire, `SLOT_LEASE_SECONDS` later at most.
- `RateLimiter`: the provider's requests-per-minute and tokens-per-minute limits as two
  GCRAs (token buckets kept as one "theoretical arrival time" each): requests are spaced
  60/rpm seconds apart with a burst of at most `burst` requests, and a request of n tokens
  waits its n × 60/tpm seconds of the token budget (a burst of `token_burst` tokens). One Lua
  call per request checks both budgets and the shared pause and spends both, or answers
  "wait this long" and spends nothing. A reply's real usage corrects the token budget
  (`settle`), so an estimate that is off does not drift over a long run. `pause` makes every
  worker on the endpoint wait (a 429's Retry-After, or headers saying the provider's budget
  is spent: `spent_for`). The limits a provider states in its
  `x-ratelimit-limit-*` headers are kept to like the endpoint's own (`learn`: the lower of
  the two wins), shared through Redis so every worker paces to them.

A provider counts its limits per account, not per endpoint saved here: two endpoints with the
same base URL, key and model (another temperature, say) spend one budget. So the budgets, the
pause and the learned limits are kept per account (`account_scope`: a hash of the base URL,
the model and the key, never the key itself), and a second endpoint on the same account is
paced from its first request. The model is part of it because providers (OpenAI among them)
state different limits per model on one key: two models kept as one account would make their
learned limits overwrite each other. Only the concurrency limit stays the endpoint's own.

Tokens are estimated before sending (`request_tokens`) the way OpenAI's own limiter does: it
does not tokenize either, it guesses from the characters and adds max_tokens, reserved at
request time whatever the reply uses. Our guess, without tiktoken (its encodings would be
fetched from the network): ceil(ASCII characters / 4) + one token per other character (CJK
text is about one token a character, accented Latin less) + 4 per message + 3 for the reply's
priming, as OpenAI's cookbook counts chat messages. OpenAI's rule of thumb is a token per ~4
characters of English, so for prose the guess is about what OpenAI counts; short text full
of digits and symbols it undercounts ("Q: What is 2 + 2?" is 5 here, ~8 in cl100k), which the
per-message overhead partly covers and the reply's usage settles. The loopback test server
counts words, fewer than this (a 159-character sentence of 24 words is 40 here): there the
budget is reserved a third too high until each reply settles it.
"""

import asyncio
import contextlib
import hashlib
import math
import random
import re
import time
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings

from apps.runs.engine.tuning import (
    AIMD_DECREASE,
    AIMD_RAMP,
    AIMD_TOP,
    AIMD_TTL,
    COMPLETION_TOKENS_GUESS,
    LEARNED_REFRESH,
    LEARNED_TTL,
    RATE_PAUSE_CAP,
    SLOT_LEASE_SECONDS,
)

KEY_PREFIX = "evalsite"

_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local limit = tonumber(ARGV[1])
local want = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
local free = limit - redis.call('ZCARD', KEYS[1])
local got = {}
for i = 1, math.min(want, free) do
  redis.call('ZADD', KEYS[1], now + ttl, ARGV[3 + i])
  got[#got + 1] = ARGV[3 + i]
end
redis.call('PEXPIRE', KEYS[1], ttl * 4)
return got
"""

_RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[i])
end
redis.call('PEXPIRE', KEYS[1], ttl * 4)
return 1
"""

# The AIMD pace (see `RateLimiter.cut`) in a hash: rpm set by the last cut, at (its Redis time,
# s), step (RPM gained a second since), top (the most it grows to), epoch (cuts so far).
_PACE = """
local function pace(key, now_s)
  local a = redis.call('HMGET', key, 'rpm', 'at', 'step', 'top', 'epoch')
  if not a[1] then return nil, tonumber(a[5] or '0') end
  local grown = tonumber(a[1]) + tonumber(a[3]) * math.max(0, now_s - tonumber(a[2]))
  return math.min(grown, tonumber(a[4])), tonumber(a[5])
end
"""

# KEYS requests tat, tokens tat, pause, pace. ARGV request interval µs (0: no RPM limit),
# request burst, µs per token (0: no TPM limit), token tolerance µs, tokens of this request.
# Both budgets are GCRAs; a request goes only if both (and no pause) let it, and then spends
# both. The AIMD pace, where there is one and it is stricter, spaces requests without a burst.
# A request bigger than the token burst goes when the token budget is idle, else it could
# never go. Returns {0 (go) or the µs to wait, the pace's epoch}.
_SPEND = (
    _PACE
    + """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local rpm, epoch = pace(KEYS[4], now / 1000000)
local paused = redis.call('PTTL', KEYS[3])
if paused > 0 then return {paused * 1000, epoch} end
local r_int = tonumber(ARGV[1])
local r_tol = r_int * tonumber(ARGV[2])
if rpm then
  local a_int = math.floor(60000000 / math.max(rpm, 0.01))
  if a_int > r_int then
    r_int = a_int
    r_tol = a_int
  end
end
local t_int = tonumber(ARGV[3])
local t_tol = tonumber(ARGV[4])
local cost = tonumber(ARGV[5])
local wait = 0
local r_new = 0
local t_new = 0
if r_int > 0 then
  local tat = tonumber(redis.call('GET', KEYS[1]) or now)
  if tat < now then tat = now end
  r_new = tat + r_int
  if r_new - now > r_tol then wait = math.max(wait, r_new - r_tol - now) end
end
if t_int > 0 and cost > 0 then
  local tat = tonumber(redis.call('GET', KEYS[2]) or now)
  local idle = tat <= now
  if tat < now then tat = now end
  t_new = tat + cost * t_int
  if t_new - now > t_tol and not idle then
    wait = math.max(wait, math.min(t_new - t_tol, tat) - now)
  end
end
if wait > 0 then return {wait, epoch} end
if r_int > 0 then
  redis.call('SET', KEYS[1], r_new, 'PX', math.ceil((r_new - now) / 1000) + 1000)
end
if t_new > 0 then
  redis.call('SET', KEYS[2], t_new, 'PX', math.ceil((t_new - now) / 1000) + 60000)
end
return {0, epoch}
"""
)

# KEYS answered; ARGV how many. Requests the provider took (sent, less those refused with a 429),
# per second of Redis time, and since when ('since', s) they are counted: what `_CUT` takes the
# provider's limit from. Counted when sent, not when answered: in a burst the provider has
# taken far more than it has answered.
_ANSWERED = """
local t = redis.call('TIME')
local s = tonumber(t[1])
redis.call('HINCRBY', KEYS[1], s, tonumber(ARGV[1]))
redis.call('HSETNX', KEYS[1], 'since', tostring(s + tonumber(t[2]) / 1000000))
if redis.call('HLEN', KEYS[1]) > 90 then
  for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
    if field ~= 'since' and tonumber(field) <= s - 60 then redis.call('HDEL', KEYS[1], field) end
  end
end
redis.call('EXPIRE', KEYS[1], 120)
return 1
"""

# KEYS pace, answered; ARGV epoch the refused request was sent in, decrease, ramp s, top
# factor, ttl s, this process's count not yet reported (as `_ANSWERED`), the 429's retry-after
# s. A 429 sent before the last cut says nothing new: no cut. The first cut paces to what the
# provider took of ours over the last minute: per minute, over the time counted (and the
# retry-after, when the two span half a minute or more: a run a few seconds old whose burst
# filled a minute's window is told to wait out most of that minute, and its count is the
# window's, not a few seconds'; a short retry-after says nothing of a minute's window) when
# that is shorter. A later cut paces to `decrease` times the pace, never above that count. The
# pace then grows by what the cut took over `ramp` s. Returns {rpm × 1000 (0: no cut), epoch}.
_CUT = (
    _PACE
    + """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local rpm, epoch = pace(KEYS[1], now)
if tonumber(ARGV[6]) ~= 0 then
  redis.call('HINCRBY', KEYS[2], t[1], tonumber(ARGV[6]))
  redis.call('HSETNX', KEYS[2], 'since', tostring(now))
  redis.call('EXPIRE', KEYS[2], 120)
end
if tonumber(ARGV[1]) < epoch then return {0, epoch} end
local count, since = 0, nil
local answered = redis.call('HGETALL', KEYS[2])
for i = 1, #answered, 2 do
  if answered[i] == 'since' then
    since = tonumber(answered[i + 1])
  elseif tonumber(answered[i]) > tonumber(t[1]) - 60 then
    count = count + tonumber(answered[i + 1])
  end
end
local counted = 60
if since then counted = math.max(1, now - since) end
local seen = count * 60 / math.min(60, counted)
local told = counted + tonumber(ARGV[7])
if told < 30 then told = counted end
local first = count * 60 / math.min(60, told)
local decrease = tonumber(ARGV[2])
local new
if rpm then
  new = rpm * decrease
  if count > 0 then new = math.min(new, seen) end
elseif count > 0 then
  new = first
else
  return {0, epoch}
end
new = math.max(new, 1)
epoch = epoch + 1
redis.call('HSET', KEYS[1], 'rpm', tostring(new), 'at', tostring(now),
  'step', tostring((1 - decrease) * new / tonumber(ARGV[3])),
  'top', tostring(new * tonumber(ARGV[4])), 'epoch', epoch)
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[5]))
return {math.floor(new * 1000), epoch}
"""
)

# KEYS pace. The pace now (rpm × 1000; 0: none) and its epoch.
_READ_PACE = (
    _PACE
    + """
local t = redis.call('TIME')
local rpm, epoch = pace(KEYS[1], tonumber(t[1]) + tonumber(t[2]) / 1000000)
return {math.floor((rpm or 0) * 1000), epoch}
"""
)

# KEYS tokens tat; ARGV µs to add (negative: a refund). A refund never makes room beyond the
# burst: the next spend starts from max(tat, now).
_SETTLE = """
local tat = redis.call('GET', KEYS[1])
if not tat then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local new = tonumber(tat) + tonumber(ARGV[1])
redis.call('SET', KEYS[1], new, 'PX', math.max(math.ceil((new - now) / 1000), 0) + 60000)
return 1
"""

# KEYS pause; ARGV ms. Every worker waits at least that long from now; a longer pause stays.
_PAUSE = """
local ms = tonumber(ARGV[1])
if redis.call('PTTL', KEYS[1]) < ms then
  redis.call('SET', KEYS[1], '1', 'PX', ms)
  return ms
end
return 0
"""


def async_redis(max_connections: int = 16) -> Any:
    """An asyncio Redis client on the same server as the RQ queue.

    A blocking pool: a burst of lanes waits for a connection instead of failing.
    """
    import redis.asyncio

    config: dict[str, Any] = settings.RQ_QUEUES["default"]
    options: dict[str, Any] = {"max_connections": max_connections, "timeout": 60}
    if url := config.get("URL"):
        pool = redis.asyncio.BlockingConnectionPool.from_url(url, **options)
    else:
        pool = redis.asyncio.BlockingConnectionPool(
            host=config.get("HOST", "localhost"),
            port=config.get("PORT", 6379),
            db=config.get("DB", 0),
            username=config.get("USERNAME"),
            password=config.get("PASSWORD"),
            **options,
        )
    return redis.asyncio.Redis(connection_pool=pool)


class EndpointSemaphore:
    """Leases on an endpoint's concurrency limit, shared across processes and machines."""

    def __init__(self, client: Any, endpoint_id: int, limit: int) -> None:
        self.client = client
        self.key = f"{KEY_PREFIX}:endpoint:{endpoint_id}:inflight"
        self.limit = max(1, limit)
        self.held: set[str] = set()
        self._acquire = client.register_script(_ACQUIRE)
        self._renew = client.register_script(_RENEW)

    async def try_acquire(self, want: int = 1) -> list[str]:
        ids = [uuid.uuid4().hex for _ in range(want)]
        got = await self._acquire(
            keys=[self.key], args=[self.limit, want, int(SLOT_LEASE_SECONDS * 1000), *ids]
        )
        leases = [g.decode() if isinstance(g, bytes) else g for g in got]
        self.held.update(leases)
        return leases

    async def acquire(self, stop: asyncio.Event | None = None) -> str | None:
        """Wait for a free slot; None if `stop` was set while waiting."""
        delay = 0.005
        while stop is None or not stop.is_set():
            leases = await self.try_acquire(1)
            if leases:
                return leases[0]
            # Jitter keeps waiting lanes of several workers from polling in step.
            await asyncio.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 1.5, 0.05)
        return None

    async def release(self, lease: str) -> None:
        self.held.discard(lease)
        await self.client.zrem(self.key, lease)

    async def renew(self) -> None:
        if self.held:
            await self._renew(keys=[self.key], args=[int(SLOT_LEASE_SECONDS * 1000), *self.held])

    async def release_all(self) -> None:
        if self.held:
            await self.client.zrem(self.key, *self.held)
            self.held.clear()

    async def in_flight(self) -> int:
        return int(await self.client.zcard(self.key))


# ---- estimating a request's tokens -----------------------------------------------------------
PER_MESSAGE = 4  # role, separators: OpenAI's cookbook counts 3–4 per chat message
REPLY_PRIMING = 3  # every reply is primed with <|start|>assistant<|message|>


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: only text counts here
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def text_tokens(text: str) -> int:
    """A conservative token count of `text` without a tokenizer (see the module's docstring)."""
    ascii_chars = len(text.encode("ascii", "ignore"))
    return math.ceil(ascii_chars / 4) + (len(text) - ascii_chars)


def prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """The prompt's estimated tokens: each message's text, its overhead, the reply's priming."""
    return REPLY_PRIMING + sum(
        PER_MESSAGE + text_tokens(_content_text(m.get("content"))) for m in messages
    )


def completion_budget(body: Mapping[str, Any]) -> int | None:
    """The completion tokens a request reserves: its max_tokens (or max_completion_tokens)."""
    for name in ("max_completion_tokens", "max_tokens"):
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def request_tokens(messages: list[dict[str, Any]], max_tokens: int | None) -> int:
    """What one request costs the TPM budget before it is sent: the prompt's estimate plus
    max_tokens, or `COMPLETION_TOKENS_GUESS` when the request sets none (then the reply's
    usage settles the real number)."""
    return prompt_tokens(messages) + (max_tokens or COMPLETION_TOKENS_GUESS)


# ---- what providers say in their headers -----------------------------------------------------
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(h|ms|m|s|us|µs|μs|ns)")
_UNIT = {
    "h": 3600.0,
    "m": 60.0,
    "s": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ns": 1e-9,
}


def parse_duration(value: str | None) -> float | None:
    """Seconds in an `x-ratelimit-reset-*` value: OpenAI writes Go durations ("1s", "6m0s",
    "20ms", "1h2m3.5s"); others write plain seconds ("2", "0.5"). None if unreadable."""
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    with contextlib.suppress(ValueError):
        seconds = float(text)
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    total, at = 0.0, 0
    for match in _DURATION_PART.finditer(text):
        if match.start() != at:
            return None
        total += float(match.group(1)) * _UNIT[match.group(2)]
        at = match.end()
    return total if at == len(text) and at > 0 else None


def _header_int(headers: Mapping[str, str], name: str) -> int | None:
    value = headers.get(name)
    if value is None:
        return None
    with contextlib.suppress(ValueError):
        return int(float(value))
    return None


def spent_for(headers: Mapping[str, str], tokens: int) -> float:
    """Seconds until the provider has room for one more request of `tokens` tokens, by its
    `x-ratelimit-*` headers; 0 when it says there is room (or says nothing).

    `reset` is the time until the budget is whole again (OpenAI's meaning); the budget is
    taken to come back evenly over it, which is exactly OpenAI's token bucket and a fair guess
    for a sliding window, so the wait for `need` units is reset × (need − remaining) /
    (limit − remaining), never more than reset.
    """
    wait = 0.0
    for kind, need in (("requests", 1), ("tokens", tokens)):
        remaining = _header_int(headers, f"x-ratelimit-remaining-{kind}")
        if remaining is None or remaining >= need:
            continue
        reset = parse_duration(headers.get(f"x-ratelimit-reset-{kind}"))
        if reset is None:
            continue
        limit = _header_int(headers, f"x-ratelimit-limit-{kind}")
        if limit is not None and limit > remaining:
            share = min(1.0, (need - remaining) / (limit - remaining))
            wait = max(wait, reset * share)
        else:
            wait = max(wait, reset)
    return wait


# ---- whose budget -----------------------------------------------------------------------------
# What the OpenAI SDK sends to when an endpoint names no base URL (nor $OPENAI_BASE_URL).
DEFAULT_BASE_URL = "https://api.openai.com/v1"


def account_scope(endpoint: Any) -> str:
    """The provider account an endpoint's requests count against, as a Redis key part:
    "account:" and a SHA-256 of its base URL (scheme and host in lower case, no trailing
    slash), its model and its API key. The key is only ever an input of the hash, which
    nothing stores: Redis, pages and logs see 32 hex digits."""
    parts = urlsplit((endpoint.effective_base_url() or DEFAULT_BASE_URL).strip())
    base = urlunsplit(
        (parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/"), parts.query, "")
    )
    seen = "\n".join(("evalsite provider account", base, endpoint.model, endpoint.api_key()))
    return "account:" + hashlib.sha256(seen.encode()).hexdigest()[:32]


def _scope(scope: int | str) -> str:
    """An account scope as is; a bare endpoint id (tests, tools) is a scope of its own."""
    return scope if isinstance(scope, str) else f"endpoint:{scope}"


# ---- the shared budgets ---------------------------------------------------------------------
class RateLimiter:
    """Requests and tokens per minute for one provider account (`scope`: see
    `account_scope`), across every worker and endpoint (GCRAs in Redis), and its shared pause.

    Without an RPM or TPM limit (nor an AIMD pace) no Redis call is made per request: the
    pause is then read by the chunk's poll (`sync`, every `RATE_POLL` s) and obeyed from
    memory.

    A provider that states no limits and answers 429 past them is paced by additive increase
    / multiplicative decrease (`cut`, shared through Redis): its first 429 paces every worker
    to what it took of ours over the last minute (a young run's count spread over its age, and
    over the 429's retry-after too when that makes half a minute or more), and each later one
    cuts that pace by
    `AIMD_DECREASE`; in between the pace grows back linearly, by what the last cut took over
    `AIMD_RAMP` s. The provider's limit is then found again and again at the cost of one 429 or
    two, instead of each worker's lanes rushing into it whenever a pause ends. A 429 that
    answers a request sent before the last cut cuts nothing: the pace it was sent at is
    already gone (TCP's "once per window").
    """

    def __init__(
        self,
        client: Any,
        scope: int | str,
        rpm: int | None = None,
        burst: int | None = None,
        *,
        tpm: int | None = None,
        token_burst: int | None = None,
    ) -> None:
        self.client = client
        scope = _scope(scope)
        self.key = f"{KEY_PREFIX}:{scope}:rate"
        self.tokens_key = f"{KEY_PREFIX}:{scope}:tokens"
        self.pause_key = pause_key(scope)
        self.pace_key = f"{KEY_PREFIX}:{scope}:pace"
        self.answered_key = f"{KEY_PREFIX}:{scope}:answered"
        # The AIMD pace last seen (RPM; None: none), the number of cuts it has had, and the
        # requests the provider took since the last `sync` (sent, less those refused).
        self.pace: float | None = None
        self.epoch = 0
        self.answered = 0
        self.interval_us = int(60_000_000 / rpm) if rpm else 0
        self.burst = max(1, burst if burst is not None else 1)
        self.token_us = 60_000_000 / tpm if tpm else 0.0
        self.token_burst = max(1, token_burst if token_burst is not None else (tpm or 60) // 60)
        self.shared = bool(self.interval_us or self.token_us)
        self.paused_until = 0.0  # time.monotonic() of this process
        # What the endpoint states (None: nothing) and what the provider's headers state.
        self.stated: tuple[int | None, int | None] = (rpm, tpm)
        self.concurrency = 1
        self.learned: tuple[int | None, int | None] = (None, None)
        self.learned_key = learned_key(scope)
        self._published = 0.0  # time.monotonic() the learned limits were last written
        # One lane per chunk asks Redis at a time; the others queue here in order, so a
        # hundred waiting lanes do not all poll when a turn comes.
        self._turn = asyncio.Lock()
        self._spend = client.register_script(_SPEND)
        self._settle = client.register_script(_SETTLE)
        self._pause = client.register_script(_PAUSE)
        self._cut = client.register_script(_CUT)
        self._count = client.register_script(_ANSWERED)
        self._read_pace = client.register_script(_READ_PACE)

    @classmethod
    def for_endpoint(cls, client: Any, endpoint: Any) -> "RateLimiter":
        """The endpoint's limits, held so that no 60-second window ever holds more than the
        limit: a GCRA lets `burst` through at once on top of its rate, so the rate gives the
        burst back (600 RPM with a burst of 10 spaces requests for 591 a minute), and a
        sliding-window provider, the strictest kind, never answers 429."""
        limiter = cls(client, account_scope(endpoint))
        limiter.stated = (endpoint.rpm_limit, endpoint.tpm_limit)
        limiter.concurrency = endpoint.concurrency_limit
        limiter._hold(*limiter.stated)
        return limiter

    def _hold(self, rpm: int | None, tpm: int | None) -> None:
        """Pace to these limits (see `for_endpoint`); None is no limit."""
        burst = max(1, min((rpm or 0) // 60, self.concurrency))
        token_burst = max(1, (tpm or 0) // 60)  # one second's worth
        held_rpm = max(1, rpm - burst + 1) if rpm else None
        held_tpm = max(1, tpm - token_burst) if tpm else None
        self.interval_us = int(60_000_000 / held_rpm) if held_rpm else 0
        self.burst = burst
        self.token_us = 60_000_000 / held_tpm if held_tpm else 0.0
        self.token_burst = token_burst
        self.shared = bool(self.interval_us or self.token_us) or self.pace is not None

    def limits(self) -> tuple[int | None, int | None]:
        """The limits paced to: the lower of the endpoint's and the provider's, each."""
        return (
            lower_limit(self.stated[0], self.learned[0]),
            lower_limit(self.stated[1], self.learned[1]),
        )

    def note_learned(self, rpm: int | None, tpm: int | None) -> bool:
        """Take the provider's stated limits (from a reply, or from Redis: another chunk read
        them); True if they changed what this limiter paces to."""
        if (rpm, tpm) == self.learned:
            return False
        before = self.limits()
        self.learned = (rpm, tpm)
        if self.limits() == before:
            return False
        self._hold(*self.limits())
        return True

    async def learn(self, headers: Mapping[str, str]) -> None:
        """The limits a provider states in `x-ratelimit-limit-*` pace every worker from the
        next request on, so an endpoint saved without limits (or with higher ones than its
        key has) still keeps to them instead of learning each one from 429s. Written to
        Redis when they change, and again every `LEARNED_REFRESH` seconds while they are seen
        (they lapse `LEARNED_TTL` seconds after the provider stops stating them)."""
        rpm = _header_int(headers, "x-ratelimit-limit-requests")
        tpm = _header_int(headers, "x-ratelimit-limit-tokens")
        rpm = rpm if rpm is not None and rpm > 0 else None
        tpm = tpm if tpm is not None and tpm > 0 else None
        if rpm is None and tpm is None:
            return
        changed = (rpm, tpm) != self.learned
        self.note_learned(rpm, tpm)
        if changed or time.monotonic() - self._published > LEARNED_REFRESH:
            self._published = time.monotonic()
            await self.client.set(self.learned_key, f"{rpm or 0} {tpm or 0}", ex=LEARNED_TTL)

    async def load_learned(self) -> None:
        """What other chunks learned from the provider, before this one sends anything."""
        self.read_learned(await self.client.get(self.learned_key))

    def read_learned(self, value: bytes | str | None) -> None:
        """The learned key's value as stored by `learn` ("rpm tpm", 0 for none)."""
        if value is None:
            self.note_learned(None, None)
            return
        text = value.decode() if isinstance(value, bytes) else value
        with contextlib.suppress(ValueError):
            rpm, tpm = (int(part) for part in text.split())
            self.note_learned(rpm or None, tpm or None)

    async def try_spend(self, tokens: int = 0) -> float:
        """Spend one request and `tokens` if both budgets allow now: 0.0, else seconds to wait."""
        args = [
            self.interval_us,
            self.burst,
            f"{self.token_us:.6f}",
            int(self.token_us * self.token_burst),
            max(0, int(tokens)) if self.token_us else 0,
        ]
        wait_us, epoch = await self._spend(
            keys=[self.key, self.tokens_key, self.pause_key, self.pace_key], args=args
        )
        self.epoch = max(self.epoch, int(epoch))
        return max(0.0, int(wait_us) / 1_000_000)

    async def wait(self, stop: asyncio.Event | None = None, tokens: int = 0) -> bool:
        """Wait for this request's turn and spend it; False if `stop` was set meanwhile."""
        if not self.shared:
            return await self._sleep_out_pause(stop)
        async with self._turn:
            while stop is None or not stop.is_set():
                wait = await self.try_spend(tokens)
                if wait <= 0:
                    return True
                await self._sleep(min(wait, 1.0) + random.random() * 0.002, stop)
        return False

    async def _sleep_out_pause(self, stop: asyncio.Event | None) -> bool:
        while (left := self.paused_until - time.monotonic()) > 0:
            if stop is not None and stop.is_set():
                return False
            await self._sleep(min(left, 1.0), stop)
        return stop is None or not stop.is_set()

    @staticmethod
    async def _sleep(seconds: float, stop: asyncio.Event | None) -> None:
        if stop is None:
            await asyncio.sleep(seconds)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=seconds)

    async def settle(self, reserved: int, used: int) -> None:
        """Correct the token budget by what the request really cost (refund or charge)."""
        if self.token_us and used != reserved:
            await self._settle(
                keys=[self.tokens_key], args=[int((used - reserved) * self.token_us)]
            )

    async def pause(self, seconds: float) -> None:
        """Nobody sends to this endpoint for `seconds` (a longer pause already set stays)."""
        seconds = min(max(seconds, 0.0), RATE_PAUSE_CAP)
        if seconds <= 0:
            return
        self.note_pause(int(seconds * 1000))
        await self._pause(keys=[self.pause_key], args=[max(1, int(seconds * 1000))])

    def note_pause(self, ms: int | None) -> None:
        """The shared pause's time left (ms, from PTTL), as read by the chunk's poll."""
        if ms is not None and ms > 0:
            self.paused_until = max(self.paused_until, time.monotonic() + ms / 1000)

    # -- AIMD, for providers that state no limits ---------------------------------------------
    def note_sent(self, refused: bool = False) -> None:
        """One request sent, or one refused after all (counted in memory; `sync` reports)."""
        self.answered += -1 if refused else 1

    def note_pace(self, milli_rpm: int, epoch: int) -> None:
        """The AIMD pace as Redis has it (rpm × 1000, 0: none), and its epoch."""
        self.pace = milli_rpm / 1000 if milli_rpm > 0 else None
        self.epoch = max(self.epoch, epoch) if self.pace is not None else epoch
        self.shared = bool(self.interval_us or self.token_us) or self.pace is not None

    async def cut(self, epoch: int, retry_after: float = 0.0) -> None:
        """A 429 answered a request sent in `epoch`, saying retry after `retry_after` s: the
        AIMD step down (see the class)."""
        answered, self.answered = self.answered, 0
        milli_rpm, now_epoch = await self._cut(
            keys=[self.pace_key, self.answered_key],
            args=[
                epoch,
                AIMD_DECREASE,
                AIMD_RAMP,
                AIMD_TOP,
                AIMD_TTL,
                answered,
                f"{max(0.0, retry_after):.3f}",
            ],
        )
        if int(milli_rpm) > 0:
            self.note_pace(int(milli_rpm), int(now_epoch))

    async def sync(self) -> None:
        """Report the requests answered since the last call and read what other chunks may
        have changed: the pause, the provider's stated limits and the AIMD pace."""
        pipe = self.client.pipeline(transaction=False)
        answered, self.answered = self.answered, 0
        if answered:
            await self._count(keys=[self.answered_key], args=[answered], client=pipe)
        pipe.pttl(self.pause_key)
        pipe.get(self.learned_key)
        await self._read_pace(keys=[self.pace_key], client=pipe)
        try:
            *_, pause, learned, (milli_rpm, epoch) = await pipe.execute()
        except BaseException:
            self.answered += answered  # counted next time
            raise
        self.note_pause(int(pause))
        self.read_learned(learned)
        self.note_pace(int(milli_rpm), int(epoch))


def pause_key(scope: int | str) -> str:
    return f"{KEY_PREFIX}:{_scope(scope)}:pause"


def learned_key(scope: int | str) -> str:
    return f"{KEY_PREFIX}:{_scope(scope)}:provider-limits"


def lower_limit(a: int | None, b: int | None) -> int | None:
    """The stricter of two limits, None being none."""
    return b if a is None else a if b is None else min(a, b)


def provider_limits(endpoints: list[Any]) -> dict[int, tuple[int | None, int | None]]:
    """The limits each endpoint's provider account last stated (RPM, TPM) by endpoint id, read
    synchronously (one MGET on the queue's Redis) for the pages and launches; (None, None)
    when none were seen lately."""
    if not endpoints:
        return {}
    import django_rq  # the sync client the queue uses; its import needs settings ready

    client = django_rq.get_connection("default")
    values = client.mget([learned_key(account_scope(e)) for e in endpoints])
    found: dict[int, tuple[int | None, int | None]] = {}
    for pk, value in zip((e.pk for e in endpoints), values, strict=True):
        found[pk] = (None, None)
        if value is None:
            continue
        text = value.decode() if isinstance(value, bytes) else value
        with contextlib.suppress(ValueError):
            rpm, tpm = (int(part) for part in text.split())
            found[pk] = (rpm or None, tpm or None)
    return found
