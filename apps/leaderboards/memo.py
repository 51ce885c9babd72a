"""Per-process memos of board computations, safe under gunicorn's threads.

A board's numbers over 100k items take seconds to compute and depend only on the state of the
runs' results and of the reviews, so they are kept in memory, least recently used first out.
Every memo is keyed by what its value depends on, never invalidated in place: a key names
the state it was computed from (`run_state`, `review_state`), so a new result or a new review
makes new keys and the old entries simply age out.

`Memo` holds a lock around every read and write of its OrderedDict: with 8 threads a bare
`if key in cache: cache.move_to_end(key)` raises KeyError when another thread evicts the key
in between. The value is computed outside the lock (database queries must not serialise the
threads); two threads missing the same key at once both compute it and the last one stays,
which is harmless since both computed the same state.
"""

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

from apps.review.queue import last_event_id

if TYPE_CHECKING:
    from apps.runs.models import Run

SIZE = 64


class Memo[V]:
    """A least-recently-used map of at most `size` entries, shared by the threads of a process."""

    def __init__(self, name: str, size: int = SIZE) -> None:
        self.name = name
        self.size = size
        self._entries: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()
        MEMOS.append(self)

    def get(self, key: Hashable) -> V | None:
        """The value kept for `key` (now the most recently used), or None."""
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: Hashable, value: V) -> V:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return value

    def get_or_compute(self, key: Hashable, compute: Callable[[], V]) -> V:
        found = self.get(key)
        return found if found is not None else self.put(key, compute())

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


MEMOS: list[Memo] = []
CLEARS: list[Callable[[], None]] = []  # functools caches' cache_clear, forgotten alike


def clear_all() -> None:
    """Forget every memo of this process (tests; a database restored under a running app;
    benchmarks of a restarted process)."""
    for memo in MEMOS:
        memo.clear()
    for clear in CLEARS:
        clear()


def run_state(run: "Run") -> str:
    """What a run's memoised numbers depend on: its results (and the summary format)."""
    from apps.leaderboards.summaries import fingerprint  # summaries uses memos too

    return fingerprint(run)


def review_state() -> int:
    """What human-corrected numbers depend on: moves with every review (one index lookup)."""
    return last_event_id()
