"""Evaluate every model on new data (#15.2, Dynabench): with the task option on, a dataset (or
version) that becomes ready gets a generation run per (endpoint, template) pair that has a
finished run in the task, the default judge follows, and the board shows the new dataset; a
file uploaded again unchanged starts nothing."""

import logging

import pytest

from apps.datasets.importing import import_dataset
from apps.datasets.models import Task
from apps.judges.models import Judge, Score, judge_of
from apps.leaderboards import boards
from apps.runs.kinds import new_data
from apps.runs.kinds.generation import create_generation_run
from apps.runs.models import Endpoint, PromptTemplate, Run
from tests.base import work
from tests.factories import make_generation_run, make_judge, make_qa_dataset, set_judging

pytestmark = pytest.mark.django_db(transaction=True)

MAPPING = {"id_column": "id", "input_columns": ["question"], "reference_column": "answer"}
FIRST = "id,question,answer\nq1,What is 1 + 1?,2\nq2,What is 2 + 2?,4\n"
SECOND = "id,question,answer\nq1,What is 1 + 1?,2\nq2,What is 2 + 2?,4\nq3,What is 3 + 3?,6\n"


def finished(dataset, endpoint, template, label, status=Run.Status.COMPLETED) -> Run:
    """A generation run of the pair over `dataset` that ended with `status`."""
    run = make_generation_run(dataset, {}, label=label, status=status)
    Run.objects.filter(pk=run.pk).update(endpoint=endpoint, template=template, chunk_size=7)
    run.refresh_from_db()
    return run


@pytest.fixture
def other_endpoint(endpoint) -> Endpoint:
    return Endpoint.objects.create(
        name="local-b", base_url=endpoint.base_url, model="test-model-b", api_key_secret="sk-b"
    )


def test_option_off_starts_nothing(task, endpoint, template):
    finished(make_qa_dataset(task, 2, name="old"), endpoint, template, "model-a")
    dataset = import_dataset(task, "new", FIRST.encode(), MAPPING, fmt="csv")
    assert dataset.status == "ready"
    assert Run.objects.filter(dataset=dataset).count() == 0
    assert new_data.evaluate_new_data(dataset) == []


def test_one_run_per_pair_with_a_finished_run(task, endpoint, other_endpoint, template):
    task.evaluate_new_data = True
    task.save()
    old = make_qa_dataset(task, 2, name="old")
    other_template = PromptTemplate.objects.create(
        task=task, name="terse", user_message="{{ question }}"
    )
    finished(old, endpoint, template, "a-old")
    finished(old, endpoint, template, "model-a")  # the same pair again: its latest run counts
    finished(old, other_endpoint, template, "model-b", Run.Status.COMPLETED_WITH_FAILURES)
    finished(old, endpoint, other_template, "never-finished", Run.Status.FAILED)
    finished(old, other_endpoint, other_template, "cancelled", Run.Status.CANCELLED)
    finished(old, endpoint, other_template, "still-going", Run.Status.RUNNING)

    dataset = import_dataset(task, "new", FIRST.encode(), MAPPING, fmt="csv")

    started = Run.objects.filter(dataset=dataset).order_by("pk")
    assert [(r.kind, r.endpoint_id, r.template_id, r.label) for r in started] == [
        ("generation", endpoint.pk, template.pk, "model-a"),
        ("generation", other_endpoint.pk, template.pk, "model-b"),
    ]
    # The latest finished run's settings carry over; each run is launched (queued, 2 items).
    assert {(r.chunk_size, r.total, r.launch, r.status) for r in started} == {(7, 2, 1, "queued")}
    # The signal received again (a job run twice) starts nothing more.
    assert new_data.evaluate_new_data(dataset) == []
    assert Run.objects.filter(dataset=dataset).count() == 2


def test_unchanged_upload_starts_nothing_and_a_changed_one_does(task, endpoint, template):
    task.evaluate_new_data = True
    task.save()
    set_judging(task, default_judge=make_judge(task, Judge.Kind.METRIC))
    finished(make_qa_dataset(task, 2, name="old"), endpoint, template, "model-a")
    mapping = {**MAPPING, "response_columns": ["given"]}
    with_answers = "id,question,answer,given\nq1,What is 1 + 1?,2,2\n"
    v1 = import_dataset(task, "new", with_answers.encode(), mapping, fmt="csv")
    assert v1.fingerprint and v1.unchanged_from() is None
    assert Run.objects.filter(dataset=v1).generation().count() == 1
    assert Run.objects.filter(dataset=v1).judging().count() == 1  # its response column

    v2 = import_dataset(task, "new", with_answers.encode(), mapping, fmt="csv")
    assert (v2.version, v2.fingerprint) == (2, v1.fingerprint)
    assert v2.unchanged_from() == v1
    assert Run.objects.filter(dataset=v2).count() == 0  # no generation, no judging either

    # The same rows under another mapping are other data (other inputs, no answers column).
    v3 = import_dataset(task, "new", with_answers.encode(), MAPPING, fmt="csv")
    assert v3.fingerprint != v1.fingerprint and v3.unchanged_from() is None
    assert Run.objects.filter(dataset=v3).generation().count() == 1


def test_a_template_that_does_not_fit_is_left_out(task, endpoint, template):
    task.evaluate_new_data = True
    task.save()
    finished(make_qa_dataset(task, 2, name="old"), endpoint, template, "model-a")
    other = "id,prompt,answer\nq1,Say hi,hi\n"
    dataset = import_dataset(task, "other-shape", other.encode(), {"id_column": "id"}, fmt="csv")
    assert Run.objects.filter(dataset=dataset).count() == 0


def test_a_failure_never_reaches_the_import(task, endpoint, template, monkeypatch, caplog):
    task.evaluate_new_data = True
    task.save()
    finished(make_qa_dataset(task, 2, name="old"), endpoint, template, "model-a")

    def broken(task_id: int) -> list:
        raise RuntimeError("the models could not be listed")

    monkeypatch.setattr(new_data, "models_of", broken)
    with caplog.at_level(logging.ERROR, logger="apps.runs.kinds.new_data"):
        dataset = import_dataset(task, "new", FIRST.encode(), MAPPING, fmt="csv")
    assert dataset.status == "ready" and dataset.row_count == 2
    assert "the models could not be listed" in caplog.text
    assert Run.objects.filter(dataset=dataset).count() == 0


@pytest.mark.slow
def test_new_data_is_generated_judged_and_on_the_board(task, endpoint, template, llm_server):
    """End to end through a real worker and the loopback server: a first model's run, then a
    new version uploaded: its run is generated, judged by the default judge, and on the board."""
    judge = make_judge(task, Judge.Kind.METRIC)
    set_judging(task, default_judge=judge)
    task.evaluate_new_data = True
    task.save()
    llm_server.configure(script=[{"match": "What is 3 + 3?", "reply": "6"}])
    v1 = import_dataset(task, "sums", FIRST.encode(), MAPPING, fmt="csv")
    assert Run.objects.count() == 0  # no model has finished a run yet
    first = create_generation_run(v1, endpoint, template, label="echo-model")
    work()
    first.refresh_from_db()
    assert first.status == Run.Status.COMPLETED
    assert Run.objects.judging().get(source_run=first).status == Run.Status.COMPLETED

    v2 = import_dataset(task, "sums", SECOND.encode(), MAPPING, fmt="csv")
    generation = Run.objects.generation().get(dataset=v2)
    assert (generation.label, generation.endpoint_id, generation.template_id) == (
        "echo-model",
        endpoint.pk,
        template.pk,
    )
    work()
    generation.refresh_from_db()
    assert generation.status == Run.Status.COMPLETED, generation.error
    judged = Run.objects.judging().get(source_run=generation)
    assert (judge_of(judged), judged.status) == (judge, Run.Status.COMPLETED)
    values = dict(Score.objects.filter(run=judged).values_list("item__key", "judge_value"))
    assert values == {"q1": 0.0, "q2": 0.0, "q3": 100.0}  # only "6" matches its reference

    board = boards.build(Task.objects.get(pk=task.pk), boards.Params())
    assert [str(d) for d in board.datasets] == ["sums v1", "sums v2"]
    on_v2 = boards.build(task, boards.Params(dataset_id=v2.pk))
    assert [(row.label, row.run.pk) for row in on_v2.rows] == [("echo-model", judged.pk)]
    assert on_v2.rows[0].cells["judge"]["exact_match"].mean == pytest.approx(100 / 3)


@pytest.mark.slow
def test_cli_import_starts_the_models_and_the_board_shows_the_new_dataset(
    task, endpoint, template, llm_server, tmp_path, capsys
):
    from django.core.management import call_command

    set_judging(task, default_judge=make_judge(task, Judge.Kind.METRIC))
    task.evaluate_new_data = True
    task.save()
    llm_server.configure(script=[{"match": "What is 3 + 3?", "reply": "6"}])
    first, second = tmp_path / "first.csv", tmp_path / "second.csv"
    first.write_text(FIRST)
    second.write_text(SECOND)
    options = ["--task", task.slug, "--name", "sums", "--id-column", "id"]
    options += ["--input-column", "question", "--reference-column", "answer"]
    call_command("import_dataset", str(first), *options)
    v1 = task.datasets.get(version=1)
    create_generation_run(v1, endpoint, template, label="echo-model")
    work()
    capsys.readouterr()

    call_command("import_dataset", str(second), *options)
    v2 = task.datasets.get(version=2)
    started = Run.objects.generation().get(dataset=v2)
    assert f"Started on it: {started}." in capsys.readouterr().out
    work()
    call_command("leaderboard", task.slug, "--dataset", str(v2.pk), "--values", "judge")
    out = capsys.readouterr().out
    assert "echo-model" in out and "33.33" in out

    call_command("import_dataset", str(second), *options)
    assert "It has the same items as sums v2: nothing was started." in capsys.readouterr().out
    assert not Run.objects.filter(dataset__version=3).exists()


def test_a_published_generated_dataset_is_new_data(task, endpoint, template):
    """#15.1's publish sends dataset_imported for a draft made ready: the models run on it."""
    from apps.drafting.drafts import publish
    from tests.factories import make_draft, make_generator

    task.evaluate_new_data = True
    task.save()
    finished(make_qa_dataset(task, 2, name="old"), endpoint, template, "model-a")
    draft = make_draft(
        make_generator(task),
        [[("Who rules?", "The king"), ("Where?", "Here")]],
        decisions=["approved", "approved"],
    )
    assert Run.objects.filter(dataset=draft).generation().count() == 0  # a draft: nothing yet
    published = publish(draft)
    [run] = Run.objects.filter(dataset=published).generation()
    assert (run.label, run.total, run.status) == ("model-a", 2, "queued")


def test_the_upload_message_names_the_runs_it_started(task, endpoint, other_endpoint, template):
    """#28.6: runs started by a new dataset version were not mentioned in the upload message."""
    from django.contrib.messages import get_messages
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.test import Client
    from django.urls import reverse

    from tests.base import make_user

    task.evaluate_new_data = True
    task.save()
    old = make_qa_dataset(task, 2, name="old")
    finished(old, endpoint, template, "model-a")
    finished(old, other_endpoint, template, "model-b")
    client = Client()
    client.force_login(make_user("admin", "uploader"))
    response = client.post(
        reverse("datasets:dataset-upload", args=[task.slug]),
        {"file": SimpleUploadedFile("sums.csv", SECOND.encode())},
    )
    assert response.status_code == 302
    response = client.post(
        response["Location"],
        {
            "name": "sums",
            "format": "csv",
            "id_column": "id",
            "input_columns": "question",
            "reference_column": "answer",
        },
    )
    assert response.status_code == 302, response.content.decode()[-2000:]
    dataset = task.datasets.get(name="sums")
    started = sorted(Run.objects.generation().filter(dataset=dataset), key=lambda r: r.pk)
    assert [run.label for run in started] == ["model-a", "model-b"]
    said = [str(m) for m in get_messages(response.wsgi_request)]
    assert f"Started on the new items: {started[0]}; {started[1]}." in said, said
    assert f"Imported 3 items into {dataset}." in said
