"""Judges pages: versioned judges with plain-word validation, the task's default judge, starting
a judge run, the results page and the failed items page (rows made with the ORM here; the
runs themselves are tested in test_judge_run*.py)."""

from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from apps.judges.models import Judge, JudgeRound, JudgeRun, RetryScope, Score, TaskJudging
from apps.runs.models import AttemptLog, Run
from tests.factories import (
    SUBJECTS,
    make_answers_dataset,
    make_generation_run,
    make_judge,
    set_judging,
)

pytestmark = pytest.mark.django_db


def judge_form(**fields: Any) -> dict[str, Any]:
    data = {
        "name": "quality",
        "kind": "rubric",
        "subjects_text": "accuracy 1 5\nclarity: 1-5",
        "label_type": "upper",
        "label_count": "4",
        "metric": "",
        "metric_options": "",
        "postprocess": "",
        "n_iter": "3",
        "aggregation": "mean",
        "use_structured_output": "on",
        "system_prompt": "",
        "user_prompt": "",
    }
    data.update(fields)
    return data


def create_url(task) -> str:
    return reverse("judges:create") + f"?task={task.slug}"


# ---- judges -------------------------------------------------------------------------------------
def test_reviewer_creates_and_edits_a_judge_as_versions(task, reviewer_client, endpoint):
    response = reviewer_client.post(create_url(task), judge_form())
    judge = Judge.objects.get(task=task, name="quality")
    assert response.status_code == 302 and response["Location"] == judge.get_absolute_url()
    assert judge.version == 1 and judge.n_iter == 3
    assert judge.subjects == SUBJECTS
    set_judging(task, default_judge=judge, default_judge_endpoint=endpoint)

    page = reviewer_client.get(reverse("judges:edit", args=[judge.pk])).content.decode()
    assert "accuracy 1 5\nclarity 1 5" in page and "saves v2" in page
    form = judge_form(name="renamed", subjects_text="accuracy 0 10", aggregation="max")
    reviewer_client.post(reverse("judges:edit", args=[judge.pk]), form)
    latest = Judge.objects.get(task=task, name="quality", version=2)  # the name stays
    assert latest.subjects == [{"name": "accuracy", "min": 0, "max": 10}]
    assert latest.aggregation == "max"
    judge.refresh_from_db()
    assert judge.subjects == SUBJECTS  # the earlier version never changes
    task.refresh_from_db()
    assert TaskJudging.of(task.pk).default_judge_id == latest.pk  # the default follows the edit

    listing = reviewer_client.get(reverse("judges:list") + f"?task={task.slug}").content.decode()
    assert "v2" in listing and "default" in listing
    detail = reviewer_client.get(judge.get_absolute_url()).content.decode()
    assert "earlier version" in detail and "You are an impartial evaluator" in detail


def test_rule_based_judges_get_a_subject_with_a_range(task, reviewer_client):
    reviewer_client.post(
        create_url(task),
        judge_form(name="choice", kind="mcq_rule", subjects_text="", n_iter="5", label_count="5"),
    )
    choice = Judge.objects.get(name="choice")
    assert choice.subjects == [{"name": "score", "min": 0, "max": 100}]
    assert choice.n_iter == 1 and choice.label_count == 5
    reviewer_client.post(
        create_url(task),
        judge_form(
            name="f1",
            kind="metric",
            subjects_text="",
            metric="token_f1",
            metric_options='{"ignore_articles": false}',
            postprocess="first_line",
        ),
    )
    f1 = Judge.objects.get(name="f1")
    assert f1.subjects == [{"name": "token_f1", "min": 0.0, "max": 100.0}]
    assert (f1.metric_options, f1.postprocess) == ({"ignore_articles": False}, "first_line")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"subjects_text": ""}, "A rubric judge needs at least one subject."),
        ({"subjects_text": "accuracy 1"}, "write a subject as name min max"),
        ({"subjects_text": "accuracy 5 1"}, "min 5 must not exceed max 1"),
        ({"subjects_text": "accuracy 1 5\nAccuracy 1 3"}, "listed twice"),
        ({"subjects_text": "accuracy"}, "needs a range"),
        ({"kind": "mcq", "subjects_text": "", "label_count": "30"}, "must be 1–26, not 30"),
        ({"kind": "mcq", "subjects_text": "a\nb"}, "at most one subject"),
        ({"kind": "metric", "subjects_text": ""}, "Choose the metric."),
        (
            {
                "kind": "metric",
                "metric": "bleu",
                "metric_options": '{"colour": 1}',
                "subjects_text": "",
            },
            "Unknown option &#x27;colour&#x27; for bleu",
        ),
        ({"user_prompt": "Rate this."}, "Include {{ response }}"),
        ({"user_prompt": "{{ response }} {{ nope }}"}, "Uses {{ nope }}, which neither"),
        ({"name": "Bad Name"}, "lowercase letters"),
    ],
)
def test_bad_judges_are_refused_in_plain_words(task, reviewer_client, fields, message):
    make_answers_dataset(task, 1)  # gives the task columns to check placeholders against
    response = reviewer_client.post(create_url(task), judge_form(**fields))
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not Judge.objects.exists()


def test_a_taken_name_must_be_edited_instead(task, reviewer_client):
    make_judge(task, name="quality")
    response = reviewer_client.post(create_url(task), judge_form())
    assert "edit it to make a new version" in response.content.decode()
    assert Judge.objects.count() == 1


def test_viewers_read_judges_but_do_not_create_them(task, viewer_client):
    judge = make_judge(task)
    assert viewer_client.get(create_url(task)).status_code == 403
    page = viewer_client.get(judge.get_absolute_url())
    assert page.status_code == 200 and "judge-run-form" not in page.content.decode()
    assert viewer_client.post(create_url(task), judge_form(name="x")).status_code == 403


def test_default_judge_needs_an_endpoint_for_llm_judges(task, reviewer_client, endpoint):
    rubric = make_judge(task)
    url = reverse("judges:set-default", args=[task.slug])
    response = reviewer_client.post(url, {"judge": rubric.pk, "endpoint": ""})
    assert response.status_code == 400
    assert "is an LLM judge: choose the endpoint" in response.content.decode()
    reviewer_client.post(url, {"judge": rubric.pk, "endpoint": endpoint.pk})
    task.refresh_from_db()
    judging = TaskJudging.of(task.pk)
    assert (judging.default_judge_id, judging.default_judge_endpoint_id) == (rubric.pk, endpoint.pk)
    metric = make_judge(task, Judge.Kind.METRIC, name="em")
    reviewer_client.post(url, {"judge": metric.pk, "endpoint": ""})
    task.refresh_from_db()
    assert TaskJudging.of(task.pk).default_judge_id == metric.pk
    reviewer_client.post(url, {"judge": "", "endpoint": ""})
    task.refresh_from_db()
    judging = TaskJudging.of(task.pk)
    assert judging.default_judge_id is None and judging.default_judge_endpoint_id is None


def test_start_a_judge_run_from_the_judge_page(task, reviewer_client, endpoint):
    dataset = make_answers_dataset(task, 3)
    source = make_generation_run(dataset, {0: "a", 1: "b", 2: "c"}, label="model-z")
    judge = make_judge(task)
    page = reviewer_client.get(judge.get_absolute_url()).content.decode()
    assert f"run:{source.pk}" in page and f"column:{dataset.pk}:response" in page
    # From the generation run's page: the judges list hands the run on to the start form.
    run_page = reviewer_client.get(source.get_absolute_url()).content.decode()
    assert f"responses=run:{source.pk}" in run_page
    listing = reviewer_client.get(
        reverse("judges:list"), {"task": task.slug, "responses": f"run:{source.pk}"}
    )
    assert f"?responses=run%3A{source.pk}" in listing.content.decode()
    chosen = reviewer_client.get(judge.get_absolute_url(), {"responses": f"run:{source.pk}"})
    assert f'<option value="run:{source.pk}" selected>' in chosen.content.decode()
    url = reverse("judges:start", args=[judge.pk])
    form = {"responses": f"run:{source.pk}", "logging_mode": "failed", "chunk_size": "50"}
    response = reviewer_client.post(url, form)
    assert response.status_code == 400 and "This field is required" in response.content.decode()
    response = reviewer_client.post(url, {**form, "endpoint": endpoint.pk, "label": "zed"})
    run = Run.objects.judging().get()
    assert response["Location"] == run.get_absolute_url()
    assert (run.source_run_id, run.endpoint_id, run.label, run.chunk_size) == (
        source.pk,
        endpoint.pk,
        "zed",
        50,
    )
    assert run.status == Run.Status.QUEUED and run.total == 3
    column = {
        "responses": f"column:{dataset.pk}:response",
        "logging_mode": "all",
        "chunk_size": "9",
    }
    reviewer_client.post(url, {**column, "endpoint": endpoint.pk})
    assert Run.objects.judging().filter(source_column="response", dataset=dataset).exists()


# ---- results ------------------------------------------------------------------------------------
def judged_run(task, n: int = 6, judge: Judge | None = None) -> Run:
    """A finished judge run: item i scores accuracy i % 5 + 1 over two rounds (item 1's rounds
    disagree), clarity 3; the last item failed."""
    dataset = make_answers_dataset(task, n)
    judge = judge or make_judge(task, n_iter=2)
    run = JudgeRun.create_with(
        judge,
        task=task,
        kind=Run.Kind.JUDGE,
        dataset=dataset,
        source_column="response",
        status=Run.Status.COMPLETED_WITH_FAILURES,
        total=n,
        done=n - 1,
        failed=1,
        launch=1,
    )
    rounds, scores = [], []
    for item in dataset.items.order_by("position"):
        i = item.position
        failed = i == n - 1
        accuracy = [None, None] if failed else ([1, 5] if i == 1 else [i % 5 + 1] * 2)
        for r in range(2):
            rounds.append(
                JudgeRound(
                    run=run,
                    item=item,
                    round=r,
                    status="failed" if failed else "ok",
                    values={} if failed else {"accuracy": accuracy[r], "clarity": 3},
                    raw_reply="<script>alert('x')</script> not JSON" if failed else "{}",
                    error_kind="unparseable" if failed else "",
                    error="No JSON object in the reply." if failed else "",
                    launch=1,
                )
            )
        for name in ("accuracy", "clarity"):
            values = accuracy if name == "accuracy" else ([None, None] if failed else [3, 3])
            value = None if failed else sum(values) / 2
            scores.append(
                Score(
                    run=run,
                    item=item,
                    subject=name,
                    status="failed" if failed else "ok",
                    judge_value=value,
                    final_value=value,
                    round_values=values,
                    spread=0 if failed else max(values) - min(values),
                    error_kind="unparseable" if failed else "",
                    error="No JSON object in the reply. (round 1 of 2)" if failed else "",
                    launch=1,
                )
            )
    JudgeRound.objects.bulk_create(rounds)
    Score.objects.bulk_create(scores)
    return run


def test_results_show_means_distributions_and_tag_means(task, viewer_client):
    run = judged_run(task)
    # items 0..4: accuracy 1, 3 (rounds 1 and 5), 3, 4, 5 → mean 3.2; item 5 failed
    response = viewer_client.get(reverse("judges:results", args=[run.pk]))
    page = response.content.decode()
    summaries = {s.name: s for s in response.context["summaries"]}
    accuracy = summaries["accuracy"]
    assert (accuracy.n, accuracy.failed) == (5, 1)
    assert accuracy.mean == pytest.approx(3.2)
    assert [(b.label, b.count) for b in accuracy.bars] == [("1", 1), ("3", 2), ("4", 1), ("5", 1)]
    assert summaries["clarity"].mean == 3
    # even items 0, 2, 4: 1, 3, 5 → 3; odd items 1, 3: 3, 4 → 3.5
    assert accuracy.tag_means == {"even": (3.0, 3), "odd": (3.5, 2)}
    assert "3.200" in page and 'data-tag="odd"' in page


def test_many_distinct_values_are_binned_over_the_range(task, viewer_client):
    judge = make_judge(
        task,
        Judge.Kind.METRIC,
        name="f1",
        metric="token_f1",
        subjects=[{"name": "f1", "min": 0, "max": 100}],
    )
    dataset = make_answers_dataset(task, 30)
    run = JudgeRun.create_with(
        judge,
        task=task,
        kind="judge",
        dataset=dataset,
        source_column="response",
        status="completed",
    )
    Score.objects.bulk_create(
        Score(run=run, item=item, subject="f1", status="ok", judge_value=v, final_value=v)
        for item, v in zip(
            dataset.items.order_by("position"), [i * 100 / 29 for i in range(30)], strict=True
        )
    )
    bars = viewer_client.get(reverse("judges:results", args=[run.pk])).context["summaries"][0].bars
    assert len(bars) == 10 and bars[0].label == "0–10" and bars[-1].label == "90–100"
    assert sum(b.count for b in bars) == 30 and bars[-1].count == 3  # 100 falls in the last bin


@pytest.mark.parametrize(
    ("query", "positions"),
    [
        ({}, [0, 1, 2, 3, 4, 5]),
        ({"status": "failed"}, [5]),
        ({"status": "ok"}, [0, 1, 2, 3, 4]),
        ({"disagree": "1"}, [1]),
        ({"tag": "odd"}, [1, 3, 5]),
        ({"subject": "accuracy", "min": "3.5"}, [3, 4]),
        ({"subject": "accuracy", "min": "3", "max": "4"}, [1, 2, 3]),
        ({"subject": "clarity", "max": "2"}, []),
        ({"tag": "even", "subject": "accuracy", "max": "3"}, [0, 2]),
    ],
)
def test_items_table_filters(task, viewer_client, query, positions):
    run = judged_run(task)
    response = viewer_client.get(reverse("judges:results", args=[run.pk]), query)
    assert [row.item.position for row in response.context["rows"]] == positions


def test_items_table_costs_the_same_queries_at_any_page_size(task, viewer_client):
    run = judged_run(task, n=260)
    url = reverse("judges:results", args=[run.pk])
    counts = []
    for size in (25, 200):
        with CaptureQueriesContext(connection) as queries:
            response = viewer_client.get(
                url, {"per_page": size}, headers={"HX-Request": "true", "HX-Target": "judge-items"}
            )
        assert len(response.context["rows"]) == size
        counts.append(len(queries))
    assert counts[0] == counts[1]
    viewer_client.get(url)  # the per-subject summary is kept from the first full visit on
    with CaptureQueriesContext(connection) as full:
        viewer_client.get(url, {"per_page": 500, "status": "ok"})
    with CaptureQueriesContext(connection) as small:
        viewer_client.get(url, {"per_page": 25, "status": "ok"})
    assert len(full) == len(small)


def test_hostile_text_stays_text(task, viewer_client):
    run = judged_run(task)
    page = viewer_client.get(reverse("judges:failed", args=[run.pk])).content.decode()
    assert "<script>alert" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; not JSON" in page


# ---- failed items ------------------------------------------------------------------------------------
def test_failed_items_page_shows_kind_reply_messages_and_admin_only_traceback(
    task, reviewer_client, admin_user
):
    run = judged_run(task)
    item = run.dataset.items.get(position=5)
    AttemptLog.objects.create(
        run=run,
        item=item,
        round=0,
        attempt=1,
        ok=False,
        request_messages=[
            {"role": "system", "content": "You are an impartial evaluator."},
            {"role": "user", "content": "<response>answer number 5</response>"},
        ],
        raw_reply='{"choices": []}',
        error_kind="unparseable",
        error="No JSON object in the reply.",
        traceback="Traceback (most recent call last): SECRET-TRACE",
    )
    url = reverse("judges:failed", args=[run.pk])
    page = reviewer_client.get(url).content.decode()
    assert f'id="failed-{item.pk}"' in page and "Unparseable reply" in page
    assert "No JSON object in the reply. (round 1 of 2)" in page
    assert "You are an impartial evaluator." in page and "answer number 5" in page
    assert "SECRET-TRACE" not in page
    admin_client = Client()  # the client fixtures share one client: this one is the admin's
    admin_client.force_login(admin_user)
    assert "SECRET-TRACE" in admin_client.get(url).content.decode()
    assert "Unparseable reply (1)" in page
    assert (
        f'id="failed-{item.pk}"'
        in reviewer_client.get(url, {"kind": "unparseable"}).content.decode()
    )
    assert (
        "No failed items of this kind"
        in reviewer_client.get(url, {"kind": "timeout"}).content.decode()
    )


def test_retry_one_item_and_retry_all_from_the_failed_page(task, reviewer_client, redis_conn):
    run = judged_run(task)
    item = run.dataset.items.get(position=5)
    response = reviewer_client.post(reverse("judges:retry-item", args=[run.pk, item.pk]))
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED and run.mode == Run.Mode.RETRY_FAILED
    assert RetryScope.objects.get(run=run, launch=run.launch).item_ids == [item.pk]
    assert run.done == 5 and run.failed == 0  # the retried item is pending again
    # While the retry is queued, another launch is refused with a message.
    response = reviewer_client.post(reverse("judges:retry-failed", args=[run.pk]), follow=True)
    assert "still going" in response.content.decode()

    Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED_WITH_FAILURES)
    response = reviewer_client.post(reverse("judges:retry-failed", args=[run.pk]), follow=True)
    assert "Judging 1 failed items again" in response.content.decode()
    run.refresh_from_db()
    assert run.mode == Run.Mode.RETRY_FAILED
    assert not RetryScope.objects.filter(run=run, launch=run.launch).exists()


def test_a_good_item_has_nothing_to_retry(task, reviewer_client):
    run = judged_run(task)
    good = run.dataset.items.get(position=0)
    response = reviewer_client.post(
        reverse("judges:retry-item", args=[run.pk, good.pk]), follow=True
    )
    assert "has no failed rounds to retry" in response.content.decode()


def test_review_bulk_retry_uses_the_judge_run_engine(task, reviewer_client):
    run = judged_run(task)
    response = reviewer_client.post(
        reverse("review:bulk", args=[run.pk]), {"action": "retry_all"}, follow=True
    )
    assert "Queued 1 failed item again." in response.content.decode()
    run.refresh_from_db()
    assert run.mode == Run.Mode.RETRY_FAILED and run.status == Run.Status.QUEUED


def test_judge_pages_404_for_other_runs(task, viewer_client):
    dataset = make_answers_dataset(task, 1)
    generation = make_generation_run(dataset, {0: "x"})
    assert viewer_client.get(reverse("judges:results", args=[generation.pk])).status_code == 404
    assert viewer_client.get(reverse("judges:failed", args=[generation.pk])).status_code == 404


def test_the_start_form_preselects_the_only_endpoint(admin_client: Client, task, endpoint):
    """#11.9: with one endpoint there is nothing to choose; with two, the task's judging
    endpoint, else none (a wrong guess would spend money on the wrong model)."""
    judge = make_judge(task)

    def chosen() -> object:
        form = admin_client.get(reverse("judges:detail", args=[judge.pk])).context["form"]
        return form["endpoint"].value()

    assert chosen() == endpoint.pk
    second = type(endpoint).objects.create(name="second", model="m", base_url=endpoint.base_url)
    assert chosen() is None
    set_judging(task, default_judge_endpoint=second)
    assert chosen() == second.pk
