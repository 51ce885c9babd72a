"""lm-evaluation-harness run for real in CI: `lm_eval --log_samples` (tests/interop/tools.py,
lm-eval 0.4.13 from .venv-lmeval, its OpenAI-compatible chat provider against the loopback
server, both models) writes the files; evalsite imports them, a reviewer overrides a score, the
board ranks the models, the corrected scores go back out as lm-eval's files and lm-eval's own
code reads them. bin/test runs this folder as its tools stage (tests/conftest.py)."""

import io
from pathlib import Path

import pytest
from django.core.management import call_command

from apps.datasets.models import Task
from apps.interop.models import Import
from apps.interop.tools import import_files
from apps.judges.models import Judge, Score
from apps.leaderboards.boards import Params, build
from apps.runs.models import Response
from tests.interop import tools


@pytest.fixture(scope="module")
def out() -> Path:
    return tools.lm_eval_outputs() / "out"


def ranked(task: Task) -> list[tuple[str, float]]:
    board = build(task, Params(judge_id=Judge.objects.get(task=task).pk))
    return [(r.label, round(r.cells["human"]["exact_match"].mean, 4)) for r in board.rows]


@pytest.mark.django_db
def test_lm_evals_own_files_reviewed_ranked_and_read_back_by_lm_eval(out, reviewer_user, tmp_path):
    task = Task.objects.create(slug="capitals", name="Capitals")
    given = [(p.name, p.read_bytes()) for p in sorted(out.glob("*/*"))]
    assert sorted(p.name for p in out.iterdir()) == ["model-a", "model-b"]
    source = import_files(task, Import.Tool.LM_EVAL, given)
    assert (source.tool, source.tool_version) == ("lm_eval", "0.4.13")
    assert (source.dataset.name, source.dataset.row_count) == ("capitals", 3)
    runs = {log.run.label: log.run for log in source.logs.select_related("run")}
    assert Response.objects.get(run=runs["model-b"], item__key="1").text == "Kyoto"
    assert ranked(task) == [("model-a", 0.6667), ("model-b", 0.3333)]
    # "It is Lima." is right; exact match said no: a reviewer says so for model-a.
    lima = Score.objects.get(run__source_run=runs["model-a"], item__key="2")
    assert lima.judge_value == 0.0
    lima.override(1.0, reviewer_user, "says Lima")
    assert ranked(task) == [("model-a", 1.0), ("model-b", 0.3333)]
    for run in runs.values():
        call_command("export_reviewed", str(run.pk), "-o", str(tmp_path), stdout=io.StringIO())

    # lm-eval's own code: the latest files of each model, its results table, the samples.
    read, unreviewed = tools.lm_eval_read([tmp_path / "model-a", tmp_path / "model-b"])
    assert read["task"] == "capitals"
    assert read["results"].startswith("results_") and read["samples"].startswith("samples_")
    # (its table writer prints 1.0000 as 1)
    assert "|capitals|Yaml|none|0|exact_match|↑|1|±|0|" in read["table"].replace(" ", "")
    assert [(r["doc_id"], r["exact_match"]) for r in read["rows"]] == [(0, 1.0), (1, 1.0), (2, 1.0)]
    assert read["rows"][2]["evalsite_review"]["exact_match"] == {
        "lm_eval": 0.0,
        "value": 1.0,
        "reason": "says Lima",
    }
    assert "|exact_match|↑|0.3333|±|0.3333|" in unreviewed["table"].replace(" ", "")
    assert [r["exact_match"] for r in unreviewed["rows"]] == [1.0, 0.0, 0.0]
