"""A judge's bias report (#31.3): the verbosity regression pinned to statsmodels' OLS with
HC1 errors; self-preference, agreement by tag and position bias on rows made here, checked by
hand; the pairwise board's style-controlled fit beside the plain one; the page for a viewer,
its CSV (cells neutralised), and the link from the judge's page."""

import csv
import io

import numpy as np
import pytest
import statsmodels.api as sm
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from apps.judges.models import Comparison, Judge, JudgeRun, PairwiseSetup, Score
from apps.judges.pairwise import normalise
from apps.leaderboards import bias, pairwise_board
from apps.leaderboards.stats import Z95
from apps.review.models import Vote
from apps.runs.forms import EndpointForm
from apps.runs.models import Endpoint, Run
from tests import factories as f
from tests.base import make_user


def viewer() -> Client:
    client = Client()
    client.force_login(make_user("viewer"))
    return client


def test_ols_hc1_matches_statsmodels() -> None:
    rng = np.random.default_rng(3)
    n = 200
    length = rng.uniform(3, 9, n)
    human = rng.integers(1, 6, n).astype(float)
    y = 0.3 * length + 0.8 * human + rng.normal(0, 0.2 + 0.1 * length, n)  # spread grows
    x = np.column_stack([np.ones(n), length, human])
    coef, se = bias.ols_hc1(y, x)
    reference = sm.OLS(y, x).fit(cov_type="HC1")
    assert np.abs(coef - reference.params).max() < 1e-9
    assert np.abs(se - reference.bse).max() < 1e-9


@pytest.fixture
def scored(db):
    """A rubric judge (family openai) over two models: "gpt" (openai, long answers) and
    "llama" (short ones). The judge gives long answers one point more than people do."""
    task = f.make_task("bias")
    rows = [
        {"key": f"k{i}", "fields": {"question": f"q{i}"}, "tags": tags}
        for i, tags in enumerate(
            [["math"], ["math"], ["math", "hard"], [], ["prose", "=x"], ["prose"]]
        )
    ]
    dataset = f.make_dataset(task, rows, columns=["question"], name="set")
    openai = Endpoint.objects.create(name="gpt", model="gpt-x", family="openai")
    meta = Endpoint.objects.create(name="llama", model="llama-x", family="llama")
    judge = f.make_judge(task, name="grader")
    gpt = f.make_generation_run(
        dataset, {i: "word " * (40 + 10 * i) for i in range(6)}, label="gpt"
    )
    llama = f.make_generation_run(dataset, {i: "word " * (5 + i) for i in range(6)}, label="llama")
    Run.objects.filter(pk=gpt.pk).update(endpoint=openai)
    Run.objects.filter(pk=llama.pk).update(endpoint=meta)
    runs = {}
    for source in (gpt, llama):
        run = f.make_judge_run(dataset, judge, source_run=source)
        Run.objects.filter(pk=run.pk).update(endpoint=openai)  # the judge is an openai model
        runs[source.label] = run
    # judge values; people: gpt's reviewed 4 of 6 (one point lower), llama's 4 of 6 (as judged,
    # one overridden up).
    judged = {"gpt": [5, 5, 4, 5, 5, 4], "llama": [3, 2, 3, 2, 3, 3]}
    human = {"gpt": [4, 4, 3, None, 4, None], "llama": [3, 3, 3, None, 3, None]}
    for label, run in runs.items():
        f.add_scores(
            run,
            {f"k{i}": {"accuracy": v, "clarity": 3} for i, v in enumerate(judged[label])},
        )
        for i, value in enumerate(human[label]):
            if value is None:
                continue
            score = f.score(run, f"k{i}", "accuracy")
            if value == score.judge_value:
                Score.objects.filter(pk=score.pk).update(confirmed_at=timezone.now())
            else:
                Score.objects.filter(pk=score.pk).update(override_value=value, final_value=value)
    return judge, runs, judged, human


def test_self_preference_and_agreement_by_tag_by_hand(scored) -> None:
    judge, _, _, _ = scored
    found = bias.report(judge)
    assert found.families_known and found.scored == 24
    accuracy = next(e for e in found.self_preference if e.subject == "accuracy")
    assert accuracy.families == ["openai"]
    # judge − human on reviewed items: gpt (own family) [1, 1, 1, 1], llama [0, −1, 0, 0].
    excess = accuracy.excess
    assert excess is not None and (excess.own_n, excess.other_n) == (4, 4)
    assert excess.own == 1.0 and excess.other == -0.25 and excess.difference == 1.25
    se = np.sqrt(0 / 4 + np.var([0, -1, 0, 0], ddof=1) / 4)
    assert (excess.low, excess.high) == pytest.approx((1.25 - Z95 * se, 1.25 + Z95 * se))
    assert excess.shown  # the interval is above 0: the judge overrates its own family
    values = accuracy.values
    assert values is not None and values.difference == pytest.approx(28 / 6 - 16 / 6)
    # Agreement by tag on the 8 reviewed accuracy scores: k0, k1 (math), k2 (math, hard),
    # k4 (prose) for each model; gpt's all disagree (one step off), llama's agree but k1.
    tags = {(t.subject, t.tag): t for t in found.tags}
    assert (tags["accuracy", "math"].n, tags["accuracy", "math"].agreeing) == (6, 2)
    assert (tags["accuracy", "hard"].n, tags["accuracy", "hard"].agreeing) == (2, 1)
    assert (tags["accuracy", "prose"].n, tags["accuracy", "prose"].agreeing) == (2, 1)
    assert tags["accuracy", "math"].mad == pytest.approx(4 / 6)
    tagged = [t.tag for t in found.tags if t.subject == "accuracy"]
    assert tagged == ["=x", "hard", "math", "prose"]
    assert not any(t.subject == "clarity" for t in found.tags)  # nobody reviewed clarity


def test_verbosity_is_the_length_slope_pinned_to_statsmodels(scored) -> None:
    judge, _, judged, human = scored
    found = bias.report(judge)
    slopes = {(s.subject, s.sample): s for s in found.verbosity}
    words = {"gpt": [40 + 10 * i for i in range(6)], "llama": [5 + i for i in range(6)]}
    length = np.log2(np.array(words["gpt"] + words["llama"], dtype=float) + 1)
    values = np.array(judged["gpt"] + judged["llama"], dtype=float)
    reference = sm.OLS(values, sm.add_constant(length)).fit(cov_type="HC1")
    every = slopes["accuracy", "judged"]
    assert every.n == 12 and every.slope == pytest.approx(reference.params[1], abs=1e-9)
    low, high = reference.conf_int()[1]
    assert (every.low, every.high) == pytest.approx((low, high), abs=1e-6)
    people = human["gpt"] + human["llama"]
    kept = [i for i, v in enumerate(people) if v is not None]
    x = np.column_stack([np.ones(len(kept)), length[kept], [people[i] for i in kept]])
    held = sm.OLS(values[kept], x).fit(cov_type="HC1")
    reviewed = slopes["accuracy", "reviewed"]
    assert reviewed.n == 8 and reviewed.slope == pytest.approx(held.params[1], abs=1e-9)
    assert reviewed.slope > 0 and reviewed.shown  # length buys points people did not give
    # clarity is 3 throughout: no slope to speak of, and nobody reviewed it.
    assert slopes["clarity", "judged"].slope == pytest.approx(0, abs=1e-12)
    assert ("clarity", "reviewed") not in slopes


def test_the_bias_page_and_its_csv(scored) -> None:
    judge, _, _, _ = scored
    client = viewer()
    page = client.get(reverse("judges:detail", args=[judge.pk])).content.decode()
    url = reverse("leaderboards:judge-bias", args=[judge.pk])
    assert f'href="{url}" id="bias-link"' in page
    html = client.get(url).content.decode()
    for section in ("bias-verbosity", "bias-self", "bias-tags", "verbosity", "tag-agreement"):
        assert f'id="{section}"' in html
    assert 'data-subject="accuracy" data-compared="excess"' in html
    assert 'id="bias-position"' not in html  # not a pairwise judge
    response = client.get(url, {"format": "csv"})
    assert response["Content-Type"].startswith("text/csv")
    text = b"".join(response.streaming_content).decode().lstrip("\ufeff")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows and set(rows[0]) == set(bias.HEADER)
    sections = {row["section"] for row in rows}
    assert sections == {"verbosity", "self-preference", "agreement by tag"}
    excess = next(r for r in rows if r["group"] == "judge - human")
    assert float(excess["estimate"]) == pytest.approx(1.25)
    assert 'filename="bias-grader-v1-bias.csv"' in response["Content-Disposition"]
    assert any(row["group"] == "'=x" for row in rows)  # a tag is data: never a formula
    assert "'=x" not in html and "=x" in html


def test_without_families_the_page_says_how_to_declare_them(scored) -> None:
    judge, _, _, _ = scored
    Endpoint.objects.update(family="")
    found = bias.report(judge)
    assert not found.families_known and not found.self_preference
    html = viewer().get(reverse("leaderboards:judge-bias", args=[judge.pk])).content.decode()
    assert 'id="no-families"' in html and "declare a model family" in html


@pytest.fixture
def duel(db):
    """A pairwise judge (family openai) over "gpt" (openai, long Markdown answers) and
    "llama" (llama, one line): it picks the first shown answer on 6 of 8 items (a flip, a
    tie on the board) and gpt in both orders on the other 2; people voted on two items."""
    task = f.make_task("duel")
    dataset = f.make_qa_dataset(task, 8)
    openai = Endpoint.objects.create(name="gpt", model="gpt-x", family="openai")
    meta = Endpoint.objects.create(name="llama", model="llama-x", family="llama")
    long = "# Answer\n\n- **first** point\n- second point\n\n"
    gpt = f.make_generation_run(
        dataset, {i: long + "more words " * (10 + 5 * i) for i in range(8)}, label="gpt"
    )
    llama = f.make_generation_run(dataset, {i: f"short {i}" for i in range(8)}, label="llama")
    Run.objects.filter(pk=gpt.pk).update(endpoint=openai)
    Run.objects.filter(pk=llama.pk).update(endpoint=meta)
    judge = f.make_judge(task, Judge.Kind.PAIRWISE, name="which", subjects=[])
    run = JudgeRun.create_with(
        judge,
        task=task,
        kind=Run.Kind.PAIRWISE,
        dataset=dataset,
        endpoint=openai,
        status=Run.Status.COMPLETED,
        launch=1,
    )
    PairwiseSetup.objects.create(run=run).responses.set([gpt, llama])
    items = list(dataset.items.order_by("position"))
    for item in items:
        shown = ("A", "A") if item.position < 6 else ("A", "B")  # a = gpt, shown first in order 0
        for order, said in enumerate(shown):
            Comparison.objects.create(
                run=run,
                item=item,
                a_run=gpt,
                b_run=llama,
                order=order,
                status="ok",
                shown=said,
                verdict=normalise(said, order),
                launch=1,
            )
    person = make_user("reviewer", "rita")
    for item, choice in ((items[6], "b"), (items[7], "tie")):
        Vote.objects.create(
            run=run, item=item, a_run=gpt, b_run=llama, user=person, a_on_left=True, choice=choice
        )
    return judge, run


def test_position_bias_and_pairwise_self_preference_by_hand(duel) -> None:
    judge, _ = duel
    found = bias.report(judge)
    p = found.position
    assert p is not None and (p.decided, p.first) == (16, 14)  # 6 × 2 flips + items 6, 7
    assert (p.pairs, p.consistent) == (8, 2)
    assert p.first_ci is not None and p.first_ci.low > 0.5
    assert p.verdict == "prefers the answer shown first"
    (own,) = found.pairwise_self
    # The judge: gpt won 2 of 8 and tied 6 → (2 + 3) / 8; people: lost one, tied one → 1/4.
    assert (own.family, own.judge_n, own.judge_share) == ("openai", 8, 5 / 8)
    assert (own.people_n, own.people_share) == (2, 0.25)
    assert found.pairwise is not None and found.pairwise.style is not None
    html = viewer().get(reverse("leaderboards:judge-bias", args=[judge.pk])).content.decode()
    assert 'id="position-verdict"' in html and "prefers the answer shown first" in html
    assert 'id="bias-style-coefficients"' in html and 'data-family="openai"' in html


def test_the_pairwise_board_shows_the_style_controlled_fit_beside_the_plain_one(duel) -> None:
    judge, _ = duel
    board = pairwise_board.build(judge.task, judge.pk)
    assert board.ratings is not None and board.style is not None
    plain = {r.model: r.rating for r in board.ratings.ratings}
    styled = {r.model: r for r in board.style.ratings}
    assert set(styled) == {"gpt", "llama"}
    assert styled["gpt"].plain == pytest.approx(plain["gpt"])
    # gpt's answers grow item by item; its Markdown (a header, two list items, a bold span
    # against none) is the same in every battle, so standardised it is constant: left out.
    assert board.style.constant == ["headers", "lists", "bold"]
    assert [c.feature for c in board.style.coefficients] == ["length"]
    assert styled["gpt"].moved == pytest.approx(styled["gpt"].rating - plain["gpt"])
    client = viewer()
    html = client.get(reverse("leaderboards:pairwise", args=[judge.task.slug])).content.decode()
    assert 'id="style-ratings"' in html and 'id="pairwise-ratings"' in html
    assert "headers, lists, bold never differed here" in html
    # The exports carry the style-controlled fit beside the plain one (#31.1).
    export = reverse("leaderboards:pairwise", args=[judge.task.slug])
    text = client.get(export, {"format": "csv"}).content.decode().lstrip("\ufeff")
    rows = {row["model"]: row for row in csv.DictReader(io.StringIO(text))}
    assert float(rows["gpt"]["style_rating"]) == round(styled["gpt"].rating, 1)
    assert float(rows["llama"]["style_ci_low"]) == round(styled["llama"].low, 1)


@pytest.mark.django_db
def test_the_endpoint_form_keeps_one_spelling_of_a_family() -> None:
    data = {"name": "gpt", "model": "gpt-x", "family": "  Open AI ", "api_key_env": "KEY"}
    data |= {"concurrency_limit": 8, "timeout_seconds": 60, "max_retries": 4}
    form = EndpointForm(data)
    assert form.is_valid(), form.errors
    assert form.save().family == "open ai"


def test_a_kept_report_follows_overrides_and_families(scored) -> None:
    """The report is memoised per process: an override (it leaves a score event) and an
    endpoint's family changed since give what a fresh computation gives."""
    from apps.leaderboards import memo

    judge, runs, _, _ = scored
    first = bias.report(judge)
    assert bias.report(judge) is first  # kept
    reviewer = make_user("reviewer", "second-look")
    score = Score.objects.filter(run=runs["gpt"], override_value__isnull=True).first()
    score.override(1 if score.judge_value != 1 else 2, reviewer, "no")
    changed = bias.report(judge)
    assert changed is not first
    memo.clear_all()
    assert repr(bias.report(judge)) == repr(changed)
    Endpoint.objects.update(family="")
    assert not bias.report(judge).families_known
