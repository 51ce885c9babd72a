"""A judge version's bias report (#31.3): does it favour a position, length, its own model
family, or agree with people less on some tags?

- Position (pairwise judges): the share of decided verdicts that went to the answer shown
  first, with a 95 % interval clustered by (item, pair) — the two orders of one pair are not
  independent — and the position consistency (the same verdict in both orders), with its
  Clopper–Pearson interval. 50 % first is no position bias.
- Verbosity: the judge's value against the answer's length, as log₂(words + 1), so the slope
  is what doubling an answer's length is worth on the subject's scale; over every judged item
  (which mixes length and quality: longer answers may be better), and over the reviewed items
  with the human value as a covariate (what length is worth beyond what people saw: the bias).
  Least squares with heteroskedasticity-robust (HC1) standard errors, pinned to statsmodels.
  A pairwise judge's verbosity is its length coefficient on the style-controlled board, beside
  people's on their votes.
- Self-preference (when endpoints declare a model family): the judge's values for models of
  its own family against the others', and on reviewed items the judge's excess over people
  (judge − human) for its own family against the others': a positive difference with an
  interval above 0 is a judge that overrates its own kind. Pairwise judges: the own family's
  share of battles against others, by the judge and by people.
- Agreement by tag: on the reviewed items, the share where the judge and people fall on the
  same step of the scale (`stats.same_step`), per item tag, with Clopper–Pearson intervals.

Reviewed = a person confirmed or overrode the score (its final value is the human value).
"""

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from apps.datasets.models import Item
from apps.datasets.values import as_text
from apps.judges.models import Comparison, Judge, Score, runs_of
from apps.judges.pairwise import outcomes
from apps.leaderboards.memo import Memo, review_state, run_state
from apps.leaderboards.pairwise_board import OUTCOME, PairwiseBoard
from apps.leaderboards.pairwise_board import build as pairwise_build
from apps.leaderboards.stats import (
    Z95,
    Interval,
    clopper_pearson,
    clustered_ci,
    mean_ci,
    same_step,
    scale_bounds,
)
from apps.review.models import Vote
from apps.runs.models import Response, Run

NO_TAG = "(no tag)"


# ---- least squares with robust errors -----------------------------------------------------------
def ols_hc1(y: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Coefficients and HC1 standard errors of y on the columns of x (MacKinnon & White 1985:
    (XᵀX)⁻¹ Xᵀ diag(e²) X (XᵀX)⁻¹ · n / (n − k)), which stay valid when the spread of the
    judge's values changes with length."""
    n, k = x.shape
    inverse = np.linalg.inv(x.T @ x)
    coef = inverse @ x.T @ y
    residual = y - x @ coef
    meat = (x * residual[:, None] ** 2).T @ x
    cov = inverse @ meat @ inverse * n / (n - k)
    return coef, np.sqrt(np.clip(np.diag(cov), 0, None))


def log_length(texts: list[str]) -> np.ndarray:
    return np.log2(np.array([len(text.split()) for text in texts], dtype=float) + 1)


# ---- the report's parts -------------------------------------------------------------------------
@dataclass(frozen=True)
class Position:
    decided: int  # verdicts (either order) that were not a tie
    first: int  # of those, for the answer shown first
    first_ci: Interval | None
    pairs: int  # (item, pair) judged in both orders
    consistent: int
    consistency_ci: tuple[float, float] | None

    @property
    def first_share(self) -> float | None:
        return self.first / self.decided if self.decided else None

    @property
    def consistency(self) -> float | None:
        return self.consistent / self.pairs if self.pairs else None

    @property
    def verdict(self) -> str:
        ci = self.first_ci
        if ci is None:
            return "too few verdicts to tell"
        if ci.low > 0.5:
            return "prefers the answer shown first"
        if ci.high < 0.5:
            return "prefers the answer shown second"
        return "no position bias shown"


@dataclass(frozen=True)
class Slope:
    """What doubling an answer's length is worth on the subject's scale."""

    subject: str
    sample: str  # "judged" (every judged item) or "reviewed" (human value held fixed)
    n: int
    slope: float
    low: float
    high: float

    @property
    def label(self) -> str:
        if self.sample == "reviewed":
            return "reviewed items, the human value held fixed"
        return "every judged item (length and quality mixed)"

    @property
    def shown(self) -> bool:
        return self.low > 0 or self.high < 0


@dataclass(frozen=True)
class Difference:
    """A mean for the judge's own family, the others', and own − others with a 95 % interval
    (normal, unequal variances)."""

    own_n: int
    own: float
    other_n: int
    other: float
    low: float
    high: float

    @property
    def difference(self) -> float:
        return self.own - self.other

    @property
    def shown(self) -> bool:
        return self.low > 0 or self.high < 0


def difference(own: np.ndarray, other: np.ndarray) -> Difference | None:
    if len(own) < 2 or len(other) < 2:
        return None
    d = float(own.mean() - other.mean())
    se = math.sqrt(float(own.var(ddof=1)) / len(own) + float(other.var(ddof=1)) / len(other))
    return Difference(
        len(own), float(own.mean()), len(other), float(other.mean()), d - Z95 * se, d + Z95 * se
    )


@dataclass(frozen=True)
class SelfPreference:
    subject: str
    families: list[str]  # the judge's family (of the runs' judging endpoints)
    values: Difference | None  # the judge's values: own family − others
    excess: Difference | None  # judge − human on reviewed items: own family − others


@dataclass(frozen=True)
class PairwiseSelf:
    """Battles between a model of the judge's family and one of another family."""

    family: str
    judge_n: int
    judge_share: float  # the own family's share of them (a tie half), by the judge
    judge_ci: Interval | None
    people_n: int = 0
    people_share: float | None = None  # and by people's votes on the same pairs
    people_ci: Interval | None = None


@dataclass(frozen=True)
class TagAgreement:
    subject: str
    tag: str
    n: int
    agreeing: int
    ci: tuple[float, float]
    mad: float  # mean absolute difference, judge − human

    @property
    def agreement(self) -> float:
        return self.agreeing / self.n


@dataclass
class BiasReport:
    judge: Judge
    position: Position | None = None
    verbosity: list[Slope] = field(default_factory=list)
    self_preference: list[SelfPreference] = field(default_factory=list)
    pairwise_self: list[PairwiseSelf] = field(default_factory=list)
    families_known: bool = False  # some run's judging endpoint and some model declare one
    tags: list[TagAgreement] = field(default_factory=list)
    pairwise: PairwiseBoard | None = None  # a pairwise judge's board (its style coefficients)
    people: PairwiseBoard | None = None  # the same pairs from people's votes
    scored: int = 0  # judged scores the report read

    @property
    def empty(self) -> bool:
        return not (self.position or self.verbosity or self.self_preference or self.tags) and not (
            self.pairwise and self.pairwise.style
        )


# ---- building it ---------------------------------------------------------------------------------
_reports: Memo[BiasReport] = Memo("bias reports", size=8)


def report(judge: Judge) -> BiasReport:
    found = BiasReport(judge)
    if judge.kind == Judge.Kind.PAIRWISE:
        _pairwise(found)
        return found
    runs = list(
        runs_of(judge)
        .filter(kind=Run.Kind.JUDGE)
        .select_related("endpoint", "source_run__endpoint", "dataset")
    )
    # A judge's scores over every run it judged (10M at scale) take a minute to read: the
    # report is kept per process by what it depends on, the runs' results, the answers they
    # judged, the endpoints' declared families and the overrides and confirmations.
    key = (
        judge.pk,
        tuple(
            (
                run_state(run),
                run_state(run.source_run) if run.source_run else None,
                _family(run),
                _family(run.source_run),
            )
            for run in runs
        ),
        review_state(),
    )
    return _reports.get_or_compute(key, lambda: _scores(found, runs))


def _family(run: Run | None) -> str:
    endpoint = run.endpoint if run is not None else None
    return endpoint.family if endpoint is not None else ""


def _scores(found: BiasReport, runs: list[Run]) -> BiasReport:
    judge = found.judge
    # (run, item, subject, judge value, human value or None)
    rows: list[tuple[Run, int, str, float, float | None]] = []
    for run in runs:
        for item, subject, value, final, overridden, confirmed in (
            Score.objects.filter(run=run, judge_value__isnull=False)
            .values_list(
                "item_id", "subject", "judge_value", "final_value", "override_value", "confirmed_at"
            )
            .iterator(chunk_size=5000)
        ):
            reviewed = overridden is not None or confirmed is not None
            human = float(final) if reviewed and final is not None else None
            rows.append((run, item, subject, float(value or 0.0), human))
    found.scored = len(rows)
    texts = {(run.pk, item): text for run in runs for item, text in _texts(run)}
    found.families_known = any(_family(run) for run in runs) and any(
        _family(run.source_run) for run in runs
    )
    for name in judge.subject_names:
        mine_rows = [row for row in rows if row[2] == name and (row[0].pk, row[1]) in texts]
        if not mine_rows:
            continue
        found.verbosity += _verbosity(name, mine_rows, texts)
        if found.families_known:
            found.self_preference.append(_self_preference(name, mine_rows))
        low, high = scale_bounds(judge.subject(name) or {})
        found.tags += _tag_agreement(name, [r for r in rows if r[2] == name], low, high)
    return found


def _texts(run: Run) -> Iterator[tuple[int, str]]:
    """(item id, the answer the judge scored) of a judge run: its generation run's first
    epoch, or the dataset's response column, as the review page shows it."""
    if run.source_run_id:
        yield from (
            Response.objects.filter(run_id=run.source_run_id, epoch=0)
            .values_list("item_id", "text")
            .iterator(chunk_size=5000)
        )
    elif run.source_column:
        for pk, fields in (
            Item.objects.filter(dataset_id=run.dataset_id)
            .values_list("pk", "fields")
            .iterator(chunk_size=5000)
        ):
            yield pk, as_text((fields or {}).get(run.source_column))


def _verbosity(
    subject: str, rows: list[tuple[Run, int, str, float, float | None]], texts: dict
) -> list[Slope]:
    found = []
    length = log_length([texts[(run.pk, item)] for run, item, *_ in rows])
    values = np.array([row[3] for row in rows])
    reviewed = np.array([row[4] is not None for row in rows])
    human = np.array([row[4] if row[4] is not None else np.nan for row in rows])
    samples: list[tuple[str, np.ndarray, np.ndarray]] = [
        ("judged", values, np.column_stack([np.ones(len(rows)), length])),
        (
            "reviewed",
            values[reviewed],
            np.column_stack([np.ones(reviewed.sum()), length[reviewed], human[reviewed]]),
        ),
    ]
    for sample, y, x in samples:
        if len(y) <= x.shape[1] + 1 or np.ptp(x[:, 1]) == 0:
            continue
        if x.shape[1] == 3 and np.ptp(x[:, 2]) == 0:
            x = x[:, :2]  # people gave one value throughout: nothing to hold fixed
        if np.linalg.matrix_rank(x) < x.shape[1]:
            continue  # length follows the human value exactly: not told apart
        coef, se = ols_hc1(y, x)
        found.append(
            Slope(
                subject,
                sample,
                len(y),
                float(coef[1]),
                float(coef[1] - Z95 * se[1]),
                float(coef[1] + Z95 * se[1]),
            )
        )
    return found


def _self_preference(
    subject: str, rows: list[tuple[Run, int, str, float, float | None]]
) -> SelfPreference:
    own: list[float] = []
    other: list[float] = []
    own_excess: list[float] = []
    other_excess: list[float] = []
    families = sorted({_family(run) for run, *_ in rows if _family(run)})
    for run, _, _, value, human in rows:
        judge_family, model_family = _family(run), _family(run.source_run)
        if not judge_family or not model_family:
            continue
        same = judge_family == model_family
        (own if same else other).append(value)
        if human is not None:
            (own_excess if same else other_excess).append(value - human)
    return SelfPreference(
        subject,
        families,
        difference(np.array(own), np.array(other)),
        difference(np.array(own_excess), np.array(other_excess)),
    )


def _tag_agreement(
    subject: str, rows: list[tuple[Run, int, str, float, float | None]], low: float, high: float
) -> list[TagAgreement]:
    compared = [(item, value, human) for _, item, _, value, human in rows if human is not None]
    if not compared:
        return []
    tags = dict(
        Item.objects.filter(pk__in={item for item, _, _ in compared}).values_list("pk", "tags")
    )
    per: dict[str, list[tuple[float, float]]] = {}
    for item, value, human in compared:
        for tag in tags.get(item) or [NO_TAG]:
            per.setdefault(str(tag), []).append((value, human))
    found = []
    for tag, pairs in sorted(per.items(), key=lambda entry: (entry[0] == NO_TAG, entry[0])):
        agreeing = sum(same_step(v, h, low, high) for v, h in pairs)
        mad = float(np.mean([abs(v - h) for v, h in pairs]))
        found.append(
            TagAgreement(
                subject, tag, len(pairs), agreeing, clopper_pearson(agreeing, len(pairs)), mad
            )
        )
    return found


def _pairwise(found: BiasReport) -> None:
    judge = found.judge
    runs = list(runs_of(judge).filter(kind=Run.Kind.PAIRWISE).select_related("endpoint"))
    found.position = _position(runs)
    found.pairwise = pairwise_build(judge.task, judge.pk, "judge")
    if Vote.objects.filter(run__in=runs).exists():
        found.people = pairwise_build(judge.task, judge.pk, "human")
    families = {
        pk: family
        for pk, family in Run.objects.filter(
            pk__in={pk for pk in found.pairwise.labels.values()}
        ).values_list("pk", "endpoint__family")
        if family
    }
    found.families_known = any(_family(run) for run in runs) and bool(families)
    if found.families_known:
        found.pairwise_self = _pairwise_self(runs, families)


def _position(runs: list[Run]) -> Position:
    said = Comparison.objects.filter(run__in=runs, status=Comparison.Status.OK).exclude(shown="tie")
    units: list[str] = []
    first: list[float] = []
    for run_id, item, a, b, shown in said.values_list(
        "run_id", "item_id", "a_run_id", "b_run_id", "shown"
    ).iterator(chunk_size=5000):
        units.append(f"{run_id}:{item}:{a}:{b}")
        first.append(1.0 if shown == "A" else 0.0)
    pairs = consistent = 0
    for run in runs:
        found = outcomes(run)
        pairs += len(found)
        consistent += sum(o.consistent for o in found)
    values = np.array(first)
    return Position(
        len(first),
        int(values.sum()),
        clustered_ci(values, np.array(units)) if len(first) else None,
        pairs,
        consistent,
        clopper_pearson(consistent, pairs) if pairs else None,
    )


def _pairwise_self(runs: list[Run], families: dict[int, str]) -> list[PairwiseSelf]:
    found = []
    judged: dict[str, list[float]] = {}
    units: dict[tuple[int, int, int, int], tuple[str, int]] = {}  # → (family, own side's run)
    for run in runs:
        family = _family(run)
        if not family:
            continue
        for outcome in outcomes(run):
            sides = (families.get(outcome.a), families.get(outcome.b))
            if None in sides or (sides[0] == family) == (sides[1] == family):
                continue  # not one side of the judge's family against another family
            own_is_a = sides[0] == family
            score = OUTCOME[outcome.verdict] if own_is_a else 1 - OUTCOME[outcome.verdict]
            judged.setdefault(family, []).append(score)
            own = outcome.a if own_is_a else outcome.b
            units[(run.pk, outcome.item_id, outcome.a, outcome.b)] = (family, own)
    voted: dict[str, list[float]] = {}
    for run_id, item, a, b, choice in Vote.objects.filter(run__in=runs).values_list(
        "run_id", "item_id", "a_run_id", "b_run_id", "choice"
    ):
        if (unit := units.get((run_id, item, a, b))) is not None:
            family, own = unit
            score = OUTCOME[choice] if own == a else 1 - OUTCOME[choice]
            voted.setdefault(family, []).append(score)
    for family, scores in sorted(judged.items()):
        people = voted.get(family, [])
        found.append(
            PairwiseSelf(
                family,
                len(scores),
                float(np.mean(scores)),
                mean_ci(scores, 0.0, 1.0),
                len(people),
                float(np.mean(people)) if people else None,
                mean_ci(people, 0.0, 1.0) if people else None,
            )
        )
    return found


# ---- the CSV -------------------------------------------------------------------------------------
HEADER = ["section", "subject", "group", "n", "estimate", "ci_low", "ci_high", "note"]


def records(found: BiasReport) -> Iterator[list[Any]]:
    """One row per number on the page (the long format: a spreadsheet pivots it)."""
    if (p := found.position) is not None:
        ci = p.first_ci
        yield [
            "position", "", "first shown wins", p.decided, p.first_share,
            ci.low if ci else None, ci.high if ci else None, p.verdict,
        ]  # fmt: skip
        cci = p.consistency_ci
        yield [
            "position", "", "consistent in both orders", p.pairs, p.consistency,
            cci[0] if cci else None, cci[1] if cci else None, "",
        ]  # fmt: skip
    for board, who in ((found.pairwise, "judge"), (found.people, "people")):
        if board is not None and board.style is not None:
            for c in board.style.coefficients:
                yield [
                    "style", "", f"{c.feature} ({who})", board.style.battles, c.coefficient,
                    c.low, c.high, "log-odds of winning per SD of the style difference",
                ]  # fmt: skip
    for s in found.verbosity:
        yield [
            "verbosity", s.subject, s.sample, s.n, s.slope, s.low, s.high,
            "value per doubling of length",
        ]  # fmt: skip
    for entry in found.self_preference:
        for group, d in (("values", entry.values), ("judge - human", entry.excess)):
            if d is not None:
                yield [
                    "self-preference", entry.subject, group, d.own_n + d.other_n, d.difference,
                    d.low, d.high, f"own family ({', '.join(entry.families)}) - others",
                ]  # fmt: skip
    for ps in found.pairwise_self:
        ci = ps.judge_ci
        yield [
            "self-preference", "", f"{ps.family} share (judge)", ps.judge_n, ps.judge_share,
            ci.low if ci else None, ci.high if ci else None, "",
        ]  # fmt: skip
        if ps.people_share is not None:
            pci = ps.people_ci
            yield [
                "self-preference", "", f"{ps.family} share (people)", ps.people_n,
                ps.people_share, pci.low if pci else None, pci.high if pci else None, "",
            ]  # fmt: skip
    for t in found.tags:
        yield [
            "agreement by tag", t.subject, t.tag, t.n, t.agreement, t.ci[0], t.ci[1],
            f"mean absolute difference {t.mad:.3f}",
        ]  # fmt: skip
