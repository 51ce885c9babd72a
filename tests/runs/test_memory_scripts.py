"""Memory scripts (#27.4, GoodAI's LTM benchmark): statements, filler up to an information gap
measured in tokens, then the question, each a turn with the whole conversation in context; the
gap actually realised recorded from the endpoint's own token counts. Real RQ workers, Redis and
the loopback LLM server (which counts a token per word of every message)."""

import json
import re

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction

from apps.datasets.importing import import_dataset
from apps.runs.engine.chunk import run_chunk
from apps.runs.engine.launch import launch
from apps.runs.kinds.scripts import create_script_run
from apps.runs.models import Response, Run, ScriptSetup, Turn
from apps.runs.scripts import (
    FILLER_MESSAGE_TOKENS,
    Filler,
    GapMeter,
    ScriptError,
    bundled_filler,
    estimate_tokens,
    script_of,
)
from tests.base import work
from tests.factories import make_task

CAT = "My cat is called Miso and she is nine years old."
CAT_Q = "What is my cat called? Answer with her name only."
CAR = "I park my blue car on level four of the garage."
CAR_Q = "On which level of the garage is my car? Answer with the number only."


def words(text: str) -> int:
    return len(text.split())


# ---- the script and its filler (no database) ----------------------------------------------------
def test_a_script_reads_from_its_columns_and_refuses_what_is_not_one():
    fields = {"facts": json.dumps([CAT, CAR]), "q": CAT_Q, "gap": "1,500"}
    script = script_of(
        fields,
        "Miso",
        statements_column="facts",
        question_column="q",
        gap_tokens=0,
        gap_column="gap",
    )
    assert (script.statements, script.question, script.expected) == ([CAT, CAR], CAT_Q, "Miso")
    assert script.gap_tokens == 1500
    one = script_of(
        {"facts": CAT, "q": CAT_Q},
        "",
        statements_column="facts",
        question_column="q",
        gap_tokens=2000,
    )
    assert one.statements == [CAT] and one.gap_tokens == 2000
    bad = [
        ({"facts": CAT}, "the item has no column 'q'"),
        ({"facts": CAT, "q": " "}, "column 'q' (the question) is empty"),
        ({"facts": "[1, 2", "q": CAT_Q}, "starts like a JSON list but is not one"),
        ({"facts": ["a", ""], "q": CAT_Q}, "statement 2 is empty or not a text"),
        ({"facts": CAT, "q": CAT_Q, "gap": "soon"}, "column 'gap' is 'soon', not a number"),
        ({"facts": CAT, "q": CAT_Q, "gap": 2.5}, "not a whole number of tokens"),
        ({"facts": CAT, "q": CAT_Q, "gap": -1}, "a gap is 0 to"),
    ]
    for fields, message in bad:
        with pytest.raises(ScriptError, match=re.escape(message)):
            script_of(
                fields,
                "",
                statements_column="facts",
                question_column="q",
                gap_tokens=0,
                gap_column="gap" if "gap" in fields else "",
            )


def test_filler_is_seeded_and_sized_in_tokens():
    assert len(bundled_filler()) >= 30
    first, again, other = Filler("1:a:0"), Filler("1:a:0"), Filler("2:a:0")
    texts = [first.message(300) for _ in range(5)]
    assert texts == [again.message(300) for _ in range(5)]  # the same seed, the same filler
    assert texts != [other.message(300) for _ in range(5)]
    for text in texts:
        # Whole sentences, as close to 300 tokens as one more sentence would not overshoot.
        assert 250 <= estimate_tokens(text) <= 300
    assert estimate_tokens(first.message(10_000)) <= FILLER_MESSAGE_TOKENS
    own = Filler("x", "one two three four five six seven eight")
    assert own.message(4) == "one two three" and own.message(4) == "four five six"
    assert own.message(4) == "seven eight one"  # cycled


def test_the_gap_is_counted_from_the_endpoints_usage_else_estimated():
    meter = GapMeter()
    meter.after_statement(prompt_tokens=120, answer="Noted.", completion_tokens=2)
    assert meter.gap == 2 and not meter.estimated
    meter.after_turn("filler " * 300, prompt_tokens=425, answer="ok", completion_tokens=3)
    assert meter.gap == 425 + 3 - 120
    blind = GapMeter()
    blind.after_statement(prompt_tokens=0, answer="Noted, thanks.", completion_tokens=0)
    blind.after_turn("a b c", prompt_tokens=0, answer="ok", completion_tokens=0)
    assert blind.estimated and blind.gap == estimate_tokens("Noted, thanks.") + 4 + 2


# ---- running scripts ----------------------------------------------------------------------------
pytestmark_db = pytest.mark.django_db(transaction=True)

ROWS = [
    {"id": "cat-2k", "facts": [CAT], "question": CAT_Q, "answer": "Miso", "gap": 2000},
    {"id": "car-2k", "facts": [CAR], "question": CAR_Q, "answer": "4", "gap": 2000},
    {"id": "cat-500", "facts": [CAT, CAR], "question": CAT_Q, "answer": "Miso", "gap": 500},
]


def scripts_file(rows: list[dict]) -> bytes:
    return "\n".join(json.dumps(row) for row in rows).encode()


@pytest.fixture
def scripts(db):
    """A script dataset as a user uploads it: JSONL with a list of statements per row."""
    task = make_task("memory")
    mapping = {
        "id_column": "id",
        "input_columns": ["facts", "question", "gap"],
        "reference_column": "answer",
    }
    return import_dataset(task, "recall", scripts_file(ROWS), mapping, fmt="jsonl")


def start(dataset, endpoint, **kwargs) -> Run:
    options = {"statements_column": "facts", "question_column": "question", "gap_column": "gap"}
    with transaction.atomic():
        return create_script_run(dataset, endpoint, **{**options, **kwargs})


def sent(llm_server) -> list[list[dict]]:
    return [entry["messages"] for entry in llm_server.stats()["log"]]


def said(turns: list[Turn]) -> list[dict]:
    """The request of the last of `turns`: every turn before it with its answer, then it."""
    before = [
        message
        for turn in turns[:-1]
        for message in (
            {"role": "user", "content": turn.asked},
            {"role": "assistant", "content": turn.text},
        )
    ]
    return [*before, {"role": "user", "content": turns[-1].asked}]


def run_here(run: Run) -> None:
    """The run's launch in this process (its one chunk takes the whole list), to its end."""
    run.refresh_from_db()
    run_chunk(run.pk, run.launch, 0)
    run.refresh_from_db()


@pytestmark_db
@pytest.mark.slow
def test_a_delayed_recall_script_runs_with_its_gap_realised_and_recorded(
    scripts, endpoint, llm_server, admin_client
):
    llm_server.configure(
        default_reply="Noted.",
        script=[
            {"match": "What is my cat called?", "reply": "Miso"},
            {"match": "which level", "reply": "3"},  # forgotten: it was 4
        ],
    )
    run = start(scripts, endpoint, system_message="You are a helpful assistant with memory.")
    work()
    run.refresh_from_db()
    assert (run.status, run.done, run.failed, run.total) == (Run.Status.COMPLETED, 3, 0, 3)
    requests = sent(llm_server)
    assert len(requests) == Turn.objects.filter(run=run).count()
    for key, statements, gap in (
        ("cat-2k", [CAT], 2000),
        ("car-2k", [CAR], 2000),
        ("cat-500", [CAT, CAR], 500),
    ):
        response = Response.objects.get(run=run, item__key=key)
        turns = response.turns()
        info = response.details["script"]
        question = turns[-1]
        assert info["question_turn"] == question.number == len(turns)
        assert [t.asked for t in turns[: len(statements)]] == statements
        assert info["statements"] == len(statements)
        assert info["filler_turns"] == len(turns) - len(statements) - 1 >= 1
        assert info["scripted_gap"] == gap and info["gap_counted_by"] == "endpoint"
        # The question was asked with the whole script before it, the system message first,
        # and the model's own answers in place.
        system = {"role": "system", "content": "You are a helpful assistant with memory."}
        said = [
            message
            for turn in turns[:-1]
            for message in (
                {"role": "user", "content": turn.asked},
                {"role": "assistant", "content": turn.text},
            )
        ]
        asked = [system, *said, {"role": "user", "content": question.asked}]
        assert asked in requests
        # The realised gap is what the model saw between the last statement and the question,
        # counted here from what was sent (a token per word, as the server counts).
        last_statement = 1 + 2 * (len(statements) - 1)
        between = sum(words(m["content"]) for m in asked[last_statement + 1 : -1])
        assert info["gap_tokens"] == between
        assert gap <= between < gap + FILLER_MESSAGE_TOKENS + 10
        # The response is the question's answer; tokens sum the turns'.
        assert response.text == question.text
        assert response.prompt_tokens == sum(t.prompt_tokens for t in turns)
        assert response.transcript()[-1] == {"role": "assistant", "content": question.text}
        assert response.transcript()[0] == {"role": "user", "content": statements[0]}
    page = admin_client.get(run.get_absolute_url())
    assert page.status_code == 200 and "Memory script" in page.content.decode()
    # Seeded: the same item's filler is the same however it is asked; two items differ.
    fillers = {
        key: [t.asked for t in Response.objects.get(run=run, item__key=key).turns()[1:-1]]
        for key in ("cat-2k", "car-2k")
    }
    assert fillers["cat-2k"] != fillers["car-2k"]
    from apps.runs.kinds.scripts import SCRIPT

    units = SCRIPT.load_units(
        run, ScriptSetup.objects.get(run=run), [str(scripts.items.get(key="cat-2k").pk)]
    )
    planned = SCRIPT.planned_requests(run, run.script_setup, units[0])
    assert [r.messages[-1]["content"] for r in planned][1:3] == fillers["cat-2k"][:2]


@pytestmark_db
@pytest.mark.slow
def test_a_failed_turn_fails_the_item_naming_it_and_retry_asks_it_again(
    scripts, endpoint, llm_server
):
    llm_server.configure(
        default_reply="Noted.",
        script=[{"match": "which level", "status": 400, "times": 1}],
    )
    run = start(scripts, endpoint, gap_column="", gap_tokens=300)
    run_here(run)
    assert (run.done, run.failed) == (2, 1)
    broken = Response.objects.get(run=run, item__key="car-2k")
    turns = broken.turns()
    assert broken.status == Response.Status.FAILED
    assert broken.error.startswith(f"Turn {len(turns)} (question): the request was refused (400)")
    assert turns[-1].error_kind == "api_error" and turns[-1].text == ""
    assert all(t.is_answered for t in turns[:-1])
    llm_server.reset(stats_only=True)
    with transaction.atomic():
        assert launch(run, Run.Mode.RETRY_FAILED) == 1
    run_here(run)
    assert (run.status, run.done, run.failed) == (Run.Status.COMPLETED, 3, 0)
    fixed = Response.objects.get(run=run, item__key="car-2k")
    again = fixed.turns()
    assert fixed.status == Response.Status.OK
    assert [t.asked for t in again] == [t.asked for t in turns]  # the same script, seeded
    # Only the failed turn was asked again, with the answered ones before it as they were.
    assert [t.launch for t in again] == [1] * (len(again) - 1) + [2]
    assert sent(llm_server) == [said(again)]
    assert Turn.objects.filter(run=run, item__key="car-2k").count() == len(again)
    assert fixed.prompt_tokens == sum(t.prompt_tokens for t in again)


@pytestmark_db
def test_each_turn_is_kept_as_it_finishes_and_resume_asks_only_the_rest(
    scripts, endpoint, llm_server
):
    """A run stopped mid-script (by a refused key on the question, which stops the whole run)
    keeps the turns answered before it; resumed, it asks only the question, with the same
    statements, filler and answers before it. In the test's own process."""
    task = scripts.task
    mapping = {"id_column": "id", "input_columns": ["facts", "question", "gap"]}
    one = import_dataset(task, "one", scripts_file(ROWS[:1]), mapping, fmt="jsonl")
    llm_server.configure(
        default_reply="Noted.",
        script=[{"match": "What is my cat called?", "status": 401, "times": 1}],
    )
    run = start(one, endpoint)
    run_here(run)
    assert run.status == Run.Status.FAILED and "401" in run.error
    kept = list(Turn.objects.filter(run=run).order_by("number"))
    assert [t.asked for t in kept[:1]] == [CAT] and len(kept) >= 3  # statement and filler
    assert all(t.is_answered and t.launch == 1 for t in kept)
    assert CAT_Q not in [t.asked for t in kept] and not Response.objects.filter(run=run).exists()

    llm_server.reset(stats_only=True)
    with transaction.atomic():
        assert launch(run, Run.Mode.RESUME) == 1
    run_here(run)
    assert (run.status, run.done, run.failed) == (Run.Status.COMPLETED, 1, 0)
    response = Response.objects.get(run=run)
    turns = response.turns()
    assert turns[:-1] == kept and turns[-1].asked == CAT_Q and turns[-1].launch == 2
    assert sent(llm_server) == [said(turns)]  # the question alone, the script before it
    info = response.details["script"]
    assert info["question_turn"] == len(turns) and info["filler_turns"] == len(kept) - 1
    assert info["gap_tokens"] >= 2000 and info["gap_counted_by"] == "endpoint"
    assert response.prompt_tokens == sum(t.prompt_tokens for t in turns)


@pytestmark_db
def test_a_run_over_items_that_are_not_scripts_is_refused_naming_the_rows(scripts, endpoint):
    with pytest.raises(ValueError, match=r"row 1: the item has no column 'fact'.*row 2"):
        start(scripts, endpoint, statements_column="fact")
    rows = [*ROWS[:1], {**ROWS[1], "gap": "later"}]
    task = scripts.task
    mapping = {"id_column": "id", "input_columns": ["facts", "question", "gap"]}
    bad = import_dataset(task, "bad", scripts_file(rows), mapping, fmt="jsonl")
    with pytest.raises(ValueError, match=r"row 2: column 'gap' is 'later', not a number"):
        start(bad, endpoint)
    assert not Run.objects.filter(kind=Run.Kind.SCRIPT).exists()


@pytestmark_db
def test_start_run_script_from_the_command_line(scripts, endpoint, admin_client):
    call_command(
        "start_run",
        "script",
        "--dataset",
        str(scripts.pk),
        "--endpoint",
        endpoint.name,
        "--statements",
        "facts",
        "--question",
        "question",
        "--gap",
        "2000",
    )
    run = Run.objects.get(kind=Run.Kind.SCRIPT)
    assert run.total == 3 and run.multi_turn
    page = admin_client.get(run.get_absolute_url()).content.decode()
    assert "then filler up to a gap of 2000 tokens (the bundled filler, seed 0)" in page
    assert f"responses=run:{run.pk}" in page
    assert run.script_setup.gap_tokens == 2000 and run.script_setup.gap_column == ""
    with pytest.raises(CommandError, match="row 1: the item has no column 'nope'"):
        call_command(
            "start_run",
            "script",
            "--dataset",
            str(scripts.pk),
            "--endpoint",
            endpoint.name,
            "--statements",
            "nope",
            "--question",
            "question",
        )


@pytestmark_db
@pytest.mark.slow
def test_a_killed_worker_leaves_each_turn_answered_once_and_the_run_finishes_by_itself(
    endpoint, llm_server, workers
):
    from tests.base import wait_for
    from tests.factories import make_dataset
    from tests.runs.conftest import kill_hard

    task = make_task("memory-kill")
    rows = [
        {
            "key": f"s{i}",
            "fields": {"facts": f"Fact {i}: the code is {7 * i}.", "question": f"Code {i}?"},
            "reference": str(7 * i),
        }
        for i in range(60)
    ]
    dataset = make_dataset(task, rows, name="many")
    llm_server.configure(latency=0.3, default_reply="Noted.")
    run = start(dataset, endpoint, gap_column="", gap_tokens=60, chunk_size=10)
    first = workers()
    workers()
    wait_for(lambda: Run.objects.get(pk=run.pk).done >= 8, what="some scripts answered")
    kill_hard(first)  # the worker and its horse: whatever it was asking is lost mid-script
    done_at_kill = {r.item_id: r.pk for r in Response.objects.filter(run=run).only("pk", "item_id")}
    # Generous: the watchdog hands the dead chunk's units on after its lease (~15 s) at any load.
    wait_for(lambda: Run.objects.get(pk=run.pk).status == Run.Status.COMPLETED, 300, "the run")
    run.refresh_from_db()
    assert (run.done, run.failed) == (60, 0)
    responses = list(Response.objects.filter(run=run).select_related("item"))
    assert len(responses) == 60
    log = llm_server.stats()["log"]
    for response in responses:
        turns = response.turns()
        # Statement, filler, question: numbered 1… once each, all of one launch's writing.
        assert [t.number for t in turns] == list(range(1, len(turns) + 1))
        assert turns[0].asked == response.item.fields["facts"]
        assert turns[-1].asked == response.item.fields["question"] and len(turns) >= 3
        if response.item_id in done_at_kill:
            assert response.pk == done_at_kill[response.item_id]  # kept, not redone
            question = response.item.fields["question"]
            assert sum(1 for e in log if e["messages"][-1]["content"] == question) == 1
    assert Turn.objects.filter(run=run).count() == sum(len(r.turns()) for r in responses)
