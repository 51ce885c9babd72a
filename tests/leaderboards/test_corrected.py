"""The judge-corrected board (#31.1): PPI++ per model and subject from reviews of the review
policy's random sample only, corrected pairs with Holm-adjusted p-values and tied ranks, the
effective number of labels, the note when the correction reorders the models; the page, the
CSV/JSONL exports, the API and the CLI carry it."""

import csv
import io
import json

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from ppi_py import ppi_mean_ci
from statsmodels.stats.multitest import multipletests

from apps.accounts.models import ApiToken
from apps.leaderboards import boards, corrected, pairs
from apps.review.models import ReviewPolicy
from apps.review.sample import sample_mask
from tests import factories as f
from tests.base import make_user

SIZE = 160
PERCENT, SEED = 25, 7


def people_and_judge(seed: int, shares: list[float], judge_shift: int) -> tuple:
    """People's values 1–5 with these shares, and a judge that moves 70 % of them by
    `judge_shift` points (clipped to the scale)."""
    rng = np.random.default_rng(seed)
    people = rng.choice(np.arange(1.0, 6.0), size=SIZE, p=shares)
    moved = rng.random(SIZE) < 0.7
    return people, np.clip(people + moved * judge_shift, 1, 5)


@pytest.fixture
def inverted(db):
    """Three models: "strong" is truly best but the judge underrates it, "weak" truly worst
    but overrated, "honest" judged right. People review the policy's random 25 % (every
    sampled item, override or confirm) and, outside it, 20 doubtful items of "weak" pushed
    to 5, which must not count."""
    task = f.make_task("ppi")
    dataset = f.make_items(task, SIZE)
    judge = f.make_judge(task, name="grader", subjects=[{"name": "accuracy", "min": 1, "max": 5}])
    ReviewPolicy.objects.create(task=task, sample_percent=PERCENT, sample_seed=SEED)
    sampled = sample_mask([f"k{i}" for i in range(SIZE)], PERCENT, SEED)
    reviewer = make_user("reviewer")
    models = {
        "strong": people_and_judge(1, [0.05, 0.1, 0.15, 0.3, 0.4], -1),
        "weak": people_and_judge(2, [0.2, 0.25, 0.25, 0.2, 0.1], +1),
        "honest": people_and_judge(3, [0.1, 0.2, 0.3, 0.25, 0.15], 0),
    }
    runs = {}
    for label, (people, judged) in models.items():
        generation = f.make_generation_run(
            dataset, {f"k{i}": f"{label} {i}" for i in range(SIZE)}, label=label
        )
        run = runs[label] = f.make_judge_run(dataset, judge, source_run=generation)
        f.add_scores(run, {f"k{i}": {"accuracy": judged[i]} for i in range(SIZE)})
        for i in np.flatnonzero(sampled):
            score = f.score(run, f"k{i}", "accuracy")
            if people[i] == judged[i]:
                score.confirm(reviewer)
            else:
                score.override(people[i], reviewer, "read it")
    people, judged = models["weak"]
    doubtful = [i for i in range(SIZE) if not sampled[i]][:20]
    for i in doubtful:
        f.score(runs["weak"], f"k{i}", "accuracy").override(5, reviewer, "doubtful pick")
    return {"task": task, "models": models, "runs": runs, "sampled": sampled}


def built(task, **query):
    board = boards.build(task, boards.Params.from_query(query))
    pairs.build(board)
    board.corrected = corrected.build(board)
    return board


def test_corrected_board_matches_ppi_python_and_restores_the_ranking(inverted):
    board = built(inverted["task"])
    found = board.corrected
    assert found is not None and found.key == "overall"
    sampled = inverted["sampled"]
    by_label = {row.label: row for row in found.rows}
    for label, (people, judged) in inverted["models"].items():
        cell = by_label[label].cells["accuracy"]
        # Only the random sample's reviews: the 20 doubtful overrides of "weak" stay out.
        low, high = ppi_mean_ci(people[sampled], judged[sampled], judged[~sampled], alpha=0.05)
        assert (cell.low, cell.high) == pytest.approx((low[0], high[0]), abs=1e-6)
        assert cell.n == sampled.sum() == by_label[label].sampled == SIZE * PERCENT // 100
        assert cell.judge_mean == pytest.approx(judged.mean())
        assert cell.effective_n is not None and cell.effective_n > 0
        # The overall is the same on 0–100: (mean − 1) / 4 × 100.
        overall = by_label[label].overall
        assert overall.mean == pytest.approx((cell.mean - 1) / 4 * 100)
    # The judge alone puts weak first; corrected, strong is first and weak last.
    judge_order = [row.label for row in found.judge_order]
    assert judge_order[0] == "weak"
    assert [row.label for row in found.rows] == ["strong", "honest", "weak"]
    assert found.reorders
    assert "changes the ranking" in found.note
    assert " > ".join(judge_order) in found.note and "strong > honest > weak" in found.note
    # Pairs: PPI++ on per-item differences, Holm-adjusted as statsmodels does it.
    raw = [pair.estimate.p for pair in found.pairs]
    expected = multipletests(raw, method="holm")[1]
    assert [pair.p_adjusted for pair in found.pairs] == pytest.approx(list(expected), abs=1e-12)
    strong_weak = next(p for p in found.pairs if {p.a.label, p.b.label} == {"strong", "weak"})
    people_s, judged_s = inverted["models"]["strong"]
    people_w, judged_w = inverted["models"]["weak"]
    d_people, d_judged = people_s - people_w, judged_s - judged_w
    sign = 1 if strong_weak.a.label == "strong" else -1
    low, high = ppi_mean_ci(
        sign * d_people[sampled], sign * d_judged[sampled], sign * d_judged[~sampled], alpha=0.05
    )
    # The pairs compare the overall, 0–100: 25 points per point of accuracy.
    assert (strong_weak.estimate.low, strong_weak.estimate.high) == pytest.approx(
        (25 * low[0], 25 * high[0]), abs=1e-6
    )
    assert strong_weak.better is not None and strong_weak.better.label == "strong"
    assert found.ranks[inverted["runs"]["strong"].pk] == 1
    assert found.ranks[inverted["runs"]["weak"].pk] > 1


def test_no_sample_no_corrected_board_and_other_reviews_never_count(inverted):
    task = inverted["task"]
    before = built(task).corrected
    ReviewPolicy.objects.filter(task=task).update(sample_percent=None)
    assert built(task).corrected is None
    # Another seed draws another sample: the reviews made on the first one mostly fall
    # outside it and stop counting (the estimate only uses what the new sample has).
    ReviewPolicy.objects.filter(task=task).update(sample_percent=PERCENT, sample_seed=SEED + 1)
    again = built(task).corrected
    overlap = sample_mask([f"k{i}" for i in range(SIZE)], PERCENT, SEED + 1) & inverted["sampled"]
    labelled = {row.label: row.cells["accuracy"] for row in again.rows}
    assert labelled["strong"].n == overlap.sum() < before.rows[0].cells["accuracy"].n


def test_page_exports_api_and_cli_carry_it(inverted, client):
    task = inverted["task"]
    admin = make_user("admin")
    client.force_login(admin)
    page = client.get(reverse("leaderboards:task", args=[task.slug])).content.decode()
    assert 'id="corrected"' in page and 'id="corrected-note"' in page
    assert f"random {PERCENT} % of items (seed {SEED})" in page
    export = reverse("leaderboards:task-export", args=[task.slug])
    text = client.get(export, {"format": "csv"}).content.decode("utf-8-sig")
    rows = {r["model"]: r for r in csv.DictReader(io.StringIO(text))}
    board = built(task)
    by_label = {row.label: row for row in board.corrected.rows}
    strong = by_label["strong"].cells["accuracy"]
    assert float(rows["strong"]["accuracy.corrected.mean"]) == round(strong.mean, 2)
    assert int(rows["strong"]["accuracy.corrected.labelled"]) == strong.n
    assert rows["strong"]["corrected.rank"] == "1"
    assert "changes the ranking" in rows["weak"]["corrected.note"]
    lines = [
        json.loads(line)
        for line in client.get(export, {"format": "jsonl"}).content.decode().splitlines()
    ]
    assert lines[0]["judge_corrected"]["ranking_changed"] is True
    assert len(lines[0]["judge_corrected"]["pairs"]) == 3
    record = next(line for line in lines if line["model"] == "strong")
    assert record["corrected"]["subjects"]["accuracy"]["mean"] == pytest.approx(strong.mean)
    assert record["corrected"]["subjects"]["accuracy"]["effective_n"] == pytest.approx(
        strong.effective_n
    )
    pairs_csv = client.get(export, {"format": "csv", "pairs": "corrected"}).content
    assert len(list(csv.DictReader(io.StringIO(pairs_csv.decode("utf-8-sig"))))) == 3
    # The API's board is the JSONL's.
    _, raw = ApiToken.issue(admin, "script")
    api = client.get(
        f"/api/v1/leaderboards/{task.slug}/", headers={"Authorization": f"Bearer {raw}"}
    ).json()
    assert api["judge_corrected"]["sample_seed"] == SEED
    assert api["rows"][0]["corrected"] is not None
    out = io.StringIO()
    call_command("leaderboard", task.slug, stdout=out)
    table = out.getvalue()
    assert "Judge-corrected (PPI++" in table and "changes the ranking" in table
    out = io.StringIO()
    call_command("leaderboard", task.slug, "--corrected-pairs", stdout=out)
    assert out.getvalue().count("\n") >= 4


def test_the_command_takes_a_target_width_as_the_page_does(inverted, capsys):
    """`leaderboard --target W` gives the reviews each model needs for its corrected interval
    to reach W, the numbers the page and export give for ?target=W."""
    task = inverted["task"]
    board = built(task)
    width = max(
        row.cells["accuracy"].high - row.cells["accuracy"].low for row in board.corrected.rows
    )
    target = width / 2
    wanted = {row.label: row.reviews_needed for row in corrected.build(board, target=target).rows}
    assert any(v for v in wanted.values())
    capsys.readouterr()
    call_command("leaderboard", task.slug, "--target", str(target), "--format", "jsonl")
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    got = {r["model"]: r["corrected"]["reviews_needed"] for r in records if r.get("model")}
    assert got == wanted
    assert records[0]["judge_corrected"]["target_width"] == pytest.approx(target)
    with pytest.raises(CommandError, match="--target must be a width above 0"):
        call_command("leaderboard", task.slug, "--target", "0", stdout=io.StringIO())


def test_a_sample_drawn_and_not_reviewed_yet_shows_the_board(db, client):
    """Before anyone reviews the sample, each estimate is missing: the page says so (it once
    failed with a 500 formatting the missing means)."""
    task = f.make_task("fresh")
    dataset = f.make_items(task, 10)
    judge = f.make_judge(task, name="grader", subjects=[{"name": "accuracy", "min": 1, "max": 5}])
    for label in ("one", "two"):
        texts = {f"k{i}": f"{label} {i}" for i in range(10)}
        generation = f.make_generation_run(dataset, texts, label=label)
        run = f.make_judge_run(dataset, judge, source_run=generation)
        f.add_scores(run, {f"k{i}": {"accuracy": 1 + i % 5} for i in range(10)})
    ReviewPolicy.objects.create(task=task, sample_percent=20, sample_seed=1)
    client.force_login(make_user("viewer"))
    client.raise_request_exception = True
    response = client.get(reverse("leaderboards:task", args=[task.slug]))
    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="corrected-table"' in page and "No item of the sample has been reviewed" in page
