"""The list of judge runs, the review list of one run (filters, pages, fixed query count)
and its bulk actions: mark reviewed, retry failed, assign."""

import html
import re

import pytest
from django.db.models import F
from django.test import Client
from django.urls import reverse

from apps.judges.models import JudgeRound, Score
from apps.review import listing
from apps.review.models import ReviewAssignment
from apps.runs.models import Run
from tests.base import make_user
from tests.factories import fail_item, judge_item, make_item, scenario

calls: list[tuple[int, list[int]]] = []


def fake_retry(run_id: int, item_ids: list[int]) -> int:
    """Stands in for the judge-run engine's hook in these tests."""
    calls.append((run_id, list(item_ids)))
    return len(item_ids)


def client_for(role: str, username: str | None = None) -> Client:
    client = Client()
    client.user = make_user(role, username)
    client.force_login(client.user)
    return client


@pytest.fixture
def reviewer(db):
    return client_for("reviewer", "alice")


@pytest.fixture
def run_with_states(db):
    """Items 0-3 judged ok, 4-5 failed, 6 half failed (one round), 7 not judged."""
    run, items = scenario(4)
    items += [make_item(run.dataset, i, tags=["hard"]) for i in (4, 5, 6)]
    items.append(make_item(run.dataset, 7, question="Needle in a haystack?"))
    fail_item(run, items[4])
    fail_item(run, items[5])
    judge_item(run, items[6], [{"accuracy": 4, "clarity": 4}, None])
    return run, items


def positions(html: str) -> list[int]:
    # The list numbers rows from 1: the item's position + 1.
    return [int(p) - 1 for p in re.findall(r'<tr data-item="\d+">.*?<td>(\d+)</td>', html, re.S)]


def listed(client: Client, run, **params) -> str:
    response = client.get(reverse("review:run", args=[run.pk]), params)
    assert response.status_code == 200
    return response.content.decode()


def test_index_lists_judge_runs_with_failed_reviewed_and_total(reviewer, run_with_states):
    run, items = run_with_states
    Score.objects.filter(run=run, item__in=items[:2]).bulk_confirm(reviewer.user)
    Score.objects.filter(run=run, item=items[2], subject="accuracy").bulk_confirm(reviewer.user)
    html = reviewer.get(reverse("review:index")).content.decode()
    row = re.search(rf'<tr data-run="{run.pk}">.*?</tr>', html, re.S).group(0)
    assert reverse("review:run", args=[run.pk]) in row
    assert 'class="num count-failed">3<' in row  # two failed items and one failed round
    assert 'class="num count-reviewed">2<' in row  # item 2 is only half reviewed
    assert 'class="num count-total">7<' in row  # item 7 is not judged yet


def test_counts_follow_reviews_and_new_results(reviewer, run_with_states):
    run, items = run_with_states

    def counts() -> tuple[str, str, str]:
        html = reviewer.get(reverse("review:index")).content.decode()
        return tuple(re.findall(r'class="num count-(?:failed|reviewed|total)">(\d+)<', html))

    assert counts() == ("3", "0", "7")
    Score.objects.filter(run=run, item=items[0]).bulk_confirm(reviewer.user)
    assert counts() == ("3", "1", "7")
    # The engine writes new results and moves the run's progress: counted afresh.
    Score.objects.filter(run=run, item=items[4]).update(status="ok", judge_value=3, error="")
    JudgeRound.objects.filter(run=run, item=items[4]).update(status="ok")
    Run.objects.filter(pk=run.pk).update(done=F("done") + 1)
    assert counts() == ("2", "1", "7")


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, [0, 1, 2, 3, 4, 5, 6, 7]),
        ({"status": "failed"}, [4, 5, 6]),
        ({"status": "ok"}, [0, 1, 2, 3]),
        ({"status": "pending"}, [7]),
        ({"review": "reviewed"}, [0]),
        ({"review": "overridden"}, [1]),
        ({"review": "unreviewed"}, [1, 2, 3, 4, 5, 6]),
        ({"tag": "hard"}, [4, 5, 6]),
        ({"q": "needle"}, [7]),
        ({"assigned": "me"}, [2]),
        ({"assigned": "none", "status": "ok"}, [0, 1, 3]),
        ({"status": "failed", "tag": "hard", "review": "unreviewed"}, [4, 5, 6]),
    ],
)
def test_filters(reviewer, run_with_states, params, expected):
    run, items = run_with_states
    Score.objects.filter(run=run, item=items[0]).bulk_confirm(reviewer.user)
    Score.objects.get(run=run, item=items[1], subject="accuracy").override(1, reviewer.user, "x", 0)
    ReviewAssignment.assign(run, [items[2].pk], reviewer.user, by=None)
    assert positions(listed(reviewer, run, **params)) == expected


def test_htmx_filtering_returns_only_the_table(reviewer, run_with_states):
    run, _ = run_with_states
    response = reviewer.get(
        reverse("review:run", args=[run.pk]), {"status": "failed"}, HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="review-table">') and "<html" not in html
    assert positions(html) == [4, 5, 6]


def test_pages(reviewer, db):
    run, _ = scenario(60)
    first = listed(reviewer, run, per_page="25")
    assert positions(first) == list(range(25)) and "Page 1 of 3" in first
    third = listed(reviewer, run, per_page="25", page="3")
    assert positions(third) == list(range(50, 60))
    assert "per_page=25" in third and "page=2" in third  # links keep the filters


def test_a_kept_list_follows_reviews_assignments_and_results(reviewer, run_with_states):
    """Which items a filter lists is kept between requests (listing.listed_ids): every change
    that moves an item in or out of a filter shows on the next request."""
    run, items = run_with_states
    assert positions(listed(reviewer, run, review="reviewed")) == []
    score = Score.objects.get(run=run, item=items[1], subject="accuracy")
    score.override(1, reviewer.user, "x", 0)
    assert positions(listed(reviewer, run, review="overridden")) == [1]
    score.refresh_from_db()
    score.revert(reviewer.user, "undo")
    assert positions(listed(reviewer, run, review="overridden")) == []
    assert positions(listed(reviewer, run, assigned="me")) == []
    ReviewAssignment.assign(run, [items[2].pk, items[3].pk], reviewer.user, by=None)
    assert positions(listed(reviewer, run, assigned="me")) == [2, 3]
    assert positions(listed(client_for("reviewer", "bob"), run, assigned="me")) == []
    ReviewAssignment.unassign(run, [items[3].pk])
    assert positions(listed(reviewer, run, assigned="me")) == [2]
    assert positions(listed(reviewer, run, status="pending")) == [7]
    judge_item(run, items[7], [{"accuracy": 2, "clarity": 2}])
    Run.objects.filter(pk=run.pk).update(done=F("done") + 1)  # the engine moves its progress
    assert positions(listed(reviewer, run, status="pending")) == []
    assert positions(listed(reviewer, run, per_page="25", page="last")) == list(range(8))


def test_query_count_does_not_grow_with_the_page_size(reviewer, db, count_queries):
    run, items = scenario(60)
    ReviewAssignment.assign(run, [i.pk for i in items[:30]], reviewer.user, by=None)
    url = reverse("review:run", args=[run.pk])
    reviewer.get(url)  # the run's counts are computed once, then cached
    small, _ = count_queries(lambda: reviewer.get(url, {"per_page": "25"}))
    large, _ = count_queries(lambda: reviewer.get(url, {"per_page": "100"}))
    assert small == large
    admin = client_for("admin", "root")
    small, _ = count_queries(lambda: admin.get(url, {"per_page": "25"}))
    large, _ = count_queries(lambda: admin.get(url, {"per_page": "100"}))
    assert small == large


# ---- bulk actions ------------------------------------------------------------------------
def bulk(client: Client, run, action: str, items=(), **extra):
    """POST a bulk action; returns the response and the messages the next page shows."""
    data = {"action": action, "item": [str(i.pk) for i in items], **extra}
    response = client.post(reverse("review:bulk", args=[run.pk]), data)
    if response.status_code != 302:
        return response, []
    shown = client.get(response["Location"]).content.decode()
    return response, [
        html.unescape(m)
        for m in re.findall(r'<div class="msg [^"]*" role="status">(.*?)</div>', shown)
    ]


def test_mark_reviewed_confirms_the_ticked_items(reviewer, run_with_states):
    run, items = run_with_states
    overridden = Score.objects.get(run=run, item=items[1], subject="accuracy")
    overridden.override(5, make_user("reviewer", "bob"), "bob", 0)
    response, messages = bulk(reviewer, run, "confirm", [items[0], items[1], items[4]])
    assert response.status_code == 302
    assert messages == ["Confirmed 3 judge scores. 2 failed scores need an override."]
    overridden.refresh_from_db()
    assert overridden.final_value == 5  # a bulk action never undoes someone's override
    assert Score.objects.filter(run=run, item=items[0]).reviewed().count() == 2
    assert not Score.objects.filter(run=run, item__in=items[2:4]).reviewed().exists()


def test_bulk_keeps_the_filters_in_its_redirect(reviewer, run_with_states):
    run, items = run_with_states
    response, _ = bulk(reviewer, run, "confirm", [items[0]], status="ok", tag="hard")
    assert response["Location"] == reverse("review:run", args=[run.pk]) + "?status=ok&tag=hard"


def test_items_of_another_run_are_ignored(reviewer, run_with_states):
    run, _ = run_with_states
    other_run, other_items = scenario(1)
    _, messages = bulk(reviewer, run, "confirm", other_items)
    assert messages == ["Confirmed 0 judge scores."]
    assert not Score.objects.filter(run=other_run).reviewed().exists()


def test_nothing_ticked_is_refused(reviewer, run_with_states):
    run, _ = run_with_states
    _, messages = bulk(reviewer, run, "confirm")
    assert messages == ["Tick the items to act on first."]


def test_retry_queues_exactly_the_failed_items_ticked(reviewer, run_with_states, monkeypatch):
    run, items = run_with_states
    monkeypatch.setattr(listing, "retry_failed_items", fake_retry)
    calls.clear()
    _, messages = bulk(reviewer, run, "retry", [items[0], items[4], items[6]])
    assert calls == [(run.pk, [items[4].pk, items[6].pk])]
    assert messages == ["Queued 2 failed items again."]
    calls.clear()
    _, messages = bulk(reviewer, run, "retry_all")
    assert calls == [(run.pk, [items[4].pk, items[5].pk, items[6].pk])]
    calls.clear()
    _, messages = bulk(reviewer, run, "retry", [items[0]])
    assert calls == [] and messages == ["No failed items to retry."]


def test_the_engine_may_refuse_a_retry_with_a_message(reviewer, run_with_states, monkeypatch):
    from django.core.exceptions import ValidationError

    def refuse(run_id: int, item_ids: list[int]) -> int:
        raise ValidationError("The run is still going.")

    monkeypatch.setattr(listing, "retry_failed_items", refuse)
    run, _items = run_with_states
    _, messages = bulk(reviewer, run, "retry_all")
    assert messages == ["The run is still going."]


def test_admins_assign_and_unassign(run_with_states):
    run, items = run_with_states
    admin, bob = client_for("admin", "root"), make_user("reviewer", "bob")
    _, messages = bulk(admin, run, "assign", items[:3], assignee=str(bob.pk))
    assert messages == ["Assigned 3 items to bob."]
    assert set(ReviewAssignment.objects.values_list("item__position", "user__username")) == {
        (0, "bob"),
        (1, "bob"),
        (2, "bob"),
    }
    _, messages = bulk(admin, run, "unassign", items[:1])
    assert ReviewAssignment.objects.count() == 2
    viewer = make_user("viewer", "val")
    _, messages = bulk(admin, run, "assign", items[:1], assignee=str(viewer.pk))
    assert messages == ["Choose a reviewer to assign the items to."]


def test_reviewers_may_not_assign(reviewer, run_with_states):
    run, items = run_with_states
    response, _ = bulk(reviewer, run, "assign", items[:1], assignee=str(reviewer.user.pk))
    assert response.status_code == 403 and not ReviewAssignment.objects.exists()
    assert "Assign ticked" not in listed(reviewer, run)
    assert "Assign ticked" in listed(client_for("admin", "root"), run)


def test_viewers_see_the_list_without_bulk_actions_and_cannot_post(run_with_states):
    run, items = run_with_states
    viewer = client_for("viewer", "val")
    html = listed(viewer, run)
    assert 'id="bulk"' not in html and 'name="item"' not in html
    response, _ = bulk(viewer, run, "confirm", items[:2])
    assert response.status_code == 403
    assert not Score.objects.filter(run=run).reviewed().exists()


def test_a_generation_run_has_no_review_list(reviewer, db):
    from tests.factories import make_generation_run

    run, _ = scenario(1)
    generation = make_generation_run(run.dataset, {})
    assert reviewer.get(reverse("review:run", args=[generation.pk])).status_code == 404


def test_retry_goes_to_the_judge_run_engine(reviewer, run_with_states):
    """The real hook (apps.judges.jobs.retry_failed_items): a scoped retry of exactly the
    ticked failed items is launched for the run."""
    from apps.judges.models import RetryScope
    from apps.runs.models import Endpoint

    run, items = run_with_states
    run.endpoint = Endpoint.objects.create(name="judge-model", model="m", base_url="http://x/v1")
    run.save()
    _, messages = bulk(reviewer, run, "retry", [items[0], items[1], items[4], items[5]])
    assert messages == ["Queued 2 failed items again."]
    scope = RetryScope.objects.get(run=run)
    assert scope.item_ids == [items[4].pk, items[5].pk]
    run.refresh_from_db()
    assert run.is_active  # queued until a worker picks it up
    _, messages = bulk(reviewer, run, "retry", [items[4]])
    assert messages == ["This run is still going; cancel it first or wait for it to end."]


def test_the_bulk_form_carries_the_filters_of_the_table_shown(reviewer, run_with_states):
    run, _ = run_with_states
    html = reviewer.get(
        reverse("review:run", args=[run.pk]), {"status": "failed"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert '<input type="hidden" name="status" value="failed" form="bulk">' in html
