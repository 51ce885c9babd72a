"""Agreement between people who reviewed the same scores (several reviewers per item: the
`Review` rows of apps.review), and how each reviewer did.

A unit is one score (one item, one subject of one judge run); its raters are the people who
reviewed it. Per judge version and subject: Krippendorff's α at the level of the subject's
scale (nominal for right/wrong subjects, ordinal for a small integer range such as 1–5,
interval otherwise), Fleiss' κ for right/wrong subjects, and percent agreement (the share of
agreeing reviewer pairs, apps.leaderboards.reliability); the same per dataset tag and per pair
of reviewers. Beside them, the judge's agreement with people on the same footing: the share
of (judge, review) pairs that agree, the ceiling being the share of (review, review) pairs
that do ("the judge agrees with people as often as people agree with each other").

Per reviewer: items and reviews done, the median seconds per review, and how often their
value is the score's human value once settled (consensus or adjudication) and the judge's.
"""

import itertools
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from apps.datasets.models import Task
from apps.judges.models import Judge
from apps.leaderboards.reliability import fleiss_kappa, krippendorff_alpha, percent_agreement
from apps.review.models import Review
from apps.review.scales import digit_keys, is_two_valued


@dataclass
class Unit:
    judge_value: float | None
    final_value: float | None
    settled: bool  # the final value is people's (consensus, adjudication, override, confirm)
    tags: list[str]
    values: dict[int, float] = field(default_factory=dict)  # reviewer id → value


@dataclass
class SubjectAgreement:
    judge: Judge
    subject: str
    level: str
    units: int = 0  # scores with two reviews or more
    reviews: int = 0
    alpha: float | None = None
    fleiss: float | None = None  # right/wrong subjects only
    percent: float | None = None  # reviewer pairs that agree
    judge_percent: float | None = None  # (judge, review) pairs that agree
    judge_pairs: int = 0
    tags: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class PairAgreement:
    judge: Judge
    subject: str
    a: str
    b: str
    n: int
    percent: float | None
    alpha: float | None


@dataclass
class ReviewerStats:
    username: str
    items: int
    reviews: int
    median_seconds: float | None
    with_people: float | None  # share of settled scores where the review is the human value
    settled: int
    with_judge: float | None  # share of reviews equal to the judge's value
    judged: int
    # On a range the consensus is a mean no one may have typed: the mean distance says more.
    settled_distance: float | None = None  # mean |review − human value| on settled scores
    judge_distance: float | None = None  # mean |review − judge value|


@dataclass
class PeopleAgreement:
    subjects: list[SubjectAgreement]
    pairs: list[PairAgreement]
    reviewers: list[ReviewerStats]

    @property
    def empty(self) -> bool:
        return not self.subjects


def level_of(judge: Judge, subject: str) -> str:
    spec = judge.subject(subject) or {}
    if is_two_valued(judge):
        return "nominal"
    return "ordinal" if digit_keys(judge, spec).scale == "digits" else "interval"


def _matrix(units: list[Unit], raters: list[int]) -> np.ndarray:
    return np.array(
        [[unit.values.get(r, np.nan) for r in raters] for unit in units], dtype=float
    ).reshape(len(units), len(raters))


def _stats(units: list[Unit], level: str) -> tuple[float | None, float | None, float | None]:
    raters = sorted({r for unit in units for r in unit.values})
    matrix = _matrix(units, raters)
    fleiss = fleiss_kappa(matrix) if level == "nominal" else None
    return krippendorff_alpha(matrix, level), fleiss, percent_agreement(matrix)


def people_agreement(task: Task, run_id: int | None = None) -> PeopleAgreement:
    reviews = Review.objects.filter(score__run__task=task)
    if run_id is not None:
        reviews = reviews.filter(score__run_id=run_id)
    rows = reviews.values_list(
        "score_id",
        "score__run__judged_with__judge_id",
        "score__subject",
        "score__item_id",
        "score__item__tags_text",
        "score__judge_value",
        "score__final_value",
        "score__override_value",
        "score__confirmed_at",
        "user_id",
        "user__username",
        "value",
        "seconds",
    )
    judges = {j.pk: j for j in Judge.objects.filter(judge_runs__run__task=task).distinct()}
    units: dict[tuple[int, str], dict[int, Unit]] = defaultdict(dict)
    names: dict[int, str] = {}
    per_reviewer: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    for row in rows.iterator(chunk_size=5000):
        score, judge_id, subject, item, tags, judged, final, override, confirmed, user = row[:10]
        username, value, seconds = row[10:]
        settled = override is not None or confirmed is not None
        unit = units[(judge_id, subject)].setdefault(
            score,
            Unit(judged, final, settled, [t for t in (tags or "").split("|") if t]),
        )
        unit.values[user] = value
        names[user] = username
        per_reviewer[user].append((item, value, seconds, judged, final, settled))
    subjects: list[SubjectAgreement] = []
    pairs: list[PairAgreement] = []
    for (judge_pk, subject), found in sorted(
        units.items(), key=lambda kv: (judges[kv[0][0]].name, -judges[kv[0][0]].version, kv[0][1])
    ):
        judge = judges[judge_pk]
        entry = _subject(judge, subject, list(found.values()))
        subjects.append(entry)
        pairs += _pairs(judge, subject, entry.level, list(found.values()), names)
    reviewers = [_reviewer(names[user], done) for user, done in per_reviewer.items()]
    reviewers.sort(key=lambda r: r.username)
    return PeopleAgreement(subjects, pairs, reviewers)


def _subject(judge: Judge, subject: str, units: list[Unit]) -> SubjectAgreement:
    level = level_of(judge, subject)
    entry = SubjectAgreement(judge, subject, level)
    entry.reviews = sum(len(u.values) for u in units)
    paired = [u for u in units if len(u.values) >= 2]
    entry.units = len(paired)
    if paired:
        entry.alpha, entry.fleiss, entry.percent = _stats(paired, level)
    judge_pairs = [
        (u.judge_value, v) for u in units if u.judge_value is not None for v in u.values.values()
    ]
    entry.judge_pairs = len(judge_pairs)
    if judge_pairs:
        entry.judge_percent = sum(j == v for j, v in judge_pairs) / len(judge_pairs)
    for tag in sorted({t for u in paired for t in u.tags}):
        tagged = [u for u in paired if tag in u.tags]
        alpha, fleiss, percent = _stats(tagged, level)
        entry.tags.append(
            {"tag": tag, "units": len(tagged), "alpha": alpha, "fleiss": fleiss, "percent": percent}
        )
    return entry


def _pairs(
    judge: Judge, subject: str, level: str, units: list[Unit], names: dict[int, str]
) -> list[PairAgreement]:
    raters = sorted({r for u in units for r in u.values}, key=lambda r: names[r])
    out = []
    for a, b in itertools.combinations(raters, 2):
        both = [u for u in units if a in u.values and b in u.values]
        if not both:
            continue
        matrix = _matrix(both, [a, b])
        out.append(
            PairAgreement(
                judge,
                subject,
                names[a],
                names[b],
                len(both),
                percent_agreement(matrix),
                krippendorff_alpha(matrix, level),
            )
        )
    return out


def _reviewer(username: str, done: list[tuple[Any, ...]]) -> ReviewerStats:
    seconds = [s for _, _, s, _, _, _ in done if s]
    settled = [(v, final) for _, v, _, _, final, is_settled in done if is_settled]
    judged = [(v, j) for _, v, _, j, _, _ in done if j is not None]
    return ReviewerStats(
        username=username,
        items=len({item for item, *_ in done}),
        reviews=len(done),
        median_seconds=statistics.median(seconds) if seconds else None,
        with_people=sum(v == f for v, f in settled) / len(settled) if settled else None,
        settled=len(settled),
        with_judge=sum(v == j for v, j in judged) / len(judged) if judged else None,
        judged=len(judged),
        settled_distance=statistics.fmean(abs(v - f) for v, f in settled) if settled else None,
        judge_distance=statistics.fmean(abs(v - j) for v, j in judged) if judged else None,
    )
