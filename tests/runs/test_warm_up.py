"""The web process freezes what its first requests made long-lived (apps.runs.apps)."""

import gc
import weakref

import pytest
from django.test import Client

from apps.runs.apps import WARM_UP_FREEZER, WarmUpFreezer


class Node:
    """A cycle: only the collector frees it."""

    def __init__(self) -> None:
        self.me = self


def frozen_after(call: WarmUpFreezer) -> tuple[bool, bool]:
    """(did the call freeze more objects, was an unreachable cycle collected first)."""
    gc.collect()
    kept = Node()  # alive: frozen if the call freezes
    garbage = Node()
    gone = weakref.ref(garbage)
    del garbage
    before = gc.get_freeze_count()
    call()
    assert kept.me is kept
    return gc.get_freeze_count() > before, gone() is None


def test_it_freezes_after_the_chosen_requests_and_collects_garbage_first() -> None:
    freezer = WarmUpFreezer(at=(1, 3))
    assert frozen_after(freezer) == (True, True)
    froze, _ = frozen_after(freezer)
    assert not froze
    assert frozen_after(freezer) == (True, True)
    for _ in range(5):  # past the last one: never again
        froze, _ = frozen_after(freezer)
        assert not froze
    assert freezer.seen == 3


@pytest.mark.django_db
def test_every_finished_request_reaches_it(
    reviewer_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(WARM_UP_FREEZER, "seen", 50)  # between freezes, whatever ran before
    assert reviewer_client.get("/tasks/").status_code == 200
    assert WARM_UP_FREEZER.seen == 51
