"""Several metric judges on one board, one row per model (#29.12, fifth point; Dynabench's
eval_metrics with a perf_metric to sort by), the values pinned to sklearn's accuracy_score and
f1_score(average="macro")."""

import re

import pytest
from django.urls import reverse
from sklearn.metrics import accuracy_score, f1_score

from apps.judges.metrics import evaluate
from apps.judges.models import Judge
from apps.leaderboards import metric_board
from tests import factories as f

pytestmark = pytest.mark.django_db

GOLD = ["entailment", "entailment", "neutral", "entailment", "contradiction", "entailment",
        "neutral", "entailment"]  # fmt: skip
# Model a says the majority label every time: 5 of 8 right, macro-F1 0.26. Model b: 4 of 8
# right, but each label right at least once: macro-F1 0.5. Accuracy and macro-F1 disagree.
PREDICTIONS = {
    "model-a": ["entailment"] * 8,
    "model-b": ["entailment", "neutral", "neutral", "contradiction", "contradiction", "neutral",
                "neutral", "contradiction"],
}  # fmt: skip


@pytest.fixture
def nli(db):
    task = f.make_task("nli")
    rows = [
        {"key": f"k{i}", "fields": {"premise": f"p{i}"}, "reference": g} for i, g in enumerate(GOLD)
    ]
    dataset = f.make_dataset(task, rows, name="anli")
    judges = {
        "acc": f.make_judge(task, Judge.Kind.METRIC, name="acc", metric="exact_match"),
        "f1": f.make_judge(
            task,
            Judge.Kind.METRIC,
            name="f1",
            metric="macro_f1",
            subjects=[{"name": "macro_f1", "min": 0, "max": 100}],
        ),
    }
    gens = {}
    for label, texts in PREDICTIONS.items():
        gens[label] = f.make_generation_run(dataset, dict(enumerate(texts)), label=label)
        for judge in judges.values():
            run = f.make_judge_run(dataset, judge, source_run=gens[label])
            subject = judge.subjects[0]["name"]
            f.add_scores(
                run,
                {
                    f"k{i}": {subject: evaluate(judge.metric, text, [GOLD[i]])}
                    for i, text in enumerate(texts)
                },
            )
    # A third model only the accuracy judge scored.
    gens["model-c"] = f.make_generation_run(dataset, dict(enumerate(GOLD)), label="model-c")
    run = f.make_judge_run(dataset, judges["acc"], source_run=gens["model-c"])
    f.add_scores(run, {f"k{i}": {"exact_match": 100} for i in range(len(GOLD))})
    return {"task": task, "judges": judges, "gens": gens}


def test_one_row_per_model_with_every_metric(nli):
    board = metric_board.build(nli["task"], perf="f1:corpus")
    assert [m.key for m in board.metrics] == ["acc", "f1", "f1:corpus"]
    by_label = {row.label: row for row in board.rows}
    assert set(by_label) == {"model-a", "model-b", "model-c"}
    for label, predicted in PREDICTIONS.items():
        values = by_label[label].values
        assert values["acc"].value == pytest.approx(100 * accuracy_score(GOLD, predicted))
        assert values["f1"].value == pytest.approx(100 * accuracy_score(GOLD, predicted))
        assert values["f1:corpus"].value == pytest.approx(
            100 * f1_score(GOLD, predicted, average="macro")
        )
        assert values["f1:corpus"].ci is not None
    assert "f1" not in by_label["model-c"].values


def test_the_performance_metric_orders_the_rows(nli):
    # Macro-F1: b (0.5) above a (0.26); c has none: last. Accuracy: c, a, b.
    assert 100 * f1_score(GOLD, PREDICTIONS["model-b"], average="macro") == pytest.approx(50.0)
    assert 100 * f1_score(GOLD, PREDICTIONS["model-a"], average="macro") == pytest.approx(1000 / 39)
    by_f1 = metric_board.build(nli["task"], perf="f1:corpus")
    assert [row.label for row in by_f1.rows] == ["model-b", "model-a", "model-c"]
    by_accuracy = metric_board.build(nli["task"], perf="acc")
    assert [row.label for row in by_accuracy.rows] == ["model-c", "model-a", "model-b"]
    only_f1 = metric_board.build(nli["task"], names=["f1"])
    assert [m.key for m in only_f1.metrics] == ["f1", "f1:corpus"]
    assert only_f1.perf is not None and only_f1.perf.key == "f1"


def test_the_page_shows_it_and_the_board_links_it(nli, viewer_client):
    url = reverse("leaderboards:metrics", args=["nli"])
    page = viewer_client.get(url, {"perf": "f1:corpus"}).content.decode()
    order = re.findall(r'<td class="model">([^<]+)</td>', page)
    assert order == ["model-b", "model-a", "model-c"]
    assert 'data-metric="f1:corpus" data-stat="value">50.0' in page
    board = viewer_client.get(reverse("leaderboards:task", args=["nli"])).content.decode()
    assert f'href="{url}" id="metrics-link"' in board


def test_it_is_behind_the_login(nli, client):
    response = client.get(reverse("leaderboards:metrics", args=["nli"]))
    assert response.status_code == 302
