"""lm-evaluation-harness's --log_samples output imported and reviewed.

tests/interop/fixtures/lm_eval/out was written by lm-eval 0.4.13 itself (PyPI, `lm-eval[api]`,
no torch: 744 MB venv, 8 min to install here) running capitals.yaml beside it against the
loopback server, once per model:
`lm_eval --model local-chat-completions --model_args model=model-a,base_url=<server>/v1/chat/
completions,tokenizer_backend=None --tasks capitals --include_path . --apply_chat_template
--log_samples --output_path out` (the server scripted as tests/interop/tools.py's SCRIPT).
"""

import json
from pathlib import Path

import pytest

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
