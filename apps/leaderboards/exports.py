"""Exports: a run's results per item (streamed) and the leaderboard, as CSV or JSONL.

Run results are read with two ordered cursors — the dataset's items and the run's scores,
both in item-id order (the scores' unique (run, item, subject) index gives that order for
free) — merged as they stream, so memory stays flat and the number of queries does not
depend on the number of items. Items without a score get empty cells (null in JSONL), like
ml3m's `load_scores` gives NaN: nothing is dropped.
"""

import csv
import io
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from django.db.models import OuterRef, Subquery, TextField
from django.db.models.functions import Cast

from apps.datasets.models import Item
from apps.judges.models import Score
from apps.leaderboards.boards import MODES, Board
from apps.leaderboards.csvsafe import cell
from apps.runs.models import Response, Run

CHUNK = 2000  # rows per database fetch
FLUSH = 500  # CSV rows per streamed piece
SCORE_COLUMNS = (
    "judge",
    "final",
    "status",
    "review",
    "override_reason",
    "reviewer",
    "rounds",
    "error",
)
FORMATS = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson; charset=utf-8"}


@dataclass(frozen=True)
class ScoreRow:
    judge: float | None
    final: float | None
    status: str
    review: str  # "overridden" | "confirmed" | ""
    override_reason: str
    reviewer: str
    rounds: str  # the round values as JSON text
    error: str


def field_names(run: Run) -> list[str]:
    columns = list(run.dataset.columns or [])
    if not columns:
        first = (
            Item.objects.filter(dataset_id=run.dataset_id)
            .order_by("pk")
            .values_list("fields", flat=True)
            .first()
        )
        columns = list(first or {})
    return columns


def subjects_of(run: Run) -> list[str]:
    if run.judge_id:
        return list(run.judge.subject_names)
    return []


def _items(run: Run) -> Iterator[tuple]:
    items = Item.objects.filter(dataset_id=run.dataset_id).order_by("pk")
    if run.kind == Run.Kind.JUDGE and run.source_run_id:
        text = Response.objects.filter(run_id=run.source_run_id, item_id=OuterRef("pk")).values(
            "text"
        )[:1]
        items = items.annotate(response_text=Subquery(text))
        return items.values_list("pk", "key", "position", "fields", "response_text").iterator(
            chunk_size=CHUNK
        )
    return (
        (pk, key, position, fields, None)
        for pk, key, position, fields in items.values_list(
            "pk", "key", "position", "fields"
        ).iterator(chunk_size=CHUNK)
    )


def _scores(run: Run) -> Iterator[tuple]:
    return (
        Score.objects.filter(run_id=run.pk)
        .order_by("item_id", "subject")
        .values_list(
            "item_id",
            "subject",
            "status",
            "judge_value",
            "final_value",
            "override_value",
            "confirmed_at",
            "override_reason",
            "override_by__username",
            "confirmed_by__username",
            Cast("round_values", TextField()),
            "error_kind",
            "error",
        )
        .iterator(chunk_size=CHUNK)
    )


def _score_row(values: tuple) -> ScoreRow:
    (
        _,
        _,
        status,
        judge,
        final,
        override,
        confirmed_at,
        reason,
        overrider,
        confirmer,
        rounds,
        error_kind,
        error,
    ) = values
    review = "overridden" if override is not None else "confirmed" if confirmed_at else ""
    return ScoreRow(
        judge=judge,
        final=final,
        status=status,
        review=review,
        override_reason=reason,
        reviewer=(overrider if override is not None else confirmer if confirmed_at else "") or "",
        rounds=rounds or "[]",
        error=f"{error_kind}: {error}" if error_kind else error,
    )


def results(run: Run) -> Iterator[tuple[tuple, dict[str, ScoreRow]]]:
    """(item pk, key, position, fields, response) with its scores by subject, item by item."""
    scores = _scores(run) if run.kind == Run.Kind.JUDGE else iter(())
    pending = next(scores, None)
    for item in _items(run):
        found: dict[str, ScoreRow] = {}
        while pending is not None and pending[0] <= item[0]:
            if pending[0] == item[0]:
                found[pending[1]] = _score_row(pending)
            pending = next(scores, None)
        yield item, found


def _response(run: Run, item: tuple) -> Any:
    if run.source_column:
        return item[3].get(run.source_column) if isinstance(item[3], dict) else None
    return item[4]


def result_header(run: Run) -> list[str]:
    fixed = {"key", "position", "response"}
    fields = [f"field.{name}" if name in fixed else name for name in field_names(run)]
    header = ["key", "position", *fields, "response"]
    for subject in subjects_of(run):
        header += [f"{subject}.{column}" for column in SCORE_COLUMNS]
    return header


def results_csv(run: Run) -> Iterator[str]:
    if run.kind == Run.Kind.GENERATION:
        yield from responses_csv(run)
        return
    names, subjects = field_names(run), subjects_of(run)
    empty = [""] * len(SCORE_COLUMNS)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow([cell(h) for h in result_header(run)])
    for count, (item, scores) in enumerate(results(run), start=1):
        fields = item[3] if isinstance(item[3], dict) else {}
        row = [
            cell(item[1]),
            item[2],
            *[cell(fields.get(n)) for n in names],
            cell(_response(run, item)),
        ]
        for subject in subjects:
            score = scores.get(subject)
            if score is None:
                row += empty
                continue
            row += [
                cell(score.judge),
                cell(score.final),
                score.status,
                score.review,
                cell(score.override_reason),
                cell(score.reviewer),
                cell(score.rounds),
                cell(score.error),
            ]
        writer.writerow(row)
        if count % FLUSH == 0:
            yield _drain(buffer)
    yield _drain(buffer)


def results_jsonl(run: Run) -> Iterator[str]:
    if run.kind == Run.Kind.GENERATION:
        yield from responses_jsonl(run)
        return
    subjects = subjects_of(run)
    lines = []
    for item, scores in results(run):
        record = {
            "key": item[1],
            "position": item[2],
            "fields": item[3],
            "response": _response(run, item),
            "scores": {
                subject: (
                    {
                        "judge": s.judge,
                        "final": s.final,
                        "status": s.status,
                        "review": s.review,
                        "override_reason": s.override_reason,
                        "reviewer": s.reviewer,
                        "rounds": json.loads(s.rounds),
                        "error": s.error,
                    }
                    if (s := scores.get(subject)) is not None
                    else None
                )
                for subject in subjects
            },
        }
        lines.append(json.dumps(record, ensure_ascii=False))
        if len(lines) >= FLUSH:
            yield "\n".join(lines) + "\n"
            lines = []
    if lines:
        yield "\n".join(lines) + "\n"


# ---- generation runs: the responses -----------------------------------------------------
RESPONSE_COLUMNS = ("status", "error", "prompt_tokens", "completion_tokens", "latency_ms")


def _responses(run: Run) -> Iterator[tuple[tuple, tuple | None]]:
    items = (
        Item.objects.filter(dataset_id=run.dataset_id)
        .order_by("pk")
        .values_list("pk", "key", "position", "fields")
    )
    responses = iter(
        Response.objects.filter(run_id=run.pk)
        .order_by("item_id")
        .values_list(
            "item_id",
            "text",
            "status",
            "error_kind",
            "error",
            "prompt_tokens",
            "completion_tokens",
            "latency_ms",
        )
        .iterator(chunk_size=CHUNK)
    )
    pending = next(responses, None)
    for item in items.iterator(chunk_size=CHUNK):
        found = None
        while pending is not None and pending[0] <= item[0]:
            if pending[0] == item[0]:
                found = pending
            pending = next(responses, None)
        yield item, found


def responses_csv(run: Run) -> Iterator[str]:
    names = field_names(run)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    fixed = {"key", "position", "response", *RESPONSE_COLUMNS}
    header = [
        "key",
        "position",
        *[f"field.{n}" if n in fixed else n for n in names],
        "response",
        *RESPONSE_COLUMNS,
    ]
    writer.writerow([cell(h) for h in header])
    for count, (item, found) in enumerate(_responses(run), start=1):
        fields = item[3] if isinstance(item[3], dict) else {}
        row = [cell(item[1]), item[2], *[cell(fields.get(n)) for n in names]]
        if found is None:
            row += [""] * (1 + len(RESPONSE_COLUMNS))
        else:
            _, text, status, error_kind, error, prompt, completion, latency = found
            error = f"{error_kind}: {error}" if error_kind else error
            row += [cell(text), status, cell(error), prompt, completion, latency]
        writer.writerow(row)
        if count % FLUSH == 0:
            yield _drain(buffer)
    yield _drain(buffer)


def responses_jsonl(run: Run) -> Iterator[str]:
    for item, found in _responses(run):
        record: dict[str, Any] = {"key": item[1], "position": item[2], "fields": item[3]}
        if found is None:
            record.update(response=None, status=None)
        else:
            _, text, status, error_kind, error, prompt, completion, latency = found
            record.update(
                response=text,
                status=status,
                error=f"{error_kind}: {error}" if error_kind else error,
                prompt_tokens=prompt,
                completion_tokens=completion,
                latency_ms=latency,
            )
        yield json.dumps(record, ensure_ascii=False) + "\n"


def _drain(buffer: io.StringIO) -> str:
    text = buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    return text


# ---- the leaderboard --------------------------------------------------------------------
STAT_COLUMNS = ("mean", "ci_low", "ci_high", "ci_method", "n", "failed", "missing")


def board_header(board: Board) -> list[str]:
    header = ["rank", "model", "run_id", "dataset", "run_status"]
    header += [f"overall.{mode}" for mode in MODES]
    for info in board.subjects:
        for mode in MODES:
            header += [f"{info.name}.{mode}.{stat}" for stat in STAT_COLUMNS]
        header.append(f"{info.name}.overridden")
    return header


def board_records(board: Board) -> Iterator[dict[str, Any]]:
    for rank, row in enumerate(board.rows, start=1):
        subjects = {}
        for info in board.subjects:
            entry: dict[str, Any] = {}
            for mode in MODES:
                c = row.cells[mode][info.name]
                entry[mode] = {
                    "mean": c.mean,
                    "ci_low": c.ci.low if c.ci else None,
                    "ci_high": c.ci.high if c.ci else None,
                    "ci_method": c.ci.method if c.ci else None,
                    "n": c.n,
                    "failed": c.failed,
                    "missing": c.missing,
                }
            entry["overridden"] = row.cells["human"][info.name].overridden
            subjects[info.name] = entry
        yield {
            "rank": rank,
            "model": row.label,
            "run_id": row.run.pk,
            "dataset": str(row.run.dataset),
            "run_status": row.run.status,
            "overall": dict(row.overall),
            "subjects": subjects,
        }


def board_csv(board: Board) -> Iterable[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow([cell(h) for h in board_header(board)])
    for record in board_records(board):
        row = [
            record["rank"],
            cell(record["model"]),
            record["run_id"],
            cell(record["dataset"]),
            record["run_status"],
        ]
        row += [cell(record["overall"][mode]) for mode in MODES]
        for info in board.subjects:
            entry = record["subjects"][info.name]
            for mode in MODES:
                row += [cell(entry[mode][stat]) for stat in STAT_COLUMNS]
            row.append(entry["overridden"])
        writer.writerow(row)
    return [buffer.getvalue()]


def board_jsonl(board: Board) -> Iterable[str]:
    meta = {
        "task": board.task.slug,
        "judge": board.judge.name if board.judge else None,
        "judge_version": board.judge.version if board.judge else None,
        "weights": board.weights,
        "tag": board.params.tag,
        "sort": board.sort,
        "direction": board.direction,
    }
    return [
        json.dumps({**meta, **record}, ensure_ascii=False) + "\n" for record in board_records(board)
    ]
