"""The board by information gap (GoodAI's LTM benchmark, #27.4): for models answering memory
scripts (apps/runs/kinds/scripts.py), each scripted gap a row, each model a column, the mean
score of the items scripted with that gap and the gap each model actually saw (its realised
gap, counted by its endpoint, its own answers included), so recall can be read against how
much stood between a fact and the question about it."""

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from apps.judges.models import Score
from apps.runs.models import Response, Run


@dataclass
class GapCell:
    mean: float | None  # over the items with a value
    n: int  # items with a value
    failed: int  # items whose scoring (or answer) failed
    realised: float | None  # mean realised gap of the model's answers, in tokens


@dataclass
class GapRow:
    gap: int  # the scripted gap, in tokens
    cells: list[GapCell] = field(default_factory=list)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def gap_rows(rows: list[Any], subject: str, human: bool) -> list[GapRow]:
    """One row per scripted gap over the board's rows (`row.run`: a judge run); [] unless
    one of them judged a memory-script run. `human`: people's corrections count (the board's
    human mode), else the judge's values only."""
    sources = {
        row.run.pk: row.run.source_run_id
        for row in rows
        if row.run.source_run is not None and row.run.source_run.kind == Run.Kind.SCRIPT
    }
    if not sources:
        return []
    # Per source run and item: the scripted gap and the realised gaps of its epochs.
    scripted: dict[int, dict[int, int]] = defaultdict(dict)
    realised: dict[int, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    answers = Response.objects.filter(run_id__in=set(sources.values())).values_list(
        "run_id", "item_id", "details"
    )
    for run_id, item_id, details in answers.iterator(chunk_size=5000):
        info = (details or {}).get("script") or {}
        if "scripted_gap" not in info:
            continue  # a unit that never read as a script
        scripted[run_id][item_id] = int(info["scripted_gap"])
        if info.get("question_turn"):
            realised[run_id][item_id].append(int(info["gap_tokens"]))
    value = "final_value" if human else "judge_value"
    scores = Score.objects.filter(run_id__in=list(sources), subject=subject).values_list(
        "run_id", "item_id", "status", value
    )
    by_run: dict[int, dict[int, tuple[str, float | None]]] = defaultdict(dict)
    for run_id, item_id, status, score in scores.iterator(chunk_size=5000):
        by_run[run_id][item_id] = (status, score)
    gaps = sorted({gap for per_item in scripted.values() for gap in per_item.values()})
    table = []
    for gap in gaps:
        row = GapRow(gap)
        for board_row in rows:
            source = sources.get(board_row.run.pk)
            if source is None:
                row.cells.append(GapCell(None, 0, 0, None))
                continue
            items = [item for item, g in scripted[source].items() if g == gap]
            values, failed = [], 0
            for item in items:
                status, score = by_run[board_row.run.pk].get(item, ("", None))
                if status == Score.Status.OK and score is not None:
                    values.append(score)
                elif status == Score.Status.FAILED:
                    failed += 1
            seen = [g for item in items for g in realised[source].get(item, [])]
            row.cells.append(GapCell(_mean(values), len(values), failed, _mean(seen)))
        table.append(row)
    return table
