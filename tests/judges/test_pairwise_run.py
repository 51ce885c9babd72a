"""Pairwise runs (#13.1–2) end to end: the jobs run in this process (tests.base.work_here), the
real SDK against the loopback server. Every (item, pair) is judged in both orders exactly once;
a judge that always picks the first position gets no winner (flips are ties, consistency near
0); a judge with a real preference gives it; a missing answer fails the unit before any
request; retry failed redoes just it."""

import csv
import io
import re

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction
from django.test import Client
from django.urls import reverse

from apps.judges.launching import JudgeRunError
from apps.judges.models import Comparison, Judge
from apps.judges.pairwise import consistency, create_pairwise_run, outcomes
from apps.leaderboards import pairwise_board
from apps.runs.engine.launch import launch
from apps.runs.models import ErrorKind, Run
from tests.base import make_user, work_here
from tests.factories import make_generation_run, make_judge, make_qa_dataset

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

N = 6


@pytest.fixture
def three_models(task):
    dataset = make_qa_dataset(task, N)
    runs = {
        "good": make_generation_run(
            dataset, {i: f"GOOD answer {i}" for i in range(N)}, label="good"
        ),
        "bad": make_generation_run(dataset, {i: f"poor answer {i}" for i in range(N)}, label="bad"),
        "meh": make_generation_run(
            dataset, {i: f"plain answer {i}" for i in range(N)}, label="meh"
        ),
    }
    judge = make_judge(task, Judge.Kind.PAIRWISE, name="which", subjects=[])
    return dataset, runs, judge


def start(judge, runs, endpoint, **kwargs) -> Run:
    with transaction.atomic():
        return create_pairwise_run(judge, runs, endpoint=endpoint, **kwargs)


def test_a_judge_that_always_picks_the_first_position_finds_no_winner(
    three_models, endpoint, llm_server
) -> None:
    _, runs, judge = three_models
    llm_server.configure(default_reply='{"verdict": "A", "reason": "first is best"}')
    run = start(judge, list(runs.values()), endpoint, logging_mode="all")
    assert run.total == N * 3
    work_here()
    run.refresh_from_db()
    assert (run.status, run.done, run.failed) == (Run.Status.COMPLETED, N * 3, 0)
    assert llm_server.stats()["requests"] == N * 3 * 2  # items × pairs × orders
    assert Comparison.objects.filter(run=run).count() == N * 3 * 2
    found = outcomes(run)
    assert len(found) == N * 3 and all(o.verdict == "tie" and not o.consistent for o in found)
    stats = consistency(judge)
    assert (stats.rate, stats.first_share) == (0.0, 1.0)
    client = Client()
    client.force_login(make_user("viewer"))
    url = reverse("judges:comparisons", args=[run.pk])
    flipped = client.get(
        url, {"show": "flipped"}, headers={"HX-Request": "true", "HX-Target": "comparisons"}
    )
    html = flipped.content.decode()
    assert "<html" not in html and html.count("flipped (tie)") == N * 3
    assert html.count("said <strong>A</strong>") == N * 3 * 2
    assert "Page 1 of" not in html  # 18 lines fit one page
    # No fake winner: every model ties with every other.
    board = pairwise_board.build(run.task)
    assert {r.rank for r in board.ratings.ratings} == {1}
    assert all(abs(r.rating - 1000) < 1e-6 for r in board.ratings.ratings)


def test_a_true_preference_wins_in_both_orders(three_models, endpoint, llm_server) -> None:
    _, runs, judge = three_models
    llm_server.configure(
        default_reply='{"verdict": "tie"}',
        script=[
            {"regex": r"<response_a>\s*GOOD", "reply": '{"verdict": "A"}'},
            {"regex": r"<response_b>\s*GOOD", "reply": '{"verdict": "B"}'},
            {
                "regex": r"<response_a>\s*plain[^<]*</response_a>\s*<response_b>\s*poor",
                "reply": "[[A]]",
            },
            {
                "regex": r"<response_a>\s*poor[^<]*</response_a>\s*<response_b>\s*plain",
                "reply": "[[B]]",
            },
        ],
    )
    run = start(judge, [runs["bad"], runs["good"], runs["meh"]], endpoint)
    work_here()
    found = outcomes(run)
    assert all(o.consistent for o in found)
    good, bad, meh = runs["good"].pk, runs["bad"].pk, runs["meh"].pk
    winners = {
        (o.a, o.b): (o.a if o.verdict == "a" else o.b)
        for o in found
        if o.item_id == found[0].item_id
    }
    assert winners[tuple(sorted((good, bad)))] == good
    assert winners[tuple(sorted((good, meh)))] == good
    assert winners[tuple(sorted((meh, bad)))] == meh
    assert consistency(judge).rate == 1.0
    repaired = Comparison.objects.filter(run=run, repaired=True).count()
    assert repaired == N * 2  # the [[A]]/[[B]] replies were free text


def test_a_missing_answer_fails_before_asking_and_retry_redoes_only_it(
    task, endpoint, llm_server
) -> None:
    dataset = make_qa_dataset(task, 3)
    a = make_generation_run(dataset, {0: "x", 1: "y", 2: "z"}, label="a")
    b = make_generation_run(dataset, {0: "x", 1: None, 2: "z"}, label="b")
    judge = make_judge(task, Judge.Kind.PAIRWISE, name="which", subjects=[])
    llm_server.configure(default_reply='{"verdict": "tie"}')
    run = start(judge, [a, b], endpoint)
    work_here()
    run.refresh_from_db()
    assert (run.done, run.failed) == (2, 1)
    assert llm_server.stats()["requests"] == 4
    failed = Comparison.objects.filter(run=run, status="failed")
    assert failed.count() == 2 and {c.error_kind for c in failed} == {ErrorKind.NO_RESPONSE}
    b.responses.filter(item__position=1).update(status="ok", text="y", error_kind="", error="")
    llm_server.reset()
    llm_server.configure(default_reply='{"verdict": "tie"}')
    with transaction.atomic():
        assert launch(run, Run.Mode.RETRY_FAILED) == 1
    work_here()
    run.refresh_from_db()
    assert (run.done, run.failed, run.launch) == (3, 0, 2) and llm_server.stats()["requests"] == 2


def test_start_run_pairwise_from_the_command_line(three_models, endpoint, llm_server) -> None:
    _, runs, _ = three_models
    with pytest.raises(CommandError, match="No generation run 'nope'"):
        call_command(
            "start_run",
            "pairwise",
            "--responses",
            "good",
            "--responses",
            "nope",
            "--judge",
            "which",
        )
    llm_server.configure(default_reply='{"verdict": "tie"}')
    call_command(
        "start_run",
        *("pairwise", "--responses", "good", "--responses", str(runs["bad"].pk)),
        *(
            "--responses",
            "meh",
            "--baseline",
            "good",
            "--judge",
            "which",
            "--endpoint",
            endpoint.name,
        ),
    )
    run = Run.objects.get(kind=Run.Kind.PAIRWISE)
    assert run.pairwise.pairs() == [
        (runs["good"].pk, runs["bad"].pk),
        (runs["good"].pk, runs["meh"].pk),
    ]
    assert run.total == N * 2


def test_like_with_like(task, endpoint) -> None:
    one = make_qa_dataset(task, 2, name="one")
    two = make_qa_dataset(task, 2, name="two")
    judge = make_judge(task, Judge.Kind.PAIRWISE, name="which", subjects=[])
    a, b = make_generation_run(one, {0: "x"}), make_generation_run(two, {0: "y"})
    with pytest.raises(JudgeRunError, match="different datasets"):
        create_pairwise_run(judge, [a, b], endpoint=endpoint)
    with pytest.raises(JudgeRunError, match="two response sets or more"):
        create_pairwise_run(judge, [a], endpoint=endpoint)
    with pytest.raises(JudgeRunError, match="not a pairwise judge"):
        create_pairwise_run(make_judge(task), [a, b], endpoint=endpoint)


def test_the_pairwise_board_ranks_a_true_preference_and_not_a_position(
    three_models, endpoint, llm_server, capsys
) -> None:
    dataset, runs, judge = three_models
    llm_server.configure(
        default_reply='{"verdict": "tie"}',
        script=[
            {"regex": r"<response_a>\s*GOOD", "reply": '{"verdict": "A"}'},
            {"regex": r"<response_b>\s*GOOD", "reply": '{"verdict": "B"}'},
        ],
    )
    start(judge, list(runs.values()), endpoint)
    work_here()
    call_command("leaderboard", dataset.task.slug, "--pairwise")
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out.lstrip("\ufeff"))))
    assert (rows[0]["model"], rows[0]["rank"]) == ("good", "1")
    assert {r["rank"] for r in rows[1:]} == {"2"}  # bad and meh: only ties between them
    assert float(rows[0]["ci_low"]) > max(float(r["ci_high"]) for r in rows[1:])
    assert rows[0]["position_consistency"] == "1.0"
    # good never lost: without the prior its rating would be infinite, and the board says so.
    assert {r["mle_exists"] for r in rows} == {"False"} and rows[0]["prior_sd"] == "400.0"
    client = Client()
    client.force_login(make_user("viewer"))
    html = client.get(reverse("leaderboards:pairwise", args=[dataset.task.slug])).content.decode()
    assert 'id="pairwise-ratings"' in html and 'data-model="good"' in html
    assert not re.search(r"\bnan\b", html)  # a word: the CSRF token may hold the letters
    assert 'id="mle-missing"' in html and "good never lost a battle" in html


def test_a_pairwise_judge_is_made_and_started_in_the_browser_forms(
    three_models, endpoint, llm_server
) -> None:
    dataset, runs, _ = three_models
    client = Client()
    client.force_login(make_user("reviewer"))
    made = client.post(
        reverse("judges:create") + f"?task={dataset.task.slug}",
        {
            "task": dataset.task.slug,
            "name": "duel",
            "kind": "pairwise",
            "user_prompt": "Is {{ response_a }} good?",
            "aggregation": "mean",
            "label_type": "upper",
            "label_count": 4,
            "n_iter": 1,
            "use_structured_output": "on",
        },
    )
    assert "Include {{ response_a }} and {{ response_b }}" not in made.content.decode()
    assert "Include {{ response_b }}" in made.content.decode()
    made = client.post(
        reverse("judges:create") + f"?task={dataset.task.slug}",
        {
            "task": dataset.task.slug,
            "name": "duel",
            "kind": "pairwise",
            "aggregation": "mean",
            "label_type": "upper",
            "label_count": 4,
            "n_iter": 1,
        },
    )
    judge = Judge.objects.get(name="duel")
    assert (judge.kind, judge.subjects) == ("pairwise", [])
    page = client.get(reverse("judges:detail", args=[judge.pk])).content.decode()
    assert 'id="position-consistency"' in page and "Start pairwise run" in page
    llm_server.configure(default_reply='{"verdict": "A"}')
    started = client.post(
        reverse("judges:start", args=[judge.pk]),
        {
            "responses": [f"run:{runs['good'].pk}", f"run:{runs['bad'].pk}"],
            "endpoint": endpoint.pk,
            "logging_mode": "failed",
        },
    )
    run = Run.objects.get(kind=Run.Kind.PAIRWISE)
    assert started.status_code == 302 and run.total == N
    work_here()
    page = client.get(reverse("judges:detail", args=[judge.pk])).content.decode()
    assert f"Over {N} pairs judged in both orders" in page and "0 times (0%)" in page


def test_a_pairwise_runs_export_has_a_row_per_comparison(
    three_models, endpoint, llm_server
) -> None:
    _, runs, judge = three_models
    llm_server.configure(default_reply='{"verdict": "A", "reason": "=cmd|first"}')
    run = start(judge, [runs["good"], runs["bad"]], endpoint)
    work_here()
    client = Client()
    client.force_login(make_user("viewer"))
    url = reverse("leaderboards:run-export", args=[run.pk])
    body = b"".join(client.get(url, {"format": "csv"}).streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(body.lstrip("\ufeff"))))
    assert len(rows) == N * 2
    first, second = rows[0], rows[1]
    assert (first["order"], first["shown_first"], first["said"], first["winner"]) == (
        "0",
        "good",
        "A",
        "good",
    )
    assert (second["order"], second["shown_first"], second["said"], second["winner"]) == (
        "1",
        "bad",
        "A",
        "bad",
    )
    assert first["reason"] == "'=cmd|first"  # neutralised
    html = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert "Pairwise board" in html
