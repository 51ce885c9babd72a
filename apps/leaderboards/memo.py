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

import functools
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from apps.leaderboards.models import StoredResult
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


@functools.cache
def code_version() -> str:
    """A digest of the code that computes stored results: a release that changes how a cell
    or a pair is computed makes new keys instead of reading the old numbers."""
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for name in sorted(here.glob("*.py")):
        digest.update(name.read_bytes())
    return digest.hexdigest()[:16]


class Stored[V]:
    """A Memo whose values are kept in the database too (StoredResult): for pure computations
    keyed by everything they depend on, so the first request of a restarted process reads
    what any process computed (one query for many keys) instead of computing it again."""

    def __init__(
        self,
        name: str,
        encode: Callable[[V], Any],
        decode: Callable[[Any], V],
        size: int = SIZE,
    ) -> None:
        self.name = name
        self.memo: Memo[V] = Memo(name, size)
        self.encode, self.decode = encode, decode

    def digest(self, key: Hashable) -> str:
        return hashlib.sha256(f"{code_version()}|{self.name}|{key!r}".encode()).hexdigest()

    def get_many(self, keys: Iterable[Hashable]) -> dict[Hashable, V]:
        """The values kept for these keys (the process's, else the database's)."""
        out: dict[Hashable, V] = {}
        missing: dict[str, Hashable] = {}
        for key in keys:
            if (found := self.memo.get(key)) is not None:
                out[key] = found
            else:
                missing[self.digest(key)] = key
        if missing:
            rows = StoredResult.objects.filter(key__in=list(missing)).values_list("key", "value")
            for digest, text in rows:
                key = missing[digest]
                out[key] = self.memo.put(key, self.decode(json.loads(text)))
        return out

    def put_many(self, values: dict[Hashable, V]) -> None:
        if not values:
            return
        for key, value in values.items():
            self.memo.put(key, value)
        StoredResult.objects.bulk_create(
            [
                StoredResult(key=self.digest(key), value=json.dumps(self.encode(value)))
                for key, value in values.items()
            ],
            ignore_conflicts=True,  # another process stored the same meanwhile
        )


MEMOS: list[Memo] = []
CLEARS: list[Callable[[], None]] = []  # functools caches' cache_clear, forgotten alike


def clear_all() -> None:
    """Forget every memo of this process (tests; a database restored under a running app;
    benchmarks of a restarted process)."""
    for memo in MEMOS:
        memo.clear()
    for clear in CLEARS:
        clear()


# The stored run summaries' layout (apps.leaderboards.summaries): bump when it changes, and
# every summary is computed again.
SUMMARY_VERSION = 3


def run_state(run: "Run") -> str:
    """What a run's memoised numbers depend on: its results (and the summary format)."""
    return f"{SUMMARY_VERSION}|{run.results_fingerprint}"


def review_state() -> int:
    """What human-corrected numbers depend on: moves with every review (one index lookup)."""
    return last_event_id()
