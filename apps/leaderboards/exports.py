"""Exports: a run's results per item (streamed) and the leaderboard, as CSV or JSONL.

Run results are read with one query that yields one row per item (each subject's score
joined in through the unique (run, item, subject) index) and streamed through
`.iterator()`, so memory stays flat and the number of queries does not depend on the
number of items. Items without a score get empty cells (null in JSONL), like
ml3m's `load_scores` gives NaN: nothing is dropped.
"""

import csv
import io
import json
from collections.abc import Iterable, Iterator
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import (
    BigIntegerField,
    Case,
    F,
    FilteredRelation,
    OuterRef,
    Q,
    Subquery,
    TextField,
    Value,
    When,
)
from django.db.models.functions import Cast, Concat

from apps.datasets.csvsafe import cell, neutralise
from apps.datasets.models import Item
from apps.leaderboards.boards import MODES, Board
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
BOM = "\ufeff"  # Excel then reads the file as UTF-8, as the datasets export does
FORMATS = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson; charset=utf-8"}


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


def _result_rows(run: Run, subjects: list[str]) -> Iterator[tuple]:
    """One row per item: (key, position, fields, response, *SCORE_COLUMNS per subject).

    One query: each subject's score is LEFT JOINed through the unique (run, item, subject)
    index, the response through the unique (run, item) index; review state, reviewer and
    error text are shaped by CASE/CONCAT in SQL so the Python loop per row stays small.
    """
    items = Item.objects.filter(dataset_id=run.dataset_id).order_by("pk")
    columns: list[Any] = ["key", "position", "fields"]
    if run.source_run_id:
        text = Response.objects.filter(run_id=run.source_run_id, item_id=OuterRef("pk"))
        items = items.annotate(response_text=Subquery(text.values("text")[:1]))
        columns.append("response_text")
    else:
        columns.append(Value(None, output_field=TextField()))
    for index, subject in enumerate(subjects):
        s = f"s{index}"
        items = items.annotate(
            **{
                s: FilteredRelation(
                    "scores", condition=Q(scores__run_id=run.pk, scores__subject=subject)
                )
            }
        )
        overridden = Q(**{f"{s}__override_value__isnull": False})
        confirmed = Q(**{f"{s}__confirmed_at__isnull": False})
        columns += [
            f"{s}__judge_value",
            f"{s}__final_value",
            f"{s}__status",
            Case(
                When(overridden, then=Value("overridden")),
                When(confirmed, then=Value("confirmed")),
                default=Value(""),
            ),
            f"{s}__override_reason",
            Case(
                When(overridden, then=F(f"{s}__override_by_id")),
                When(confirmed, then=F(f"{s}__confirmed_by_id")),
                default=None,
                output_field=BigIntegerField(),
            ),
            Cast(f"{s}__round_values", TextField()),
            Case(
                When(**{f"{s}__error_kind": ""}, then=F(f"{s}__error")),
                default=Concat(
                    f"{s}__error_kind", Value(": "), f"{s}__error", output_field=TextField()
                ),
                output_field=TextField(),
            ),
        ]
    return items.values_list(*columns).iterator(chunk_size=CHUNK)


def text(value: str | None) -> str:
    """A text cell from the database, neutralised (None is empty)."""
    return neutralise(value) if value else ""


def usernames() -> dict[int, str]:
    """Every user's name by id: a team is small, and mapping ids here keeps two user joins
    per subject out of the export query."""
    return dict(get_user_model().objects.values_list("pk", "username"))


def _response(run: Run, row: tuple) -> Any:
    if run.source_column:
        return row[2].get(run.source_column) if isinstance(row[2], dict) else None
    return row[3]


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
    width = len(SCORE_COLUMNS)
    empty = ("",) * width
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    buffer.write(BOM)
    writer.writerow([cell(h) for h in result_header(run)])
    users = usernames()
    for count, row in enumerate(_result_rows(run, subjects), start=1):
        fields = row[2] if isinstance(row[2], dict) else {}
        out = [cell(row[0]), row[1], *[cell(fields.get(n)) for n in names]]
        out.append(cell(_response(run, row)))
        for start in range(4, 4 + width * len(subjects), width):
            if row[start + 2] is None:  # no score row (status is never NULL): not scored
                out += empty
                continue
            judge, final, status, review, reason, reviewer, rounds, error = row[
                start : start + width
            ]
            # Numbers stay numbers (None writes empty) and need no quote: a spreadsheet reads
            # -3.0 as a number. Status and review are our own words; rounds is JSON text
            # starting with "["; reason, reviewer and error are anyone's text.
            reviewer = text(users.get(reviewer)) if reviewer else ""
            out += (judge, final, status, review, text(reason), reviewer, rounds, text(error))
        writer.writerow(out)
        if count % FLUSH == 0:
            yield _drain(buffer)
    yield _drain(buffer)


def _score_record(values: tuple, users: dict[int, str]) -> dict[str, Any] | None:
    if values[2] is None:
        return None
    record = dict(zip(SCORE_COLUMNS, values, strict=True))
    record["rounds"] = json.loads(record["rounds"] or "[]")
    record["reviewer"] = users.get(record["reviewer"], "") if record["reviewer"] else ""
    return record


def results_jsonl(run: Run) -> Iterator[str]:
    if run.kind == Run.Kind.GENERATION:
        yield from responses_jsonl(run)
        return
    subjects = subjects_of(run)
    width = len(SCORE_COLUMNS)
    lines = []
    users = usernames()
    for row in _result_rows(run, subjects):
        scores = {
            subject: _score_record(row[4 + i * width : 4 + (i + 1) * width], users)
            for i, subject in enumerate(subjects)
        }
        record = {
            "key": row[0],
            "position": row[1],
            "fields": row[2],
            "response": _response(run, row),
            "scores": scores,
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
    buffer.write(BOM)
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
    header += [f"overall.{mode}.{end}" for mode in MODES for end in ("ci_low", "ci_high")]
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
            "overall_ci": {
                mode: [ci.low, ci.high] if (ci := row.overall_ci.get(mode)) else None
                for mode in MODES
            },
            "subjects": subjects,
        }


def board_csv(board: Board) -> Iterable[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    buffer.write(BOM)
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
        for mode in MODES:
            row += [cell(end) for end in record["overall_ci"][mode] or (None, None)]
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
