"""The board by information gap (#27.4): models answering GoodAI-style memory scripts, each
scripted gap a row, the score of the items scripted with it and the gap each model really saw."""

import json
import re

import pytest
from django.db import transaction
from django.test import Client

from apps.accounts.models import ApiToken
from apps.datasets.importing import import_dataset
from apps.judges.launching import create_judge_run
from apps.judges.models import Judge
from apps.leaderboards import boards
from apps.runs.kinds.scripts import create_script_run
from apps.runs.models import Endpoint, Response, Run
from tests import factories as f
from tests.base import make_user, work
from tests.leaderboards.test_exports import read_csv


def script_run(dataset, label: str, answers: dict[str, tuple[str | None, int, int]]) -> Run:
    """A memory-script run that has ended: per item key (answer or None for failed, scripted
    gap, realised gap)."""
    run = Run.objects.create(
        task=dataset.task,
        kind=Run.Kind.SCRIPT,
        dataset=dataset,
        label=label,
        status=Run.Status.COMPLETED,
        multi_turn=True,
        launch=1,
    )
    items = {item.key: item for item in dataset.items.all()}
    for key, (text, scripted, realised) in answers.items():
        Response.objects.create(
            run=run,
            item=items[key],
            status=Response.Status.OK if text is not None else Response.Status.FAILED,
            text=text or "",
            launch=1,
            details={
                "script": {
                    "scripted_gap": scripted,
                    "gap_tokens": realised,
                    "question_turn": 5 if text is not None else None,
                }
            },
        )
    return run


@pytest.mark.django_db
def test_the_board_breaks_scores_down_by_scripted_gap_with_the_realised_gap(admin_client):
    task = f.make_task("ltm")
    rows = [{"key": f"k{i}", "fields": {"facts": "x", "question": "q"}} for i in range(5)]
    dataset = f.make_dataset(task, rows, name="recall")
    judge = f.make_judge(task, Judge.Kind.METRIC, name="em")
    gaps = {"k0": 500, "k1": 500, "k2": 2000, "k3": 2000, "k4": 2000}
    a = script_run(
        dataset,
        "model-a",
        {k: ("Miso", g, g + 10 * i) for i, (k, g) in enumerate(gaps.items())},
    )
    b = script_run(
        dataset,
        "model-b",
        {**{k: ("Miso", g, g + 40) for k, g in gaps.items() if k != "k4"}, "k4": (None, 2000, 0)},
    )
    judged_a = f.make_judge_run(dataset, judge, source_run=a)
    judged_b = f.make_judge_run(dataset, judge, source_run=b)
    f.add_scores(
        judged_a,
        {
            "k0": {"exact_match": 100},
            "k1": {"exact_match": 0},
            "k2": {"exact_match": 100},
            "k3": {"exact_match": 0},
            "k4": {"exact_match": 0},
        },
    )
    f.add_scores(
        judged_b,
        {
            "k0": {"exact_match": 100},
            "k1": {"exact_match": 100},
            "k2": {"exact_match": 0},
            "k3": {"exact_match": 0},
            "k4": {"exact_match": None},
        },
    )
    board = boards.build(task, boards.Params.from_query({"judge": str(judge.pk)}))
    labels = [row.label for row in board.rows]
    table = {row.gap: dict(zip(labels, row.cells, strict=True)) for row in board.gap_rows}
    assert list(table) == [500, 2000]
    # By hand: model-a 500 → (100 + 0) / 2, realised (500 + 510) / 2; 2000 → 100/3 over
    # k2 k3 k4, realised (2020 + 2030 + 2040) / 3. model-b: 500 → 100, realised 540;
    # 2000 → 0 over k2 k3 (k4 failed), realised 2040 (k4 never asked its question).
    assert (table[500]["model-a"].mean, table[500]["model-a"].realised) == (50, 505)
    assert table[2000]["model-a"].mean == pytest.approx(100 / 3)
    assert table[2000]["model-a"].realised == 2030 and table[2000]["model-a"].n == 3
    assert (table[500]["model-b"].mean, table[500]["model-b"].realised) == (100, 540)
    cell = table[2000]["model-b"]
    assert (cell.mean, cell.n, cell.failed, cell.realised) == (0, 2, 1, 2040)

    page = admin_client.get(f"/leaderboards/{task.slug}/?judge={judge.pk}").content.decode()
    section = page[page.index('id="gap-breakdown"') :]
    section = section[: section.index("</section>")]
    assert "By information gap" in section
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", section))
    assert "2000 33.3" in text and "n=2, 1 failed · realised 2040" in text

    # The exports and the API carry the same breakdown (#27.8).
    export = f"/leaderboards/{task.slug}/export/"
    rows = {r["model"]: r for r in read_csv(admin_client.get(export, {"judge": judge.pk}))}
    b = rows["model-b"]
    assert (b["exact_match.gap_500.mean"], b["exact_match.gap_500.realised"]) == ("100.0", "540")
    assert [b[f"exact_match.gap_2000.{c}"] for c in ("mean", "n", "failed", "realised")] == [
        "0.0",
        "2",
        "1",
        "2040",
    ]
    assert rows["model-a"]["exact_match.gap_2000.mean"] == "33.33"
    body = admin_client.get(export, {"judge": judge.pk, "format": "jsonl"}).content
    records = {r["model"]: r for r in map(json.loads, body.decode().splitlines())}
    assert records["model-a"]["gap_subject"] == "exact_match"
    assert records["model-a"]["gaps"][1] == {
        "gap": 2000,
        "mean": pytest.approx(100 / 3),
        "n": 3,
        "failed": 0,
        "realised": 2030,
    }
    _, token = ApiToken.issue(make_user("viewer"), "script")
    api = Client().get(
        f"/api/v1/leaderboards/{task.slug}/",
        {"judge": judge.pk},
        headers={"Authorization": f"Bearer {token}"},
    )
    by_model = {r["model"]: r for r in api.json()["rows"]}
    assert by_model["model-b"]["gaps"][1] == {
        "gap": 2000,
        "mean": 0,
        "n": 2,
        "failed": 1,
        "realised": 2040,
    }


@pytest.mark.django_db
def test_a_board_without_memory_scripts_has_no_gap_table(admin_client):
    task = f.make_task("plain")
    dataset = f.make_qa_dataset(task, 2)
    judge = f.make_judge(task, Judge.Kind.METRIC, name="em")
    run = f.make_judge_run(dataset, judge, source_run=f.make_generation_run(dataset, {0: "0"}))
    f.add_scores(run, {"q0": {"exact_match": 100}})
    assert boards.build(task, boards.Params.from_query({})).gap_rows == []
    assert (
        'id="gap-breakdown"' not in admin_client.get(f"/leaderboards/{task.slug}/").content.decode()
    )


@pytest.fixture
def endpoint(db, llm_server) -> Endpoint:
    return Endpoint.objects.create(
        name="local",
        base_url=llm_server.base_url,
        model="test-model",
        concurrency_limit=4,
        timeout_seconds=5,
        max_retries=3,
        api_key_secret="sk-test-gaps",
    )


CAT = "My cat is called Miso and she is nine years old."
CAR = "I park my blue car on level four of the garage."


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_delayed_recall_script_with_a_2000_token_gap_runs_is_judged_and_broken_down(
    endpoint, llm_server, admin_client
):
    """The done-when of #27.4: scripts uploaded as a user uploads them, asked through real
    workers against the loopback server with 2,000 filler tokens between fact and question,
    judged by an exact-match judge, and the board's gap table pinned by hand."""
    task = f.make_task("memory")
    rows = [
        {
            "id": "cat",
            "facts": [CAT],
            "question": "What is my cat called?",
            "answer": "Miso",
            "gap": 2000,
        },
        {
            "id": "car",
            "facts": [CAR],
            "question": "Which level is my car on?",
            "answer": "4",
            "gap": 2000,
        },
        {"id": "near", "facts": [CAT], "question": "How old is my cat?", "answer": "9", "gap": 200},
    ]
    mapping = {
        "id_column": "id",
        "input_columns": ["facts", "question", "gap"],
        "reference_column": "answer",
    }
    data = "\n".join(json.dumps(row) for row in rows).encode()
    dataset = import_dataset(task, "recall", data, mapping, fmt="jsonl")
    llm_server.configure(
        default_reply="Noted.",
        script={"my cat called": "Miso", "level is my car": "3", "How old": "9"},
    )
    with transaction.atomic():
        run = create_script_run(
            dataset,
            endpoint,
            statements_column="facts",
            question_column="question",
            gap_column="gap",
            label="forgetful",
        )
    work()
    run.refresh_from_db()
    assert (run.status, run.done) == (Run.Status.COMPLETED, 3)
    judge = f.make_judge(task, Judge.Kind.METRIC, name="recall-em")
    with transaction.atomic():
        judged = create_judge_run(judge, source_run=run)
    work()
    judged.refresh_from_db()
    assert (judged.status, judged.done) == (Run.Status.COMPLETED, 3)
    realised = {
        r.item.key: r.details["script"]["gap_tokens"] for r in Response.objects.filter(run=run)
    }
    assert 2000 <= realised["cat"] < 2500 and 2000 <= realised["car"] < 2500
    assert 200 <= realised["near"] < 700
    board = boards.build(task, boards.Params.from_query({}))
    table = {row.gap: row.cells[0] for row in board.gap_rows}
    assert list(table) == [200, 2000]
    assert (table[200].mean, table[200].n, table[200].realised) == (100, 1, realised["near"])
    assert (table[2000].mean, table[2000].n) == (50, 2)  # Miso right, level 3 wrong
    assert table[2000].realised == (realised["cat"] + realised["car"]) / 2
    page = admin_client.get(f"/leaderboards/{task.slug}/").content.decode()
    assert 'id="gap-breakdown"' in page and "forgetful" in page
