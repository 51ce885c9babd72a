"""Every paged list pages through one partial: its links keep the list's filters, change only
the page number, and swap the list in place when htmx is there."""

import re

import pytest
from django.test import Client

from apps.runs.models import Response
from tests.base import make_user
from tests.factories import (
    add_scores,
    make_generation_run,
    make_items,
    make_judge,
    make_judge_run,
    make_task,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin() -> Client:
    client = Client()
    client.force_login(make_user("admin"))
    return client


def links(html: str) -> dict[str, str]:
    """id → href of the previous/next links (the template escapes & as &amp;)."""
    found = re.findall(r'<a href="([^"]*)" id="(previous-page|next-page)"', html)
    return {name: href.replace("&amp;", "&") for href, name in found}


def test_judge_results_keep_filters_and_swap_the_items(admin: Client) -> None:
    task = make_task()
    dataset = make_items(task, 30)
    run = make_judge_run(dataset, make_judge(task))
    add_scores(run, {f"k{i}": {"accuracy": 3, "clarity": 4} for i in range(30)})
    html = admin.get(f"/judges/runs/{run.pk}/results/?status=ok&per_page=25&junk=1").text
    assert links(html) == {"next-page": "?subject=accuracy&status=ok&per_page=25&page=2"}
    assert 'hx-target="#judge-items"' in html and "Page 1 of 2" in html
    second = admin.get(
        f"/judges/runs/{run.pk}/results/?subject=accuracy&status=ok&per_page=25&page=2"
    )
    assert links(second.text) == {"previous-page": "?subject=accuracy&status=ok&per_page=25&page=1"}


def test_failed_items_keep_the_error_kind(admin: Client) -> None:
    task = make_task()
    dataset = make_items(task, 101)
    run = make_judge_run(dataset, make_judge(task))
    add_scores(run, {f"k{i}": {"accuracy": None, "clarity": None} for i in range(101)})
    html = admin.get(f"/judges/runs/{run.pk}/failed/?kind=unparseable").text
    assert links(html) == {"next-page": "?kind=unparseable&page=2"}
    assert "hx-target" not in re.search(r'<nav class="pagination".*?</nav>', html, re.S)[0]


def test_review_index_pages_newer_and_older(admin: Client) -> None:
    task = make_task()
    dataset = make_items(task, 1)
    judge = make_judge(task)
    for _ in range(26):
        make_judge_run(dataset, judge)
    html = admin.get("/review/").text
    assert links(html) == {"next-page": "?page=2"} and "Older →" in html
    assert "← Newer" in admin.get("/review/?page=2").text


def test_run_responses_keep_the_status_filter(admin: Client) -> None:
    task = make_task()
    dataset = make_items(task, 60)
    run = make_generation_run(dataset, {f"k{i}": "text" for i in range(60)})
    Response.objects.filter(run=run, item__position__gte=55).update(status="failed")
    html = admin.get(f"/runs/{run.pk}/?status=ok").text
    assert links(html) == {"next-page": "?status=ok&page=2"}
    assert 'hx-target="#responses"' in html and "Page 1 of 2" in html
    assert "Page 2 of 2" in admin.get(f"/runs/{run.pk}/?status=ok&page=2").text


def test_no_links_when_one_page_holds_everything(admin: Client) -> None:
    task = make_task()
    dataset = make_items(task, 3)
    run = make_generation_run(dataset, {"k0": "a", "k1": "b", "k2": "c"})
    assert 'class="pagination"' not in admin.get(f"/runs/{run.pk}/").text
