"""Review in real Chromium: a queue worked with the keyboard alone, and hostile model output
that must stay text on every review page that shows it."""

import re

import pytest
from playwright.sync_api import expect

from apps.datasets.models import Dataset
from apps.judges.models import Judge, JudgeRound, Score
from apps.runs.models import AttemptLog
from tests.base import make_user
from tests.factories import (
    judge_item,
    make_generation_run,
    make_item,
    make_judge_run,
    make_review_dataset,
    make_task,
)


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_queue_reviewed_with_the_keyboard_alone(login, live_server):
    dataset = make_review_dataset(make_task())
    items = [make_item(dataset, i, question=f"Question number {i}") for i in range(3)]
    run = make_judge_run(dataset)
    for item in items:
        judge_item(run, item, [{"accuracy": 3, "clarity": 3}] * 2)
    scores = {(s.item.position, s.subject): s for s in Score.objects.select_related("item")}
    reviewer = make_user("reviewer", "alice")

    page = login(reviewer, f"/review/run/{run.pk}/")
    page.keyboard.press("j")  # start the queue (file order)
    page.wait_for_url(re.compile(rf"/review/run/{run.pk}/item/{items[0].pk}/"))
    expect(page.locator("#lock-status")).to_contain_text("You hold this item")

    page.keyboard.press("?")
    expect(page.locator("#keys-help")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#keys-help")).to_be_hidden()

    # Override accuracy: a digit sets the focused subject's value, then the reason, Enter saves.
    accuracy = page.locator(f"#score-{scores[0, 'accuracy'].pk}")
    expect(accuracy).to_have_class(re.compile("is-focused"))
    page.keyboard.press("4")
    # Keys typed into the reason are text, not shortcuts (j, k, c, digits, ?).
    page.keyboard.type("Too harsh: j k c 7 ? the answer is right")
    page.keyboard.press("Enter")
    expect(accuracy.locator(".state")).to_have_text("Overridden")
    expect(accuracy.locator(".final-value")).to_have_text("4")

    # Focus moved on to clarity by itself: c confirms it.
    clarity = page.locator(f"#score-{scores[0, 'clarity'].pk}")
    expect(clarity).to_have_class(re.compile("is-focused"))
    page.keyboard.press("c")
    expect(clarity.locator(".state")).to_have_text("Confirmed")
    assert f"/item/{items[0].pk}/" in page.url  # saved without leaving the page

    # Move on; the next item is served and claimed.
    page.keyboard.press("j")
    page.wait_for_url(re.compile(rf"/item/{items[1].pk}/"))
    expect(page.locator("#inputs")).to_contain_text("Question number 1")
    # ↓ picks the second subject; a digit there overrides that subject, not the first.
    page.keyboard.press("ArrowDown")
    page.keyboard.press("2")
    page.keyboard.type("Rambling")
    page.keyboard.press("Enter")
    expect(page.locator(f"#score-{scores[1, 'clarity'].pk} .state")).to_have_text("Overridden")
    expect(page.locator(f"#score-{scores[1, 'accuracy'].pk} .state")).to_have_text("Not reviewed")

    # Back to the first item: its history shows both changes.
    page.keyboard.press("k")
    page.wait_for_url(re.compile(rf"/item/{items[0].pk}/"))
    history = page.locator(f"#score-{scores[0, 'accuracy'].pk} .history-table").text_content()
    assert re.search(
        r"alice\s*Override\s*3\s*4\s*Too harsh: j k c 7 \? the answer is right", history
    )
    history = page.locator(f"#score-{scores[0, 'clarity'].pk} .history-table").text_content()
    assert re.search(r"alice\s*Confirm\s*3\s*3", history)

    first = Score.objects.get(pk=scores[0, "accuracy"].pk)
    assert first.override_reason == "Too harsh: j k c 7 ? the answer is right"
    for key, value, kind in [
        ((0, "accuracy"), 4, "override"),
        ((0, "clarity"), 3, "confirm"),
        ((1, "clarity"), 2, "override"),
    ]:
        score = Score.objects.get(pk=scores[key].pk)
        assert score.final_value == value and score.judge_value == 3
        assert list(score.events.values_list("kind", "user__username")) == [(kind, "alice")]
    assert not Score.objects.filter(pk=scores[1, "accuracy"].pk).reviewed().exists()


PAYLOADS = [
    "<script>window.__xss = 1; document.title = 'pwned'</script>",
    "<img src=x onerror=\"window.__xss = 2; document.title = 'pwned'; alert('img')\">",
    "<svg onload=\"window.__xss = 3; alert('svg')\"></svg>",
    "\"'><img src=x onerror=alert('attr')>",
]
EVIL = " ".join(PAYLOADS)


def hostile_run():
    """A judge run where everything a model or an upload could write holds the payloads."""
    task = make_task()
    dataset = make_review_dataset(task)
    dataset.tag_counts = {EVIL: 2}
    dataset.save()
    items = [
        make_item(
            dataset,
            i,
            question=f"Q{i} {EVIL}",
            answer=f"A{i} {EVIL}",
            reference=f"R{i} {EVIL}",
            tags=[EVIL],
            key=f"k{i}<script>window.__xss=9</script>",
        )
        for i in range(2)
    ]
    for item in items:
        item.fields["extra <b onmouseover=alert(1)>"] = {"nested": EVIL}
        item.save()
    generation = make_generation_run(dataset, {0: f"GEN {EVIL}", 1: f"GEN {EVIL}"})
    judge = Judge.objects.create(
        task=task,
        name="hostile",
        kind=Judge.Kind.RUBRIC,
        subjects=[{"name": "accuracy", "min": 1, "max": 5}],
        n_iter=2,
    )
    by_column = make_judge_run(dataset, judge=judge, label=f"label {PAYLOADS[0]} {PAYLOADS[2]}")
    by_run = make_judge_run(dataset, judge=judge, source_run=generation, label="from-run")
    for run in (by_column, by_run):
        judge_item(
            run,
            items[0],
            [{"accuracy": 2, "note": EVIL}, {"accuracy": 4}],
            reasons=[f"REASON {EVIL}", f"REASON2 {EVIL}"],
            raw_replies=[f"RAW {EVIL}", f"RAW2 {EVIL}"],
        )
        judge_item(run, items[1], [None, None], raw_replies=[f"BAD {EVIL}", EVIL])
        JudgeRound.objects.filter(run=run, item=items[1]).update(error=f"ERR {EVIL}")
        Score.objects.filter(run=run, item=items[1]).update(error=f"SCORE ERR {EVIL}")
        AttemptLog.objects.create(
            run=run,
            item=items[1],
            round=0,
            request_messages=[{"role": "user", "content": f"PROMPT {EVIL}"}, EVIL],
            raw_reply=f"LOG {EVIL}",
            error=f"LOGERR {EVIL}",
            traceback=f"TB {EVIL}",
        )
    return (by_column, by_run), items


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_hostile_markup_stays_text_on_every_review_page(login, live_server, page):
    (by_column, by_run), items = hostile_run()
    reviewer = make_user("reviewer", "alice")
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.add_init_script("window.__xss = 0;")
    login(reviewer)

    def visit(path: str, title: str) -> None:
        response = page.goto(f"{live_server.url}{path}")
        assert response is not None and response.status == 200, path
        page.wait_for_load_state("networkidle")
        # Open every fold, so nothing stays unrendered.
        page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
        check(path, title)

    def check(where: str, title: str) -> None:
        assert page.evaluate("window.__xss") == 0, where
        assert page.title() == title, where
        assert dialogs == [], where
        # Nothing was parsed into elements: no images, no SVG, only our own static scripts.
        assert page.locator("img, svg, b").count() == 0, where
        scripts = page.locator("script").evaluate_all("els => els.map(e => e.src)")
        assert all(src.startswith(f"{live_server.url}/static/") for src in scripts), where

    visit("/review/", "Review · evalsite")
    expect(page.locator("#review-runs")).to_contain_text("label <script>window.__xss = 1;")
    for run in (by_column, by_run):
        visit(f"/review/run/{run.pk}/", f"Review #{run.pk} · evalsite")
        expect(page.locator("#review-items")).to_contain_text("k0<script>window.__xss=9</script>")
        for item in items:
            title = f"Review item {item.key} · evalsite"
            visit(f"/review/run/{run.pk}/item/{item.pk}/", title)
            page_text = page.locator("main").inner_text()
            assert "<img src=x onerror=" in page_text and "<svg onload=" in page_text
            visit(f"/review/run/{run.pk}/item/{item.pk}/?blind=1", title)

    # After a blind entry the judge's round and reasons are swapped in by HTMX: still text.
    score = Score.objects.get(run=by_run, item=items[0])
    title = f"Review item {items[0].key} · evalsite"
    page.goto(f"{live_server.url}/review/run/{by_run.pk}/item/{items[0].pk}/?blind=1")
    page.locator(f"#score-{score.pk} input[name=value]").fill("3")
    page.locator(f"#score-{score.pk} button[type=submit]").click()
    expect(page.locator("#evidence")).to_contain_text("REASON <script>")
    check("blind reveal", title)

    # A reviewer's own reason is hostile too: saved over HTMX, shown in the card and history.
    card = page.locator(f"#score-{score.pk}")
    card.locator("textarea[name=reason]").fill(f"MY REASON {EVIL}")
    card.locator(".override-form button[type=submit]").click()
    expect(card.locator(".state")).to_have_text("Overridden")
    expect(card.locator(".override-reason")).to_contain_text("MY REASON <script>")
    check("override swap", title)
    assert Dataset.objects.count() == 1


# ---- the item page across subject scales and roles (#11) --------------------------------
def scaled_runs():
    """One item judged by an MCQ judge (0 or 100), a rubric with a 1–5 and a 0–100 subject,
    and a continuous 0–100 metric."""
    task = make_task()
    dataset = make_review_dataset(task)
    item = make_item(dataset, 0, question="Which is prime? A) 4 B) 6 C) 7", answer="C")

    def judged(kind, subjects, values, **fields):
        judge = Judge.objects.create(
            task=task, name=f"{kind}-judge", kind=kind, subjects=subjects, n_iter=1, **fields
        )
        run = make_judge_run(dataset, judge=judge)
        (first, *rest) = judge_item(run, item, [values])
        return run, [first, *rest]

    mcq = judged(Judge.Kind.MCQ, [{"name": "score", "min": 0, "max": 100}], {"score": 0})
    rubric = judged(
        Judge.Kind.RUBRIC,
        [{"name": "accuracy", "min": 1, "max": 5}, {"name": "overall", "min": 0, "max": 100}],
        {"accuracy": 2, "overall": 60},
    )
    metric = judged(
        Judge.Kind.METRIC,
        [{"name": "token_f1", "min": 0, "max": 100}],
        {"token_f1": 40},
        metric="token_f1",
    )
    return item, mcq, rubric, metric


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width", [1280, 800])
def test_the_reason_box_spans_its_card(login, live_server, page, width):
    item, (mcq, [score]), _rubric, _metric = scaled_runs()
    page.set_viewport_size({"width": width, "height": 900})
    login(make_user("reviewer", "alice"), f"/review/run/{mcq.pk}/item/{item.pk}/")
    form = page.locator(f"#score-{score.pk} .override-form").bounding_box()
    reason = page.locator(f"#score-{score.pk} textarea[name=reason]").bounding_box()
    assert form and reason
    # The whole width of the form (the card's column less its padding), not a third of it.
    assert reason["width"] >= form["width"] - 1, (reason, form)
    assert reason["x"] + reason["width"] <= width
    assert reason["width"] >= (400 if width == 1280 else 600)


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_digit_keys_follow_the_scale_of_the_subject_in_view(login, live_server, page):
    item, (mcq, [mcq_score]), (rubric, [accuracy, overall]), (metric, [f1]) = scaled_runs()
    help_rows = page.locator("#keys-help tbody.keys-digits:visible")
    login(make_user("reviewer", "alice"), f"/review/run/{mcq.pk}/item/{item.pk}/")

    # MCQ: 0 and 1 are its two values; "1" is 100 (right), never 1. Shown in help and card.
    card = page.locator(f"#score-{mcq_score.pk}")
    expect(card.locator(".keys-hint")).to_have_text("keys 0 → 0 (wrong) · 1 → 100 (right)")
    page.keyboard.press("?")
    expect(help_rows).to_have_count(1)
    expect(help_rows).to_have_text(re.compile(r"0\s*score: 0 \(wrong\)\s*1\s*score: 100 \(right\)"))
    page.keyboard.press("Escape")
    page.keyboard.press("1")
    expect(card.locator("input[name=value]")).to_have_value("100")
    page.keyboard.type("C is prime: the judge misread")
    page.keyboard.press("Enter")
    expect(card.locator(".final-value")).to_have_text("100")
    mcq_score.refresh_from_db()
    assert mcq_score.final_value == 100 and mcq_score.override_value == 100

    # Rubric 1–5: digits in range are the values, others do nothing; the help follows focus.
    page.goto(f"{live_server.url}/review/run/{rubric.pk}/item/{item.pk}/")
    first, second = page.locator(f"#score-{accuracy.pk}"), page.locator(f"#score-{overall.pk}")
    page.keyboard.press("?")
    expect(help_rows).to_have_count(1)
    expect(help_rows).to_have_text(re.compile(r"1–5\s*accuracy: that value"))
    page.keyboard.press("Escape")
    page.keyboard.press("7")
    expect(first.locator("input[name=value]")).to_have_value("2")
    assert page.evaluate("document.activeElement === document.body")  # the reason was not opened
    page.keyboard.press("3")
    expect(first.locator("input[name=value]")).to_have_value("3")
    expect(first.locator("textarea[name=reason]")).to_be_focused()
    page.keyboard.press("Escape")

    # ↓ to the 0–100 subject: digits do nothing there, and the help says so.
    page.keyboard.press("ArrowDown")
    expect(second).to_have_class(re.compile("is-focused"))
    page.keyboard.press("?")
    expect(help_rows).to_have_count(1)
    expect(help_rows).to_have_text(re.compile(r"0–9\s*overall: nothing: type the value \(0–100\)"))
    page.keyboard.press("Escape")
    for digit in "159":
        page.keyboard.press(digit)
    expect(second.locator("input[name=value]")).to_have_value("60")
    expect(second.locator("textarea[name=reason]")).not_to_be_focused()

    # A continuous 0–100 metric: the same, digits do nothing.
    page.goto(f"{live_server.url}/review/run/{metric.pk}/item/{item.pk}/")
    page.keyboard.press("1")
    expect(page.locator(f"#score-{f1.pk} input[name=value]")).to_have_value("40")
    page.keyboard.press("?")
    expect(help_rows).to_have_text(re.compile(r"0–9\s*token_f1: nothing: type the value"))
    assert not Score.objects.filter(pk__in=[accuracy.pk, overall.pk, f1.pk]).reviewed().exists()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_viewer_gets_no_lock_no_forms_and_no_keys_that_save(login, live_server, page):
    item, (mcq, [score]), _rubric, _metric = scaled_runs()
    login(make_user("viewer", "val"), f"/review/run/{mcq.pk}/item/{item.pk}/")
    page.wait_for_load_state("networkidle")
    expect(page.locator(f"#score-{score.pk} .final-value")).to_have_text("0")
    # The one form a viewer gets is their own: how they read model output (Raw / Rendered).
    forms = "#review-item form:not(#text-view-switch), #lock-status, textarea"
    assert page.locator(forms).count() == 0
    expect(page.locator("#text-view-switch")).to_have_count(1)
    page.keyboard.press("1")
    page.keyboard.press("c")
    page.keyboard.press("?")
    expect(page.locator("#keys-help")).to_be_visible()
    help_text = page.locator("#keys-help").inner_text()
    assert "next / previous item" in help_text
    assert "save" not in help_text and "confirm" not in help_text and "score:" not in help_text
    page.wait_for_timeout(300)
    assert not mcq.review_locks.exists()  # the open page neither took nor renews a lock
    score.refresh_from_db()
    assert score.final_value == 0 and not score.events.exists()
