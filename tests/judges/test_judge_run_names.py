"""Judge runs of one judge are told apart wherever they are listed or headed: each names its
judge (name, version) and what it judged (a generation run's label, else its id, or a dataset
and column), from one place: `Run.title`."""

import pytest
from django.urls import reverse

from apps.judges.models import JudgeRun, judge_of
from apps.runs.models import Run
from tests.factories import make_answers_dataset, make_generation_run, make_judge

pytestmark = pytest.mark.django_db


@pytest.fixture
def three_runs(task):
    """One judge over a labelled generation run, an unlabelled one and a dataset column."""
    dataset = make_answers_dataset(task, 2)
    judge = make_judge(task, name="quality")
    labelled = make_generation_run(dataset, {0: "a", 1: "b"}, label="model-alpha")
    unlabelled = make_generation_run(dataset, {0: "a", 1: "b"}, label="")

    def judge_run(**source) -> Run:
        return JudgeRun.create_with(
            judge,
            task=task,
            kind=Run.Kind.JUDGE,
            dataset=dataset,
            status="completed",
            **source,
        )

    runs = (
        judge_run(source_run=labelled),
        judge_run(source_run=unlabelled),
        judge_run(source_column="response"),
    )
    names = (
        "quality v1 on model-alpha",
        f"quality v1 on run #{unlabelled.pk}",
        "quality v1 on answers v1 · column response",
    )
    return runs, names


def test_the_title_names_the_judge_and_what_it_judged(three_runs):
    runs, names = three_runs
    assert [run.title for run in runs] == list(names)
    assert str(runs[0]) == f"Judge run #{runs[0].pk} quality v1 on model-alpha"
    labelled = runs[0]
    labelled.label = "alpha-strict"  # the run's own label leads when it says more
    assert labelled.title == "alpha-strict · quality v1 on model-alpha"
    labelled.label = "model-alpha"  # and is not repeated when it says the same
    assert labelled.title == "quality v1 on model-alpha"


def test_every_list_and_header_of_judge_runs_tells_them_apart(three_runs, viewer_client, task):
    runs, names = three_runs
    lists = [
        reverse("runs:list"),
        reverse("datasets:task-detail", args=[task.slug]),
        reverse("review:index"),
    ]
    for url in lists:
        page = viewer_client.get(url).content.decode()
        for run, name in zip(runs, names, strict=True):
            assert f"#{run.pk} {name}" in page, url
    judge_page = viewer_client.get(judge_of(runs[0]).get_absolute_url()).content.decode()
    for name in names:
        assert name.removeprefix("quality v1 on ") in judge_page
    for run, name in zip(runs, names, strict=True):
        headers = {
            reverse("runs:detail", args=[run.pk]): f"<h1>Judge run #{run.pk} {name}</h1>",
            reverse("judges:results", args=[run.pk]): f"Results of judge run #{run.pk} {name}",
            reverse("judges:failed", args=[run.pk]): f"Failed items of judge run #{run.pk} {name}",
            reverse("review:run", args=[run.pk]): f"Review #{run.pk} {name}",
        }
        for url, header in headers.items():
            assert header in viewer_client.get(url).content.decode(), url


def test_model_output_in_labels_stays_text(task, viewer_client):
    dataset = make_answers_dataset(task, 1)
    source = make_generation_run(dataset, {0: "a"}, label="<b>bold</b>")
    run = JudgeRun.create_with(
        make_judge(task),
        task=task,
        kind=Run.Kind.JUDGE,
        dataset=dataset,
        source_run=source,
        status="completed",
    )
    page = viewer_client.get(reverse("runs:list")).content.decode()
    assert f"#{run.pk} rubric-judge v1 on &lt;b&gt;bold&lt;/b&gt;" in page
