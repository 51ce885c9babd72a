"""The board's per-process memos under gunicorn's threads (#26.3)."""

import ast
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from apps.leaderboards import boards, memo, pairs  # noqa: F401 — their memos register on import
from apps.leaderboards.memo import Memo

THREADS = 8
ROUNDS = 1000
KEYS = 12


@pytest.fixture
def busy_switching() -> Iterator[None]:
    """Switch threads every microsecond, so that any unguarded check-then-act races."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def _hammer(cache: Memo[tuple[int, int]], rounds: int) -> list[BaseException]:
    """Every thread asks for every key, `rounds` times, while the cache evicts (size < keys)."""
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def work(seed: int) -> None:
        start.wait()
        try:
            for n in range(rounds):
                key = (seed * 7 + n) % KEYS
                value = cache.get_or_compute(key, lambda k=key: (k, k * k))
                assert value == (key, key * key), (key, value)
                cache.get((key + 1) % KEYS)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_a_memo_hammered_by_eight_threads_a_thousand_times_stays_right(
    busy_switching: None,
) -> None:
    cache: Memo[tuple[int, int]] = Memo("hammer", size=3)
    try:
        for _ in range(ROUNDS):
            assert _hammer(cache, rounds=20) == []
            assert len(cache) <= 3
    finally:
        memo.MEMOS.remove(cache)


def test_least_recently_used_goes_first() -> None:
    cache: Memo[str] = Memo("order", size=2)
    try:
        cache.put("a", "A")
        cache.put("b", "B")
        assert cache.get("a") == "A"  # now b is the oldest
        cache.put("c", "C")
        assert (cache.get("a"), cache.get("b"), cache.get("c")) == ("A", None, "C")
        memo.clear_all()
        assert len(cache) == 0
    finally:
        memo.MEMOS.remove(cache)


def test_every_board_cache_is_a_memo() -> None:
    """No hand-rolled process-wide cache is left in the leaderboards: module-level empty dicts
    and OrderedDicts there were the unlocked caches."""
    found = []
    for path in Path("apps/leaderboards").glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
            if (isinstance(value, ast.Dict) and not value.keys) or (
                isinstance(value, ast.Call)
                and getattr(value.func, "id", getattr(value.func, "attr", "")) == "OrderedDict"
            ):
                found.append(f"{path}:{node.lineno}")
    assert found == []
    names = {m.name for m in memo.MEMOS}
    assert {"item values", "compared pairs", "reduced cells", "dataset items"} <= names
