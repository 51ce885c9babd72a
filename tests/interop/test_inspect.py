"""Inspect AI logs made by inspect-ai itself (tests/interop/tools.py: `inspect eval` with its
OpenAI-compatible provider against the loopback server, two models, two epochs, two scorers)
imported into a task, reviewed, ranked, and exported back as a log inspect_ai reads."""

import json
import zipfile
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from apps.datasets.models import Dataset, Item, Task
from apps.interop.models import Import, ImportedLog
from apps.interop.results import ImportError_
from apps.interop.tools import import_files
from apps.judges.forms import JudgeForm
from apps.judges.launching import JudgeRunError, check_source
from apps.judges.models import Judge, JudgeRound, Score
from apps.leaderboards.boards import Params, build
from apps.runs.models import Response, Run
from tests.factories import make_generation_run, make_qa_dataset
from tests.interop import tools


@pytest.fixture(scope="module")
def logs() -> Path:
    return tools.inspect_logs()


@pytest.fixture
def task(db) -> Task:
    return Task.objects.create(slug="capitals", name="Capitals")


def files(directory: Path) -> list[tuple[str, bytes]]:
    return [(p.name, p.read_bytes()) for p in sorted(directory.iterdir())]


def runs_by_label(source: Import) -> dict[str, Run]:
    return {log.run.label: log.run for log in source.logs.select_related("run")}


def match_score(run: Run, key: str) -> Score:
    return Score.objects.get(
        run__source_run=run, run__judged_with__judge__name="inspect-match", item__key=key
    )


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", ["eval", "json"])
def test_logs_become_items_response_sets_and_judges(logs, task, fmt):
    source = import_files(task, Import.Tool.INSPECT, files(logs / fmt))
    assert (source.tool, source.tool_version) == ("inspect", "0.3.285")
    dataset = source.dataset
    assert (dataset.name, dataset.row_count) == ("capitals", 3)
    jp = Item.objects.get(dataset=dataset, key="jp")
    assert jp.reference == "Tokyo"
    assert jp.fields["input"] == "What is the capital of Japan?"
    assert jp.fields["region"] == "asia"  # metadata as fields
    runs = runs_by_label(source)
    assert sorted(runs) == ["model-a", "model-b"]
    for run in runs.values():
        assert (run.kind, run.epochs, run.status) == ("generation", 2, "completed")
        assert Response.objects.filter(run=run).count() == 6  # 3 samples × 2 epochs
    b = runs["model-b"]
    assert set(Response.objects.filter(run=b, item=jp).values_list("epoch", "text", "status")) == {
        (0, "Kyoto", "ok"),
        (1, "Kyoto", "ok"),
    }
    judges = Judge.objects.filter(task=task).order_by("name")
    assert [(j.name, j.kind) for j in judges] == [
        ("inspect-includes", "imported"),
        ("inspect-match", "imported"),
    ]
    assert judges[1].subjects == [{"name": "match", "min": 0.0, "max": 1.0}]
    wrong = match_score(b, "jp")
    assert (wrong.judge_value, wrong.epoch_values) == (0.0, [0.0, 0.0])
    assert match_score(runs["model-a"], "jp").judge_value == 1.0
    assert set(
        JudgeRound.objects.filter(run=wrong.run, item=jp).values_list("epoch", "reason")
    ) == {(0, "Kyoto"), (1, "Kyoto")}  # the scorer's explanation, per epoch


@pytest.mark.django_db
def test_override_ranks_and_exports_a_log_inspect_reads(logs, task, reviewer_user, tmp_path):
    source = import_files(task, Import.Tool.INSPECT, files(logs / "eval"))
    runs = runs_by_label(source)
    judge = Judge.objects.get(task=task, name="inspect-match")
    board = build(task, Params(judge_id=judge.pk))
    assert [row.label for row in board.rows] == ["model-a", "model-b"]
    assert [round(row.cells["human"]["match"].mean, 4) for row in board.rows] == [1.0, 0.6667]

    # A reviewer accepts model-b's Kyoto: the human board ties the models, the judge's stays.
    match_score(runs["model-b"], "jp").override(1.0, reviewer_user, "old capital, accepted")
    board = build(task, Params(judge_id=judge.pk))
    assert {row.label: row.cells["human"]["match"].mean for row in board.rows} == {
        "model-a": 1.0,
        "model-b": 1.0,
    }

    out = tmp_path / "out"
    out.mkdir()
    call_command("export_reviewed", str(runs["model-b"].pk), "-o", str(out))
    (written,) = out.iterdir()
    assert written.name.endswith("-reviewed.json")
    read = tools.inspect_read(written)  # inspect_ai's own read_eval_log
    assert read["status"] == "success"
    assert {s["name"] for s in read["results"]} == {"match", "includes", "reviewers"}
    reviewers = next(s for s in read["results"] if s["name"] == "reviewers")
    assert reviewers["metrics"] == {"match": 1.0, "includes": pytest.approx(2 / 3)}
    samples = {(s["id"], s["epoch"]): s["scores"] for s in read["samples"]}
    assert len(samples) == 6
    jp = samples[("jp", 2)]
    assert jp["match"]["value"] == "I"  # Inspect's own value, as it was
    assert jp["reviewers"]["value"] == {"match": 1.0, "includes": 0.0}
    assert "old capital, accepted" in jp["reviewers"]["explanation"]
    assert samples[("fr", 1)]["reviewers"]["value"] == {"match": 1.0, "includes": 1.0}


@pytest.mark.django_db
def test_a_bad_sample_is_named_and_nothing_is_stored(logs, task):
    name, data = files(logs / "json")[0]
    log = json.loads(data)
    log["samples"][4]["scores"]["match"]["value"] = "maybe"
    bad = json.dumps(log).encode()
    with pytest.raises(ImportError_) as caught:
        import_files(task, Import.Tool.INSPECT, [files(logs / "json")[1], (name, bad)])
    key, epoch = log["samples"][4]["id"], log["samples"][4]["epoch"]
    assert str(caught.value) == (
        f"{name}, sample {key!r} epoch {epoch}: score 'match': 'maybe' is not a number, "
        "true/false or one of Inspect's C, I, P, N."
    )
    assert not Dataset.objects.exists() and not Run.objects.exists()
    assert not Judge.objects.exists() and not ImportedLog.objects.exists()


@pytest.mark.django_db
def test_unreadable_logs_are_refused_by_name(logs, task, tmp_path):
    name, data = files(logs / "eval")[0]
    with zipfile.ZipFile(logs / "eval" / name) as archive:
        partial = tmp_path / "running.eval"
        with zipfile.ZipFile(partial, "w") as out:
            out.writestr("_journal/start.json", archive.read("_journal/start.json"))
    with pytest.raises(CommandError, match=r"running.eval: the log has no header.json"):
        call_command("import_results", str(partial), "--task", "capitals", "--tool", "inspect")
    with pytest.raises(ImportError_, match=r"cut.eval: not a readable Inspect .eval log"):
        import_files(task, Import.Tool.INSPECT, [("cut.eval", data[: len(data) // 2])])
    assert not Dataset.objects.exists()


@pytest.mark.django_db
def test_cli_import_says_what_it_made(logs, task, capsys):
    paths = [str(p) for p in sorted((logs / "json").iterdir())]
    call_command("import_results", *paths, "--task", "capitals", "--tool", "inspect")
    out = capsys.readouterr().out
    assert out.startswith("Imported Inspect AI 0.3.285: ")
    assert "3 items into capitals / capitals v1" in out
    assert "model-a" in out and "model-b" in out


@pytest.mark.django_db
def test_imported_results_show_on_the_pages(logs, task, reviewer_client):
    source = import_files(task, Import.Tool.INSPECT, files(logs / "eval"))
    b = runs_by_label(source)["model-b"]
    judge_run = match_score(b, "jp").run
    jp = Item.objects.get(dataset=source.dataset, key="jp")
    judge = Judge.objects.get(task=task, name="inspect-match")
    for url in (
        f"/runs/{b.pk}/",
        f"/runs/{b.pk}/items/{jp.pk}/",
        f"/runs/{judge_run.pk}/",
        f"/judges/{judge.pk}/",
        f"/judges/runs/{judge_run.pk}/results/",
        f"/review/run/{judge_run.pk}/",
        f"/leaderboards/{task.slug}/",
    ):
        response = reviewer_client.get(url)
        assert response.status_code == 200, url
    assert b"Kyoto" in reviewer_client.get(f"/runs/{b.pk}/items/{jp.pk}/").content


@pytest.mark.django_db
def test_imported_judges_are_neither_offered_nor_run_again(task):
    form = JudgeForm(task=task)
    assert "imported" not in [value for value, _ in form.fields["kind"].choices]
    assert "rubric" in [value for value, _ in form.fields["kind"].choices]
    judge = Judge(task=task, name="inspect-match", kind=Judge.Kind.IMPORTED).save_as_new_version(
        None
    )
    run = make_generation_run(make_qa_dataset(task, 2), {0: "yes"})
    with pytest.raises(JudgeRunError, match="imported from another tool"):
        check_source(judge, run, None, "")
