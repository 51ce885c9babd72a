"""Clustered uncertainty (#18.4): items that come in groups (the questions of one passage) are
not independent; with a tag prefix chosen as cluster, the board's CIs are cluster-robust and
the board says which clustering it used."""

import csv
import io
import math

import numpy as np
import pytest
from django.urls import reverse

from apps.leaderboards import boards
from apps.leaderboards.boards import Params
from apps.leaderboards.stats import clustered_ci, clustered_se
from tests import factories as f


def test_clustered_se_by_hand() -> None:
    # Mean 3.5; cluster sums 3, 7, 11 of size 2 → residuals −4, 0, 4; Σ² = 32; G = 3:
    # √(3/2 · 32) / 6 = √48 / 6.
    values = np.array([1.0, 2, 3, 4, 5, 6])
    assert clustered_se(values, np.array(["a", "a", "b", "b", "c", "c"])) == pytest.approx(
        math.sqrt(48) / 6
    )
    assert clustered_se(values, np.array(["a"] * 6)) is None  # one cluster: undefined
    ci = clustered_ci(values, np.array(["a", "a", "b", "b", "c", "c"]))
    assert ci.method == "clustered"
    assert ci.high - ci.low == pytest.approx(2 * 1.959963984540054 * math.sqrt(48) / 6)


def test_it_is_what_a_cluster_bootstrap_estimates_and_wider_than_naive() -> None:
    rng = np.random.default_rng(3)
    groups, size = 300, 5
    clusters = np.repeat(np.arange(groups), size)
    values = np.repeat(rng.normal(0, 1, groups), size) + rng.normal(0, 0.3, groups * size)
    se = clustered_se(values, clusters)
    # Reference: resample whole clusters (20,000 times) and take the SD of the means.
    picks = rng.integers(0, groups, size=(20_000, groups))
    by_cluster = values.reshape(groups, size).mean(axis=1)
    bootstrap_se = by_cluster[picks].mean(axis=1).std()
    assert se == pytest.approx(bootstrap_se, rel=0.06)
    naive = values.std(ddof=1) / math.sqrt(values.size)
    assert se > 2 * naive  # five near-copies per cluster: about √5 wider


@pytest.mark.django_db
def test_the_board_clusters_on_a_tag_prefix(viewer_client) -> None:
    task = f.make_task("passages")
    rng = np.random.default_rng(9)
    level = rng.integers(1, 6, size=10)  # each passage's questions score alike
    rows = [
        {"key": f"k{i}", "fields": {"question": f"q{i}"}, "tags": [f"passage:{i // 4}", "en"]}
        for i in range(40)
    ]
    dataset = f.make_dataset(task, rows, name="set")
    judge = f.make_judge(task, name="quality", subjects=[{"name": "accuracy", "min": 1, "max": 5}])
    generation = f.make_generation_run(dataset, {}, label="m")
    run = f.make_judge_run(dataset, judge, source_run=generation, label="m")
    values = [int(level[i // 4]) for i in range(40)]
    f.add_scores(run, {f"k{i}": {"accuracy": v} for i, v in enumerate(values)})
    plain = boards.build(task, Params())
    clustered = boards.build(task, Params(cluster="passage:"))
    naive, robust = (b.rows[0].cells["human"]["accuracy"].ci for b in (plain, clustered))
    assert robust.method == "clustered" and clustered.clusters == 10
    expected = clustered_se(np.array(values, float), np.repeat(np.arange(10), 4))
    assert robust.high - robust.low == pytest.approx(2 * 1.959963984540054 * expected)
    assert robust.high - robust.low > 1.5 * (naive.high - naive.low)
    assert clustered.rows[0].overall_ci["human"].method == "clustered"
    # Said on the page, in the CSV.
    url = reverse("leaderboards:task", args=[task.slug])
    html = viewer_client.get(url, {"cluster": "passage:"}).content.decode()
    assert 'id="clustering-note"' in html and "(10 clusters;" in html
    export = viewer_client.get(
        reverse("leaderboards:task-export", args=[task.slug]),
        {"format": "csv", "cluster": "passage:"},
    )
    [record] = csv.DictReader(io.StringIO(export.content.decode().lstrip("\ufeff")))
    assert (
        record["clustered_by"] == "passage:" and record["accuracy.human.ci_method"] == "clustered"
    )
