"""What each model on a board cost: its generation run and the judge run that scored it, in
tokens and dollars, what batch mode and the response cache saved, the cost per item, the
model's latency (p50/p95), and the score-vs-cost Pareto front (#32.4).

Everything comes from the runs' own totals (`Run.prompt_tokens`, `cost`, `saved_cost`…, which
the engine adds up from each call's tokens at the endpoint's price) and one query for the
responses' latencies, so a board pays two queries for it whatever its size.
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from django.conf import settings
from django.db.models import Count

from apps.judges.models import Score
from apps.leaderboards.memo import Memo, run_state
from apps.runs.models import Response, Run

if TYPE_CHECKING:
    from apps.leaderboards.boards import Board, Row


@dataclass(frozen=True)
class RunCost:
    """One run's spend: tokens, dollars (None when its model has no price), savings."""

    run_id: int
    prompt_tokens: int
    completion_tokens: int
    dollars: float | None
    batch_saved: float | None  # what batch mode saved against the request-by-request price
    cache_saved: float | None  # what the cached replies would have cost
    cached: int  # requests answered from the cache
    sent: int  # requests sent to the endpoint
    batch: bool

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class ModelCost:
    """A board row's cost: generation (None for a response column: the answers came with the
    file) and judge, their sum, per item, and the generation's latency."""

    generation: RunCost | None
    judge: RunCost
    items: int  # items answered (the cost per item divides by these)
    latency_p50: float | None  # ms, over answers that went to the model
    latency_p95: float | None
    latency_n: int

    @property
    def parts(self) -> list[RunCost]:
        return [c for c in (self.generation, self.judge) if c is not None]

    @property
    def dollars(self) -> float | None:
        """Generation + judge; None when either cost is unknown (no price)."""
        amounts = [c.dollars for c in self.parts]
        return None if any(a is None for a in amounts) else sum(a for a in amounts if a)

    @property
    def tokens(self) -> int:
        return sum(c.tokens for c in self.parts)

    @property
    def per_item(self) -> float | None:
        dollars = self.dollars
        return dollars / self.items if dollars is not None and self.items else None

    def saved(self, kind: str) -> float | None:
        """Batch or cache savings of generation and judge together (None: unknown)."""
        amounts = [getattr(c, f"{kind}_saved") for c in self.parts]
        return None if any(a is None for a in amounts) else sum(a for a in amounts if a)


def run_cost(run: Run) -> RunCost:
    known = run.cost_known
    factor = settings.BATCH_PRICE_FACTOR
    batch_saved: float | None = 0.0
    if run.batch and known and 0 < factor < 1:
        # The run's cost is at the batch price: the same tokens sent one by one cost 1/factor.
        batch_saved = run.cost / factor - run.cost
    priced = run.endpoint is None or run.endpoint.has_price
    return RunCost(
        run_id=run.pk,
        prompt_tokens=run.prompt_tokens,
        completion_tokens=run.completion_tokens,
        dollars=run.cost if known else None,
        batch_saved=batch_saved if known else None,
        cache_saved=run.saved_cost if priced else None,
        cached=run.cached_count,
        sent=run.sent_count,
        batch=run.batch,
    )


def percentile(values: np.ndarray, q: float) -> float | None:
    """numpy's default (linear) percentile; None without values."""
    return float(np.percentile(values, q)) if values.size else None


@dataclass(frozen=True)
class Answered:
    """What a response set's rows say beside its run's totals: items answered, latencies."""

    items: int
    p50: float | None
    p95: float | None
    n: int


# Keyed by the run's results fingerprint: a board shown again reads no response.
_answered: Memo[Answered] = Memo("costs")


def answered_of(runs: list[Run]) -> dict[int, Answered]:
    """Run id → its answered items and latency percentiles, for generation-like runs, in one
    query for those not memoised. Cached and batch answers have no latency of their own (0):
    only the requests timed count."""
    found: dict[int, Answered] = {}
    missing = []
    for run in runs:
        if (hit := _answered.get(run_state(run))) is not None:
            found[run.pk] = hit
        else:
            missing.append(run)
    if not missing:
        return found
    items: dict[int, set[int]] = {run.pk: set() for run in missing}
    times: dict[int, list[int]] = {run.pk: [] for run in missing}
    rows = Response.objects.filter(
        run_id__in=[run.pk for run in missing], status=Response.Status.OK
    ).values_list("run_id", "item_id", "latency_ms")
    for run_id, item_id, ms in rows.iterator(chunk_size=10_000):
        items[run_id].add(item_id)
        if ms > 0:
            times[run_id].append(ms)
    for run in missing:
        values = np.asarray(times[run.pk], dtype=float)
        found[run.pk] = _answered.put(
            run_state(run),
            Answered(
                len(items[run.pk]), percentile(values, 50), percentile(values, 95), values.size
            ),
        )
    return found


def scored_items(runs: list[Run]) -> dict[int, int]:
    """Judge run id → items it scored (a response column's judge run), memoised likewise."""
    found = {}
    missing = []
    for run in runs:
        if (hit := _answered.get(("scored", run_state(run)))) is not None:
            found[run.pk] = hit.items
        else:
            missing.append(run)
    counts = (
        dict(
            Score.objects.filter(run_id__in=[r.pk for r in missing], status=Score.Status.OK)
            .values("run_id")
            .annotate(n=Count("item_id", distinct=True))
            .values_list("run_id", "n")
        )
        if missing
        else {}
    )
    for run in missing:
        n = counts.get(run.pk, 0)
        _answered.put(("scored", run_state(run)), Answered(n, None, None, 0))
        found[run.pk] = n
    return found


def model_costs(rows: "list[Row]") -> dict[int, ModelCost]:
    """Judge run id → its model's cost, for the board's rows."""
    sources = {
        row.run.pk: row.run.source_run
        for row in rows
        if row.run.source_run is not None and row.run.source_run.kind != Run.Kind.COLUMN
    }
    answered = answered_of([s for s in sources.values() if s is not None])
    # A response column's judge run: the items it scored (the column cost nothing to make).
    columns = scored_items([row.run for row in rows if row.run.pk not in sources])
    out = {}
    for row in rows:
        source = sources.get(row.run.pk)
        found = answered[source.pk] if source is not None else None
        out[row.run.pk] = ModelCost(
            generation=run_cost(source) if source is not None else None,
            judge=run_cost(row.run),
            items=found.items if found else columns.get(row.run.pk, 0),
            latency_p50=found.p50 if found else None,
            latency_p95=found.p95 if found else None,
            latency_n=found.n if found else 0,
        )
    return out


def pareto_front(points: dict[int, tuple[float, float]]) -> set[int]:
    """The keys of the (score, dollars) points no other point beats: none scores at least as
    high for at most the cost and is better on one of the two. Higher scores are better."""
    front = set()
    for key, (score, cost) in points.items():
        dominated = any(
            s >= score and c <= cost and (s > score or c < cost)
            for other, (s, c) in points.items()
            if other != key
        )
        if not dominated:
            front.add(key)
    return front


# The chart's drawing area in SVG user units (it scales to the page's width).
WIDTH, HEIGHT = 640, 300
LEFT, RIGHT, TOP, BOTTOM = 56, 150, 16, 40


def board_points(board: "Board") -> dict[int, tuple[float, float]]:
    """Run id → (overall score in the board's mode, dollars per item) of the models whose
    cost is known: what the chart plots and the Pareto front is drawn from."""
    points = {}
    for row in board.rows:
        found = board.costs.get(row.run.pk)
        score = row.overall.get(board.mode)
        if found is not None and found.per_item is not None and score is not None:
            points[row.run.pk] = (score, found.per_item)
    return points


def cost_chart(board: "Board") -> dict[str, Any] | None:
    """Score (the board's overall, in its mode) against dollars per item, one point per model
    whose cost is known, the Pareto front marked and joined. Positions only: the template
    writes the SVG, so every label stays escaped text."""
    mode = board.mode
    points = board_points(board)
    if not any(cost > 0 for _, cost in points.values()):
        return None  # nothing known to cost anything (rule-based judges on a file's answers)
    labels = {row.run.pk: row.label for row in board.rows}
    front = pareto_front(points)
    scores = [s for s, _ in points.values()]
    if board.normalised:
        low, high = 0.0, 100.0
    else:
        low, high = min(scores), max(scores)
        if low == high:
            low, high = low - 1, high + 1
    most = max(c for _, c in points.values())
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(cost: float) -> float:
        return round(LEFT + cost / most * inner_w, 1)

    def y(score: float) -> float:
        return round(TOP + (high - min(max(score, low), high)) / (high - low) * inner_h, 1)

    dots = [
        {
            "run": key,
            "label": labels[key],
            "score": score,
            "per_item": cost,
            "x": x(cost),
            "y": y(score),
            "front": key in front,
        }
        for key, (score, cost) in sorted(points.items(), key=lambda kv: (kv[1][1], -kv[1][0]))
    ]
    # The front as a staircase from the cheapest to the best: each step holds its score until
    # the next (dearer, better) model.
    on_front = [d for d in dots if d["front"]]
    path = []
    for i, dot in enumerate(on_front):
        path.append(f"{dot['x']},{dot['y']}")
        if i + 1 < len(on_front):
            path.append(f"{on_front[i + 1]['x']},{dot['y']}")
    left_out = [row.label for row in board.rows if row.run.pk not in points]
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "left": LEFT,
        "right": WIDTH - RIGHT,
        "top": TOP,
        "bottom": HEIGHT - BOTTOM,
        "low": low,
        "high": high,
        "most": most,
        "dots": dots,
        "front": " ".join(path),
        "front_labels": [d["label"] for d in on_front],
        "left_out": left_out,
        "mode": mode,
    }


def run_record(found: RunCost | None) -> dict[str, Any] | None:
    if found is None:
        return None
    return {
        "run_id": found.run_id,
        "prompt_tokens": found.prompt_tokens,
        "completion_tokens": found.completion_tokens,
        "usd": found.dollars,
        "batch": found.batch,
        "batch_saved_usd": found.batch_saved,
        "cached": found.cached,
        "sent": found.sent,
        "cache_saved_usd": found.cache_saved,
    }


def cost_record(found: ModelCost | None, front: set[int], run_id: int) -> dict[str, Any] | None:
    """A board row's cost as the JSONL export and the API give it (dollars null: no price)."""
    if found is None:
        return None
    return {
        "generation": run_record(found.generation),
        "judging": run_record(found.judge),
        "tokens": found.tokens,
        "usd": found.dollars,
        "batch_saved_usd": found.saved("batch"),
        "cache_saved_usd": found.saved("cache"),
        "items": found.items,
        "usd_per_item": found.per_item,
        "latency_p50_ms": found.latency_p50,
        "latency_p95_ms": found.latency_p95,
        "latency_n": found.latency_n,
        "pareto_front": run_id in front,
    }


# The CSV's flat cost columns, each a path into `cost_record`.
CSV_COLUMNS = (
    "generation.prompt_tokens",
    "generation.completion_tokens",
    "generation.usd",
    "judging.prompt_tokens",
    "judging.completion_tokens",
    "judging.usd",
    "batch_saved_usd",
    "cache_saved_usd",
    "usd",
    "items",
    "usd_per_item",
    "latency_p50_ms",
    "latency_p95_ms",
    "pareto_front",
)


def csv_cells(record: dict[str, Any] | None) -> list[Any]:
    out: list[Any] = []
    for column in CSV_COLUMNS:
        value: Any = record
        for part in column.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        out.append(value)
    return out


def page(board: "Board") -> dict[str, Any]:
    """What the board page's cost section needs beside `board.costs`."""
    return {
        "cost_chart": cost_chart(board),
        "cost_front": pareto_front(board_points(board)),
        "batch_factor": settings.BATCH_PRICE_FACTOR,
    }
