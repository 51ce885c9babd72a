"""A multi-turn run's exports (#27.8): the CSV has one row per turn, the JSONL each item's
turns and its whole transcript, as the item's page shows it."""

import json

import pytest

from apps.judges.models import Score
from apps.runs.models import Run, Turn
from tests import factories as f
from tests.leaderboards.test_exports import read_csv, run_export

pytestmark = pytest.mark.django_db


@pytest.fixture
def dialogues():
    task = f.make_task()
    system = {"role": "system", "content": "Be brief."}
    dataset = f.make_conversation_dataset(
        task,
        [
            [system, {"role": "user", "content": "Name a colour."}, "And another?"],
            ["What is 2 + 2?", "Times 3?"],
            ["Never asked?", "Still not?"],
        ],
    )
    # d0 answered (its second answer hostile to a spreadsheet), d1's second turn failed.
    run = f.make_multi_turn_run(dataset, {"d0": ["Red.", "=HYPERLINK(1)"], "d1": ["4", None]})
    return run


def test_the_csv_has_a_row_per_turn(dialogues, viewer_client):
    rows = read_csv(run_export(viewer_client, dialogues))
    assert [(r["key"], r["turn"], r["asked"], r["response"], r["status"]) for r in rows] == [
        ("d0", "1", "Name a colour.", "Red.", "ok"),
        ("d0", "2", "And another?", "'=HYPERLINK(1)", "ok"),
        ("d1", "1", "What is 2 + 2?", "4", "ok"),
        ("d1", "2", "Times 3?", "", "failed"),
        ("d2", "", "", "", ""),  # never asked: one row, nothing dropped
    ]
    assert rows[3]["error"] == "api_error: the server failed (500): boom"
    assert (rows[1]["prompt_tokens"], rows[1]["completion_tokens"]) == ("20", "5")


def test_the_jsonl_has_each_items_turns_and_transcript(dialogues, viewer_client):
    response = run_export(viewer_client, dialogues, "jsonl")
    body = b"".join(response.streaming_content).decode()
    records = {r["key"]: r for r in map(json.loads, body.splitlines())}
    assert records["d0"]["transcript"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": "Red."},
        {"role": "user", "content": "And another?"},
        {"role": "assistant", "content": "=HYPERLINK(1)"},  # JSON is not a spreadsheet
    ]
    d1 = records["d1"]
    assert d1["status"] == "failed"
    assert [t["answer"] for t in d1["turns"]] == ["4", None]
    assert d1["turns"][1]["error"] == "api_error: the server failed (500): boom"
    # Up to the failed turn, as the item's page shows it.
    assert d1["transcript"] == [
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "4"},
    ]
    assert (records["d2"]["response"], records["d2"]["turns"], records["d2"]["transcript"]) == (
        None,
        [],
        [],
    )
    # The same transcript the pages read from the Response.
    run_response = dialogues.responses.get(item__key="d0")
    assert records["d0"]["transcript"] == run_response.transcript()


def test_a_simulated_conversation_exports_what_each_turn_said(viewer_client):
    task = f.make_task()
    dataset = f.make_qa_dataset(task, 1)
    run = Run.objects.create(
        task=task,
        kind=Run.Kind.SIMULATION,
        dataset=dataset,
        multi_turn=True,
        status=Run.Status.COMPLETED,
    )
    item = dataset.items.get()
    for number, (asked, said) in enumerate([("Hi, I need a plan.", "Sure."), ("Thanks", "Bye")], 1):
        Turn.objects.create(run=run, item=item, number=number, asked=asked, text=said)
    record = json.loads(b"".join(run_export(viewer_client, run, "jsonl").streaming_content))
    assert [m["content"] for m in record["transcript"]] == [
        "Hi, I need a plan.",
        "Sure.",
        "Thanks",
        "Bye",
    ]
    rows = read_csv(run_export(viewer_client, run))
    assert [(r["turn"], r["asked"], r["response"]) for r in rows] == [
        ("1", "Hi, I need a plan.", "Sure."),
        ("2", "Thanks", "Bye"),
    ]


def test_a_per_turn_judges_results_carry_each_turns_value(dialogues, viewer_client):
    judge = f.make_judge(dialogues.task, name="mt", per_turn=True, reply_format="brackets")
    judged = f.make_judge_run(dialogues.dataset, judge, source_run=dialogues)
    f.add_scores(judged, {"d0": {"accuracy": 3, "clarity": 4}})
    Score.objects.filter(run=judged, subject="accuracy").update(turn_values=[4.0, 2.0])
    rows = read_csv(run_export(viewer_client, judged))
    assert json.loads(rows[0]["accuracy.turns"]) == [4.0, 2.0]
    assert rows[1]["accuracy.turns"] == ""  # d1 not scored
    record = json.loads(
        b"".join(run_export(viewer_client, judged, "jsonl").streaming_content).splitlines()[0]
    )
    assert record["scores"]["accuracy"]["turns"] == [4.0, 2.0]
    assert record["scores"]["clarity"]["turns"] == []
    # A judge of the whole conversation has no turns column.
    whole = f.make_judge_run(dialogues.dataset, source_run=dialogues)
    assert "accuracy.turns" not in read_csv(run_export(viewer_client, whole))[0]
