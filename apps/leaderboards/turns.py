"""The board's turn columns, for a judge that scores each turn of a dialogue (Judge.per_turn):
per model and subject, turn 1, turn 2, … and overall, as MT-Bench's `show_result.py` reports
its single-answer grades (first turn, second turn, average).

A turn's column is the mean of the judge's values for that turn (`Score.turn_values`) over the
items that have it, scored the board's way: strict counts failed and not yet judged items at
the subject's worst value in every turn column, as the overall column does; answered only
leaves them out. Overall is the board's own cell (each item's mean over its turns; over
items that all have as many turns, as MT-Bench's do, that is MT-Bench's average over every
judgement). People override an item's overall score, not its turns: the turn columns are the
judge's values.
"""

from dataclasses import dataclass, field

from apps.datasets.models import Item
from apps.judges.models import Score
from apps.leaderboards.stats import Dist
from apps.leaderboards.subjects import SubjectInfo


@dataclass
class TurnCell:
    mean: float | None
    n: int  # items in the mean
    answered: int  # items with a value for this turn


@dataclass
class TurnRow:
    label: str
    run_id: int
    turns: list[TurnCell]
    overall: float | None


@dataclass
class TurnTable:
    subject: SubjectInfo
    turns: int  # the most turns any item has
    rows: list[TurnRow] = field(default_factory=list)


def _values(run_id: int, subject: str, tag: str | None) -> tuple[list[list[float | None]], int]:
    """The OK scores' turn values and how many scores failed."""
    scores = Score.objects.filter(run_id=run_id, subject=subject)
    if tag is not None:
        scores = scores.filter(item__tags_text__contains=f"|{tag}|")
    values: list[list[float | None]] = []
    failed = 0
    for status, turn_values in scores.values_list("status", "turn_values").iterator(
        chunk_size=5000
    ):
        if status == Score.Status.OK:
            values.append(list(turn_values or []))
        else:
            failed += 1
    return values, failed


def turn_table(
    rows: list[tuple[str, int, int, float | None]],
    info: SubjectInfo,
    scoring: str,
    tag: str | None = None,
) -> TurnTable | None:
    """`rows`: (model label, judge run id, dataset id, the board's overall mean of `info`) in
    the board's order. None when no score has turn values (the judge did not score per turn)."""
    found = {}
    for _, run_id, dataset_id, _ in rows:
        dataset = Item.objects.filter(dataset_id=dataset_id)
        if tag is not None:
            dataset = dataset.filter(tags_text__contains=f"|{tag}|")
        values, failed = _values(run_id, info.name, tag)
        found[run_id] = (values, failed, dataset.count())
    most = max((len(v) for values, _, _ in found.values() for v in values), default=0)
    if most == 0:
        return None
    table = TurnTable(info, most)
    for label, run_id, _, overall in rows:
        values, failed, items = found[run_id]
        unanswered = failed + max(items - len(values) - failed, 0)
        cells = []
        for number in range(most):
            dist = Dist()
            for turn_values in values:
                value = turn_values[number] if number < len(turn_values) else None
                if value is not None:
                    dist.add(float(value))
            answered = dist.n
            if scoring == "strict" and info.worst is not None and unanswered:
                dist.add(info.worst, unanswered)
            cells.append(TurnCell(dist.mean, dist.n, answered))
        table.rows.append(TurnRow(label, run_id, cells, overall))
    return table
