"""A grid of models per item (#28.3): rows are items, columns the models' responses and scores,
failures marked, filters by tag, score range and disagreement, cells linking to reviews."""

import re

import pytest
from django.urls import reverse

from apps.leaderboards import grid
from tests import factories as f

EVIL = "<script>alert(1)</script>"


@pytest.fixture
def three_models(db):
    """accuracy 1–5 on k0..k4 (k0, k1 tagged math):
    alpha 5 5 3 1 2 · beta 5 4 3 failed 2 · gamma 5 5 3 2 (k4 not judged)."""
    task = f.make_task("grid")
    dataset = f.make_items(task, 5, tags=[["math"], ["math"], [], [], []])
    judge = f.make_judge(task, name="quality", subjects=[{"name": "accuracy", "min": 1, "max": 5}])
    values = {
        "alpha": [5, 5, 3, 1, 2],
        "beta": [5, 4, 3, None, 2],
        "gamma": [5, 5, 3, 2],
    }
    runs = {}
    for label, scores in values.items():
        texts = {i: f"{label} answers q{i}" + (EVIL if i == 0 else "") for i in range(5)}
        generation = f.make_generation_run(dataset, texts, label=label)
        run = f.make_judge_run(dataset, judge, source_run=generation, label=label)
        f.add_scores(run, {f"k{i}": {"accuracy": v} for i, v in enumerate(scores)})
        runs[label] = run
    return {"task": task, "dataset": dataset, "judge": judge, "runs": runs}


def table(found) -> dict[str, list]:
    return {
        row.item.key: [c.value if c.value is not None else c.scored for c in row.cells]
        for row in found.rows
    }


def test_rows_are_items_and_columns_models(three_models):
    found = grid.build(three_models["dataset"], three_models["judge"], "accuracy")
    assert found.labels == ["alpha", "beta", "gamma"] and found.matched == 5
    # A failed item is False-scored (scored, no value); gamma never judged k4: not scored.
    assert table(found) == {
        "k0": [5, 5, 5],
        "k1": [5, 4, 5],
        "k2": [3, 3, 3],
        "k3": [1, True, 2],
        "k4": [2, 2, False],
    }
    k0 = found.rows[0].cells[1]
    assert k0.text.startswith("beta answers q0")
    assert k0.url == reverse(
        "review:item", args=[three_models["runs"]["beta"].pk, found.rows[0].item.pk]
    )


def test_filters_by_tag_range_and_disagreement(three_models):
    def build(**filters):
        found = grid.build(three_models["dataset"], three_models["judge"], "accuracy", **filters)
        return list(table(found))

    assert build(tag="math") == ["k0", "k1"]
    assert build(low=1, high=2) == ["k3", "k4"]  # any model's value in [1, 2]
    assert build(high=1.5) == ["k3"]
    # k1 (5 4 5), k3 (1, failed, 2) and k4 (2 2 and one not judged) differ; k0 and k2 agree.
    assert build(disagree=True) == ["k1", "k3", "k4"]
    assert build(disagree=True, tag="math") == ["k1"]


def test_filters_follow_a_review_and_new_results(three_models, admin_user):
    """The filtered rows are kept between pages (grid.FILTERED), keyed by the runs' results
    and the reviews: a correction or a new result is seen at once."""
    from apps.judges.models import Score

    def build(mode: str = "human", **filters):
        found = grid.build(
            three_models["dataset"], three_models["judge"], "accuracy", mode, **filters
        )
        return list(table(found))

    assert build(disagree=True) == ["k1", "k3", "k4"]
    assert build("judge", disagree=True) == ["k1", "k3", "k4"]
    beta = three_models["runs"]["beta"]
    Score.objects.get(run=beta, item__key="k1", subject="accuracy").override(5, admin_user, "5")
    assert build(disagree=True) == ["k3", "k4"]  # k1 now 5 5 5
    assert build("judge", disagree=True) == ["k1", "k3", "k4"]
    gamma = three_models["runs"]["gamma"]
    f.add_scores(gamma, {"k4": {"accuracy": 2}})
    assert build(disagree=True) == ["k3"]


def test_the_page_escapes_marks_failures_and_paginates(three_models, viewer_client, monkeypatch):
    url = reverse("leaderboards:grid", args=["grid"])
    html = viewer_client.get(url).content.decode()
    assert "5 items · 3 models · accuracy" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and EVIL not in html
    assert re.search(r'grid-failed">\s*<a href="[^"]+" class="grid-score">failed</a>', html)
    assert "not judged" in html
    monkeypatch.setattr(grid, "PER_PAGE", 2)
    second = viewer_client.get(url, {"page": 2, "disagree": "1"}).content.decode()
    assert 'data-key="k4"' in second and 'data-key="k1"' not in second and "page 2 of 2" in second


def test_the_board_links_to_the_grid(three_models, viewer_client):
    html = viewer_client.get(reverse("leaderboards:task", args=["grid"])).content.decode()
    assert reverse("leaderboards:grid", args=["grid"]) in html
