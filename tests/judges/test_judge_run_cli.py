"""`manage.py start_run judge --responses RUN_ID_OR_DATASET:COLUMN --judge NAME [--endpoint NAME]
[--wait]`."""

import io
import subprocess
import sys

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.judges.models import Judge, Score, judge_of
from apps.runs.models import Run
from tests.base import ROOT, subprocess_env, work
from tests.factories import (
    make_answers_dataset,
    make_generation_run,
    make_judge,
    rubric_reply,
    set_judging,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def start_run(*args: str) -> str:
    out = io.StringIO()
    call_command("start_run", "judge", *args, stdout=out)
    return out.getvalue()


def test_judge_a_dataset_column_by_id_and_by_name(task, endpoint, llm_server):
    dataset = make_answers_dataset(task, 3)
    make_judge(task, name="quality")
    llm_server.configure(default_reply=rubric_reply(4, 2))
    output = start_run(
        "--responses", f"{dataset.pk}:response", "--judge", "quality", "--endpoint", "judge-llm"
    )
    run = Run.objects.judging().get()
    assert f"Started run #{run.pk} (quality v1 on answers v1 · column response): 3 items." in output
    assert (run.source_column, run.endpoint.name, judge_of(run).name) == (
        "response",
        "judge-llm",
        "quality",
    )

    # By name (its latest version); a newer judge version is used unless one is named.
    newer = make_judge(task, name="quality", version=2)
    start_run("--responses", "answers:response", "--judge", "quality", "--endpoint", "judge-llm")
    assert judge_of(Run.objects.judging().order_by("-pk").first()) == newer
    start_run(
        "--responses",
        "answers:response",
        "--judge",
        "quality",
        "--judge-version",
        "1",
        "--endpoint",
        "judge-llm",
    )
    assert judge_of(Run.objects.judging().order_by("-pk").first()).version == 1
    work()
    assert all(r.status == Run.Status.COMPLETED for r in Run.objects.judging())
    assert Score.objects.filter(status="ok").count() == 3 * 2 * 3


def test_rule_based_judge_of_a_generation_run_needs_no_endpoint(task, llm_server):
    dataset = make_answers_dataset(task, 2, reference=lambda i: f"answer number {i}")
    source = make_generation_run(dataset, {0: "answer number 0", 1: "wrong"})
    make_judge(task, Judge.Kind.METRIC, name="em")
    start_run("--responses", str(source.pk), "--judge", "em")
    work()
    run = Run.objects.judging().get()
    assert run.source_run_id == source.pk and run.endpoint_id is None
    assert sorted(Score.objects.values_list("judge_value", flat=True)) == [0, 100]
    assert llm_server.stats()["requests"] == 0


def test_the_task_default_endpoint_is_used_when_none_is_named(task, endpoint):
    dataset = make_answers_dataset(task, 1)
    make_judge(task, name="quality")
    set_judging(task, default_judge_endpoint=endpoint)
    start_run("--responses", f"{dataset.pk}:response", "--judge", "quality")
    assert Run.objects.judging().get().endpoint_id == endpoint.pk


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--responses", "answers", "--judge", "quality"],
            "give a generation run id, or DATASET:COLUMN",
        ),
        (["--responses", "999:response", "--judge", "quality"], "No dataset with id 999"),
        (["--responses", "nothing:response", "--judge", "quality"], "No dataset named 'nothing'"),
        (["--responses", "999", "--judge", "quality"], "No run with id 999"),
        (
            ["--responses", "answers:response", "--judge", "nope"],
            "No judge 'nope' in this task (there are: quality)",
        ),
        (
            ["--responses", "answers:nope", "--judge", "quality", "--endpoint", "judge-llm"],
            "has no column 'nope'",
        ),
        (["--responses", "answers:response", "--judge", "quality"], "choose the endpoint"),
        (
            ["--responses", "answers:response", "--judge", "quality", "--endpoint", "x"],
            "No endpoint named 'x' (there are: judge-llm)",
        ),
    ],
)
def test_bad_arguments_are_named(task, endpoint, args, message):
    make_answers_dataset(task, 1)
    make_judge(task, name="quality")
    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace(")", r"\)")):
        start_run(*args)
    assert not Run.objects.judging().exists()


def test_wait_follows_the_run_to_the_end(task, endpoint, llm_server, workers):
    dataset = make_answers_dataset(task, 4)
    make_judge(task, name="quality")
    llm_server.configure(default_reply=rubric_reply(3, 3), script={"number 2\n<": "???"})
    workers()
    result = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "start_run",
            "judge",
            "--responses",
            f"{dataset.pk}:response",
            "--judge",
            "quality",
            "--endpoint",
            "judge-llm",
            "--wait",
            "--poll",
            "0.2",
        ],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr  # one item failed
    assert "Started run #" in result.stdout
    assert "completed_with_failures: 3 done, 1 failed of 4" in result.stdout
