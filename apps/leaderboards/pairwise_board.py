"""The pairwise board (#13.4): Bradley–Terry ratings of the response sets a task's pairwise
runs compared, from the judge's battles (each (item, pair) judged in both orders; a flip
between the orders is a tie), people's votes in the A/B queue, or both; with the judge's
position consistency and its agreement with people on the same pairs beside them."""

from dataclasses import dataclass, field

import numpy as np

from apps.datasets.models import Task
from apps.judges.models import Judge, judge_of
from apps.judges.pairwise import Consistency, consistency, outcomes
from apps.leaderboards import sequential
from apps.leaderboards.bradley_terry import LengthControlled, Ratings, length_controlled, ratings
from apps.leaderboards.style import StyleControlled, controlled, style_counts
from apps.review.models import Vote
from apps.runs.models import Response, Run, set_names

SOURCES = {"judge": "judge battles", "human": "human battles", "both": "judge and human battles"}
OUTCOME = {"a": 1.0, "b": 0.0, "tie": 0.5}


@dataclass
class PairwiseBoard:
    task: Task
    judges: list[Judge]
    judge: Judge | None
    ratings: Ratings | None
    consistency: Consistency | None
    labels: dict[str, int]  # a response set's name on the board → its run id
    source: str = "judge"
    # Judge–human agreement on pairs: people's votes on pairs the judge decided in both
    # orders, and how many of them the judge's outcome matched.
    compared_votes: int = 0
    agreeing_votes: int = 0
    baseline_id: int | None = None
    baseline: str = ""  # with a baseline: each model's win rate against it, raw and
    length_controlled: list[LengthControlled] | None = None  # length-controlled
    style: StyleControlled | None = None  # the ratings at equal length and Markdown
    # People's votes per pair of models, watched as they come in (#31.4): may the A/B queue stop?
    vote_sequences: list["VoteSequence"] = field(default_factory=list)

    @property
    def source_label(self) -> str:
        return SOURCES[self.source]

    @property
    def agreement(self) -> float | None:
        return self.agreeing_votes / self.compared_votes if self.compared_votes else None


@dataclass(frozen=True)
class VoteSequence:
    """The anytime-valid confidence sequence (apps.leaderboards.sequential) of one pair of
    models' A/B votes, in the order they were cast: each vote is +1 (a better), −1 (b better)
    or 0 (tie), so the mean is a's share of wins minus b's. Valid however often it is looked
    at, so the queue may stop on this pair once it has decided."""

    a: str
    b: str
    n: int
    mean: float
    low: float
    high: float
    state: str
    decided_at: int | None

    @property
    def label(self) -> str:
        decision = {
            sequential.BETTER: f"decided: {self.a} better",
            sequential.WORSE: f"decided: {self.b} better",
            sequential.EQUIVALENT: "decided: no difference larger than δ",
        }
        return decision.get(self.state, sequential.DECISIONS[sequential.GOING])


def vote_sequences(
    votes: list[tuple[int, int, str]], names: dict[int, str], horizon: int, delta: float = 0.0
) -> list[VoteSequence]:
    """votes: (a run, b run, choice) in the order cast. One sequence per pair of models, the
    pair's sides in name order (a vote on the pair the other way round counts flipped)."""
    streams: dict[tuple[int, int], list[float]] = {}
    for a, b, choice in votes:
        sign = 1.0 if names[a] <= names[b] else -1.0
        key = (a, b) if sign > 0 else (b, a)
        streams.setdefault(key, []).append(sign * (2 * OUTCOME[choice] - 1))
    out = []
    for (a, b), diffs in sorted(streams.items(), key=lambda kv: (names[kv[0][0]], names[kv[0][1]])):
        d = np.array(diffs)
        size = max(horizon, len(d), sequential.MIN_ITEMS)
        seq = sequential.running(d, size)
        state, at = sequential.first_decision(d, delta, size)
        out.append(
            VoteSequence(
                a=names[a],
                b=names[b],
                n=len(d),
                mean=float(seq.mean[-1]),
                low=float(seq.low[-1]),
                high=float(seq.high[-1]),
                state=state,
                decided_at=at,
            )
        )
    return out


def find_set(task: Task, name: str) -> int | None:
    """A response set of the task by its name on the board (or its run id)."""
    names = set_names(list(Run.objects.response_sets().filter(task=task)))
    found = [pk for pk, known in names.items() if known == name or str(pk) == name]
    return found[0] if found else None


def find_judge(task: Task, name: str) -> int | None:
    """The newest version of a pairwise judge, by name, that has a pairwise run."""
    return (
        Judge.objects.filter(task=task, name=name, judge_runs__run__kind=Run.Kind.PAIRWISE)
        .order_by("-version")
        .values_list("pk", flat=True)
        .first()
    )


def build(
    task: Task, judge_id: int | None = None, source: str = "judge", baseline: int | None = None
) -> PairwiseBoard:
    """The board of one pairwise judge's runs (the newest judge by default), from the judge's
    battles, people's votes (the A/B queue) or both."""
    source = source if source in SOURCES else "judge"
    runs = list(
        Run.objects.filter(task=task, kind=Run.Kind.PAIRWISE)
        .exclude(status=Run.Status.QUEUED)
        .select_related("judged_with__judge")
        .order_by("-pk")
    )
    judges = sorted({judge_of(run) for run in runs}, key=lambda j: (j.name, -j.version))
    judge = next((j for j in judges if j.pk == judge_id), judges[0] if judges else None)
    if judge is None:
        return PairwiseBoard(task, judges, None, None, None, {}, source)
    names = set_names(list(Run.objects.response_sets().filter(task=task)))
    mine = [run for run in runs if judge_of(run).pk == judge.pk]
    judged: dict[tuple[int, int, int, int], str] = {}
    for run in mine:
        for found in outcomes(run):
            judged[(run.pk, found.item_id, found.a, found.b)] = found.verdict
    votes = list(
        Vote.objects.filter(run__in=mine).values_list(
            "run_id", "item_id", "a_run_id", "b_run_id", "choice"
        )
    )
    battles: list[tuple[int, int, int, float]] = []  # (item, a, b, outcome)
    if source in ("judge", "both"):
        battles += [(item, a, b, OUTCOME[v]) for (_, item, a, b), v in judged.items()]
    if source in ("human", "both"):
        battles += [(item, a, b, OUTCOME[choice]) for _, item, a, b, choice in votes]
    named = [(names[a], names[b], o) for _, a, b, o in battles]
    board = PairwiseBoard(
        task,
        judges,
        judge,
        ratings(named) if named else None,
        consistency(judge),
        {name: pk for pk, name in names.items()},
        source,
    )
    if board.ratings is not None:
        plain = {r.model: r.rating for r in board.ratings.ratings}
        board.style = _style_controlled(battles, named, plain)
    cast = Vote.objects.filter(run__in=mine).order_by("pk")
    horizon = max((run.dataset.row_count for run in mine), default=0)
    board.vote_sequences = vote_sequences(
        list(cast.values_list("a_run_id", "b_run_id", "choice")), names, horizon
    )
    for run_id, item, a, b, choice in votes:
        verdict = judged.get((run_id, item, a, b))
        if verdict is not None:
            board.compared_votes += 1
            board.agreeing_votes += verdict == choice
    if baseline in names:
        board.baseline, board.baseline_id = names[baseline], baseline
        board.length_controlled = _length_controlled(baseline, judged, votes, source, names)
    return board


def _length_controlled(
    baseline: int,
    judged: dict[tuple[int, int, int, int], str],
    votes: list[tuple[int, int, int, int, str]],
    source: str,
    names: dict[int, str],
) -> list[LengthControlled]:
    """Each model's battles against the baseline, with the answers' length difference."""
    battles = []
    if source in ("judge", "both"):
        battles += [(item, a, b, v) for (_, item, a, b), v in judged.items()]
    if source in ("human", "both"):
        battles += [(item, a, b, choice) for _, item, a, b, choice in votes]
    battles = [battle for battle in battles if baseline in battle[1:3]]
    words = {
        (item, run): len(text.split())
        for item, run, text in Response.objects.filter(
            run_id__in={r for _, a, b, _ in battles for r in (a, b)}, epoch=0
        ).values_list("item_id", "run_id", "text")
    }
    per_model: dict[int, list[tuple[float, float]]] = {}
    for item, a, b, verdict in battles:
        other = b if a == baseline else a
        won = OUTCOME[verdict] if other == a else 1 - OUTCOME[verdict]
        difference = words.get((item, other), 0) - words.get((item, baseline), 0)
        per_model.setdefault(other, []).append((won, float(difference)))
    found = [length_controlled(names[m], rows) for m, rows in per_model.items()]
    return sorted(found, key=lambda r: -(r.controlled if r.controlled is not None else r.raw))


def _style_controlled(
    battles: list[tuple[int, int, int, float]],
    named: list[tuple[str, str, float]],
    plain: dict[str, float],
) -> StyleControlled:
    """The board's battles refitted with each answer's length and Markdown as covariates."""
    runs = {r for _, a, b, _ in battles for r in (a, b)}
    counts = {
        (item, run): style_counts(text)
        for item, run, text in Response.objects.filter(run_id__in=runs, epoch=0)
        .values_list("item_id", "run_id", "text")
        .iterator(chunk_size=2000)
    }
    empty = (0, 0, 0, 0)
    style_a = np.array([counts.get((item, a), empty) for item, a, _, _ in battles], dtype=float)
    style_b = np.array([counts.get((item, b), empty) for item, _, b, _ in battles], dtype=float)
    return controlled(named, style_a, style_b, plain)
