"""Ten reviewer sessions at once on one queue of three reviews per item (#12): through the
views (claim, submit every subject, claim the next), on whichever database the suite runs on
(SQLite and PostgreSQL in CI). Every item ends with exactly three reviewers, no review is lost
or doubled, nothing fails ("database is locked" included), and at no moment does an item hold
more reviews than its target plus the claims open on it."""

import random
import re
import threading
import time
from collections import Counter

import pytest
from django.db import connection
from django.db.models import Count
from django.test import Client
from django.urls import reverse

from apps.judges.models import Score
from apps.review.models import Review, ReviewClaim, ReviewPolicy
from tests.base import make_user
from tests.factories import judge_item, make_item, make_judge_run, make_review_dataset, make_task

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SESSIONS = 10
ITEMS = 24
TARGET = 3
ITEM_URL = re.compile(r"/review/run/(\d+)/item/(\d+)/")


def test_ten_sessions_review_one_queue_at_once() -> None:
    task = make_task("load")
    dataset = make_review_dataset(task)
    items = [make_item(dataset, i) for i in range(ITEMS)]
    run = make_judge_run(dataset)
    for item in items:
        judge_item(run, item, [{"accuracy": 3, "clarity": 4}])
    ReviewPolicy.objects.create(task=task, reviews_per_item=TARGET, thresholds={"accuracy": 4})
    scores = {
        item_id: dict(rows)
        for item_id, rows in _by_item(
            Score.objects.filter(run=run).values_list("item_id", "subject", "pk")
        )
    }
    users = [make_user("reviewer", f"r{i}") for i in range(SESSIONS)]
    submitted: list[tuple[int, int]] = []  # (item, user) per review page submitted
    problems: list[str] = []
    excess: list[str] = []
    stop = threading.Event()
    barrier = threading.Barrier(SESSIONS + 1)

    def session(user) -> None:
        client = Client()
        client.force_login(user)
        rng = random.Random(user.pk)
        try:
            barrier.wait(timeout=30)
            current = ""
            while True:
                answer = client.post(
                    reverse("review:claim", args=[run.pk]), {"order": "position", "after": current}
                )
                found = ITEM_URL.search(answer.get("Location", ""))
                if answer.status_code != 302:
                    problems.append(f"claim answered {answer.status_code}")
                    return
                if found is None or int(found[2]) == (int(current) if current else -1):
                    if not current:
                        return  # the queue is done for this reviewer
                    current = ""  # back to the start once, like a reviewer reopening it
                    continue
                item_id = int(found[2])
                for subject, score_id in scores[item_id].items():
                    reply = client.post(
                        reverse("review:submit", args=[score_id]),
                        {
                            "value": str(rng.randint(1, 5)),
                            "reason": subject,
                            "shown_at": time.time(),
                        },
                    )
                    if reply.status_code != 302:
                        problems.append(
                            f"submit answered {reply.status_code}: {reply.content[:300]!r}"
                        )
                        return
                submitted.append((item_id, user.pk))
                current = str(item_id)
        except Exception as exc:  # every failure of a session is the finding
            problems.append(f"{type(exc).__name__}: {exc}")
        finally:
            connection.close()

    def watch() -> None:
        """Reviews never exceed the target plus the claims open on the item."""
        try:
            while not stop.is_set():
                reviewers = Counter(
                    dict(
                        Review.objects.filter(score__run=run)
                        .values_list("score__item_id")
                        .annotate(n=Count("user_id", distinct=True))
                        .values_list("score__item_id", "n")
                    )
                )
                claims = Counter(
                    ReviewClaim.live().filter(run=run).values_list("item_id", flat=True)
                )
                for item_id, n in reviewers.items():
                    if n > TARGET + claims[item_id]:
                        excess.append(f"item {item_id}: {n} reviewers, {claims[item_id]} claims")
                time.sleep(0.05)
        finally:
            connection.close()

    threads = [threading.Thread(target=session, args=(u,)) for u in users]
    watcher = threading.Thread(target=watch)
    for thread in threads:
        thread.start()
    watcher.start()
    barrier.wait(timeout=30)
    for thread in threads:
        thread.join(timeout=600)
    stop.set()
    watcher.join(timeout=30)
    # A session still going would leave its last item short in `submitted`: say so instead.
    assert not [t for t in threads if t.is_alive()], "sessions still running after 10 minutes"
    assert not problems, problems[:5]
    assert not excess, excess[:5]
    per_item = Counter(item for item, _ in submitted)
    assert per_item == {item.pk: TARGET for item in items}
    assert len(set(submitted)) == len(submitted)  # nobody reviewed an item twice
    assert Review.objects.filter(score__run=run).count() == ITEMS * TARGET * 2  # none lost
    assert not ReviewClaim.objects.filter(run=run).exists()  # every claim ended with its review
    # Every score was settled by consensus or waits for adjudication.
    settled = Score.objects.filter(run=run).filter(confirmed_at__isnull=False).count()
    settled += Score.objects.filter(run=run, override_value__isnull=False).count()
    waiting = Score.objects.filter(
        run=run, adjudication__isnull=False, adjudication__settled_at__isnull=True
    ).count()
    assert settled + waiting == ITEMS * 2


def _by_item(rows):
    found: dict[int, list[tuple[str, int]]] = {}
    for item_id, subject, pk in rows:
        found.setdefault(item_id, []).append((subject, pk))
    return found.items()
