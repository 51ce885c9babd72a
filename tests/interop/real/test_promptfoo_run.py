"""promptfoo run for real in CI: `promptfoo eval` (tests/interop/tools.py, promptfoo 0.121.20
from npm with tests/interop/promptfoo's lock file, its OpenAI provider against the loopback
server, two providers) writes results.json; evalsite imports it, a reviewer overrides a verdict,
the board ranks the providers, the corrected verdicts go back out as a promptfoo results file,
and promptfoo itself imports that file and exports it again. bin/test runs this folder as its
tools stage (tests/conftest.py)."""

import io
import json

import pytest
from django.core.management import call_command

from apps.datasets.models import Task
from apps.interop.models import Import
from apps.interop.tools import import_files
from apps.judges.models import Judge, Score
from apps.leaderboards.boards import Params, build
from apps.runs.models import Response
from tests.interop import tools


def ranked(task: Task) -> list[tuple[str, float]]:
    board = build(task, Params(judge_id=Judge.objects.get(task=task).pk))
    return [(r.label, round(r.cells["human"]["pass"].mean, 4)) for r in board.rows]


@pytest.mark.django_db
def test_promptfoos_own_results_reviewed_ranked_and_read_back_by_promptfoo(reviewer_user, tmp_path):
    results = tools.promptfoo_results() / "results.json"
    task = Task.objects.create(slug="capitals", name="Capitals")
    source = import_files(task, Import.Tool.PROMPTFOO, [(results.name, results.read_bytes())])
    assert (source.tool, source.tool_version) == ("promptfoo", "0.121.20")
    assert (source.dataset.name, source.dataset.row_count) == ("capitals", 3)
    runs = {log.run.label: log.run for log in source.logs.select_related("run")}
    assert sorted(runs) == ["openai:chat:model-a", "openai:chat:model-b"]
    assert Response.objects.get(run=runs["openai:chat:model-b"], item__key="Japan").text == "Kyoto"
    assert ranked(task) == [("openai:chat:model-a", 0.6667), ("openai:chat:model-b", 0.3333)]
    verdict = Score.objects.get(
        run__source_run=runs["openai:chat:model-b"], item__key="Japan", subject="pass"
    )
    assert verdict.judge_value == 0.0
    verdict.override(1.0, reviewer_user, "Kyoto, once")
    assert [value for _, value in ranked(task)] == [0.6667, 0.6667]
    call_command(
        "export_reviewed",
        str(runs["openai:chat:model-b"].pk),
        "-o",
        str(tmp_path),
        stdout=io.StringIO(),
    )

    # promptfoo itself: the reviewed file into a database of its own, and out again.
    eval_id = json.loads((tmp_path / "results-reviewed.json").read_text())["evalId"]
    said = tools.promptfoo(tmp_path, "import", "results-reviewed.json")
    assert f"Eval with ID {eval_id} has been successfully imported" in said
    tools.promptfoo(tmp_path, "export", "eval", eval_id, "-o", "back.json")
    back = json.loads((tmp_path / "back.json").read_text())
    assert back["evalId"] == eval_id
    rows = {
        (r["testCase"]["description"], r["provider"]["id"]): r for r in back["results"]["results"]
    }
    assert len(rows) == 6
    japan_b = rows[("Japan", "openai:chat:model-b")]
    assert (japan_b["success"], japan_b["score"]) == (True, 1)
    assert japan_b["gradingResult"]["componentResults"][0] == {
        "pass": True,
        "score": 1,
        "reason": "evalsite reviewers: Kyoto, once",
        "assertion": {"type": "human"},
    }
    assert rows[("Japan", "openai:chat:model-a")]["success"] is True
    assert [
        rows[("Peru", p)]["success"] for p in ("openai:chat:model-a", "openai:chat:model-b")
    ] == [
        False,
        False,
    ]
    assert (back["results"]["stats"]["successes"], back["results"]["stats"]["failures"]) == (4, 2)
