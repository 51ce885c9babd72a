"""Searching a task's items and the models' answers (#28.5): from the task page and the review
list, each hit linking to where it is reviewed; model output stays text."""

import re

import pytest
from django.test import Client
from django.urls import reverse

from apps.review.search import snippet
from tests.factories import (
    make_conversation_dataset,
    make_generation_run,
    make_item,
    make_judge_run,
    make_multi_turn_run,
    make_review_dataset,
    make_task,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    task = make_task("geo")
    dataset = make_review_dataset(task)
    make_item(dataset, 0, question="What is the capital of France?")
    make_item(dataset, 1, question="Name a river in Egypt.")
    make_item(dataset, 2, question="How tall is Everest?")
    judged = make_generation_run(
        dataset,
        {0: "Paris.", 1: "The Nile, near Paris? <script>alert(1)</script>", 2: "8,849 m"},
        label="model-a",
    )
    unjudged = make_generation_run(dataset, {0: "It is Lyon", 1: "The Nile"}, label="model-b")
    judge_run = make_judge_run(dataset, source_run=judged)
    other = make_review_dataset(make_task("elsewhere"))
    make_item(other, 0, question="Paris in another task")
    return task, dataset, judged, unjudged, judge_run


def results(client, task, q, **extra):
    response = client.get(reverse("review:search", args=[task.slug]), {"q": q}, **extra)
    assert response.status_code == 200
    return response.content.decode()


def hits(html: str) -> list[tuple[str, list[tuple[str, str]]]]:
    """[(item heading link, [(source label, source link)])] in page order."""
    out = []
    for article in re.findall(r'<article class="card search-hit".*?</article>', html, re.S):
        heading = re.search(r'<h2 class="small"><a href="([^"]+)"', article).group(1)
        sources = re.findall(r'<a href="([^"]+)" class="search-source">([^<]+)</a>', article)
        out.append((heading, [(label, url) for url, label in sources]))
    return out


def test_items_and_answers_are_found_with_links_to_their_review(viewer_client, world):
    task, dataset, _, unjudged, judge_run = world
    item0, item1, _ = dataset.items.order_by("position")
    review = lambda item: reverse("review:item", args=[judge_run.pk, item.pk])  # noqa: E731
    page = results(viewer_client, task, "paris")
    assert "2 items found." in page
    assert hits(page) == [
        # The item's own text, then each model's answer: judged answers open their review, the
        # others the generation run's response page.
        (review(item0), [("model-a", review(item0))]),
        (review(item1), [("model-a", review(item1))]),
    ]
    assert hits(results(viewer_client, task, "nile")) == [
        (
            review(item1),
            [
                ("model-a", review(item1)),
                ("model-b", reverse("runs:response-detail", args=[unjudged.pk, item1.pk])),
            ],
        )
    ]
    assert hits(results(viewer_client, task, "capital france")) == [
        (review(item0), [("Item", review(item0))])
    ]
    assert "Paris in another task" not in page
    assert hits(results(viewer_client, task, "lyon")) == [
        (
            review(item0),
            [("model-b", reverse("runs:response-detail", args=[unjudged.pk, item0.pk]))],
        )
    ]


def test_model_output_in_a_snippet_is_text(reviewer_client, world):
    task = world[0]
    page = results(reviewer_client, task, "nile")
    assert "<script>" not in page
    assert "The <mark>Nile</mark>, near Paris? &lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_an_item_without_a_judge_run_links_to_its_page_in_the_dataset(viewer_client):
    task = make_task()
    dataset = make_review_dataset(task)
    item = make_item(dataset, 4, question="Where is Timbuktu?")
    assert hits(results(viewer_client, task, "timbuktu")) == [
        (reverse("datasets:item-detail", args=[dataset.pk, 4]), [("Item", item_url := reverse(
            "datasets:item-detail", args=[dataset.pk, item.position]))])
    ]  # fmt: skip
    assert item_url


def test_htmx_gets_the_results_only_and_the_pages_keep_the_query(viewer_client, world, settings):
    task = world[0]
    partial = results(viewer_client, task, "paris", HTTP_HX_REQUEST="true")
    assert partial.lstrip().startswith('<section id="search-results">')
    assert "<h1>" not in partial
    from apps.review import search

    settings.DEBUG = False
    search.PER_PAGE, before = 1, search.PER_PAGE
    try:
        page = results(viewer_client, task, "paris")
        assert len(hits(page)) == 1 and "Page 1 of 2" in page
        assert "?q=paris&amp;page=2" in page
    finally:
        search.PER_PAGE = before


def test_no_query_shows_the_form_only_and_login_is_needed(viewer_client, world):
    task = world[0]
    page = results(viewer_client, task, "")
    assert 'id="search-q"' in page and "found" not in page
    response = Client().get(reverse("review:search", args=[task.slug]), {"q": "paris"})
    assert response.status_code == 302 and "/login" in response["Location"]


def test_the_task_page_and_the_review_list_link_to_the_search(viewer_client, world):
    task, *_, judge_run = world
    url = reverse("review:search", args=[task.slug])
    assert f'href="{url}"' in viewer_client.get(task.get_absolute_url()).content.decode()
    listed = viewer_client.get(reverse("review:run", args=[judge_run.pk])).content.decode()
    assert f'href="{url}"' in listed


def test_the_review_list_search_finds_the_judged_answer_too(viewer_client, world):
    *_, judge_run = world
    url = reverse("review:run", args=[judge_run.pk])

    def rows(q: str) -> list[str]:
        page = viewer_client.get(url, {"q": q}).content.decode()
        return re.findall(r'<tr data-item="\d+">.*?<td>(\d+)</td>', page, re.S)

    assert rows("egypt") == ["2"]  # the item's question (rows count from 1)
    assert rows("8,849") == ["3"]  # the answer judged
    assert rows("paris") == ["1", "2"]
    assert rows("lyon") == []  # another model's answer, not this run's


def test_a_snippet_marks_every_word_around_the_first_match():
    text = "x" * 200 + " Paris is the capital. PARIS again." + "y" * 400
    parts = snippet(text, "paris capital")
    assert parts[0] == ("…", False) and parts[-1][0].endswith("…")
    assert [p for p, marked in parts if marked] == ["Paris", "capital", "PARIS"]
    assert snippet("short", "zzz") == [("short", False)]


def test_every_turns_answer_of_a_multi_turn_run_is_found(viewer_client):
    task = make_task("chat")
    dataset = make_conversation_dataset(task, [["Name a port.", "And a river?"], ["Hi", "Bye"]])
    run = make_multi_turn_run(
        dataset, {"d0": ["Zanzibar harbour.", "The Volga."], "d1": ["Hello", "Ciao"]}
    )
    item = dataset.items.get(key="d0")
    response_page = reverse("runs:response-detail", args=[run.pk, item.pk])
    # Turn 1's answer is in no Response (the item's holds its last answer): found as turn 1.
    assert hits(results(viewer_client, task, "zanzibar")) == [
        (
            reverse("datasets:item-detail", args=[dataset.pk, 0]),
            [("model-a · turn 1", response_page)],
        )
    ]
    # The last answer is the Response's text too: shown once, as its turn.
    assert hits(results(viewer_client, task, "volga"))[0][1] == [
        ("model-a · turn 2", response_page)
    ]
    # The review list of a judge run over it finds any turn's answer.
    judge_run = make_judge_run(dataset, source_run=run)
    listed = viewer_client.get(reverse("review:run", args=[judge_run.pk]), {"q": "zanzibar"})
    assert re.findall(r'<tr data-item="(\d+)">', listed.content.decode()) == [str(item.pk)]


def test_a_word_in_every_answer_lists_the_first_items_and_says_there_are_more(
    viewer_client, world, monkeypatch
):
    """A common word (more index matches than COMMON) tests items one by one in page order
    and stops at CAP: the same first items as reading the index's whole list."""
    task = world[0]
    everywhere = results(viewer_client, task, "paris")
    from apps.review import search

    monkeypatch.setattr(search, "COMMON", 0)  # every word is common
    assert hits(results(viewer_client, task, "paris")) == hits(everywhere)
    assert hits(results(viewer_client, task, "nil*")) == hits(results(viewer_client, task, "nile"))
    monkeypatch.setattr(search, "CAP", 1)
    page = results(viewer_client, task, "paris")
    assert "More than 1 items found: the first 1 are listed." in page
    assert hits(page) == hits(everywhere)[:1]


def test_the_review_list_search_of_a_common_word_counts_up_to_its_cap(
    viewer_client, world, monkeypatch
):
    from apps.review import listing

    url = reverse("review:run", args=[world[-1].pk])

    def rows(q: str) -> tuple[list[str], str]:
        page = viewer_client.get(url, {"q": q}).content.decode()
        return re.findall(r'<tr data-item="\d+">.*?<td>(\d+)</td>', page, re.S), page

    monkeypatch.setattr(listing, "COMMON", 0)  # each item looked up on its own
    assert rows("paris")[0] == ["1", "2"] and rows("8,849")[0] == ["3"]
    assert rows("lyon")[0] == []  # another model's answer, not this run's
    monkeypatch.setattr(listing, "SEARCH_CAP", 1)
    found, page = rows("paris")
    assert found == ["1"] and "more than 1 items" in page
