"""What boards store or memoise about scores stays exactly what the scores say (#33.2): scores
change through every path — the judge, an override, a revert, consensus of reviews, an
adjudication, a re-judge, the delete of a run — and after each the stored run summaries (with
their live human overlay), the per-item arrays the grid and regressions read, each score's
`final_value` and the board's cells are compared with a recomputation from the score rows.

Real Redis and the loopback LLM server; the judging jobs run in this process (work_here)."""

import json
import math

import numpy as np
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from apps.judges.launching import create_judge_run
from apps.judges.models import Judge, Score, judge_of
from apps.leaderboards import agreement, boards, items, memo, summaries
from apps.leaderboards.epochs import Reduction, override_value, reduce
from apps.leaderboards.models import RunSummary, StoredArrays
from apps.leaderboards.people import people_agreement
from apps.leaderboards.subjects import subject_infos
from apps.review.models import Adjudication, Review, ReviewPolicy
from apps.review.queue import last_event_id
from apps.runs.engine.launch import launch
from apps.runs.models import Run
from tests.base import make_user, work_here
from tests.factories import make_answers_dataset, make_generation_run, make_judge, rubric_reply

pytestmark = pytest.mark.django_db(transaction=True)

SUBJECTS = ("accuracy", "clarity")
N = 6


def about(i: int) -> str:
    return f"number {i}\n</response>"


def expected(run: Run) -> dict[str, dict]:
    """From the score rows alone: per subject and mode, each item's value (None: failed or
    unscored) in the dataset's order, and how many scores hold a human value."""
    positions = {
        pk: n
        for n, pk in enumerate(run.dataset.items.order_by("position").values_list("pk", flat=True))
    }
    out: dict[str, dict] = {}
    for subject in SUBJECTS:
        judge: list[float | None] = [None] * len(positions)
        human: list[float | None] = [None] * len(positions)
        overridden = 0
        for score in Score.objects.filter(run=run, subject=subject):
            ok = score.status == Score.Status.OK
            judged = score.judge_value if ok else None
            final = score.override_value if score.override_value is not None else judged
            assert score.final_value == final, (score.pk, score.final_value, final)
            judge[positions[score.item_id]] = judged
            human[positions[score.item_id]] = final
            overridden += score.override_value is not None
        out[subject] = {"judge": judge, "human": human, "overridden": overridden}
    return out


def as_array(values: list[float | None]) -> np.ndarray:
    return np.array([math.nan if v is None else v for v in values], dtype=float)


def mean(values: list[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return sum(got) / len(got) if got else None


def comparable(fields: dict) -> dict:
    """A summary's numbers in a form where counting changes in one by one and computing from
    scratch must agree exactly (sums of squares only up to rounding, compared apart)."""
    groups = {}
    for subject, tags_text, judge, failed, human, human_failed, overridden in fields["groups"]:
        groups[subject, tags_text] = (
            (judge[0], judge[3], failed),
            (human[0], human[3], human_failed, overridden),
            (judge[1], judge[2], human[1], human[2]),
        )
    vectors = {}
    for tags_text, entries in fields["vectors"].get("groups", []):
        vectors[tags_text] = (
            None
            if entries is None
            else sorted([(tuple(j), tuple(h), n) for j, h, n in entries if n], key=repr)
        )
    return {
        "groups": {key: value[:2] for key, value in groups.items()},
        "sums": {key: value[2] for key, value in groups.items()},
        "vectors": vectors,
        "held": sorted(map(tuple, fields["held"])),
        "flaky": fields["flaky"],
        "items": fields["item_counts"],
    }


def stored_summaries_equal_recomputed(runs: list[Run]) -> None:
    """Each run's stored summary, people's changes counted in one by one as they came, equals
    the summary computed from the score rows now (not stored)."""
    summaries.load(runs)
    for run in runs:
        run.refresh_from_db()
        row = RunSummary.objects.get(run=run)
        kept = comparable({f: getattr(row, f) for f in summaries.aggregate(run)})
        fresh = comparable(json.loads(json.dumps(summaries.aggregate(run))))  # as stored
        assert kept["groups"] == fresh["groups"], run.label
        assert kept["vectors"] == fresh["vectors"], run.label
        assert (kept["held"], kept["flaky"], kept["items"]) == (
            fresh["held"],
            fresh["flaky"],
            fresh["items"],
        )
        for key, sums in kept["sums"].items():
            assert sums == pytest.approx(fresh["sums"][key]), (run.label, key)


def check(task, runs: list[Run]) -> None:
    """Every stored or memoised number of `runs` equals its recomputation, read once as this
    process has it (memos keyed by state) and once as a fresh process would (memos empty)."""
    stored_summaries_equal_recomputed(runs)
    for fresh in (False, True):
        if fresh:
            memo.clear_all()
        loaded = summaries.load(runs)
        board = boards.build(task, boards.Params(scoring="answered"))
        rows = {row.run.pk: row for row in board.rows}
        assert set(rows) == {run.pk for run in runs}
        for run in runs:
            run.refresh_from_db()
            want = expected(run)
            for subject, got in want.items():
                group, _ = summaries.merged(loaded[run.pk], subject)
                for mode in ("judge", "human"):
                    values = [v for v in got[mode] if v is not None]
                    dist = group.human if mode == "human" else group.judge
                    assert dist.n == len(values), (run.label, subject, mode, fresh)
                    assert dist.mean == pytest.approx(mean(got[mode])), (run.label, subject, mode)
                    cell = rows[run.pk].cells[mode][subject]
                    assert cell.answered_mean == pytest.approx(mean(got[mode]))
                    assert cell.answered == len(values)
                    arrays = items.item_values(run, mode, last_event_id())
                    np.testing.assert_array_equal(arrays[subject], as_array(got[mode]))
                assert group.overridden == got["overridden"]
                assert rows[run.pk].cells["human"][subject].overridden == got["overridden"]
    check_agreement(task)


def check_agreement(task) -> None:
    """The agreement page's memo (keyed by the state of runs, events, reviews and blind
    entries) gives what a fresh computation gives, whatever changed since it was kept."""
    for fresh in (False, True):
        if fresh:
            memo.clear_all()
        assert agreement.page(task) == (agreement.agreement(task), people_agreement(task))


def test_every_path_that_changes_scores_keeps_the_stored_numbers_exact(llm_server):
    from apps.datasets.models import Task
    from apps.runs.models import Endpoint

    task = Task.objects.create(slug="consistent", name="Consistent")
    endpoint = Endpoint.objects.create(
        name="judge-llm",
        base_url=llm_server.base_url,
        model="test-model",
        concurrency_limit=4,
        timeout_seconds=5,
        max_retries=1,
        api_key_secret="sk-test-judge-0000",
    )
    people = {name: make_user("reviewer", name) for name in ("alice", "bob")}
    admin = make_user("admin", "root")
    ReviewPolicy.objects.create(task=task, reviews_per_item=2, thresholds={"accuracy": 1})
    dataset = make_answers_dataset(task, N)
    judge = make_judge(task, n_iter=1, aggregation=Judge.Aggregation.MEAN)

    # The judge: two models; item 1 scored apart, item 2 unparseable (failed), model-b's
    # item 5 scored apart.
    llm_server.configure(
        default_reply=rubric_reply(4, 3),
        script=[
            {"match": about(1), "reply": rubric_reply(2, 5)},
            {"match": about(2), "reply": "no JSON here"},
            {"match": f"model-b {about(5)}", "reply": rubric_reply(1, 1)},
        ],
    )
    runs = []
    for label in ("model-a", "model-b"):
        answers = make_generation_run(
            dataset, {i: f"{label} answer number {i}" for i in range(N)}, label=label
        )
        with transaction.atomic():
            runs.append(create_judge_run(judge, endpoint=endpoint, source_run=answers))
    work_here()
    for run in runs:
        run.refresh_from_db()
        assert run.is_terminal, run.status
    assert RunSummary.objects.filter(run__in=runs).count() == 2  # stored by the finishing job
    check(task, runs)
    a, b = runs

    def score(run: Run, position: int, subject: str = "accuracy") -> Score:
        return Score.objects.get(run=run, item__position=position, subject=subject)

    # An override, of an OK score and of a failed one; then a revert of the first.
    score(a, 0).override(1, admin, "wrong")
    score(a, 2).override(5, admin, "the judge failed; it is right")
    check(task, runs)
    score(a, 0).revert(admin, "on second thought")
    check(task, runs)

    # Reviews that agree: their consensus becomes the value.
    for name, value in (("alice", 2), ("bob", 3)):
        Review.submit(score(b, 3), people[name], value, "", 5)
    assert score(b, 3).override_value == 2.5
    check(task, runs)

    # Reviews that disagree beyond the threshold, then an adjudication.
    for name, value in (("alice", 1), ("bob", 5)):
        Review.submit(score(b, 4), people[name], value, "", 5)
    Adjudication.objects.get(score=score(b, 4)).decide(2, admin, "alice is nearer")
    assert score(b, 4).override_value == 2
    check(task, runs)

    # A re-judge with new values (the failed item now answers): overrides stay final.
    llm_server.configure(default_reply=rubric_reply(3, 2), script=[])
    with transaction.atomic():
        assert launch(a, Run.Mode.OVERWRITE) == N
    work_here()
    a.refresh_from_db()
    assert a.is_terminal and score(a, 1).judge_value == 3 and score(a, 2).override_value == 5
    check(task, runs)

    # The delete of a run: its stored numbers go with it and the board no longer lists it.
    b_id = b.pk
    b.delete()
    assert not RunSummary.objects.filter(run_id=b_id).exists()
    assert not StoredArrays.objects.filter(run_id=b_id).exists()
    check(task, [a])


def expected_reduced(run: Run, reduction: Reduction) -> dict[str, dict[str, np.ndarray]]:
    """From the score rows alone: per subject and mode, each item's value under `reduction`
    (`epochs.reduce` of its epochs; a person's value as `epochs.override_value` puts it)."""
    positions = {
        pk: n
        for n, pk in enumerate(run.dataset.items.order_by("position").values_list("pk", flat=True))
    }
    scales = {info.name: (info.worst, info.best) for info in subject_infos(judge_of(run))}
    out: dict[str, dict[str, np.ndarray]] = {}
    for subject in SUBJECTS:
        worst, best = scales[subject]
        judge = np.full(len(positions), math.nan)
        human = np.full(len(positions), math.nan)
        for score in Score.objects.filter(run=run, subject=subject):
            at = positions[score.item_id]
            if score.status == Score.Status.OK and score.judge_value is not None:
                epochs = score.epoch_values or [score.judge_value]
                judge[at] = human[at] = reduce(epochs, reduction, worst, best)
            if score.override_value is not None:
                human[at] = override_value(score.override_value, reduction, worst, best)
        out[subject] = {"judge": judge, "human": human}
    return out


def check_reduced(task, run: Run) -> None:
    """The majority vote and pass@2 boards' cells and per-item values equal a recomputation;
    a fresh process reads the stored arrays, never the scores' epoch values."""
    for fresh in (False, True):
        if fresh:
            memo.clear_all()
        for reduction in (Reduction("majority"), Reduction("pass", 2)):
            with CaptureQueriesContext(connection) as queries:
                board = boards.build(task, boards.Params(scoring="answered", epochs=reduction))
            if fresh:
                assert not [q for q in queries if "epoch_values" in q["sql"]], reduction
            [row] = [row for row in board.rows if row.run.pk == run.pk]
            for subject, want in expected_reduced(run, reduction).items():
                for mode in ("judge", "human"):
                    got = items.item_values(run, mode, last_event_id(), reduction)[subject]
                    np.testing.assert_array_equal(got, want[mode], err_msg=f"{reduction} {mode}")
                    values = want[mode][~np.isnan(want[mode])]
                    cell = row.cells[mode][subject]
                    assert cell.answered == len(values), (reduction, subject, mode, fresh)
                    assert cell.answered_mean == pytest.approx(
                        values.mean() if len(values) else None
                    ), (reduction, subject, mode, fresh)


def test_majority_vote_and_pass_at_k_stay_exact_through_every_path(llm_server):
    """As above for a model with 3 epochs (#33.2: the board reduces them from arrays its judge
    run stored when it ended): the judge, an override, a revert, consensus, an adjudication, a
    re-judge and the delete of the run."""
    from apps.datasets.models import Task
    from apps.runs.models import Endpoint

    task = Task.objects.create(slug="epochs", name="Epochs")
    endpoint = Endpoint.objects.create(
        name="judge-llm",
        base_url=llm_server.base_url,
        model="test-model",
        concurrency_limit=4,
        timeout_seconds=5,
        max_retries=1,
        api_key_secret="sk-test-judge-0000",
    )
    people = {name: make_user("reviewer", name) for name in ("alice", "bob")}
    admin = make_user("admin", "root")
    ReviewPolicy.objects.create(task=task, reviews_per_item=2, thresholds={"accuracy": 1})
    dataset = make_answers_dataset(task, N)
    judge = make_judge(task, n_iter=1, aggregation=Judge.Aggregation.MEAN)
    # Epochs 1 and 2 answer "number i", epoch 3 "take i": item 1's epochs disagree (2, 2, 4 on
    # accuracy: majority 2), item 3's all pass (5), item 2's first two epochs fail.
    llm_server.configure(
        default_reply=rubric_reply(4, 3),
        script=[
            {"match": about(1), "reply": rubric_reply(2, 5)},
            {"match": about(2), "reply": "no JSON here"},
            {"match": about(3), "reply": rubric_reply(5, 5)},
            {"match": "take 3\n</response>", "reply": rubric_reply(5, 1)},
        ],
    )
    answers = make_generation_run(
        dataset, {i: [f"answer number {i}"] * 2 + [f"answer take {i}"] for i in range(N)}
    )
    with transaction.atomic():
        run = create_judge_run(judge, endpoint=endpoint, source_run=answers)
    work_here()
    run.refresh_from_db()
    assert run.is_terminal and run.judged_epochs == 3
    stored = StoredArrays.objects.get(run=run)  # by the finishing job
    assert stored.state.endswith(items.LAYOUT)
    check_reduced(task, run)

    def score(position: int, subject: str = "accuracy") -> Score:
        return Score.objects.get(run=run, item__position=position, subject=subject)

    assert score(1).epoch_values == [2, 2, 4] and score(3, "clarity").epoch_values == [5, 5, 1]
    score(0).override(1, admin, "wrong")
    score(2).override(5, admin, "the judge failed; it is right")
    check_reduced(task, run)
    score(0).revert(admin, "on second thought")
    check_reduced(task, run)
    for name, value in (("alice", 2), ("bob", 3)):
        Review.submit(score(3), people[name], value, "", 5)
    assert score(3).override_value == 2.5
    for name, value in (("alice", 1), ("bob", 5)):
        Review.submit(score(4), people[name], value, "", 5)
    Adjudication.objects.get(score=score(4)).decide(5, admin, "bob is right")
    check_reduced(task, run)

    # A re-judge: every epoch now agrees on item 1 and the failed epochs answer.
    llm_server.configure(default_reply=rubric_reply(3, 2), script=[])
    with transaction.atomic():
        assert launch(run, Run.Mode.OVERWRITE) == N
    work_here()
    run.refresh_from_db()
    assert run.is_terminal and score(1).epoch_values == [3, 3, 3]
    check_reduced(task, run)

    run_id = run.pk
    run.delete()
    assert not StoredArrays.objects.filter(run_id=run_id).exists()
    memo.clear_all()
    assert boards.build(task, boards.Params(epochs=Reduction("majority"))).rows == []


@pytest.mark.django_db
@pytest.mark.parametrize("margin", [0, 30])
def test_changes_counted_into_the_stored_summary_one_by_one(board_data, margin, monkeypatch):
    """Overrides, confirmations, reverts, bulk confirms and people's settled values are
    counted into the stored summary by their events, without computing it again; with the
    watermark at the newest event (margin 0) each change is looked at once, with the default
    margin again on every read: either way the summary equals one computed from scratch."""
    from datetime import timedelta

    monkeypatch.setattr(summaries, "MARGIN", timedelta(seconds=margin))
    task, runs = board_data["task"], [board_data["run_a"], board_data["run_b"]]
    admin = make_user("admin", "root")
    boards.build(task, boards.Params())
    computed = {r.run_id: r.computed_at for r in RunSummary.objects.all()}

    def score(run: Run, key: str, subject: str = "accuracy") -> Score:
        return Score.objects.get(run=run, item__key=key, subject=subject)

    a, b = runs
    score(a, "k0").override(1, admin, "wrong")
    score(a, "k3").override(4, admin, "the judge failed")  # a failed score gets a value
    stored_summaries_equal_recomputed(runs)
    score(a, "k0").override(2, admin, "nearer")  # an override overridden
    score(a, "k0", "clarity").override(1, admin, "unclear")  # the same item, another subject
    score(b, "k1").confirm(admin)
    stored_summaries_equal_recomputed(runs)
    score(a, "k0").revert(admin, "was right")
    score(a, "k3").revert(admin, "leave it failed")
    Score.objects.filter(run=b).bulk_confirm(admin)
    score(b, "k2").settle_by_people(5, "consensus", None, "agreed")
    score(b, "k2").settle_by_people(2, "adjudicate", admin, "decided")  # the judge's value
    check(task, runs)
    # Counted in, never computed again.
    assert {r.run_id: r.computed_at for r in RunSummary.objects.all()} == computed
