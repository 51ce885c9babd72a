"""A chunk's share of its endpoint's concurrency limit, leased from Redis (apps.runs.engine.limits)."""

import asyncio
import contextlib
import random
import time
from collections import deque

from apps.runs.engine.errors import Stopped
from apps.runs.engine.limits import (
    EndpointSemaphore,
)


# ---- slots of the shared concurrency limit ------------------------------------------------------
class SlotPool:
    """This chunk's share of the endpoint's concurrency limit.

    A lease taken from Redis is kept locally while requests keep coming, so a busy chunk
    costs no Redis round trip per request; leases idle for `IDLE` seconds go back (`trim`),
    and every lease is renewed by the chunk's heartbeat so a dead worker's expire. One refill
    task asks Redis for as many leases as there are waiters in one call, and polls (with
    jitter) while the limit is taken by other chunks.

    `share`, when set, caps the leases this chunk holds (the chunk sets it to its part of the
    limit among the launch's chunks): beyond it a released lease goes back to Redis instead of
    to the next local request. Without it the first chunk of a launch took every slot and kept
    them while busy, so the other workers of a fleet polled for none and the whole run ran on
    one process's CPU (bench/bench_fleet.py).
    """

    IDLE = 0.25

    def __init__(self, semaphore: EndpointSemaphore, stop: asyncio.Event) -> None:
        self.semaphore = semaphore
        self.stop = stop
        self.free: deque[tuple[str, float]] = deque()
        self.waiters: deque[asyncio.Future[str]] = deque()
        self.refill: asyncio.Task[None] | None = None
        self.share: int | None = None
        self._giving_back: set[asyncio.Task[None]] = set()

    async def acquire(self) -> str:
        if self.free:
            return self.free.pop()[0]
        if self.stop.is_set():
            raise Stopped
        waiter: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.waiters.append(waiter)
        if self.refill is None or self.refill.done():
            self.refill = asyncio.create_task(self._refill())
        try:
            return await waiter
        except asyncio.CancelledError:
            with contextlib.suppress(ValueError):
                self.waiters.remove(waiter)
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self.release(waiter.result())  # handed a lease as we were cancelled
            raise

    async def _refill(self) -> None:
        delay = 0.005
        try:
            while True:
                wanted = sum(1 for w in self.waiters if not w.done())
                if not wanted:
                    return
                if self.stop.is_set():
                    raise Stopped
                if self.share is not None:
                    # At our share, waiters get the leases our own requests release.
                    wanted = min(wanted, self.share - len(self.semaphore.held))
                leases = await self.semaphore.try_acquire(wanted) if wanted > 0 else []
                for lease in leases:
                    self.release(lease)
                if leases:
                    delay = 0.005
                    continue
                # The limit is taken (by other chunks or workers): look again shortly.
                await asyncio.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 1.5, 0.05)
        except BaseException as exc:
            while self.waiters:
                waiter = self.waiters.popleft()
                if not waiter.done():
                    waiter.set_exception(exc if isinstance(exc, Exception) else Stopped())
            if not isinstance(exc, Stopped | asyncio.CancelledError):
                raise

    def release(self, lease: str) -> None:
        if self.share is not None and len(self.semaphore.held) > self.share:
            task = asyncio.get_running_loop().create_task(self.semaphore.release(lease))
            self._giving_back.add(task)
            task.add_done_callback(self._giving_back.discard)
            return
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(lease)
                return
        self.free.append((lease, time.monotonic()))

    async def trim(self, everything: bool = False) -> None:
        cutoff = time.monotonic() - self.IDLE
        while self.free and (everything or self.free[0][1] < cutoff):
            lease, _ = self.free.popleft()
            await self.semaphore.release(lease)
        if everything and self.refill is not None:
            self.refill.cancel()
            await asyncio.gather(self.refill, return_exceptions=True)
        if everything:
            await asyncio.gather(*self._giving_back, return_exceptions=True)
