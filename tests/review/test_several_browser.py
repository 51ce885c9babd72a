"""Three reviewers at once in Chromium on items that take three reviews each (#12): before
submitting, none sees another's value or reason, nor (blind) the judge's; after, each sees all
that were given; every item ends with exactly three reviews."""

import re

import pytest
from playwright.sync_api import Page, expect

from apps.judges.models import Score
from apps.review.models import Review, ReviewPolicy
from tests.base import PASSWORD, make_user
from tests.factories import judge_item, make_item, make_judge_run, make_review_dataset, make_task

NAMES = ("ann", "ben", "cat")


def open_as(browser, live_server, user, path: str) -> Page:
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    page.goto(f"{live_server.url}{path}")
    return page


def review(page: Page, score: Score, value: int, reason: str) -> None:
    card = page.locator(f"#score-{score.pk}")
    card.locator("input[name=value]").fill(str(value))
    card.locator("textarea[name=reason]").fill(reason)
    card.get_by_role("button", name="Submit review").click()
    expect(card.locator(".my-review")).to_contain_text(reason)


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_three_reviewers_at_once_see_nothing_of_each_other_before_submitting(
    browser, live_server
) -> None:
    task = make_task("trio")
    dataset = make_review_dataset(task)
    items = [make_item(dataset, i, question=f"Question {i}") for i in range(2)]
    run = make_judge_run(dataset)
    for item in items:
        judge_item(run, item, [{"accuracy": 4, "clarity": 3}])
    ReviewPolicy.objects.create(task=task, reviews_per_item=3, thresholds={"accuracy": 1})
    users = {name: make_user("reviewer", name) for name in NAMES}
    scores = {(s.item_id, s.subject): s for s in Score.objects.filter(run=run)}
    query = "?order=position&blind=1"
    pages = {
        name: open_as(
            browser, live_server, user, f"/review/run/{run.pk}/item/{items[0].pk}/{query}"
        )
        for name, user in users.items()
    }
    for page in pages.values():
        expect(page.locator("#lock-status")).to_contain_text("reserved for your review")
        expect(page.locator(".judge-value")).to_have_count(0)  # blind: no judge value yet
        expect(page.locator(".review-count").first).to_have_text("0 of 3 reviews")

    first = items[0].pk
    for turn, name in enumerate(NAMES):
        page = pages[name]
        page.reload()
        text = page.content()
        for other in NAMES:
            if other != name:
                assert f"{other.upper()}-SECRET" not in text, f"{name} saw {other}'s review"
        expect(page.locator(".review-count").first).to_have_text(f"{turn} of 3 reviews")
        review(page, scores[first, "accuracy"], 4 + (turn == 2), f"{name.upper()}-SECRET acc")
        review(page, scores[first, "clarity"], 3, f"{name.upper()}-SECRET cla")
        # Now everything given so far shows, with the judge's value.
        card = page.locator(f"#score-{scores[first, 'accuracy'].pk}")
        expect(card.locator(".reviews-table tbody tr")).to_have_count(turn + 1)
        expect(card.locator(".judge-value")).to_have_text("4")
    accuracy = pages["cat"].locator(f"#score-{scores[first, 'accuracy'].pk}")
    expect(accuracy.locator(".state").last).to_have_text("Consensus")
    expect(accuracy.locator(".final-value")).to_have_text(re.compile(r"4\.33"))

    # On to the next item, everyone through the queue's Next button.
    for name in NAMES:
        page = pages[name]
        page.get_by_role("button", name=re.compile("Next item")).click()
        page.wait_for_url(re.compile(rf"/item/{items[1].pk}/"))
        review(page, scores[items[1].pk, "accuracy"], 2, f"{name} second")
        review(page, scores[items[1].pk, "clarity"], 3, f"{name} second")
    for item in items:
        reviewers = Review.objects.filter(score__item=item).values("user").distinct().count()
        assert reviewers == 3
        assert Review.objects.filter(score__item=item).count() == 6
    second = Score.objects.get(pk=scores[items[1].pk, "accuracy"].pk)
    assert second.final_value == 2 and second.events.get().kind == "consensus"
