"""lm-evaluation-harness's --log_samples output imported and reviewed.

tests/interop/fixtures/lm_eval/out was written by lm-eval 0.4.13 itself (PyPI, `lm-eval[api]`,
no torch: 590 MB venv, 45 s to install here) running capitals.yaml beside it against the
loopback server, once per model:
`lm_eval --model local-chat-completions --model_args model=model-a,base_url=<server>/v1/chat/
completions,tokenizer_backend=None --tasks capitals --include_path . --apply_chat_template
--log_samples --output_path out` (the server scripted as tests/interop/tools.py's SCRIPT).
bin/test's tools stage runs lm-eval itself the same way (tests/interop/real/test_lm_eval_run.py);
this copy keeps the database stages free of it.
"""

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from apps.datasets.models import Dataset, Item, Task
from apps.interop.models import Import
from apps.interop.results import ImportError_
from apps.interop.tools import import_files
from apps.judges.models import Judge, Score
from apps.leaderboards.boards import Params, build
from apps.runs.models import Response

OUT = Path(__file__).resolve().parent / "fixtures" / "lm_eval" / "out"


@pytest.fixture
def task(db) -> Task:
    return Task.objects.create(slug="capitals", name="Capitals")


def files() -> list[tuple[str, bytes]]:
    return [(p.name, p.read_bytes()) for p in sorted(OUT.glob("*/*"))]


@pytest.mark.django_db
def test_samples_become_items_responses_and_metric_scores(task, reviewer_user):
    source = import_files(task, Import.Tool.LM_EVAL, files())
    assert (source.tool, source.tool_version) == ("lm_eval", "0.4.13")
    assert (source.dataset.name, source.dataset.row_count) == ("capitals", 3)
    japan = Item.objects.get(dataset=source.dataset, key="1")
    assert japan.reference == "Tokyo" and japan.fields["country"] == "Japan"
    assert japan.fields["prompt"] == "What is the capital of Japan?"
    assert sorted(log.run.label for log in source.logs.all()) == ["model-a", "model-b"]
    assert Response.objects.get(run__label="model-b", item=japan).text == "Kyoto"
    judge = Judge.objects.get(task=task)
    assert (judge.name, judge.subject_names) == ("lm-eval-capitals", ["exact_match"])
    board = build(task, Params(judge_id=judge.pk))
    assert [(r.label, round(r.cells["human"]["exact_match"].mean, 4)) for r in board.rows] == [
        ("model-a", 0.6667),
        ("model-b", 0.3333),
    ]
    # "It is Lima." is right; exact match said no: a reviewer says so for model-a.
    wrong = Score.objects.get(run__source_run__label="model-a", item__key="2")
    assert wrong.judge_value == 0.0
    wrong.override(1.0, reviewer_user, "says Lima")
    board = build(task, Params(judge_id=judge.pk))
    assert board.rows[0].label == "model-a"
    assert board.rows[0].cells["human"]["exact_match"].mean == 1.0


@pytest.mark.django_db
def test_a_bad_line_is_named_and_nothing_is_stored(task):
    given = files()
    name, data = next((n, d) for n, d in given if n.startswith("samples_"))
    lines = data.decode().splitlines()
    row = json.loads(lines[1])
    row["exact_match"] = "yes"
    lines[1] = json.dumps(row)
    broken = [(n, "\n".join(lines).encode() if n == name else d) for n, d in given]
    with pytest.raises(ImportError_) as caught:
        import_files(task, Import.Tool.LM_EVAL, broken)
    assert (
        str(caught.value) == f"{name}, line 2 (doc 1): metric 'exact_match': 'yes' is not a number."
    )
    assert not Dataset.objects.exists() and not Judge.objects.exists()
    with pytest.raises(ImportError_, match=r"notes.txt: not an lm-eval file"):
        import_files(task, Import.Tool.LM_EVAL, [("notes.txt", b"hi")])


@pytest.mark.django_db
def test_reviewed_scores_go_back_out_in_lm_evals_files_and_read_back(task, reviewer_user, tmp_path):
    source = import_files(task, Import.Tool.LM_EVAL, files())
    runs = {log.run.label: log.run for log in source.logs.select_related("run")}
    lima = Score.objects.get(run__source_run=runs["model-a"], item__key="2")
    lima.override(1.0, reviewer_user, "says Lima")
    Score.objects.get(run__source_run=runs["model-a"], item__key="0").confirm(reviewer_user)
    call_command(
        "export_reviewed", str(runs["model-a"].pk), "-o", str(tmp_path), stdout=io.StringIO()
    )
    call_command(
        "export_reviewed", str(runs["model-b"].pk), "-o", str(tmp_path), stdout=io.StringIO()
    )
    for model in ("model-a", "model-b"):
        given = sorted(p.name for p in (OUT / model).iterdir())
        assert sorted(p.name for p in (tmp_path / model).iterdir()) == given  # lm-eval's names
    # model-a: the reviewer's value in the sample line, lm-eval's own and the reason beside it;
    # every other key as lm-eval wrote it.
    written = [
        json.loads(line)
        for line in next((tmp_path / "model-a").glob("samples_*")).read_text().splitlines()
    ]
    original = [
        json.loads(line)
        for line in next((OUT / "model-a").glob("samples_*")).read_text().splitlines()
    ]
    assert written[2]["exact_match"] == 1.0
    assert written[2]["evalsite_review"] == {
        "exact_match": {"lm_eval": 0.0, "value": 1.0, "reason": "says Lima"}
    }
    assert written[0]["evalsite_review"] == {
        "exact_match": {"lm_eval": 1.0, "value": 1.0, "reason": "Confirmed"}
    }
    assert "evalsite_review" not in written[1]
    for before, after in zip(original, written, strict=True):
        after.pop("evalsite_review", None)
        assert {k: v for k, v in after.items() if k != "exact_match"} == {
            k: v for k, v in before.items() if k != "exact_match"
        }
    results = json.loads(next((tmp_path / "model-a").glob("results_*")).read_text())
    assert results["results"]["capitals"]["exact_match,none"] == 1.0
    assert results["results"]["capitals"]["exact_match_stderr,none"] == 0.0
    # model-b, unreviewed: the mean and lm-eval's mean_stderr counted again agree with lm-eval's.
    ours = json.loads(next((tmp_path / "model-b").glob("results_*")).read_text())
    theirs = json.loads(next((OUT / "model-b").glob("results_*")).read_text())
    for column in ("exact_match,none", "exact_match_stderr,none"):
        assert ours["results"]["capitals"][column] == pytest.approx(
            theirs["results"]["capitals"][column], rel=1e-12
        )
    # Read back by the lm-eval reader: the corrected scores are the scores.
    again = Task.objects.create(slug="again", name="Again")
    back = import_files(
        again, Import.Tool.LM_EVAL, [(p.name, p.read_bytes()) for p in sorted(tmp_path.glob("*/*"))]
    )
    assert back.tool_version == "0.4.13"
    judge = Judge.objects.get(task=again)
    board = build(again, Params(judge_id=judge.pk))
    assert [(r.label, round(r.cells["human"]["exact_match"].mean, 4)) for r in board.rows] == [
        ("model-a", 1.0),
        ("model-b", 0.3333),
    ]
