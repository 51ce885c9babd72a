"""The failed items page: one line per failed item, grouped by error kind with counts, details
folded in <details>, "retry all of this kind" per group; items whose generation failed are
their own kind, point to the generation run and are never offered for retry."""

import pytest
from django.test import Client
from django.urls import reverse

from apps.judges.models import JudgeRound, JudgeRun, RetryScope, Score
from apps.runs.models import AttemptLog, ErrorKind, Response, Run
from tests.factories import make_answers_dataset, make_generation_run, make_judge

pytestmark = pytest.mark.django_db

# position → error kind; positions 0 and 1 are judged fine.
KINDS = {
    2: ErrorKind.UNPARSEABLE,
    3: ErrorKind.UNPARSEABLE,
    4: ErrorKind.UNPARSEABLE,
    5: ErrorKind.TIMEOUT,
    6: ErrorKind.TIMEOUT,
    7: ErrorKind.NO_RESPONSE,
    8: ErrorKind.NO_RESPONSE,
}


def failed_run(task, kinds: dict[int, str] = KINDS, n: int = 9) -> Run:
    """A finished judge run of a generation run with failures of the given kinds (the items
    failed for want of a response also failed in the generation run)."""
    dataset = make_answers_dataset(task, n)
    no_response = {p for p, k in kinds.items() if k == ErrorKind.NO_RESPONSE}
    source = make_generation_run(
        dataset,
        {i: None if i in no_response else f"answer {i}" for i in range(n)},
        label="model-a",
        status=Run.Status.COMPLETED_WITH_FAILURES if no_response else Run.Status.COMPLETED,
    )
    source.failed = len(no_response)
    source.save(update_fields=["failed"])
    judge = make_judge(task, name="quality")
    run = JudgeRun.create_with(
        judge,
        task=task,
        kind=Run.Kind.JUDGE,
        dataset=dataset,
        source_run=source,
        status=Run.Status.COMPLETED_WITH_FAILURES,
        total=n,
        done=n - len(kinds),
        failed=len(kinds),
        launch=1,
    )
    rounds, scores = [], []
    for item in dataset.items.order_by("position"):
        kind = kinds.get(item.position, "")
        status = "failed" if kind else "ok"
        error = {
            ErrorKind.UNPARSEABLE: "No JSON object in the reply.",
            ErrorKind.TIMEOUT: "no answer within 60 s",
            ErrorKind.NO_RESPONSE: f"Nothing to judge: the response of run #{source.pk} to this "
            "item failed (API error: the server failed (500): boom).",
        }.get(kind, "")
        rounds.append(
            JudgeRound(
                run=run,
                item=item,
                round=0,
                status=status,
                values={} if kind else {"accuracy": 4, "clarity": 4},
                raw_reply="not JSON at all" if kind == ErrorKind.UNPARSEABLE else "",
                error_kind=kind,
                error=error,
                launch=1,
            )
        )
        for subject in ("accuracy", "clarity"):
            scores.append(
                Score(
                    run=run,
                    item=item,
                    subject=subject,
                    status=status,
                    judge_value=None if kind else 4,
                    final_value=None if kind else 4,
                    round_values=[None if kind else 4],
                    error_kind=kind,
                    error=error,
                    launch=1,
                )
            )
    JudgeRound.objects.bulk_create(rounds)
    Score.objects.bulk_create(scores)
    return run


def failed_url(run: Run) -> str:
    return reverse("judges:failed", args=[run.pk])


def test_failures_are_grouped_by_kind_with_counts(task, reviewer_client):
    run = failed_run(task)
    response = reviewer_client.get(failed_url(run))
    groups = response.context["groups"]
    assert [(g.kind, g.count, g.retryable) for g in groups] == [
        (ErrorKind.UNPARSEABLE, 3, 3),
        (ErrorKind.NO_RESPONSE, 2, 0),
        (ErrorKind.TIMEOUT, 2, 2),
    ]
    positions = [[e.score.item.position for e in g.items] for g in groups]
    assert positions == [[2, 3, 4], [7, 8], [5, 6]]
    page = response.content.decode()
    assert page.count('class="failed-item"') == 7
    assert page.count("<details>") == 7  # every item's details are folded
    assert "Unparseable reply (3)" in page and "No response: generation failed (2)" in page
    # "Retry all failed" counts only what judging again may fix.
    assert "Retry all failed (5)" in page
    assert "Retry all 3 of this kind" in page and "Retry all 2 of this kind" in page


def test_items_without_a_response_point_to_the_generation_run_instead_of_retry(
    task, reviewer_client
):
    run = failed_run(task)
    response = reviewer_client.get(failed_url(run), {"kind": ErrorKind.NO_RESPONSE})
    page = response.content.decode()
    (group,) = response.context["groups"]
    assert group.kind == ErrorKind.NO_RESPONSE and "Internal error" not in page
    assert page.count('class="failed-item"') == 2
    assert "retry-item" not in page and "retry-kind" not in page
    source = run.source_run
    assert f'href="{source.get_absolute_url()}?status=failed"' in page
    assert reverse("runs:retry-failed", args=[source.pk]) in page
    item = run.dataset.items.get(position=7)
    assert reverse("runs:response-detail", args=[source.pk, item.pk]) in page

    # Once the generation run has answered an item, that one may be judged again.
    Response.objects.filter(run=source, item=item).update(status="ok", text="late answer")
    page = reviewer_client.get(failed_url(run)).content.decode()
    assert "Retry all failed (6)" in page and "Judge the 1 answered since" in page


def test_retry_of_one_kind_retries_only_that_kind(task, reviewer_client, redis_conn):
    run = failed_run(task)
    response = reviewer_client.post(
        reverse("judges:retry-kind", args=[run.pk]),
        {"error_kind": ErrorKind.TIMEOUT, "kind": ErrorKind.TIMEOUT},
    )
    assert response.status_code == 302
    assert response["Location"] == f"{failed_url(run)}?kind=timeout"
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED and run.mode == Run.Mode.RETRY_FAILED
    timeouts = sorted(run.dataset.items.filter(position__in=[5, 6]).values_list("pk", flat=True))
    assert RetryScope.objects.get(run=run, launch=run.launch).item_ids == timeouts
    assert (run.done, run.failed) == (2, 5)  # the two timeouts are pending again, the rest wait


def test_retry_of_a_kind_that_cannot_help_queues_nothing(task, reviewer_client):
    run = failed_run(task)
    response = reviewer_client.post(
        reverse("judges:retry-kind", args=[run.pk]),
        {"error_kind": ErrorKind.NO_RESPONSE},
        follow=True,
    )
    assert "can be retried" in response.content.decode()
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED_WITH_FAILURES and run.launch == 1


def test_retry_of_a_kind_needs_a_reviewer(task, viewer_client):
    run = failed_run(task)
    url = reverse("judges:retry-kind", args=[run.pk])
    assert viewer_client.post(url, {"error_kind": ErrorKind.TIMEOUT}).status_code == 403
    page = viewer_client.get(failed_url(run)).content.decode()
    assert "retry-kind" not in page and "retry-item" not in page and "retry-all" not in page


def test_tracebacks_stay_admin_only_inside_the_folded_details(task, reviewer_client, admin_user):
    run = failed_run(task)
    item = run.dataset.items.get(position=5)
    AttemptLog.objects.create(
        run=run,
        item=item,
        round=0,
        ok=False,
        error_kind=ErrorKind.TIMEOUT,
        error="no answer within 60 s",
        traceback="Traceback: SECRET-TRACE",
    )
    assert "SECRET-TRACE" not in reviewer_client.get(failed_url(run)).content.decode()
    admin = Client()
    admin.force_login(admin_user)
    assert "SECRET-TRACE" in admin.get(failed_url(run)).content.decode()
