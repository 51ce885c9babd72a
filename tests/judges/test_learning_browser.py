"""In Chromium, as a reviewer would: review 20 items of a judge run with the keyboard, improve
the judge with those reviews, check the new version against the held-out ones, and see both
versions' agreement with people side by side."""

import re

import pytest
from django.db import transaction
from playwright.sync_api import expect

from apps.judges.launching import create_judge_run
from apps.judges.models import Judge, Score
from apps.leaderboards import alignment
from tests.base import make_user, work
from tests.factories import make_answers_dataset, make_judge, set_judging
from tests.judges.test_learning_check import FIVE, LEARNED, is_trick

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.slow]

N = 20


def test_review_improve_check_and_compare_in_the_browser(
    task, endpoint, llm_server, login, live_server
) -> None:
    dataset = make_answers_dataset(
        task, N, response=lambda i: f"TRICK wrong {i}" if is_trick(i) else f"right {i}"
    )
    judge = make_judge(
        task,
        name="quality",
        subjects=[{"name": "accuracy", "min": 1, "max": 5}],
        user_prompt="Q: {{ inputs }}\nA: {{ response }}",
    )
    set_judging(task, default_judge_endpoint=endpoint)
    llm_server.configure(default_reply=FIVE, script=[LEARNED])
    with transaction.atomic():
        run = create_judge_run(judge, endpoint=endpoint, dataset=dataset, source_column="response")
    work()
    positions = dict(dataset.items.values_list("pk", "position"))

    page = login(make_user("reviewer", "alice"), f"/review/run/{run.pk}/")
    page.keyboard.press("j")
    for done in range(N):
        page.wait_for_url(re.compile(rf"/review/run/{run.pk}/item/\d+/"))
        item_id = int(re.search(r"/item/(\d+)/", page.url).group(1))
        score = Score.objects.get(run=run, item_id=item_id, subject="accuracy")
        state = page.locator(f"#score-{score.pk} .state")
        if is_trick(positions[item_id]):
            page.keyboard.press("1")
            page.keyboard.type("confidently wrong")
            page.keyboard.press("Enter")
            expect(state).to_have_text("Overridden")
        else:
            page.keyboard.press("c")
            expect(state).to_have_text("Confirmed")
        if done < N - 1:
            page.keyboard.press("j")
            page.wait_for_url(lambda url, seen=item_id: f"/item/{seen}/" not in url)
    assert Score.objects.filter(run=run).reviewed().count() == N

    page.goto(f"{live_server.url}{judge.get_absolute_url()}")
    page.click("#improve-judge")
    expect(page.locator("#reviewed-count")).to_have_text(str(N))
    drafted = page.locator(".card.example").count()
    assert drafted >= 2
    page.click("#save-improved")
    expect(page.locator("#messages")).to_contain_text("Saved quality v2")
    v2 = Judge.objects.get(name="quality", version=2)
    expect(page.locator("#judge-examples")).to_contain_text(f"{drafted} from reviews")

    page.click("#check-judge")
    page.wait_for_url(re.compile(r"/leaderboards/judges/\d+/alignment/"))
    work()
    page.reload()
    report = alignment.report(v2)
    (subject,) = report.subjects
    card = page.locator("#check-accuracy")
    expect(card).to_have_attribute("data-verdict", subject.verdict)
    rows = card.locator("tr.metrics")
    expect(rows).to_have_count(2)  # this version and the one people reviewed, side by side
    expect(rows.nth(0)).to_have_attribute("data-version", "this version")
    expect(rows.nth(1)).to_have_attribute("data-version", "quality v1")
    assert subject.checked.mad == 0 < subject.before.mad
    expect(page.locator("#held-out-items")).to_have_text(str(report.held_out))
