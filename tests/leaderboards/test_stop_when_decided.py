"""A judge run set to stop itself when its comparison with a baseline has decided (#31.4): the
engine's commits trigger the anytime-valid confidence sequence; a clear difference stops the run
early (cancelled with the decision as its reason, every result kept, resume finishes it), a null
keeps going to the end. Jobs run in this process (tests.base.work_here)."""

import pytest
from django.db import transaction
from django.test import Client
from django.urls import reverse

from apps.datasets.models import Task
from apps.judges.launching import create_judge_run
from apps.judges.models import Score
from apps.leaderboards import sequential
from apps.leaderboards.models import StopRule
from apps.leaderboards.stopping import RuleError, set_rule
from apps.runs.engine.launch import launch
from apps.runs.models import Endpoint, Run
from tests.base import make_user, work_here
from tests.factories import (
    add_scores,
    make_answers_dataset,
    make_generation_run,
    make_judge,
    make_judge_run,
    rubric_reply,
)

pytestmark = pytest.mark.django_db(transaction=True)

FAST = 40  # items answered at once; the rest wait SLOW s each, so a run that fails to stop
SLOW = 1.0  # takes (N - FAST) × SLOW / 4 s and the test sees it go on


@pytest.fixture
def task(db) -> Task:
    return Task.objects.create(slug="qa", name="QA")


@pytest.fixture
def endpoint(db, llm_server) -> Endpoint:
    return Endpoint.objects.create(
        name="judge-llm",
        base_url=llm_server.base_url,
        model="test-model",
        concurrency_limit=4,
        timeout_seconds=5,
        max_retries=1,
        api_key_secret="sk-test-judge-0000",
    )


def baseline_of(dataset, judge):
    """A finished judge run of another model on the same items: accuracy 2 on even items, 4 on
    odd ones (mean 3)."""
    n = dataset.items.count()
    gen = make_generation_run(dataset, {f"q{i}": f"baseline {i}" for i in range(n)}, label="base")
    baseline = make_judge_run(dataset, judge, source_run=gen, label="base")
    add_scores(baseline, {f"q{i}": {"accuracy": 2 + 2 * (i % 2), "clarity": 3} for i in range(n)})
    return baseline


def start(task, endpoint, dataset, judge, baseline, delta: float = 0.0) -> Run:
    with transaction.atomic():
        run = create_judge_run(
            judge, endpoint=endpoint, dataset=dataset, source_column="response", label="new"
        )
        set_rule(run, baseline, "accuracy", delta)
    return run


def test_a_clear_difference_stops_the_run_early_and_resume_finishes_it(
    task, endpoint, llm_server
) -> None:
    n = 120
    dataset = make_answers_dataset(task, n)
    judge = make_judge(task, name="quality", n_iter=1)
    baseline = baseline_of(dataset, judge)
    # The run's judge gives 5 everywhere: A − B is 3 or 1, a difference of 2 that the sequence
    # decides at the 30th pair. Items from FAST on are held back by the server (latency).
    llm_server.configure(
        default_reply=rubric_reply(5, 3),
        script=[
            {
                "regex": rf"answer number ({'|'.join(map(str, range(FAST, n)))})\n",
                "latency": SLOW,
                "reply": rubric_reply(5, 3),
            }
        ],
    )
    run = start(task, endpoint, dataset, judge, baseline)
    work_here()

    run.refresh_from_db()
    rule = StopRule.objects.get(run=run)
    assert run.status == Run.Status.CANCELLED, (run.status, run.error)
    assert rule.state == sequential.BETTER and rule.decided_at == sequential.MIN_ITEMS
    assert rule.stopped_at is not None and rule.low is not None and rule.low > 0
    assert run.stop_reason.startswith("decided: new better than base on accuracy after 30 paired")
    # Stopped early, keeping what it had: a run that did not stop judges all n.
    judged = Score.objects.filter(run=run, subject="accuracy", status="ok").count()
    assert FAST <= judged == run.done < n - 40, (judged, run.done)
    assert run.can_resume and run.remaining == n - run.done
    assert not run.failure_cause  # cancelled, not failed

    admin = make_user("admin", "boss")
    client = Client()
    client.force_login(admin)
    page = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert "decided: new better than base" in page and "raise the budget" not in page

    # Resume: the rule is spent (it stopped the run once), so the run finishes every item.
    llm_server.configure(script=[])
    with transaction.atomic():
        launch(run, Run.Mode.RESUME)
    work_here()
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    assert run.done == n
    assert Score.objects.filter(run=run, subject="accuracy", status="ok").count() == n


def test_a_null_keeps_going_to_the_end(task, endpoint, llm_server) -> None:
    n = 60
    dataset = make_answers_dataset(task, n)
    judge = make_judge(task, name="quality", n_iter=1)
    baseline = baseline_of(dataset, judge)
    # 3 against 2 / 4: A − B is +1 or −1 in turn, mean 0.
    llm_server.configure(default_reply=rubric_reply(3, 3))
    run = start(task, endpoint, dataset, judge, baseline)
    work_here()

    run.refresh_from_db()
    rule = StopRule.objects.get(run=run)
    assert run.status == Run.Status.COMPLETED, run.error
    assert run.done == n and run.stop_reason == ""
    assert rule.state == sequential.GOING and rule.stopped_at is None
    assert rule.checked_n >= sequential.MIN_ITEMS  # it was checked as results arrived
    assert rule.low is not None and rule.low < 0 < rule.high


def test_a_rule_set_on_a_decided_running_run_stops_it_at_once(task) -> None:
    """No engine: the run's scores are there, the rule is set while it still counts as running.
    With δ, "no difference larger than δ" decides too; lower-is-better subjects flip sides."""
    n = 50
    dataset = make_answers_dataset(task, n)
    judge = make_judge(task, name="quality", n_iter=1)
    baseline = baseline_of(dataset, judge)
    run = make_judge_run(dataset, judge, source_column="response", status=Run.Status.RUNNING)
    add_scores(run, {f"q{i}": {"accuracy": 3, "clarity": 3} for i in range(n)})

    with pytest.raises(RuleError, match="no subject 'speed'"):
        set_rule(run, baseline, "speed")
    with pytest.raises(RuleError, match="itself"):
        set_rule(run, run, "accuracy")
    rule = set_rule(run, baseline, "accuracy", delta=0.0)
    assert rule.state == sequential.GOING and rule.stopped_at is None
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING

    rule = set_rule(run, baseline, "accuracy", delta=1.5)
    assert rule.state == sequential.EQUIVALENT and rule.stopped_at is not None
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert run.stop_reason.startswith("decided: no difference larger than 1.5 from base")


def test_the_compare_page_sets_the_rule_for_reviewers_only(task) -> None:
    n = 40
    dataset = make_answers_dataset(task, n)
    judge = make_judge(task, name="quality", n_iter=1)
    baseline = baseline_of(dataset, judge)
    run = make_judge_run(dataset, judge, source_column="response", status=Run.Status.RUNNING)
    add_scores(run, {f"q{i}": {"accuracy": 3, "clarity": 3} for i in range(10)})
    page = reverse("leaderboards:compare", args=[task.slug])
    stop = reverse("leaderboards:stop-rule", args=[task.slug])
    form = {"a": run.pk, "b": baseline.pk, "subject": "accuracy", "delta": ""}

    viewer = Client()
    viewer.force_login(make_user("viewer", "watcher"))
    html = viewer.get(page, {"a": run.pk, "b": baseline.pk}).content.decode()
    assert "Stop run A when this decides" not in html
    assert viewer.post(stop, form).status_code == 403
    assert not StopRule.objects.exists()

    reviewer = Client()
    reviewer.force_login(make_user("reviewer", "alice"))
    html = reviewer.get(page, {"a": run.pk, "b": baseline.pk}).content.decode()
    assert 'data-subject="accuracy">Stop run A when this decides' in html
    answer = reviewer.post(stop, form, follow=True)
    assert "will stop itself once its comparison on accuracy decides" in answer.content.decode()
    rule = StopRule.objects.get(run=run)
    assert (rule.baseline_id, rule.subject, rule.delta, rule.checked_n) == (
        baseline.pk,
        "accuracy",
        0.0,
        10,
    )
    html = reviewer.get(page, {"a": run.pk, "b": baseline.pk}).content.decode()
    assert 'id="stop-rule" data-state="going"' in html and "10 paired items" in html
    bad = reviewer.post(stop, {**form, "subject": "speed"}, follow=True).content.decode()
    assert "no subject &#x27;speed&#x27;" in bad
