"""The response cache: identical requests already answered are reused instead of sent.

`LLM.chat` computes each request's `cache_key` (apps.runs.engine.llm) and, when the run allows it,
asks `ReplyCache.get` before it reserves budget, waits for the rate limit or takes a slot: a
hit is the stored reply, costing $0, counted as cached on the run (`Run.cached_count`, with
`saved_cost` at the endpoint's price). Lookups of one chunk are gathered into one query per
turn of the event loop, on the chunk's database thread.

Every good reply is stored (`store`), whether or not its run reads the cache, so a later run
may reuse it; the engine stores it when it writes the result, and only if the attempt is still
ok then (a judge reply that could not be scored is a failure, and failures are never cached).
An overwrite launch never reads the cache (it exists to ask again) and its replies replace the
stored ones.
"""

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from django.utils import timezone

from apps.runs.models import CachedReply

FIELDS = ("content", "finish_reason", "prompt_tokens", "completion_tokens", "cost")
QUERY_SLICE = 500  # keys per IN (...) query


def lookup(keys: list[str]) -> dict[str, dict[str, Any]]:
    """The stored replies of these keys (a database call)."""
    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(keys), QUERY_SLICE):
        rows = CachedReply.objects.filter(key__in=keys[start : start + QUERY_SLICE])
        for row in rows.values("key", *FIELDS):
            found[row["key"]] = row
    return found


def store(entries: list[dict[str, Any]]) -> int:
    """Store good replies (inside the caller's transaction); a key stored again is replaced."""
    unique = {entry["key"]: entry for entry in entries}
    if not unique:
        return 0
    now = timezone.now()
    CachedReply.objects.bulk_create(
        [CachedReply(created_at=now, **entry) for entry in unique.values()],
        update_conflicts=True,
        unique_fields=["key"],
        update_fields=[*FIELDS, "model", "created_at"],
    )
    return len(unique)


class ReplyCache:
    """Cache lookups of one chunk, batched: `get` is what `LLM` calls (its `CacheLookup`)."""

    def __init__(self, db: Callable[..., Awaitable[Any]]) -> None:
        self.db = db
        self.waiting: dict[str, list[asyncio.Future[dict[str, Any] | None]]] = {}
        self.fetching: asyncio.Task[None] | None = None

    async def get(self, key: str) -> dict[str, Any] | None:
        future: asyncio.Future[dict[str, Any] | None] = asyncio.get_running_loop().create_future()
        self.waiting.setdefault(key, []).append(future)
        if self.fetching is None or self.fetching.done():
            self.fetching = asyncio.create_task(self._fetch())
        return await future

    async def _fetch(self) -> None:
        await asyncio.sleep(0)  # the other lanes of this turn add their keys first
        while self.waiting:
            batch, self.waiting = self.waiting, {}
            try:
                found = await self.db(lookup, list(batch))
            except BaseException as exc:
                for futures in batch.values():
                    for future in futures:
                        if not future.done():
                            future.set_exception(
                                exc if isinstance(exc, Exception) else RuntimeError(str(exc))
                            )
                return  # each lane sees the error as its request's
            for key, futures in batch.items():
                for future in futures:
                    if not future.done():
                        future.set_result(found.get(key))
