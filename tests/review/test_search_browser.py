"""The task search in Chromium (#28.5): typed, the results swap in place; model output in a
snippet is shown, never run; a hit opens the item's review."""

import re

import pytest
from playwright.sync_api import expect

from tests.base import make_user
from tests.factories import (
    make_generation_run,
    make_item,
    make_judge_run,
    make_review_dataset,
    make_task,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_search_from_the_task_page_to_the_review(login, live_server):
    task = make_task("geo")
    dataset = make_review_dataset(task)
    make_item(dataset, 0, question="What is the capital of France?")
    item = make_item(dataset, 1, question="Name a river in Egypt.")
    hostile = 'The Nile <img src=x onerror="alert(1)"><script>alert(2)</script>'
    judged = make_generation_run(dataset, {0: "Paris.", 1: hostile}, label="model-a")
    judge_run = make_judge_run(dataset, source_run=judged)

    page = login(make_user("viewer"), task.get_absolute_url())
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.click("#task-search")
    page.fill("#search-q", "nile")
    expect(page.locator("#search-count")).to_have_text("1 item found.")
    expect(page).to_have_url(re.compile(r"q=nile"))
    found = page.locator(".search-hit .search-found")
    expect(found).to_contain_text('<img src=x onerror="alert(1)">')  # as text
    expect(found.locator("mark")).to_have_text(["Nile"])
    assert found.locator("img, script").count() == 0

    page.click(".search-hit a.search-source >> text=model-a")
    page.wait_for_url(re.compile(rf"/review/run/{judge_run.pk}/item/{item.pk}/"))
    assert dialogs == []
