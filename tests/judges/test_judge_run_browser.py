"""In Chromium: open a judge run's failed items, read the raw reply, retry one item to success
(the loopback server fails that item's judge reply the first time only)."""

import pytest
from django.db import transaction
from django.urls import reverse

from apps.judges.launching import create_judge_run
from apps.judges.models import Score
from apps.runs.models import Run
from tests.base import wait_for, work
from tests.factories import make_answers_dataset, make_judge, rubric_reply

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BAD_REPLY = "I'd say <b>quite good</b> overall, maybe a four?"


def test_read_a_raw_reply_and_retry_one_item(
    task, endpoint, llm_server, reviewer_user, login, page, workers
):
    dataset = make_answers_dataset(task, 3)
    judge = make_judge(task)
    llm_server.configure(
        default_reply=rubric_reply(4, 5),
        script=[{"match": "number 1\n</response>", "reply": BAD_REPLY, "times": 1}],
    )
    with transaction.atomic():
        run = create_judge_run(judge, endpoint=endpoint, dataset=dataset, source_column="response")
    work()
    run.refresh_from_db()
    assert (run.done, run.failed) == (2, 1)
    item = dataset.items.get(position=1)

    login(reviewer_user, reverse("runs:detail", args=[run.pk]))
    page.click("#judge-run-links a:has-text('Failed items')")
    page.wait_for_url(f"**{reverse('judges:failed', args=[run.pk])}")
    group = page.locator("#group-unparseable")
    assert group.locator(".error-kind").inner_text() == "Unparseable reply"
    failed = group.locator(f"#failed-{item.pk}")
    assert not failed.locator(".raw-reply").is_visible()  # one line until it is opened
    failed.locator("summary").click()
    # The reply is shown as the judge wrote it: its markup is text, not HTML.
    assert failed.locator(".raw-reply").inner_text() == BAD_REPLY
    assert failed.locator(".raw-reply b").count() == 0
    assert "answer number 1" in failed.locator(".sent-message").last.inner_text()
    assert page.locator(".failed-item").count() == 1

    workers()
    failed.locator("button.retry-item").click()
    page.wait_for_selector("#messages >> text=Judging item q1 again")
    wait_for(
        lambda: Run.objects.get(pk=run.pk).status == Run.Status.COMPLETED,
        timeout=60,
        what="the retried item to be judged",
    )
    page.reload()
    assert page.locator("#no-failed").is_visible()
    scores = Score.objects.filter(run=run, item=item)
    assert {s.subject: s.judge_value for s in scores} == {"accuracy": 4, "clarity": 5}

    page.click("#results-link")
    row = page.locator(f"#judge-item-table tr[data-item='{item.pk}']")
    assert "scored" in row.inner_text()
    assert page.locator("#subject-1 .subject-failed").inner_text() == "0"
