"""The default judge: with a default judge, each new response set in the task is judged by
itself (a generation run that finishes, an uploaded dataset's response columns)."""

import pytest
from django.db import transaction
from django.urls import reverse

from apps.datasets.importing import import_dataset
from apps.judges.auto import judge_new_response_sets
from apps.judges.models import Judge, Score, judge_of
from apps.runs.engine.launch import launch
from apps.runs.kinds.generation import create_generation_run
from apps.runs.models import PromptTemplate, Run
from tests.base import work_here
from tests.factories import make_answers_dataset, make_judge, rubric_reply, set_judging

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

UPLOAD = (
    "id,question,gold,model_a,model_b\n"
    "1,Capital of France?,Paris,Paris,Lyon\n"
    "2,Two plus two?,4,4,4\n"
    "3,Colour of the sky?,blue,Blue,green\n"
)
MAPPING = {
    "id_column": "id",
    "input_columns": ["question"],
    "reference_column": "gold",
    "response_columns": ["model_a", "model_b"],
}


def test_a_finished_generation_run_is_judged_by_itself(task, endpoint, llm_server):
    dataset = make_answers_dataset(task, 4)
    template = PromptTemplate.objects.create(task=task, name="qa", user_message="Q: {{ question }}")
    judge = make_judge(task)
    set_judging(task, default_judge=judge, default_judge_endpoint=endpoint)
    llm_server.configure(
        default_reply=rubric_reply(5, 3),
        script=[
            {"match": "Q: Question 2?", "status": 400},  # this response fails for now
            {"match": "Q: Question", "reply": "generated answer"},
        ],
    )
    generation = create_generation_run(dataset, endpoint, template, label="model-g")
    work_here()  # the generation run, then the judge run it started
    generation.refresh_from_db()
    assert generation.status == Run.Status.COMPLETED_WITH_FAILURES
    judge_run = Run.objects.judging().get(source_run=generation)
    assert judge_of(judge_run) == judge and judge_run.endpoint_id == endpoint.pk
    assert judge_run.status == Run.Status.COMPLETED_WITH_FAILURES
    assert (judge_run.done, judge_run.failed) == (3, 1)
    assert set(
        Score.objects.filter(run=judge_run, status="ok").values_list("judge_value", flat=True)
    ) == {5, 3}
    missing = Score.objects.get(run=judge_run, item__position=2, subject="accuracy")
    assert missing.error.startswith("Nothing to judge:")

    # The generation run's failed item is answered later: the judge run judges just that one.
    llm_server.configure(script=[{"match": "Q: Question", "reply": "generated answer"}])
    llm_server.reset(stats_only=True)
    with transaction.atomic():
        launch(generation, Run.Mode.RETRY_FAILED)
    work_here()
    judge_run.refresh_from_db()
    assert Run.objects.judging().filter(source_run=generation).count() == 1
    assert judge_run.status == Run.Status.COMPLETED, judge_run.error
    assert (judge_run.done, judge_run.failed) == (4, 0)
    assert llm_server.stats()["requests"] == 2  # one generation request, one judge request


def test_a_finished_memory_script_run_is_judged_by_itself(task, endpoint, llm_server):
    from apps.runs.kinds.scripts import create_script_run
    from tests.factories import make_dataset

    rows = [
        {
            "key": f"s{i}",
            "fields": {"fact": f"The code is {i}.", "q": "The code?"},
            "reference": str(i),
        }
        for i in range(3)
    ]
    dataset = make_dataset(task, rows, name="scripts")
    judge = make_judge(task, Judge.Kind.METRIC, name="em")
    set_judging(task, default_judge=judge)
    llm_server.configure(default_reply="1")
    with transaction.atomic():
        run = create_script_run(
            dataset, endpoint, statements_column="fact", question_column="q", gap_tokens=20
        )
    work_here()
    judge_run = Run.objects.judging().get(source_run=run)
    assert judge_run.status == Run.Status.COMPLETED and judge_of(judge_run) == judge
    values = dict(Score.objects.filter(run=judge_run).values_list("item__key", "judge_value"))
    assert values == {"s0": 0, "s1": 100, "s2": 0}  # each answered "1"


def test_uploaded_response_columns_are_judged_by_themselves(task, llm_server):
    judge = make_judge(task, Judge.Kind.METRIC, metric_options={"ignore_case": True})
    set_judging(task, default_judge=judge)
    dataset = import_dataset(task, "uploaded", UPLOAD.encode(), MAPPING, fmt="csv")
    runs = {run.source_column: run for run in Run.objects.judging().filter(dataset=dataset)}
    assert set(runs) == {"model_a", "model_b"}
    work_here()
    values = {}
    for column, run in runs.items():
        run.refresh_from_db()
        assert run.status == Run.Status.COMPLETED, run.error
        values[column] = sorted(
            Score.objects.filter(run=run).values_list("item__key", "judge_value")
        )
    assert values["model_a"] == [("1", 100), ("2", 100), ("3", 100)]
    assert values["model_b"] == [("1", 0), ("2", 100), ("3", 0)]
    assert llm_server.stats()["requests"] == 0
    # Once judged, the same response set is not judged again by the same judge.
    assert judge_new_response_sets(dataset=dataset) == []


def test_nothing_is_judged_without_a_usable_default(task, endpoint):
    import_dataset(task, "plain", UPLOAD.encode(), MAPPING, fmt="csv")
    assert not Run.objects.judging().exists()
    # An LLM judge as default without an endpoint is skipped (and the import still succeeds).
    set_judging(task, default_judge=make_judge(task))
    dataset = import_dataset(task, "plain", UPLOAD.encode(), MAPPING, fmt="csv")
    assert dataset.version == 2 and dataset.status == "ready"
    assert not Run.objects.judging().exists()
    set_judging(task, default_judge_endpoint=endpoint)
    assert len(judge_new_response_sets(dataset=dataset)) == 2


@pytest.mark.django_db
def test_the_default_judge_is_not_named_like_evaluating_new_data(admin_client) -> None:
    """'Evaluate every model' headed the default-judge card while the task page's 'Evaluate
    every model on new data' is another feature (#28.6): one name per feature."""
    from tests.factories import make_task

    task = make_task()
    judges_page = admin_client.get(reverse("judges:list") + f"?task={task.slug}").content.decode()
    task_page = admin_client.get(task.get_absolute_url()).content.decode()
    assert 'id="default-judge"' in judges_page and "Default judge: judge every new" in judges_page
    assert "Evaluate every model" not in judges_page
    assert "Evaluate every model on new data" in task_page
