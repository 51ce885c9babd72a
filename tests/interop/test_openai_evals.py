"""OpenAI Evals' run logs imported and reviewed (#30.1).

tests/interop/fixtures/openai_evals/out was written by OpenAI's own `oaieval` (evals 3.0.1.post1
from PyPI, installed --no-deps with the few packages its recorder and OpenAI completion
functions import: openai, tiktoken, blobfile, backoff, pyyaml, numpy, pydantic, tqdm, lz4,
zstandard, requests; the whole package pulls in torch, spaCy and more) running the registry
beside it (a FuzzyMatch eval over chat prompts) against the loopback server, once per model:
`OPENAI_BASE_URL=<server>/v1 OPENAI_API_KEY=sk-loopback EVALS_SEQUENTIAL=1 oaieval
gpt-4-model-a capitals --registry_path registry --record_path out/gpt-4-model-a.jsonl` (the
server scripted as tests/interop/tools.py's SCRIPT, its models named gpt-4-model-a and -b,
which evals sends to chat completions). As oaieval wrote them, the final report comes before
the events.
"""

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from openai.types.evals.runs import OutputItemListResponse

from apps.datasets.models import Dataset, Item, Task
from apps.interop.forms import ImportForm
from apps.interop.models import Import
from apps.interop.openai_evals import read_logs
from apps.interop.results import ImportError_
from apps.interop.tools import import_files
from apps.judges.models import Judge, JudgeRound, Score
from apps.leaderboards.boards import Params, build
from apps.runs.models import Response, Run

OUT = Path(__file__).resolve().parent / "fixtures" / "openai_evals" / "out"


@pytest.fixture
def task(db) -> Task:
    return Task.objects.create(slug="capitals", name="Capitals")


def files() -> list[tuple[str, bytes]]:
    return [(p.name, p.read_bytes()) for p in sorted(OUT.glob("*.jsonl"))]


@pytest.mark.django_db
def test_run_logs_become_items_responses_and_scores(task, reviewer_user):
    source = import_files(task, Import.Tool.OPENAI, files())
    assert (source.tool, source.tool_version) == ("openai", "")
    assert (source.dataset.name, source.dataset.row_count) == ("capitals", 3)
    japan = Item.objects.get(dataset=source.dataset, key="capitals.dev.1")
    assert japan.reference == "Tokyo"
    assert japan.fields["input"] == "Answer with the city only.\nWhat is the capital of Japan?"
    assert japan.conversation == [
        {"role": "system", "content": "Answer with the city only."},
        {"role": "user", "content": "What is the capital of Japan?"},
    ]
    runs = {log.run.label: log.run for log in source.logs.select_related("run")}
    assert sorted(runs) == ["gpt-4-model-a", "gpt-4-model-b"]
    assert Response.objects.get(run=runs["gpt-4-model-b"], item=japan).text == "Kyoto"
    assert (runs["gpt-4-model-a"].prompt_tokens, runs["gpt-4-model-a"].completion_tokens) == (
        33,
        5,
    )
    judge = Judge.objects.get(task=task)
    assert (judge.name, judge.subject_names) == (
        "openai-capitals",
        ["correct", "accuracy", "f1_score"],
    )
    # The grades as oaieval recorded them: Kyoto is not Tokyo; "It is Lima." matches fuzzily
    # and has an F1 of 0.5 against "Lima".
    lima = Score.objects.get(
        run__source_run=runs["gpt-4-model-b"], item__key="capitals.dev.2", subject="f1_score"
    )
    assert lima.judge_value == 0.5
    kyoto = JudgeRound.objects.get(run__source_run=runs["gpt-4-model-b"], item=japan)
    assert kyoto.values == {"correct": 0.0, "accuracy": 0.0, "f1_score": 0.0}
    assert kyoto.reason == 'match: expected "Tokyo", picked []'
    board = build(task, Params(judge_id=judge.pk))
    assert [(r.label, round(r.cells["human"]["correct"].mean, 4)) for r in board.rows] == [
        ("gpt-4-model-a", 1.0),
        ("gpt-4-model-b", 0.6667),
    ]
    # Kyoto was the imperial capital for a millennium; a reviewer gives model-b the point.
    score = Score.objects.get(run__source_run=runs["gpt-4-model-b"], item=japan, subject="correct")
    score.override(1.0, reviewer_user, "historic capital")
    board = build(task, Params(judge_id=judge.pk))
    assert [r.cells["human"]["correct"].mean for r in board.rows] == [1.0, 1.0]
    # Imported again: a second dataset, the same judge version (same subjects and ranges).
    again = import_files(task, Import.Tool.OPENAI, files(), name="capitals again")
    assert again.dataset.name == "capitals again"
    assert Judge.objects.filter(task=task).count() == 1
    assert Run.objects.filter(task=task, kind=Run.Kind.GENERATION).count() == 4


@pytest.mark.django_db
def test_reviewed_scores_go_back_out_in_oaievals_logs_and_read_back(task, reviewer_user, tmp_path):
    source = import_files(task, Import.Tool.OPENAI, files())
    b = next(log.run for log in source.logs.select_related("run") if log.run.label.endswith("b"))
    japan = Item.objects.get(dataset=source.dataset, key="capitals.dev.1")
    Score.objects.get(run__source_run=b, item=japan, subject="correct").override(
        1.0, reviewer_user, "historic capital"
    )
    call_command("export_reviewed", str(b.pk), "-o", str(tmp_path), stdout=io.StringIO())
    (written,) = tmp_path.iterdir()
    assert written.name == "gpt-4-model-b-reviewed.jsonl"
    rows = [json.loads(line) for line in written.read_text().splitlines()]
    original = [json.loads(line) for line in (OUT / "gpt-4-model-b.jsonl").read_text().splitlines()]
    assert rows[0] == original[0]  # the spec
    assert rows[1]["final_report"]["accuracy"] == original[1]["final_report"]["accuracy"]
    assert rows[1]["final_report"]["evalsite_reviewed"] == pytest.approx(
        {"correct": 1.0, "accuracy": 2 / 3, "f1_score": 0.5}
    )
    match = next(r for r in rows[2:] if r["sample_id"] == "capitals.dev.1" and r["type"] == "match")
    assert match["data"]["correct"] is True
    assert match["data"]["evalsite_review"] == {
        "correct": {"recorded": False, "value": 1.0, "reason": "historic capital"}
    }
    # Every other event as oaieval recorded it.
    assert [r for r in rows[2:] if r is not match] == [
        r for r in original[2:] if r["event_id"] != match["event_id"]
    ]
    # Read back by the importer: the reviewer's value is the recorded one.
    call_command(
        "export_reviewed",
        str(source.logs.exclude(run=b).get().run_id),
        "-o",
        str(tmp_path),
        stdout=io.StringIO(),
    )
    again = Task.objects.create(slug="again", name="Again")
    back = import_files(
        again, Import.Tool.OPENAI, [(p.name, p.read_bytes()) for p in sorted(tmp_path.iterdir())]
    )
    assert back.dataset.row_count == 3
    board = build(again, Params(judge_id=Judge.objects.get(task=again).pk))
    assert [r.cells["human"]["correct"].mean for r in board.rows] == [1.0, 1.0]


def broken(line: int, change) -> list[tuple[str, bytes]]:
    """The logs with model-b's line `line` (1-based) changed by `change(row)`."""
    given = files()
    name, data = given[1]
    lines = data.decode().splitlines()
    row = json.loads(lines[line - 1])
    change(row)
    lines[line - 1] = json.dumps(row)
    return [given[0], (name, "\n".join(lines).encode())]


@pytest.mark.django_db
def test_a_bad_line_is_named_and_nothing_is_stored(task):
    bad_cases = [
        (
            broken(8, lambda row: row.update(data=[1])),
            "gpt-4-model-b.jsonl, line 8: the 'metrics' event's data is not an object.",
        ),
        (
            broken(7, lambda row: row["data"].update(correct="yes")),
            "gpt-4-model-b.jsonl, line 7 (sample capitals.dev.1): match 'correct': 'yes' "
            "is not a number or true/false.",
        ),
        (
            broken(1, lambda row: row.pop("spec")),
            "gpt-4-model-b.jsonl, line 1: neither the spec, an event (type, sample_id, data) "
            "nor the final report.",
        ),
        (
            [files()[0], ("notes.jsonl", b'{"type": "match", "sample_id": "x", "data": {}}\n')],
            "notes.jsonl: not an OpenAI Evals log (no spec line; oaieval writes it first).",
        ),
        (
            [files()[0], ("bad.jsonl", b"{oops\n")],
            "bad.jsonl, line 1: not JSON",
        ),
    ]
    for given, message in bad_cases:
        with pytest.raises(ImportError_) as caught:
            import_files(task, Import.Tool.OPENAI, given)
        assert str(caught.value).startswith(message), str(caught.value)
    # The same model's log twice answers each sample twice.
    with pytest.raises(ImportError_, match=r"sample 'capitals.dev.2' epoch 1 appears twice"):
        import_files(task, Import.Tool.OPENAI, [files()[0], files()[0]])
    assert not Dataset.objects.exists() and not Judge.objects.exists()
    assert not Run.objects.exists()


def test_the_import_form_offers_openai_evals():
    # The page's flow (post, errors named, redirect) is tested with promptfoo's file; here,
    # only that the form takes this tool and says which files to give.
    form = ImportForm()
    assert ("openai", "OpenAI-format JSONL") in form.fields["tool"].choices
    assert "OpenAI Evals: oaieval's run log (.jsonl) per model." in form.fields["uploads"].help_text


def test_a_model_graded_log_keeps_the_graders_words_and_a_failed_sample():
    """A model-graded eval (evals/elsuite/modelgraded/classify.py) records the grader's own
    sampling after the model's and its `choice` as a word beside numbers; a sample whose
    request failed has an `error` event and no sampling."""
    name, data = files()[0]
    lines = data.decode().splitlines()
    grader = {
        "run_id": "r",
        "event_id": 100,
        "sample_id": "capitals.dev.0",
        "type": "sampling",
        "data": {"prompt": "Is Paris right? Y or N", "sampled": ["Y, it is."]},
    }
    graded = dict(grader, event_id=101, type="metrics", data={"choice": "Y", "score": 1.0})
    failed = dict(
        grader,
        event_id=102,
        sample_id="capitals.dev.9",
        type="error",
        data={"type": "APIError", "message": "upstream 503"},
    )
    lines += [json.dumps(grader), json.dumps(graded), json.dumps(failed)]
    results = read_logs([(name, "\n".join(lines).encode())])
    (model,) = results.models
    paris = next(a for a in model.answers if a.key == "capitals.dev.0")
    assert paris.text == "Paris"  # the model's answer, not the grader's
    assert paris.values["capitals"] == {
        "correct": 1.0,
        "accuracy": 1.0,
        "f1_score": 1.0,
        "score": 1.0,
    }
    assert paris.explanations["capitals"].splitlines()[-2:] == ['choice: "Y"', "grader: Y, it is."]
    nine = next(a for a in model.answers if a.key == "capitals.dev.9")
    assert (nine.text, nine.error) == ("", "APIError: upstream 503")


# ---- the Evals platform's output items ----------------------------------------------------
TICKETS = [
    ("My monitor won't turn on!", "Hardware"),
    ("I'm in vim and I can't quit!", "Software"),
    ("Best restaurants in Cleveland?", "Other"),
]
GRADER = "Match output to human label"


def output_items(run: str, model: str, answers: list[str | None]) -> bytes:
    """A platform run's output items as a script saves them: each the openai SDK's own
    OutputItemListResponse (validated by it), dumped with its model_dump_json(), a line each;
    the ticket-triage eval of OpenAI's Evals guide, graded by a string check. None: the
    request failed."""
    lines = []
    for index, ((text, label), answer) in enumerate(zip(TICKETS, answers, strict=True)):
        failed = answer is None
        item = OutputItemListResponse.model_validate(
            {
                "object": "eval.run.output_item",
                "id": f"outputitem_{run}_{index}",
                "run_id": run,
                "eval_id": "eval_tickets",
                "created_at": 1767225600,
                "status": "error" if failed else "pass" if answer == label else "fail",
                "datasource_item_id": index,
                "datasource_item": {"ticket_text": text, "correct_label": label},
                "results": []
                if failed
                else [
                    {
                        "name": GRADER,
                        "type": "string_check",
                        "passed": answer == label,
                        "score": float(answer == label),
                        "sample": None,
                    }
                ],
                "sample": {
                    "input": [
                        {"role": "developer", "content": "Categorize the ticket."},
                        {"role": "user", "content": text},
                    ],
                    "output": [] if failed else [{"role": "assistant", "content": answer}],
                    "finish_reason": "" if failed else "stop",
                    "model": model,
                    "usage": {
                        "total_tokens": 0 if failed else 25,
                        "completion_tokens": 0 if failed else 2,
                        "prompt_tokens": 0 if failed else 23,
                        "cached_tokens": 0,
                    },
                    "error": {"code": "rate_limit_exceeded", "message": "Slow down."}
                    if failed
                    else {"code": "", "message": ""},
                    "temperature": 1.0,
                    "max_completion_tokens": 2048,
                    "top_p": 1.0,
                    "seed": 42,
                },
            }
        )
        lines.append(item.model_dump_json())
    return "\n".join(lines).encode()


@pytest.mark.django_db
def test_the_evals_platforms_output_items_come_in(task):
    mini = output_items("evalrun_mini", "gpt-4o-mini-2024-07-18", ["Hardware", "Hardware", "Other"])
    big = output_items("evalrun_big", "gpt-4.1-2025-04-14", ["Hardware", "Software", None])
    source = import_files(task, Import.Tool.OPENAI, [("mini.jsonl", mini), ("big.jsonl", big)])
    assert (source.dataset.name, source.dataset.row_count) == ("eval_tickets", 3)
    vim = Item.objects.get(dataset=source.dataset, key="1")
    assert (vim.reference, vim.fields["ticket_text"]) == ("Software", TICKETS[1][0])
    # The platform's developer message is the conversation's system prompt.
    assert vim.conversation[0] == {"role": "system", "content": "Categorize the ticket."}
    runs = {log.run.label: log.run for log in source.logs.select_related("run")}
    assert sorted(runs) == ["gpt-4.1-2025-04-14", "gpt-4o-mini-2024-07-18"]
    assert Response.objects.get(run=runs["gpt-4o-mini-2024-07-18"], item=vim).text == "Hardware"
    failed = Response.objects.get(run=runs["gpt-4.1-2025-04-14"], item__key="2")
    assert (failed.status, failed.error) == ("failed", "rate_limit_exceeded: Slow down.")
    judge = Judge.objects.get(task=task)
    assert (judge.name, judge.subject_names) == ("openai-graders", ["pass", GRADER])
    wrong = JudgeRound.objects.get(run__source_run=runs["gpt-4o-mini-2024-07-18"], item=vim)
    assert wrong.values == {"pass": 0.0, GRADER: 0.0}
    assert wrong.reason == f"{GRADER}: failed"
    board = build(task, Params(judge_id=judge.pk))
    means = {r.label: round(r.cells["human"][GRADER].mean, 4) for r in board.rows}
    # gpt-4.1's failed request counts at the worst value, as the board scores strictly.
    assert means == {"gpt-4o-mini-2024-07-18": 0.6667, "gpt-4.1-2025-04-14": 0.6667}
    # A list page saved whole reads the same; a line that is something else is named.
    page = json.dumps({"object": "list", "data": [json.loads(x) for x in mini.splitlines()]})
    assert len(read_logs([("page.json", page.encode())]).samples) == 3
    bad = mini.replace(b'"score":0.0', b'"score":"zero"')
    with pytest.raises(ImportError_) as caught:
        import_files(task, Import.Tool.OPENAI, [("mini.jsonl", bad)])
    assert str(caught.value) == (
        f"mini.jsonl, line 2 (item 1): grader {GRADER!r} score: 'zero' is not a number or "
        "true/false."
    )
