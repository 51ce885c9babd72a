"""Robustness deltas (#15.3): per model, per subject and per tag, the paired difference
perturbed − original with its 95% t-interval, pinned to values computed by hand."""

import csv
import io
import json

import numpy as np
import pytest
from django.test import Client

from apps.datasets.perturb import perturb_dataset
from apps.leaderboards import robustness, stats
from apps.runs.models import Endpoint, PromptTemplate, Run
from tests.base import make_user
from tests.factories import (
    add_scores,
    make_dataset,
    make_generation_run,
    make_judge,
    make_judge_run,
    make_task,
    set_judging,
)

pytestmark = pytest.mark.django_db

# t(0.975, 3) and t(0.975, 1), as printed by any t table.
T3 = 3.182446305284263
T1 = 12.706204736174698


@pytest.fixture
def world():
    task = make_task("robust")
    judge = make_judge(task, name="rubric")
    set_judging(task, default_judge=judge)
    rows = [
        {"key": "k0", "fields": {"question": "Describe photosynthesis"}, "tags": ["easy"]},
        {"key": "k1", "fields": {"question": "Explain gravity"}, "tags": ["easy"]},
        {"key": "k2", "fields": {"question": "q2"}, "tags": ["hard"]},
        {"key": "k3", "fields": {"question": "q3"}, "tags": ["hard"]},
    ]
    original = make_dataset(task, rows, name="facts", mapping={"input_columns": ["question"]})
    copy = perturb_dataset(original, "typos", 7)
    endpoint = Endpoint.objects.create(name="m", model="m")
    other = Endpoint.objects.create(name="n", model="n")
    template = PromptTemplate.objects.create(task=task, name="t", user_message="{{ question }}")

    def judged(dataset, endpoint, label, values):
        generation = make_generation_run(dataset, {}, label=label)
        Run.objects.filter(pk=generation.pk).update(endpoint=endpoint, template=template)
        generation.refresh_from_db()
        run = make_judge_run(dataset, judge, source_run=generation)
        add_scores(run, values)
        return run

    def scores(accuracy, clarity):
        return {
            f"k{i}": {"accuracy": a, "clarity": c}
            for i, (a, c) in enumerate(zip(accuracy, clarity, strict=True))
        }

    judged(original, endpoint, "model-a", scores([5, 4, 3, 5], [3, 3, 3, 3]))
    judged(copy, endpoint, "model-a", scores([4, 4, 2, 3], [3, 3, 3, None]))
    judged(original, other, "model-b", scores([1, 1, 1, 1], [1, 1, 1, 1]))  # no run on the copy
    return task, original, copy


def test_copy_tags_the_changed_items(world):
    _, _, copy = world
    assert dict(copy.items.values_list("key", "tags")) == {
        "k0": ["easy", "perturbed:typos"],
        "k1": ["easy", "perturbed:typos"],
        "k2": ["hard"],
        "k3": ["hard"],
    }


def test_deltas_and_t_intervals_by_hand(world):
    task, original, copy = world
    found = robustness.build(task, mode="judge", scoring="strict")
    [entry] = found.copies
    assert (entry.copy, entry.original, entry.waiting) == (copy, original, ["model-b"])
    [model] = entry.models
    assert model.label == "model-a"

    # accuracy: differences −1, 0, −1, −2 → mean −1, sd √(2/3), se √(2/3)/2 = 0.408248;
    # half-width 3.182446 × 0.408248 = 1.299228.
    accuracy = model.subjects["accuracy"]
    assert (accuracy.n, accuracy.original, accuracy.perturbed) == (4, 4.25, 3.25)
    assert accuracy.mean == pytest.approx(-1.0)
    half = T3 * (2 / 3) ** 0.5 / 2
    assert (accuracy.ci.low, accuracy.ci.high) == pytest.approx((-1 - half, -1 + half))
    assert (accuracy.ci.low, accuracy.ci.high) == pytest.approx((-2.299228, 0.299228), abs=1e-6)
    assert accuracy.ci.method == "t"

    # clarity, strict: the failed k3 counts at the worst value 1 → differences 0, 0, 0, −2:
    # mean −0.5, sd 1, se 0.5.
    clarity = model.subjects["clarity"]
    assert (clarity.n, clarity.mean) == (4, pytest.approx(-0.5))
    assert (clarity.ci.low, clarity.ci.high) == pytest.approx((-0.5 - T3 * 0.5, -0.5 + T3 * 0.5))

    # Per tag, accuracy: easy −1, 0 (mean −0.5, sd √½); hard −1, −2 (mean −1.5, sd √½);
    # perturbed:typos is k0 and k1, the items the typos changed. Half-width t(0.975, 1) × ½ =
    # 6.353102, beyond the differences a 1–5 subject allows: the interval is cut to ±4.
    half = T1 * 0.5**0.5 / 2**0.5
    assert half == pytest.approx(6.353102, abs=1e-6)
    for tag, mean in (("easy", -0.5), ("hard", -1.5), ("perturbed:typos", -0.5)):
        cell = model.tags[tag]["accuracy"]
        assert (cell.n, cell.mean) == (2, pytest.approx(mean)), tag
        assert (cell.ci.low, cell.ci.high) == (-4.0, 4.0), tag
        raw = robustness.t_interval(np.array([mean - 0.5, mean + 0.5]))
        assert (raw.low, raw.high) == pytest.approx((mean - half, mean + half)), tag
    assert entry.tags == ["easy", "hard", "perturbed:typos"]


def test_answered_only_pairs_items_with_both_values(world):
    task, _, _ = world
    found = robustness.build(task, mode="judge", scoring="answered")
    clarity = found.copies[0].models[0].subjects["clarity"]
    assert (clarity.n, clarity.mean) == (3, 0.0)
    # Three equal differences: not 0 [0, 0] (the t-interval's zero width) but the bounded
    # interval on the 1–5 subject's [−4, 4] (#29.1), as wide as three items allow.
    assert clarity.ci == stats.mean_ci([0.0, 0.0, 0.0], -4, 4)
    assert clarity.ci.method == "bounded" and clarity.ci.low < -1 and clarity.ci.high > 1
    # One pair has no interval.
    single = robustness.delta(np.array([1.0]), np.array([2.0]))
    assert (single.n, single.mean, single.ci) == (1, 1.0, None)


def test_page_and_export(world):
    task, _, copy = world
    client = Client()
    client.force_login(make_user("viewer"))
    page = client.get(f"/leaderboards/{task.slug}/robustness/?values=judge").content.decode()
    assert f'id="copy-{copy.pk}"' in page and 'data-perturbation="typos"' in page
    assert 'data-subject="accuracy" data-stat="delta">-1.00<' in page
    assert 'data-subject="accuracy" data-stat="ci">[-2.30, 0.30]<' in page
    assert "Judged on the original only (no judged run on the copy yet): model-b." in page
    board = client.get(f"/leaderboards/{task.slug}/").content.decode()
    assert f'href="/leaderboards/{task.slug}/robustness/" id="robustness-link"' in board

    body = client.get(f"/leaderboards/{task.slug}/robustness/?values=judge&format=csv")
    rows = list(csv.DictReader(io.StringIO(body.content.decode().lstrip("\ufeff"))))
    overall = [r for r in rows if r["tag"] == "" and r["subject"] == "accuracy"]
    assert len(overall) == 1
    assert (overall[0]["model"], overall[0]["perturbation"], overall[0]["seed"]) == (
        "model-a",
        "typos",
        "7",
    )
    assert float(overall[0]["delta"]) == -1.0
    assert float(overall[0]["ci_low"]) == pytest.approx(-2.299228, abs=1e-6)
    assert len(rows) == 2 * (1 + 3)  # two subjects, all items and three tags
    lines = client.get(f"/leaderboards/{task.slug}/robustness/?format=jsonl").content.decode()
    first = json.loads(lines.splitlines()[0])
    assert first["perturbed_dataset_id"] == copy.pk and first["values"] == "human"


def test_the_board_leaves_copies_out_of_all(world):
    from apps.leaderboards import boards

    task, original, copy = world
    board = boards.build(task, boards.Params())
    assert board.has_copies and {d.pk for d in board.datasets} == {original.pk, copy.pk}
    assert sorted(row.label for row in board.rows) == ["model-a", "model-b"]
    assert {row.run.dataset_id for row in board.rows} == {original.pk}
    on_copy = boards.build(task, boards.Params(dataset_id=copy.pk))
    assert [(row.label, row.run.dataset_id) for row in on_copy.rows] == [("model-a", copy.pk)]
    page = Client()
    page.force_login(make_user("viewer"))
    assert "all but perturbed copies" in page.get(f"/leaderboards/{task.slug}/").content.decode()


def test_cli(world, capsys):
    from django.core.management import CommandError, call_command

    task, _, copy = world
    call_command("leaderboard", task.slug, "--robustness", "--values", "judge")
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if "accuracy" in line)
    assert line.split()[-8:] == [
        "model-a",
        "accuracy",
        "4",
        "4.25",
        "3.25",
        "-1.00",
        "[-2.30,",
        "0.30]",
    ]
    assert str(copy) in line
    call_command("leaderboard", task.slug, "--robustness", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out.lstrip("\ufeff"))))
    assert len(rows) == 8 and {r["model"] for r in rows} == {"model-a"}
    empty = make_task("no-copies")
    with pytest.raises(CommandError, match="no-copies has no perturbed copy"):
        call_command("leaderboard", empty.slug, "--robustness")
