"""Measured, not hoped (#14.2): a loopback judge that errs systematically on one kind of item
(scripted: it scores confidently wrong "TRICK" answers 5 unless an example taught it better)
is improved with examples from people's reviews, then checked on the held-out items: the
version with examples is closer to people and the report says so with the split; the version
without them, checked on the same items, is not shown better."""

import json

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction
from django.test import Client
from django.urls import reverse

from apps.judges import learning
from apps.judges.launching import create_judge_run
from apps.judges.models import JudgeCheck, Score
from apps.leaderboards import alignment
from apps.runs.models import Run
from tests.base import make_user, work_here
from tests.factories import make_answers_dataset, make_judge, score

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

N = 40
FIVE = json.dumps({"reason": "looks right", "accuracy": 5})
ONE = json.dumps({"reason": "confidently wrong", "accuracy": 1})
# Taught by an example scored 1 and asked about a TRICK answer (the last line of the request).
LEARNED = {"regex": r'"accuracy": 1[,}][\s\S]*A: TRICK[^\n]*\Z', "scope": "any", "reply": ONE}


def is_trick(i: int) -> bool:
    return i % 2 == 0


@pytest.fixture
def judged(task, endpoint, llm_server):
    dataset = make_answers_dataset(
        task, N, response=lambda i: f"TRICK wrong {i}" if is_trick(i) else f"right {i}"
    )
    judge = make_judge(
        task,
        name="quality",
        subjects=[{"name": "accuracy", "min": 1, "max": 5}],
        user_prompt="Q: {{ inputs }}\nA: {{ response }}",
    )
    llm_server.configure(default_reply=FIVE, script=[LEARNED])
    with transaction.atomic():
        run = create_judge_run(judge, endpoint=endpoint, dataset=dataset, source_column="response")
    work_here()
    reviewer = make_user("reviewer")
    for i in range(N):
        accuracy = score(run, f"q{i}", "accuracy")
        if is_trick(i):
            accuracy.override(1, reviewer, "confidently wrong")
        else:
            accuracy.confirm(reviewer)
    return dataset, judge, run, reviewer


def test_examples_from_reviews_raise_held_out_agreement_and_the_check_says_so(
    judged, endpoint, llm_server, capsys
) -> None:
    dataset, v1, reviewed_run, reviewer = judged
    draft = learning.draft(v1, k=4, seed=0)
    assert {e["values"]["accuracy"] for e in draft.examples} == {1.0, 5.0}
    v2 = learning.save_version(v1, draft.examples, draft, reviewer)
    held = set(draft.held_out)
    assert held and not held & {e["item"] for e in v2.examples}

    llm_server.reset(stats_only=True)
    with transaction.atomic():
        (check_run,) = learning.start_check(v2, endpoint, reviewer)
    check = JudgeCheck.objects.get(run=check_run)
    assert check.reviewed_run == reviewed_run and set(check.items) == held
    assert check_run.kind == Run.Kind.CHECK and check_run.total == len(held)
    work_here()
    assert llm_server.stats(log=False)["requests"] == len(held)  # only the held-out items
    report = alignment.report(v2)
    (accuracy,) = report.subjects
    tricks = sum(is_trick(dataset.items.get(pk=pk).position) for pk in held)
    assert accuracy.n == len(held) and tricks > 0
    assert accuracy.checked.mad == 0 and accuracy.checked.accuracy == 1.0
    assert accuracy.before.mad == pytest.approx(4 * tricks / len(held))
    assert accuracy.verdict == "better" and accuracy.mad_difference_ci.high < 0

    # The version without examples, checked on the very same held-out items: not better.
    with transaction.atomic():
        (plain_run,) = learning.start_check(v1, endpoint, reviewer)
    assert set(JudgeCheck.objects.get(run=plain_run).items) == held
    work_here()
    (plain,) = alignment.report(v1).subjects
    assert plain.checked.mad == plain.before.mad and plain.verdict == "not shown better"

    # Check runs stay off the board and the review queue; the page and the CLI tell it.
    assert not Run.objects.judging().filter(kind=Run.Kind.CHECK).exists()
    assert Score.objects.filter(run=check_run).count() == len(held)
    client = Client()
    client.force_login(make_user("viewer", "watcher"))
    page = client.get(reverse("leaderboards:judge-alignment", args=[v2.pk])).content.decode()
    assert 'data-verdict="better"' in page and f'id="held-out-items">{len(held)}<' in page
    assert "quality v1" in page
    page = client.get(reverse("leaderboards:judge-alignment", args=[v1.pk])).content.decode()
    assert 'data-verdict="not shown better"' in page
    page = client.get(check_run.get_absolute_url()).content.decode()
    assert 'id="alignment-report"' in page
    # The judge's page lists its runs, not its checks (those are on the report).
    page = client.get(v2.get_absolute_url()).content.decode()
    assert f'href="/runs/{check_run.pk}/"' not in page and 'id="alignment-link"' in page
    capsys.readouterr()
    call_command("judge_alignment", "quality", "--version", "2", "--format", "json")
    out = json.loads(capsys.readouterr().out)
    assert out["held_out"] == len(held) and out["seed"] == 0
    (subject,) = out["subjects"]
    assert subject["subject"] == "accuracy" and subject["verdict"] == "better"
    assert subject["this_version"]["mad"] == 0
    assert sorted(row["item"] for row in out["items"]) == sorted(
        dataset.items.get(pk=pk).key for pk in held
    )


def test_checking_needs_a_split_and_reviewers(judged, endpoint) -> None:
    _, v1, _, _ = judged
    with pytest.raises(learning.LearningError, match="improve it with reviews first"):
        learning.start_check(v1, endpoint)
    client = Client()
    client.force_login(make_user("viewer", "watcher"))
    response = client.post(reverse("judges:check", args=[v1.pk]), {"endpoint": endpoint.pk})
    assert response.status_code == 403 and not Run.objects.filter(kind=Run.Kind.CHECK).exists()


def test_start_run_has_no_check_subcommand_but_resumes_a_check(judged, endpoint) -> None:
    _, v1, _, reviewer = judged
    with pytest.raises(CommandError, match="invalid choice: 'check'"):
        call_command("start_run", "check", "--judge", "quality")
    draft = learning.draft(v1, k=2, seed=0)
    v2 = learning.save_version(v1, draft.examples, draft, reviewer)
    with transaction.atomic():
        (run,) = learning.start_check(v2, endpoint, reviewer)
    work_here()
    call_command("start_run", "resume", str(run.pk))  # nothing left: a launch of 0 items
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED and run.launch == 2
