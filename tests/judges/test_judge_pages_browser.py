"""In Chromium: the judge form shows only the chosen kind's settings, the judge page makes a
judge the task's default, and a failed-items page of 40 failures stays short."""

import pytest
from django.urls import reverse

from apps.judges.models import Judge, TaskJudging
from apps.runs.models import ErrorKind
from tests.factories import make_judge
from tests.judges.test_failed_page import failed_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SUBJECTS = "rubric mcq mcq_rule metric"
PROMPTS = "rubric mcq pairwise"
GROUPS = (SUBJECTS, PROMPTS, "rubric mcq", "rubric", "mcq mcq_rule", "metric")


def visible_groups(page) -> list[str]:
    return [
        kinds
        for kinds in GROUPS
        if page.locator(f'fieldset.kind-fields[data-kinds="{kinds}"]').is_visible()
    ]


def test_choosing_a_kind_shows_only_its_settings(task, reviewer_user, login, page):
    login(reviewer_user, reverse("judges:create") + f"?task={task.slug}")
    assert visible_groups(page) == list(GROUPS)  # no kind chosen yet: every group
    page.select_option("select[name=kind]", "mcq_rule")
    assert visible_groups(page) == [SUBJECTS, "mcq mcq_rule"]
    assert page.locator("input[name=label_count]").is_visible()
    assert not page.locator("textarea[name=system_prompt]").is_visible()
    page.select_option("select[name=kind]", "rubric")
    assert visible_groups(page) == [SUBJECTS, PROMPTS, "rubric mcq", "rubric"]
    # A pairwise judge has prompts and no subjects.
    page.select_option("select[name=kind]", "pairwise")
    assert visible_groups(page) == [PROMPTS]
    assert not page.locator("textarea[name=subjects_text]").is_visible()
    page.select_option("select[name=kind]", "metric")
    assert visible_groups(page) == [SUBJECTS, "metric"]
    # The hidden settings do not stop the form: a metric judge is saved.
    page.fill("input[name=name]", "exact")
    page.select_option("select[name=metric]", "exact_match")
    page.click("#judge-form button[type=submit]")
    page.wait_for_selector("#messages >> text=Judge exact v1 saved")
    assert Judge.objects.get(name="exact").kind == Judge.Kind.METRIC
    # Editing starts from the judge's kind.
    page.goto(page.url.rstrip("/") + "/edit/")
    assert visible_groups(page) == [SUBJECTS, "metric"]


def test_make_this_the_default_judge_from_its_page(task, reviewer_user, login, page):
    judge = make_judge(task, Judge.Kind.MCQ_RULE, name="choice")
    login(reviewer_user, judge.get_absolute_url())
    page.click("#make-default")
    page.wait_for_selector("#messages >> text=is now judged by choice v1")
    assert page.url.endswith(judge.get_absolute_url())
    assert page.locator("h1 .badge", has_text="default judge").is_visible()
    task.refresh_from_db()
    assert TaskJudging.of(task.pk).default_judge_id == judge.pk


def test_forty_failures_fit_in_a_short_page(task, reviewer_user, login, page):
    kinds = [ErrorKind.UNPARSEABLE, ErrorKind.TIMEOUT, ErrorKind.API_ERROR, ErrorKind.NO_RESPONSE]
    run = failed_run(task, {i: kinds[i % 4] for i in range(40)}, n=42)
    page.set_viewport_size({"width": 1280, "height": 900})
    login(reviewer_user, reverse("judges:failed", args=[run.pk]))
    assert page.locator(".failed-item").count() == 40
    assert page.locator(".failed-group").count() == 4
    height = page.evaluate("document.documentElement.scrollHeight")
    assert height < 4000, height
    print(f"40 failures: {height} px tall at 1280 px")
    # A line opens in place to show what the judge replied.
    line = page.locator("#group-unparseable .failed-item").first
    assert not line.locator(".raw-reply").is_visible()
    line.locator("summary").click()
    assert line.locator(".raw-reply").inner_text() == "not JSON at all"
