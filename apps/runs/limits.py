"""Limits shared by every chunk on every worker, kept in Redis.

- `EndpointSemaphore`: at most `limit` requests in flight to one endpoint. A ZSET of lease
  ids scored by their expiry (Redis server time, so machines' clocks do not matter);
  acquiring is one Lua script (drop expired leases, add ours if there is room). Holders renew
  their leases while alive (`renew`), so a worker killed with SIGKILL frees its slots when
  its leases expire, `SLOT_LEASE_SECONDS` later at most.
- `RateLimiter`: a requests-per-minute limit as GCRA (a token bucket kept as one
  "theoretical arrival time"): requests are spaced 60/rpm seconds apart, with a burst of
  at most `burst` requests. One Lua call per request answers "go" or "wait this long".
"""

import asyncio
import random
import uuid
from typing import Any

from django.conf import settings

from apps.runs.tuning import SLOT_LEASE_SECONDS

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

_GCRA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local allow_at = tat - (burst - 1) * interval
if allow_at > now then
  return allow_at - now
end
redis.call('SET', KEYS[1], tat + interval, 'PX', math.ceil((tat + interval - now) / 1000) + 1000)
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


class RateLimiter:
    """Requests per minute for one endpoint, across every worker (GCRA in Redis)."""

    def __init__(self, client: Any, endpoint_id: int, rpm: int, burst: int | None = None) -> None:
        self.client = client
        self.key = f"{KEY_PREFIX}:endpoint:{endpoint_id}:rate"
        self.interval_us = int(60_000_000 / max(1, rpm))
        self.burst = max(1, burst if burst is not None else 1)
        self._gcra = client.register_script(_GCRA)

    async def wait(self, stop: asyncio.Event | None = None) -> bool:
        """Wait for this request's turn; False if `stop` was set meanwhile."""
        while stop is None or not stop.is_set():
            wait_us = int(await self._gcra(keys=[self.key], args=[self.interval_us, self.burst]))
            if wait_us <= 0:
                return True
            await asyncio.sleep(min(wait_us / 1_000_000, 1.0) + random.random() * 0.002)
        return False
