"""The judge form groups the settings by the kinds they are for (a script shows only the chosen
kind's group; without it every group is shown under a legend naming its kinds), explains the
kinds above the fields; the judge page makes a judge the task's default."""

import re

import pytest
from django.test import Client
from django.urls import reverse

from apps.judges.models import Judge, TaskJudging
from tests.factories import make_judge
from tests.judges.test_judge_pages import create_url, judge_form

pytestmark = pytest.mark.django_db


def fieldsets(page: str) -> dict[str, tuple[str, list[str]]]:
    """data-kinds → (legend, field names) of each kind's fieldset."""
    found = {}
    for kinds, body in re.findall(
        r'<fieldset class="kind-fields" data-kinds="([^"]*)">(.*?)</fieldset>', page, re.S
    ):
        legend = re.search(r"<legend>(.*?)</legend>", body).group(1)
        found[kinds] = (legend, re.findall(r'class="field field-([a-z_]+)"', body))
    return found


def test_without_javascript_every_group_says_which_kinds_it_is_for(task, reviewer_client):
    page = reviewer_client.get(create_url(task)).content.decode()
    assert fieldsets(page) == {
        # A pairwise judge scores no subjects: the box is hidden when it is chosen.
        "rubric mcq mcq_rule metric": (
            "Subjects (every kind but pairwise and log-likelihood choices)",
            ["subjects_text"],
        ),
        "rubric mcq pairwise": (
            "For LLM rubric and multiple choice (LLM) and pairwise (LLM) judges",
            ["system_prompt", "user_prompt"],
        ),
        "rubric mcq": (
            "For LLM rubric and multiple choice (LLM) judges",
            ["n_iter", "aggregation"],
        ),
        "rubric": (
            "For LLM rubric judges only",
            [
                "reply_format",
                "reply_pattern",
                "use_structured_output",
                "ask_confidence",
                "per_turn",
            ],
        ),
        "mcq mcq_rule": (
            "For multiple choice (LLM) and multiple choice (rule-based) judges",
            ["label_type", "label_count"],
        ),
        "metric": (
            "For metric (rule-based) judges only",
            [
                "metric",
                "metric_options",
                "postprocess",
                "postprocess_reference",
                "converter",
                "dataset_metric",
            ],
        ),
    }
    # The kinds are explained above the fields; the settings every kind has come first.
    assert page.index('id="kinds-help"') < page.index('name="name"') < page.index("kind-fields")
    assert page.index('name="kind"') < page.index('name="subjects_text"') < page.index("n_iter")
    assert "js/judge_form.js" in page


def test_settings_of_other_kinds_sent_without_javascript_are_ignored(task, reviewer_client):
    form = judge_form(
        name="exact",
        kind="metric",
        metric="exact_match",
        subjects_text="",
        system_prompt="You judge.",
        n_iter="5",
        label_count="7",
    )
    response = reviewer_client.post(create_url(task), form)
    judge = Judge.objects.get(name="exact")
    assert response.status_code == 302
    assert (judge.metric, judge.system_prompt, judge.n_iter, judge.label_count) == (
        "exact_match",
        "",
        1,
        4,
    )


def judge_page(client, judge: Judge) -> str:
    return client.get(judge.get_absolute_url()).content.decode()


def test_make_a_rule_based_judge_the_default_from_its_page(task, reviewer_client, viewer_user):
    judge = make_judge(task, Judge.Kind.MCQ_RULE, name="choice")
    viewer = Client()  # the client fixtures share one client
    viewer.force_login(viewer_user)
    assert 'id="make-default-form"' not in judge_page(viewer, judge)
    page = judge_page(reviewer_client, judge)
    assert (
        'id="make-default-form"' in page
        and 'name="endpoint"' not in page.split("make-default-form")[1].split("</form>")[0]
    )
    url = reverse("judges:set-default", args=[task.slug])
    response = reviewer_client.post(url, {"judge": judge.pk, "next": judge.get_absolute_url()})
    assert response.status_code == 302 and response["Location"] == judge.get_absolute_url()
    task.refresh_from_db()
    assert TaskJudging.of(task.pk).default_judge_id == judge.pk
    page = judge_page(reviewer_client, judge)
    assert "default judge" in page and 'id="make-default-form"' not in page
    assert "is now judged by choice v1" in page


def test_an_llm_judge_needs_its_endpoint_to_become_the_default(task, reviewer_client, endpoint):
    judge = make_judge(task, name="quality")
    url = reverse("judges:set-default", args=[task.slug])
    back = judge.get_absolute_url()
    response = reviewer_client.post(url, {"judge": judge.pk, "next": back}, follow=True)
    assert "choose the endpoint that judges" in response.content.decode()
    task.refresh_from_db()
    assert TaskJudging.of(task.pk).default_judge_id is None
    reviewer_client.post(url, {"judge": judge.pk, "endpoint": endpoint.pk, "next": back})
    task.refresh_from_db()
    judging = TaskJudging.of(task.pk)
    assert (judging.default_judge_id, judging.default_judge_endpoint_id) == (judge.pk, endpoint.pk)


def test_make_default_is_for_reviewers_and_stays_on_this_site(task, reviewer_client, viewer_user):
    judge = make_judge(task, Judge.Kind.MCQ_RULE, name="choice")
    url = reverse("judges:set-default", args=[task.slug])
    viewer = Client()  # the client fixtures share one client
    viewer.force_login(viewer_user)
    assert viewer.post(url, {"judge": judge.pk}).status_code == 403
    response = reviewer_client.post(url, {"judge": judge.pk, "next": "https://evil.example/"})
    assert response["Location"] == reverse("judges:list") + f"?task={task.slug}"


def test_only_the_latest_version_can_become_the_default(task, reviewer_client):
    old = make_judge(task, Judge.Kind.MCQ_RULE, name="choice")
    make_judge(task, Judge.Kind.MCQ_RULE, name="choice", version=2)
    assert 'id="make-default-form"' not in judge_page(reviewer_client, old)
