"""Pairwise runs over response columns (#13.2): answers that came with the uploaded file are a
response set like a generation run's, from the judge's start form and from the command line;
read once per (dataset, column), an empty cell fails its comparisons with a message naming the
column, and nothing is kept when the run cannot be made."""

import csv
import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from apps.judges.models import Comparison, Judge
from apps.judges.pairwise import outcomes
from apps.leaderboards import pairwise_board
from apps.runs.engine.launch import LaunchError, launch
from apps.runs.models import Response, Run, set_names
from tests.base import make_user, work_here
from tests.factories import make_dataset, make_generation_run, make_judge

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

N = 5


@pytest.fixture
def with_columns(task):
    rows = [
        {
            "key": f"q{i}",
            "fields": {
                "question": f"question {i}",
                "gpt": f"GOOD answer {i}",
                "llama": f"poor answer {i}" if i != 3 else None,
            },
            "reference": "",
        }
        for i in range(N)
    ]
    mapping = {"input_columns": ["question"], "response_columns": ["gpt", "llama"]}
    dataset = make_dataset(task, rows, name="answers", mapping=mapping)
    judge = make_judge(task, Judge.Kind.PAIRWISE, name="which", subjects=[])
    return dataset, judge


def test_response_columns_and_a_generation_run_compared_from_the_command_line(
    with_columns, endpoint, llm_server, capsys
) -> None:
    dataset, _ = with_columns
    run_answers = {i: f"plain answer {i}" for i in range(N)}
    generated = make_generation_run(dataset, run_answers, label="mistral")
    llm_server.configure(
        default_reply='{"verdict": "tie"}',
        script=[
            {"regex": r"<response_a>\s*GOOD", "reply": '{"verdict": "A"}'},
            {"regex": r"<response_b>\s*GOOD", "reply": '{"verdict": "B"}'},
        ],
    )
    args = ["start_run", "pairwise", "--judge", "which", "--endpoint", endpoint.name]
    call_command(
        *args,
        *("--responses", "answers:gpt", "--responses", f"{dataset.pk}:llama"),
        *("--responses", "mistral"),
    )
    run = Run.objects.get(kind=Run.Kind.PAIRWISE)
    columns = {r.source_column: r for r in Run.objects.filter(kind=Run.Kind.COLUMN)}
    assert set(columns) == {"gpt", "llama"}
    gpt, llama = columns["gpt"], columns["llama"]
    assert (gpt.label, gpt.status, gpt.total, gpt.done) == ("gpt", "completed", N, N)
    assert (llama.status, llama.done, llama.failed) == ("completed_with_failures", N - 1, 1)
    assert Response.objects.get(run=gpt, item__key="q2").text == "GOOD answer 2"
    assert run.total == N * 3
    work_here()
    run.refresh_from_db()
    # The one empty cell fails its two pairs (llama vs gpt, llama vs mistral), before asking.
    assert (run.done, run.failed) == (N * 3 - 2, 2)
    assert llm_server.stats()["requests"] == (N * 3 - 2) * 2
    failed = Comparison.objects.filter(run=run, status="failed").first()
    assert "llama" in failed.error and "no answer" in failed.error
    assert all(o.consistent for o in outcomes(run))
    # The run's comparisons page: why the two failed, and who won the rest.
    client = Client()
    client.force_login(make_user("viewer"))
    url = reverse("judges:comparisons", args=[run.pk])
    failed_page = client.get(url, {"show": "failed"}).content.decode()
    assert failed_page.count('class="comparison failed"') == 2
    assert "no answer" in failed_page and "q3" in failed_page
    everything = client.get(url).content.decode()
    assert everything.count('class="comparison') == N * 3
    assert everything.count('<td class="outcome">gpt</td>') == N * 2 - 1
    assert client.get(url, {"show": "flipped"}).content.decode().count('class="comparison') == 0
    run_page = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert 'id="failed-comparisons"' in run_page
    board = pairwise_board.build(dataset.task)
    assert board.ratings.ratings[0].model == "gpt" and board.ratings.ratings[0].rank == 1
    assert set(board.labels) == {"gpt", "llama", "mistral"}
    assert board.labels["mistral"] == generated.pk
    # A second pairwise run reads the same columns again: no second copy.
    call_command(*args, "--responses", "answers:gpt", "--responses", "answers:llama")
    assert Run.objects.filter(kind=Run.Kind.COLUMN).count() == 2
    second = Run.objects.filter(kind=Run.Kind.PAIRWISE).order_by("-pk").first()
    assert second.pairwise.pairs() == [(gpt.pk, llama.pk)]
    # A column run is read, not run: nothing to resume or retry.
    assert not gpt.can_resume and not llama.can_retry_failed
    with pytest.raises(LaunchError, match="read from a file"):
        launch(llama, Run.Mode.RETRY_FAILED)
    capsys.readouterr()
    call_command("leaderboard", dataset.task.slug, "--pairwise")
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out.lstrip("\ufeff"))))
    assert (rows[0]["model"], rows[0]["rank"]) == ("gpt", "1")
    # JSONL, against a baseline: each model's raw and length-controlled win rate against it.
    call_command(
        "leaderboard",
        dataset.task.slug,
        *("--pairwise", "--format", "jsonl", "--baseline", "mistral", "--judge", "which"),
    )
    records = {r["model"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert set(records) == {"gpt", "llama", "mistral"}
    # gpt beat mistral on every item; llama tied it on the 4 it answered; same word counts.
    assert records["gpt"]["win_rate_vs_baseline"] == 1.0
    assert records["llama"]["win_rate_vs_baseline"] == 0.5
    assert records["llama"]["lc_win_rate"] == pytest.approx(0.5, abs=1e-4)
    assert records["mistral"]["baseline"] == "mistral"
    assert records["mistral"]["win_rate_vs_baseline"] is None
    with pytest.raises(CommandError, match="No response set 'nobody'"):
        call_command("leaderboard", dataset.task.slug, "--pairwise", "--baseline", "nobody")
    url = reverse("leaderboards:pairwise", args=[dataset.task.slug])
    page = client.get(url, {"baseline": generated.pk}).content.decode()
    assert 'id="pairwise-jsonl"' in page and f"baseline={generated.pk}" in page
    body = client.get(url, {"baseline": generated.pk, "format": "jsonl"}).content.decode()
    lines = [json.loads(line) for line in body.splitlines()]
    assert (lines[0]["model"], lines[0]["lc_win_rate"]) == ("gpt", records["gpt"]["lc_win_rate"])


def test_bad_column_references_say_why_and_keep_nothing(with_columns, endpoint) -> None:
    args = ["start_run", "pairwise", "--judge", "which", "--endpoint", endpoint.name]
    with pytest.raises(CommandError, match=r"no response column 'question'.*gpt, llama"):
        call_command(*args, "--responses", "answers:gpt", "--responses", "answers:question")
    with pytest.raises(CommandError, match="No dataset named 'nope'"):
        call_command(*args, "--responses", "answers:gpt", "--responses", "nope:gpt")
    with pytest.raises(CommandError, match="No judge 'missing'"):
        call_command(
            "start_run",
            "pairwise",
            *("--judge", "missing", "--responses", "answers:gpt", "--responses", "answers:llama"),
        )
    assert not Run.objects.exists() and not Response.objects.exists()


def test_the_start_form_offers_response_columns_and_the_run_page_shows_them(
    with_columns, endpoint, llm_server
) -> None:
    dataset, judge = with_columns
    generated = make_generation_run(dataset, {i: f"x {i}" for i in range(N)}, label="mistral")
    client = Client()
    client.force_login(make_user("reviewer"))
    page = client.get(reverse("judges:detail", args=[judge.pk])).content.decode()
    assert f'value="column:{dataset.pk}:gpt"' in page and f'value="run:{generated.pk}"' in page
    llm_server.configure(default_reply='{"verdict": "A"}')
    started = client.post(
        reverse("judges:start", args=[judge.pk]),
        {
            "responses": [f"column:{dataset.pk}:gpt", f"column:{dataset.pk}:llama"],
            "baseline": f"run:{generated.pk}",
            "endpoint": endpoint.pk,
            "logging_mode": "failed",
        },
    )
    run = Run.objects.get(kind=Run.Kind.PAIRWISE)
    assert started.status_code == 302 and run.total == N * 2
    gpt = Run.objects.get(kind=Run.Kind.COLUMN, source_column="gpt")
    llama = Run.objects.get(kind=Run.Kind.COLUMN, source_column="llama")
    assert run.pairwise.pairs() == [(generated.pk, gpt.pk), (generated.pk, llama.pk)]
    html = client.get(reverse("runs:detail", args=[gpt.pk])).content.decode()
    assert "GOOD answer 4" in html and 'id="resume-run"' not in html
    export = reverse("leaderboards:run-export", args=[gpt.pk])
    body = b"".join(client.get(export, {"format": "csv"}).streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(body.lstrip("\ufeff"))))
    assert len(rows) == N and rows[4]["response"] == "GOOD answer 4"
    assert "read as a response set" in html
    work_here()
    listing = client.get(reverse("runs:list")).content.decode()
    assert "Response column" in listing and "answers" in listing


def test_two_response_sets_with_one_label_stay_two_players(with_columns, endpoint) -> None:
    dataset, _ = with_columns
    a = make_generation_run(dataset, {0: "x"}, label="same")
    b = make_generation_run(dataset, {0: "y"}, label="same")
    column = Run.objects.for_column(dataset, "gpt")
    names = set_names([a, b, column])
    assert names == {a.pk: f"same (#{a.pk})", b.pk: f"same (#{b.pk})", column.pk: "gpt"}
