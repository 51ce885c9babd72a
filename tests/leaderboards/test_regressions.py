"""Regressions between two runs (#28.4): every item with its two values, sorted by the change,
filters, a word-level diff of the responses, a CSV, and the compare page's link to it."""

import csv
import io

import pytest
from django.urls import reverse

from apps.judges.models import Judge, judge_of
from apps.leaderboards import regressions
from apps.runs.models import Run
from tests import factories as f
from tests.base import make_user

EVIL = '<script>alert(1)</script><img src=x onerror="alert(2)">'


@pytest.fixture
def two_runs(db):
    """accuracy 1–5, higher is better; baseline → candidate per item:
    k0 3 → 4, k1 3 → 2, k2 3 → 3, k3 3 → failed, k4 failed → failed, k5 2 → 5, k6 = 1 → 2."""
    task = f.make_task("reg")
    dataset = f.make_items(task, 7)
    judge = f.make_judge(task, name="quality", subjects=[{"name": "accuracy", "min": 1, "max": 5}])
    base_text = {i: f"The answer is {i} apples." for i in range(7)}
    cand_text = {**base_text, 1: f"The answer is {EVIL} pears.", 2: "The answer is 2 apples."}
    base_gen = f.make_generation_run(dataset, base_text, label="base-model")
    cand_gen = f.make_generation_run(dataset, cand_text, label="cand-model")
    base = f.make_judge_run(dataset, judge, source_run=base_gen, label="base-model")
    cand = f.make_judge_run(dataset, judge, source_run=cand_gen, label="cand-model")
    before = [3, 3, 3, 3, None, 2, 1]
    after = [4, 2, 3, None, None, 5, 2]
    f.add_scores(base, {f"k{i}": {"accuracy": v} for i, v in enumerate(before)})
    f.add_scores(cand, {f"k{i}": {"accuracy": v} for i, v in enumerate(after)})
    # A person corrected the candidate's k6 to 1: unchanged with human-corrected values.
    f.score(cand, "k6", "accuracy").override(1, make_user("reviewer", "rita"), "too generous")
    return {"task": task, "base": base, "cand": cand}


def test_changes_are_sorted_worst_first_and_follow_corrections(two_runs):
    found = regressions.changes(two_runs["base"], two_runs["cand"], "accuracy")
    assert [(c.key, c.state, c.change) for c in found] == [
        ("k1", "regressed", -1.0),
        ("k3", "failed", None),
        ("k5", "improved", 3.0),
        ("k0", "improved", 1.0),
        ("k2", "unchanged", 0.0),
        ("k6", "unchanged", 0.0),  # 1 → 1 after the override; k4 failed in both: left out
    ]
    judge_only = regressions.changes(two_runs["base"], two_runs["cand"], "accuracy", "judge")
    assert next(c for c in judge_only if c.key == "k6").state == "improved"
    assert regressions.counts(found) == [
        ("regressed", "regressed", 1),
        ("improved", "improved", 2),
        ("unchanged", "unchanged", 2),
        ("failed", "failed in one", 1),
    ]


def test_lower_is_better_flips_improved_and_regressed(two_runs):
    # Set in place (a version in use is frozen for users; here it is the test's setup).
    subjects = [{"name": "accuracy", "min": 1, "max": 5, "higher_is_better": False}]
    Judge.objects.filter(pk=judge_of(two_runs["base"]).pk).update(subjects=subjects)
    base, cand = (Run.objects.get(pk=two_runs[k].pk) for k in ("base", "cand"))
    found = regressions.changes(base, cand, "accuracy", "judge")
    states = {c.key: c.state for c in found}
    assert (states["k0"], states["k1"], states["k5"]) == ("regressed", "improved", "regressed")
    assert [c.key for c in found][:3] == ["k5", "k0", "k6"]  # worst (+3) first


def test_the_word_diff_marks_words_and_escapes_everything():
    html = regressions.word_diff("The answer is 4 apples.", f"The answer is {EVIL} pears.")
    assert html.startswith("The answer is <del>4</del><ins>&lt;script&gt;")
    assert "<script" not in html and "<img" not in html and "&lt;img" in html
    assert "<del>apples.</del>" in html and html.endswith(" pears.</ins>")


def test_the_page_filters_diffs_and_links_each_review(two_runs, viewer_client):
    url = reverse("leaderboards:regressions", args=["reg"])
    params = {"a": two_runs["base"].pk, "b": two_runs["cand"].pk}
    html = viewer_client.get(url, params).content.decode()
    assert "all 6" in html and "regressed 1" in html and "failed in one 1" in html
    assert html.index('data-key="k1"') < html.index('data-key="k5"') < html.index('data-key="k2"')
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert" not in html
    assert "same response" in html  # k0: the two runs answered alike
    k1 = two_runs["cand"].scores.get(item__key="k1", subject="accuracy").item_id
    assert reverse("review:item", args=[two_runs["cand"].pk, k1]) in html
    only = viewer_client.get(url, {**params, "show": "regressed"}).content.decode()
    assert 'data-key="k1"' in only and 'data-key="k5"' not in only


def test_the_csv_has_every_item_with_neutralised_cells(two_runs, viewer_client):
    item = two_runs["base"].dataset.items.get(key="k0")
    item.key = "=HYPERLINK(1)"
    item.save(update_fields=["key"])
    url = reverse("leaderboards:regressions", args=["reg"])
    params = {"a": two_runs["base"].pk, "b": two_runs["cand"].pk, "format": "csv"}
    response = viewer_client.get(url, params)
    assert response["Content-Type"].startswith("text/csv")
    text = b"".join(response.streaming_content).decode().lstrip("\ufeff")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 6 and rows[0] == {
        "item": "k1",
        "subject": "accuracy",
        "baseline": "3.0",
        "candidate": "2.0",
        "change": "-1.0",
        "state": "regressed",
    }
    assert any(r["item"] == "'=HYPERLINK(1)" for r in rows)


def test_the_compare_page_links_to_it(two_runs, viewer_client):
    params = {"a": two_runs["base"].pk, "b": two_runs["cand"].pk}
    html = viewer_client.get(reverse("leaderboards:compare", args=["reg"]), params).content.decode()
    link = (
        f"/leaderboards/reg/regressions/?a={params['a']}&amp;b={params['b']}&amp;subject=accuracy"
    )
    assert link in html
