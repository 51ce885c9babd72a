"""Exports: a run's results per item (streamed) and the leaderboard, as CSV or JSONL.

Run results are read as streamed queries in item order, merged in Python: the items, the
run's scores (the unique (run, item, subject) index), the first epoch's responses and the
judge's rounds (for its reasons), beside one small query of blind entries, so memory stays
flat and the number of queries does not depend on the number of items. Items without a
score get empty cells (null in JSONL), like ml3m's `load_scores` gives NaN: nothing is
dropped.

CSV cells carry numbers at the precision the pages show (people read them beside the page);
JSONL carries full precision (programs read it). A board export holds what its view shows:
judge-only, human-corrected, or both side by side.
"""

import csv
import functools
import io
import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import (
    BigIntegerField,
    Case,
    F,
    Q,
    TextField,
    Value,
    When,
)
from django.db.models.functions import Cast, Concat

from apps.datasets.csvsafe import cell, line_writer, neutralise
from apps.datasets.models import Item
from apps.judges.models import Comparison, JudgeRound, Score, judge_of
from apps.leaderboards import costs
from apps.leaderboards.boards import Board, Row
from apps.leaderboards.corpus import CorpusCell
from apps.leaderboards.corrected import Corrected, CorrectedRow
from apps.leaderboards.pairs import Pairs
from apps.leaderboards.pairwise_board import PairwiseBoard
from apps.leaderboards.people import PeopleAgreement
from apps.leaderboards.ppi import Estimate
from apps.review.models import Adjudication, BlindEntry, Review
from apps.runs.models import Response, Run, Turn, set_names
from apps.runs.turns import dialogue

CHUNK = 2000  # rows per database fetch
FLUSH = 500  # CSV rows per streamed piece
MEMO = 10_000  # distinct values remembered per export (see _Memo)
SCORE_COLUMNS = (
    "judge",
    "final",
    "status",
    "review",
    "override_reason",
    "reviewer",
    "rounds",
    "error",
    "turns",
)
# Per subject in a run's CSV: the score columns above from SQL, the judge's reason and the
# blind entries from their own queries.
RESULT_COLUMNS = (
    "judge",
    "final",
    "status",
    "judge_reason",
    "review",
    "override_reason",
    "reviewer",
    "blind",
    "rounds",
    "error",
)
RESULT_DIGITS = 3  # the run's results page shows values with up to 3 decimals
BOARD_DIGITS = 2  # the board shows means, intervals and the overall with 2
BOM = "\ufeff"  # Excel then reads the file as UTF-8, as the datasets export does
FORMATS = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson; charset=utf-8"}


def field_names(run: Run) -> list[str]:
    """The dataset's columns as a run's export writes them: a judged column is the run's
    response, so it is written once, as `response`, not a second time as a field."""
    return [name for name in dataset_columns(run) if name != run.source_column]


def dataset_columns(run: Run) -> list[str]:
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
    if hasattr(run, "judged_with"):
        return list(judge_of(run).subject_names)
    return []


def _result_rows(run: Run, subjects: list[str]) -> Iterator[tuple[int, str, int, Any, Any, list]]:
    """One row per item in id order: (pk, key, position, fields, response, scores), scores
    holding each subject's SCORE_COLUMNS (None where the subject has no score).

    Three streamed queries merged here by item id, each an ordered walk of a unique index:
    the dataset's items, the run's scores (run, item, subject) and the first epoch's responses
    (run, item, epoch). One query joining every subject's score cost 3 s in PostgreSQL at 100k
    items × 5 subjects (five hash joins and an on-disk sort), and as a cursor it chose nested
    loops: 18 s. Review state, reviewer and error text are shaped by CASE/CONCAT in SQL so the
    Python loop per row stays small.
    """
    items = (
        Item.objects.filter(dataset_id=run.dataset_id)
        .order_by("pk")
        .values_list("pk", "key", "position", "fields")
        .iterator(chunk_size=CHUNK)
    )
    responses: Iterator[tuple] = iter(())
    if run.source_run_id:
        # With epochs, the first epoch's response; the rounds column has every epoch's values.
        responses = (
            Response.objects.filter(run_id=run.source_run_id, epoch=0)
            .order_by("item_id")
            .values_list("item_id", "text")
            .iterator(chunk_size=CHUNK)
        )
    response_of = _by_item(responses)
    overridden = Q(override_value__isnull=False)
    confirmed = Q(confirmed_at__isnull=False)
    scores = (
        Score.objects.filter(run_id=run.pk, subject__in=subjects)
        .order_by("item_id", "subject")
        .values_list(
            "item_id",
            "subject",
            "judge_value",
            "final_value",
            "status",
            Case(
                When(overridden, then=Value("overridden")),
                When(confirmed, then=Value("confirmed")),
                default=Value(""),
            ),
            "override_reason",
            # As text: Django converts an integer expression row by row in Python (0.5 s
            # at 500k scores); a text column passes through (see usernames).
            Cast(
                Case(
                    When(overridden, then=F("override_by_id")),
                    When(confirmed, then=F("confirmed_by_id")),
                    default=None,
                    output_field=BigIntegerField(),
                ),
                TextField(),
            ),
            Cast("round_values", TextField()),
            Case(
                When(error_kind="", then=F("error")),
                default=Concat("error_kind", Value(": "), "error", output_field=TextField()),
                output_field=TextField(),
            ),
            Cast("turn_values", TextField()),
        )
        .iterator(chunk_size=CHUNK * max(1, len(subjects)))
    )
    index = {subject: i for i, subject in enumerate(subjects)}
    score = next(scores, None)
    for pk, key, position, fields in items:
        found = response_of(pk)
        by_subject: list[Any] = [None] * len(subjects)
        # The merge inline, not through _by_item: five scores an item, 500k calls saved.
        while score is not None and score[0] <= pk:
            if score[0] == pk:
                by_subject[index[score[1]]] = score[2:]
            score = next(scores, None)
        yield pk, key, position, fields, found[0][1] if found else None, by_subject


def text(value: str | None) -> str:
    """A text cell from the database, neutralised (None is empty)."""
    return neutralise(value) if value else ""


def usernames() -> dict[str, str]:
    """Every user's name by id (as text, as the export query gives it): a team is small, and
    mapping ids here keeps two user joins per subject out of the export query."""
    return {str(pk): name for pk, name in get_user_model().objects.values_list("pk", "username")}


class _Memo(dict):
    """`memo[value]` is `make(value)`, kept for up to MEMO distinct values: a judge gives few
    distinct values (1 to 5, means of 3 epochs, the same few rounds lists), and round() costs
    ten dictionary lookups, json.loads seventy (1.6 s of a 100k-item export before)."""

    def __init__(self, make: Callable[[Any], Any]) -> None:
        self.make = make

    def __missing__(self, key: Any) -> Any:
        value = self.make(key)
        # 0.0 == -0.0 as keys, and round(-0.0) writes "-0.0": zeros are not kept.
        if len(self) < MEMO and key != 0:
            self[key] = value
        return value


def _rounder(digits: int) -> _Memo:
    return _Memo(lambda value: None if value is None else round(value, digits))


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _significant(value: float | None, digits: int = 6) -> float | None:
    """A p-value to `digits` significant digits: rounding to decimals wrote 0.0 for a p the
    page shows as "< 0.001" (2e-9 from a sign test over 30 items)."""
    return None if value is None else float(f"{value:.{digits}g}")


def _reason_parts(reason: str, prefixes: dict[str, str]) -> str | dict[str, str]:
    """A reply's reason for every subject at once (`prefixes`: "accuracy: " -> "accuracy").

    A judge that gives a reason per subject has them kept as lines "accuracy: …" (see
    `apps.judges.parsing._find_reason`): each subject gets its own part. A reason that does not
    start that way is one reason for the whole reply (returned whole), and belongs to every
    subject.
    """
    parts: dict[str, list[str]] = {}
    current = None
    starts = tuple(prefixes)
    for line in reason.splitlines():
        start = None
        if line.startswith(starts):  # one C-level test for the many lines that start none
            start = next(p for p in prefixes if line.startswith(p))
        if start is not None:
            current = prefixes[start]
            parts.setdefault(current, []).append(line[len(start) :])
        elif current is None:
            return reason  # text before any "subject: " line: one reason for the reply
        else:
            parts[current].append(line)
    return {name: "\n".join(lines) for name, lines in parts.items()} if parts else reason


def judge_reasons(reasons: list[str], subjects: list[str]) -> dict[str, str]:
    """Each subject's reason over the item's rounds, numbered when the judge ran several; each
    reply read once for every subject (once per subject cost 5.5 of 8 s of CPU for 100k
    items × 5 subjects × 3 rounds)."""
    prefixes = {f"{name}: ": name for name in subjects}
    parts = [_reason_parts(reason, prefixes) for reason in reasons]
    said = {}
    for subject in subjects:
        texts = [p if isinstance(p, str) else p.get(subject, "") for p in parts]
        if len(texts) == 1:
            said[subject] = texts[0]
        else:
            said[subject] = "\n".join(f"round {i}: {t}" for i, t in enumerate(texts, start=1) if t)
    return said


def _round_reasons(run: Run) -> Callable[[int], list[str]]:
    """item id -> the judge's reason of each round, read in one streamed query beside the
    items (both in item order), so a run of any size never holds its reasons in memory."""
    rounds = (
        JudgeRound.objects.filter(run_id=run.pk)
        .order_by("item_id", "epoch", "round")
        .values_list("item_id", "reason")
        .iterator(chunk_size=CHUNK)
    )
    pending = next(rounds, None)

    def reasons(item_id: int) -> list[str]:
        nonlocal pending
        found = []
        while pending is not None and pending[0] <= item_id:
            if pending[0] == item_id:
                found.append(pending[1])
            pending = next(rounds, None)
        return found

    return reasons


def blind_entries(run: Run) -> dict[tuple[int, str], list[tuple[str, float]]]:
    """(item id, subject) -> [(reviewer, blind value)]. People type these one by one, so a run
    has few enough to hold in memory."""
    out: dict[tuple[int, str], list[tuple[str, float]]] = {}
    rows = (
        BlindEntry.objects.filter(score__run_id=run.pk)
        .order_by("score__item_id", "score__subject", "user__username")
        .values_list("score__item_id", "score__subject", "user__username", "value")
    )
    for item_id, subject, user, value in rows:
        out.setdefault((item_id, subject), []).append((user, value))
    return out


def blind_text(entries: list[tuple[str, float]]) -> str:
    """ "ann: 3; bob: 2": who entered which blind value, in one neutralised cell (a username
    may start with @, + or -)."""
    return text("; ".join(f"{user}: {round(value, RESULT_DIGITS):g}" for user, value in entries))


def result_columns(run: Run) -> tuple[str, ...]:
    """Per subject: RESULT_COLUMNS, and each turn's value for a judge that scores per turn
    (MT-Bench's turn 1, turn 2)."""
    per_turn = hasattr(run, "judged_with") and judge_of(run).per_turn
    return (*RESULT_COLUMNS, "turns") if per_turn else RESULT_COLUMNS


def result_header(run: Run) -> list[str]:
    fixed = {"key", "position", "response"}
    fields = [f"field.{name}" if name in fixed else name for name in field_names(run)]
    header = ["key", "position", *fields, "response"]
    for subject in subjects_of(run):
        header += [f"{subject}.{column}" for column in result_columns(run)]
    return header


def _one_snapshot(make: Callable[[Run], Iterator[str]]) -> Callable[[Run], Iterator[str]]:
    """On PostgreSQL, an export's streams read inside one transaction: one snapshot for all of
    them, and their cursors stream; outside a transaction a cursor is WITH HOLD, its whole
    result written to a temporary store first (0.1 s of the server's 0.6 s at 100k items).
    SQLite takes the write lock when a transaction begins (IMMEDIATE): not there."""

    @functools.wraps(make)
    def export(run: Run) -> Iterator[str]:
        if connection.vendor != "postgresql":
            yield from make(run)
            return
        with transaction.atomic():
            yield from make(run)

    return export


@_one_snapshot
def results_csv(run: Run) -> Iterator[str]:
    if run.holds_responses:
        yield from responses_csv(run)
        return
    if run.kind == Run.Kind.PAIRWISE:
        yield from comparisons_csv(run)
        return
    names, subjects = field_names(run), subjects_of(run)
    per_turn = "turns" in result_columns(run)
    writer = line_writer()
    users = usernames()
    blind = blind_entries(run)
    reasons_of = _round_reasons(run)
    column = run.source_column
    rounded = _rounder(RESULT_DIGITS)

    def score_cells(score: tuple) -> list:
        """A score's cells, the judge's reason and blind entries left empty (filled per item)."""
        judge, final, status, review, reason, reviewer, rounds, error, turns = score
        # Numbers stay numbers (None writes empty) and need no quote: a spreadsheet reads -3.0
        # as a number. Status and review are our own words; rounds is JSON text starting with
        # "["; reasons, reviewer, blind entries and error are anyone's text.
        found = [
            rounded[judge],
            rounded[final],
            status,
            "",
            review,
            text(reason),
            text(users.get(reviewer)) if reviewer else "",
            "",
            rounds,
            text(error),
        ]
        if per_turn:  # JSON text starting with "[", as rounds
            found.append(turns)
        return found

    # A row is its item's cells and a CSV piece per subject. The same few scores recur (a
    # judge's values, the same rounds), so each one's piece is written once and kept: writing
    # 100k rows cell by cell cost 0.5 s of CPU, mostly formatting floats.
    pieces = _Memo(lambda score: writer.writerow(score_cells(score))[:-2])

    def around(score: tuple) -> tuple[str, str, str]:
        """A score's piece in three, around its judge's reason (cell 3) and blind entries
        (cell 7): an item with reasons writes only those two cells of its own."""
        found = score_cells(score)
        return tuple(writer.writerow(found[a:b])[:-2] for a, b in ((0, 3), (4, 7), (8, None)))

    parts = _Memo(around)

    def one(value: str) -> str:
        return writer.writerow([value])[:-2] if value else ""  # a lone "" would write '""'

    empty = "," * (len(result_columns(run)) - 1)
    lines = [BOM + writer.writerow([cell(h) for h in result_header(run)])[:-2]]
    for pk, key, position, fields, response, scores in _result_rows(run, subjects):
        fields = fields if isinstance(fields, dict) else {}
        out = [cell(key), position, *[cell(fields.get(n)) for n in names]]
        out.append(cell(fields.get(column) if column else response))
        line = [writer.writerow(out)[:-2]]
        reasons = reasons_of(pk)
        said = judge_reasons(reasons, subjects) if reasons else {}
        for subject, score in zip(subjects, scores, strict=True):
            if score is None:  # no score row: not scored
                line.append(empty)
            elif reasons or blind:
                head, middle, tail = parts[score]
                reason = one(text(said[subject])) if reasons else ""
                entries = one(blind_text(blind.get((pk, subject), []))) if blind else ""
                line.append(f"{head},{reason},{middle},{entries},{tail}")
            else:
                line.append(pieces[score])
        lines.append(",".join(line))
        if len(lines) >= FLUSH:
            yield "\r\n".join(lines) + "\r\n"
            lines = []
    if lines:
        yield "\r\n".join(lines) + "\r\n"


def _score_record(
    values: tuple | None,
    users: dict[str, str],
    reason: str,
    blind: list[tuple[str, float]],
    per_turn: bool,
    parsed: _Memo,
) -> dict[str, Any] | None:
    """A subject's score in a JSONL line, keys in RESULT_COLUMNS order (`parsed`: JSON text
    to its value, remembered)."""
    if values is None:
        return None
    judge, final, status, review, override_reason, reviewer, rounds, error, turns = values
    record = {
        "judge": judge,
        "final": final,
        "status": status,
        "judge_reason": reason,
        "review": review,
        "override_reason": override_reason,
        "reviewer": users.get(reviewer, "") if reviewer else "",
        "blind": [{"user": user, "value": value} for user, value in blind],
        "rounds": parsed[rounds or "[]"],
        "error": error,
    }
    if per_turn:
        record["turns"] = parsed[turns or "[]"]
    return record


@_one_snapshot
def results_jsonl(run: Run) -> Iterator[str]:
    if run.holds_responses:
        yield from responses_jsonl(run)
        return
    if run.kind == Run.Kind.PAIRWISE:
        for record in comparison_records(run):
            yield json.dumps(record, ensure_ascii=False) + "\n"
        return
    subjects = subjects_of(run)
    per_turn = "turns" in result_columns(run)
    parsed = _Memo(json.loads)
    users = usernames()
    blind = blind_entries(run)
    reasons_of = _round_reasons(run)
    column = run.source_column
    encode = json.JSONEncoder(ensure_ascii=False).encode  # json.dumps makes one per call
    # A line is json.dumps of {"key", "position", "fields", "response", "scores"}, written in
    # pieces with the same separators: a score without the judge's reasons or blind entries is
    # one of a few that recur, its JSON written once and kept (as results_csv does).
    pieces = _Memo(lambda score: encode(_score_record(score, users, "", [], per_turn, parsed)))
    names = [encode(subject) + ": " for subject in subjects]
    lines = []
    for pk, key, position, fields, response, scores in _result_rows(run, subjects):
        reasons = reasons_of(pk)
        if column and isinstance(fields, dict):
            # The judged column is the response: once, under "response".
            response = fields.get(column)
            fields = {k: v for k, v in fields.items() if k != column}
        said = judge_reasons(reasons, subjects) if reasons else {}
        found = []
        for name, subject, score in zip(names, subjects, scores, strict=True):
            if score is None:
                found.append(name + "null")
            elif reasons or blind:
                reason = said.get(subject, "")
                entries = blind.get((pk, subject), []) if blind else []
                one = _score_record(score, users, reason, entries, per_turn, parsed)
                found.append(name + encode(one))
            else:
                found.append(name + pieces[score])
        lines.append(
            f'{{"key": {encode(key)}, "position": {encode(position)}, '
            f'"fields": {encode(fields)}, "response": {encode(response)}, '
            f'"scores": {{{", ".join(found)}}}}}'
        )
        if len(lines) >= FLUSH:
            yield "\n".join(lines) + "\n"
            lines = []
    if lines:
        yield "\n".join(lines) + "\n"


# ---- generation runs: the responses -----------------------------------------------------
RESPONSE_COLUMNS = ("status", "error", "prompt_tokens", "completion_tokens", "latency_ms")


def _responses(run: Run) -> Iterator[tuple[tuple, tuple | None]]:
    """(item, response) in item order, a row per epoch's response (epoch order), or one
    (item, None) for an item without any; a response is (item id, epoch, text, …)."""
    for item, found in _item_responses(run):
        if not found:
            yield item, None
        for response in found:
            yield item, response


def _by_item(rows: Iterator[tuple]) -> Callable[[int], list[tuple]]:
    """For a stream of rows ordered by item id (their first value), the rows of each item
    asked for in increasing id order: one pass, nothing held beyond the current item."""
    pending = next(rows, None)

    def of(item_id: int) -> list[tuple]:
        nonlocal pending
        found = []
        while pending is not None and pending[0] <= item_id:
            if pending[0] == item_id:
                found.append(pending)
            pending = next(rows, None)
        return found

    return of


def _item_responses(run: Run, *extra: str) -> Iterator[tuple[tuple, list[tuple]]]:
    """(item, its responses in epoch order) in item order; an item is (id, key, position,
    fields, *extra)."""
    items = (
        Item.objects.filter(dataset_id=run.dataset_id)
        .order_by("pk")
        .values_list("pk", "key", "position", "fields", *extra)
    )
    responses = iter(
        Response.objects.filter(run_id=run.pk)
        .order_by("item_id", "epoch")
        .values_list(
            "item_id",
            "epoch",
            "text",
            "status",
            "error_kind",
            "error",
            "prompt_tokens",
            "completion_tokens",
            "latency_ms",
            "details",
        )
        .iterator(chunk_size=CHUNK)
    )
    of = _by_item(responses)
    for item in items.iterator(chunk_size=CHUNK):
        yield item, of(item[0])


# ---- multi-turn runs: a row per turn, the whole transcript -------------------------------
TURN_COLUMNS = ("turn", "asked", "response", "status", "error")
TURN_NUMBERS = ("prompt_tokens", "completion_tokens", "latency_ms")


def _conversations(run: Run) -> Iterator[tuple[tuple, int | None, tuple | None, list[tuple]]]:
    """(item, epoch, response, turns) of a multi-turn run in item and epoch order: one per
    epoch with a response or a turn (an item still being asked has turns and no response),
    or (item, None, None, []) for an item never asked. A turn is (item id, epoch, number,
    asked, text, error kind, error, prompt tokens, completion tokens, latency)."""
    turns = (
        Turn.objects.filter(run_id=run.pk)
        .order_by("item_id", "epoch", "number")
        .values_list(
            "item_id",
            "epoch",
            "number",
            "asked",
            "text",
            "error_kind",
            "error",
            "prompt_tokens",
            "completion_tokens",
            "latency_ms",
        )
        .iterator(chunk_size=CHUNK)
    )
    turns_of = _by_item(turns)
    for item, responses in _item_responses(run, "conversation"):
        by_epoch: dict[int, list[tuple]] = {}
        for turn in turns_of(item[0]):
            by_epoch.setdefault(turn[1], []).append(turn)
        answered = {response[1]: response for response in responses}
        epochs = sorted(set(by_epoch) | set(answered))
        if not epochs:
            yield item, None, None, []
        for epoch in epochs:
            yield item, epoch, answered.get(epoch), by_epoch.get(epoch, [])


def _turn_error(turn: tuple) -> str:
    return f"{turn[5]}: {turn[6]}" if turn[5] else turn[6]


def turns_csv(run: Run) -> Iterator[str]:
    """A multi-turn run's answers, one row per (item, epoch, turn): what the turn asked, the
    model's answer, its status, error, tokens and latency; an item never asked has one row
    with empty cells."""
    names = field_names(run)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    fixed = {"key", "position", "epoch", *TURN_COLUMNS, *TURN_NUMBERS}
    epochs = run.epochs > 1
    header = [
        "key",
        "position",
        *(["epoch"] if epochs else []),
        *[f"field.{n}" if n in fixed else n for n in names],
        *TURN_COLUMNS,
        *TURN_NUMBERS,
    ]
    buffer.write(BOM)
    writer.writerow([cell(h) for h in header])
    count = 0
    for item, epoch, _, turns in _conversations(run):
        fields = item[3] if isinstance(item[3], dict) else {}
        start = [cell(item[1]), item[2]]
        if epochs:
            start.append(epoch + 1 if epoch is not None else "")
        start += [cell(fields.get(n)) for n in names]
        rows: list[tuple | None] = list(turns) or [None]  # never asked: one empty row
        for turn in rows:
            if turn is None:
                row = start + [""] * (len(TURN_COLUMNS) + len(TURN_NUMBERS))
            else:
                status = "failed" if turn[5] else "ok"
                row = [*start, turn[2], cell(turn[3]), cell(turn[4]), status]
                row += [cell(_turn_error(turn)), turn[7], turn[8], turn[9]]
            writer.writerow(row)
            count += 1
            if count % FLUSH == 0:
                yield _drain(buffer)
    yield _drain(buffer)


def turns_jsonl(run: Run) -> Iterator[str]:
    """A multi-turn run's answers, one record per (item, epoch): the item's response (its
    status and error, tokens and cost summed), each turn, and the whole transcript as chat
    messages (the item's conversation with the model's answers in place; what a memory
    script or simulated user said otherwise), as the item's page shows it."""
    for item, epoch, found, turns in _conversations(run):
        record: dict[str, Any] = {"key": item[1], "position": item[2], "fields": item[3]}
        if run.epochs > 1 and epoch is not None:
            record["epoch"] = epoch + 1
        if found is None:
            record.update(response=None, status=None)
        else:
            _, _, text, status, error_kind, error, prompt, completion, latency, details = found
            record.update(
                response=text,
                status=status,
                error=f"{error_kind}: {error}" if error_kind else error,
                prompt_tokens=prompt,
                completion_tokens=completion,
                latency_ms=latency,
            )
            if details:  # a memory script's realised gaps
                record["details"] = details
        record["turns"] = [
            {
                "turn": turn[2],
                "asked": turn[3],
                "answer": turn[4] if not turn[5] else None,
                "error": _turn_error(turn),
                "prompt_tokens": turn[7],
                "completion_tokens": turn[8],
                "latency_ms": turn[9],
            }
            for turn in turns
        ]
        record["transcript"] = _transcript(run, item[4] or [], turns)
        yield json.dumps(record, ensure_ascii=False) + "\n"


def _transcript(run: Run, conversation: list[dict[str, Any]], turns: list[tuple]) -> list[Any]:
    """As `Response.transcript`, from the export's rows: up to the first turn not answered."""
    answered = []
    for number, turn in enumerate(turns, 1):
        if turn[2] != number or turn[5]:
            break
        answered.append(turn)
    if conversation and run.kind == Run.Kind.GENERATION:
        return dialogue([dict(m) for m in conversation], [turn[4] for turn in answered])
    return [
        message
        for turn in answered
        for message in (
            {"role": "user", "content": turn[3]},
            {"role": "assistant", "content": turn[4]},
        )
    ]


def responses_csv(run: Run) -> Iterator[str]:
    if run.multi_turn:
        yield from turns_csv(run)
        return
    names = field_names(run)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    fixed = {"key", "position", "response", *RESPONSE_COLUMNS}
    epochs = run.epochs > 1  # a column saying which answer of the item a row is
    # A choice-scoring run's response is its raw pick: the length-normalised one goes beside.
    choice = run.kind == Run.Kind.CHOICE
    header = [
        "key",
        "position",
        *(["epoch"] if epochs else []),
        *[f"field.{n}" if n in fixed else n for n in names],
        "response",
        *(["pick_norm"] if choice else []),
        *RESPONSE_COLUMNS,
    ]
    buffer.write(BOM)
    writer.writerow([cell(h) for h in header])
    for count, (item, found) in enumerate(_responses(run), start=1):
        fields = item[3] if isinstance(item[3], dict) else {}
        row = [cell(item[1]), item[2]]
        if epochs:
            row.append(found[1] + 1 if found is not None else "")
        row += [cell(fields.get(n)) for n in names]
        if found is None:
            row += [""] * (1 + choice + len(RESPONSE_COLUMNS))
        else:
            _, _, text, status, error_kind, error, prompt, completion, latency, details = found
            error = f"{error_kind}: {error}" if error_kind else error
            row.append(cell(text))
            if choice:
                row.append(cell((details or {}).get("pick_norm", "")))
            row += [status, cell(error), prompt, completion, latency]
        writer.writerow(row)
        if count % FLUSH == 0:
            yield _drain(buffer)
    yield _drain(buffer)


def responses_jsonl(run: Run) -> Iterator[str]:
    if run.multi_turn:
        yield from turns_jsonl(run)
        return
    for item, found in _responses(run):
        record: dict[str, Any] = {"key": item[1], "position": item[2], "fields": item[3]}
        if found is None:
            record.update(response=None, status=None)
        else:
            _, epoch, text, status, error_kind, error, prompt, completion, latency, details = found
            if run.epochs > 1:
                record["epoch"] = epoch + 1
            record.update(
                response=text,
                status=status,
                error=f"{error_kind}: {error}" if error_kind else error,
                prompt_tokens=prompt,
                completion_tokens=completion,
                latency_ms=latency,
            )
            if details:  # a choice-scoring run's picks and every option's log-likelihood
                record["details"] = details
        yield json.dumps(record, ensure_ascii=False) + "\n"


def _drain(buffer: io.StringIO) -> str:
    text = buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    return text


# ---- the leaderboard --------------------------------------------------------------------
STAT_COLUMNS = (
    "mean",
    "ci_low",
    "ci_high",
    "ci_method",
    "strict_mean",
    "answered_mean",
    "coverage",
    "n",
    "failed",
    "missing",
)
# Decimals of the board's numbers, as the page shows them (coverage as a percentage with one).
ROUNDED = {
    "mean": BOARD_DIGITS,
    "ci_low": BOARD_DIGITS,
    "ci_high": BOARD_DIGITS,
    "strict_mean": BOARD_DIGITS,
    "answered_mean": BOARD_DIGITS,
    "coverage": 3,
}


def _judged(row: Row) -> dict[str, Any]:
    """What the judge run judged: a generation run, or a column of the dataset."""
    return {
        "judged_run_id": row.run.source_run_id,
        "judged_column": row.run.source_column or None,
    }


def board_header(board: Board) -> list[str]:
    """The columns of the view the board shows (judge-only, human-corrected, or both), then
    what the board was built with: judge, tag, sort, the overall's formula, and each
    subject's weight, range and direction (the same in every row, so each row stands alone)."""
    modes = board.modes_shown
    header = ["rank", "tied_rank", "model", "run_id", "judged_run_id", "judged_column", "dataset"]
    header.append("run_status")
    header += [f"overall.{mode}" for mode in modes]
    header += [f"overall.{mode}.{end}" for mode in modes for end in ("ci_low", "ci_high")]
    for info in board.subjects:
        for mode in modes:
            header += [f"{info.name}.{mode}.{stat}" for stat in STAT_COLUMNS]
        header.append(f"{info.name}.overridden")
    header += ["epochs", "model_epoch_reduction", "flaky_items"]
    if (turns := board.turn_table) is not None:  # judged per turn: MT-Bench's turn columns
        header += [f"{turns.subject.name}.turn_{k}" for k in range(1, turns.turns + 1)]
    if (corpus := board.corpus_metric) is not None:  # corpus BLEU, macro-F1 (#29.12)
        header += [corpus.name, *(f"{corpus.name}.{c}" for c in ("ci_low", "ci_high", "n"))]
    if board.gap_rows:  # memory scripts: the subject's mean per scripted gap (#27.4)
        subject = _gap_subject(board)
        header += [
            f"{subject}.gap_{row.gap}.{column}" for row in board.gap_rows for column in GAP_COLUMNS
        ]
    if board.corrected is not None:  # PPI++ from the policy's random sample (#31.1)
        header += [
            "corrected.rank",
            "corrected.tied_rank",
            "corrected.sampled",
            "corrected.reviews_needed",
        ]
        for name in ["overall", *(info.name for info in board.subjects)]:
            header += [f"{name}.corrected.{stat}" for stat in CORRECTED_COLUMNS]
    header += [f"cost.{column}" for column in costs.CSV_COLUMNS]  # #32.4
    header += ["judge", "scoring", "epoch_reduction", "items", "clustered_by", "tag", "sort"]
    header.append("overall.formula")
    for info in board.subjects:
        header += [f"{info.name}.{c}" for c in ("weight", "min", "max", "direction")]
    if board.corrected is not None:
        header += [
            "corrected.sample",
            "corrected.ranked_by",
            "corrected.note",
            "corrected.design",
            "corrected.target_width",
        ]
    return header


GAP_COLUMNS = ("mean", "n", "failed", "realised")


def _gap_subject(board: Board) -> str:
    """The subject the gap table breaks down (the board's tag subject, else its first)."""
    by = board.tag_subject or board.subjects[0]
    return by.name


def _gaps(board: Board, index: int) -> list[dict[str, Any]] | None:
    """The board row's column of the gap table: per scripted gap, the mean over the items
    scripted with it, n, failed and the mean realised gap; None without memory scripts."""
    if not board.gap_rows:
        return None
    return [
        {
            "gap": row.gap,
            "mean": (c := row.cells[index]).mean,
            "n": c.n,
            "failed": c.failed,
            "realised": c.realised,
        }
        for row in board.gap_rows
    ]


# Per subject (and the overall) of a corrected board: the PPI++ estimate, its interval, the
# labels it learnt from and what they are worth (#31.1).
CORRECTED_COLUMNS = (
    "mean",
    "ci_low",
    "ci_high",
    "judge_mean",
    "labelled",
    "effective_n",
    "lambda",
)


def estimate_record(found: Estimate | None) -> dict[str, Any] | None:
    if found is None:
        return None
    return {
        "mean": found.mean,
        "ci_low": found.low,
        "ci_high": found.high,
        "se": found.se,
        "judge_mean": found.judge_mean,
        "labelled": found.n,
        "unlabelled": found.unlabelled,
        "effective_n": found.effective_n,
        "lambda": found.lam,
    }


def corrected_record(corrected: Corrected, row: CorrectedRow) -> dict[str, Any]:
    return {
        "rank": corrected.rows.index(row) + 1,
        "tied_rank": corrected.ranks.get(row.run.pk),
        "sampled": row.sampled,
        # More reviews of the sample for the ranking key's interval to reach the target width
        # asked for (?target=; None without one, or when the sample cannot reach it).
        "reviews_needed": row.reviews_needed,
        "overall": estimate_record(row.overall),
        "subjects": {name: estimate_record(cell) for name, cell in row.cells.items()},
    }


def corrected_meta(corrected: Corrected | None) -> dict[str, Any] | None:
    """How the corrected scores were made, and every pair of models compared on them."""
    if corrected is None:
        return None
    return {
        "method": (
            "active inference: PPI++ with each review weighted by 1/π (its item's recorded "
            "chance of being drawn), 95% normal interval"
            if corrected.policy.is_active
            else "PPI++ (power-tuned prediction-powered inference), 95% normal interval"
        ),
        "sample": corrected.sample_label,
        "sample_design": corrected.policy.sample_design,
        "sample_percent": corrected.policy.sample_percent,
        "sample_seed": corrected.policy.sample_seed,
        "target_width": corrected.target,
        "ranked_by": corrected.key,
        "ranking_changed": corrected.reorders,
        "note": corrected.note,
        "correction": "holm",
        "pairs": [
            {
                "model_a": pair.a.label,
                "model_b": pair.b.label,
                "run_a": pair.a.run.pk,
                "run_b": pair.b.run.pk,
                "diff": estimate_record(pair.estimate),
                "p": pair.estimate.p if pair.estimate else None,
                "p_adjusted": pair.p_adjusted,
                "significantly_better": pair.better.label if pair.better else None,
            }
            for pair in corrected.pairs
        ],
    }


def board_records(board: Board) -> Iterator[dict[str, Any]]:
    modes = board.modes_shown
    corrected_rows = (
        {r.run.pk: r for r in board.corrected.rows} if board.corrected is not None else {}
    )
    front = costs.pareto_front(costs.board_points(board))
    by_turn = (
        {r.run_id: [c.mean for c in r.turns] for r in board.turn_table.rows}
        if board.turn_table is not None
        else {}
    )
    for rank, row in enumerate(board.rows, start=1):
        subjects = {}
        for info in board.subjects:
            entry: dict[str, Any] = {}
            for mode in modes:
                c = row.cells[mode][info.name]
                entry[mode] = {
                    "mean": c.mean,
                    "ci_low": c.ci.low if c.ci else None,
                    "ci_high": c.ci.high if c.ci else None,
                    "ci_method": c.ci.method if c.ci else None,
                    "strict_mean": c.strict_mean,
                    "answered_mean": c.answered_mean,
                    "coverage": c.coverage,
                    "n": c.n,
                    "failed": c.failed,
                    "missing": c.missing,
                }
            entry["overridden"] = row.cells["human"][info.name].overridden
            subjects[info.name] = entry
        yield {
            "rank": rank,
            "tied_rank": board.tied_ranks.get(row.run.pk),
            "model": row.label,
            "run_id": row.run.pk,
            **_judged(row),
            "dataset": str(row.run.dataset),
            "run_status": row.run.status,
            "overall": {mode: row.overall[mode] for mode in modes},
            "overall_ci": {
                mode: [ci.low, ci.high] if (ci := row.overall_ci.get(mode)) else None
                for mode in modes
            },
            "subjects": subjects,
            "epochs": row.run.judged_epochs,
            # The model's own reduction: pass@n where it has only n < k epochs (#29.10).
            "model_epoch_reduction": board.reduction_for(row.run).query,
            "flaky_items": board.flaky.get(row.run.pk) if board.epochs > 1 else None,
            "corpus": _corpus_record(board.corpus.get(row.run.pk)),
            # A judge that scores per turn: the subject's mean per turn (`Board.turn_table`).
            "turns": by_turn.get(row.run.pk),
            # Memory scripts: the subject (`gap_subject`) per scripted information gap.
            "gap_subject": _gap_subject(board) if board.gap_rows else None,
            "gaps": _gaps(board, rank - 1),
            # PPI++ from the review policy's random sample; None without one (#31.1).
            "corrected": corrected_record(board.corrected, corrected_rows[row.run.pk])
            if board.corrected is not None
            else None,
            # Generation and judge cost, savings, per item, latency, Pareto front (#32.4).
            "cost": costs.cost_record(board.costs.get(row.run.pk), front, row.run.pk),
        }


def _corpus_record(found: CorpusCell | None) -> dict[str, Any] | None:
    if found is None:
        return None
    return {
        "metric": found.name,
        "value": found.value,
        "ci_low": found.ci.low if found.ci else None,
        "ci_high": found.ci.high if found.ci else None,
        "n": found.n,
    }


def board_meta(board: Board) -> dict[str, Any]:
    return {
        "task": board.task.slug,
        "judge": board.judge.name if board.judge else None,
        "judge_version": board.judge.version if board.judge else None,
        "values": board.params.values,
        "scoring": board.params.scoring,
        "items": "common" if board.params.common and board.coverage else "all",
        "clustered_by": board.params.cluster,
        "epochs": board.reduction.query,
        "weights": board.weights,
        "tag": board.params.tag,
        "sort": board.sort,
        "direction": board.direction,
        "overall_formula": board.overall_formula,
        "scales": {
            info.name: {"min": info.low, "max": info.high, "direction": info.direction}
            for info in board.subjects
        },
        "judge_corrected": corrected_meta(board.corrected),
    }


def board_csv(board: Board) -> Iterable[str]:
    modes = board.modes_shown
    meta = board_meta(board)
    judge = f"{meta['judge']} v{meta['judge_version']}"
    built_with = [
        judge,
        meta["scoring"],
        meta["epochs"],
        meta["items"],
        meta["clustered_by"],
        meta["tag"],
        f"{board.sort} ({board.direction})",
        board.overall_formula,
    ]
    for info in board.subjects:
        built_with += [board.weights.get(info.name, 1.0), info.low, info.high, info.direction]
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    buffer.write(BOM)
    writer.writerow([cell(h) for h in board_header(board)])
    for record in board_records(board):
        row = [
            record["rank"],
            record["tied_rank"],
            cell(record["model"]),
            record["run_id"],
            record["judged_run_id"],
            cell(record["judged_column"]),
            cell(record["dataset"]),
            record["run_status"],
        ]
        row += [_rounded(record["overall"][mode], BOARD_DIGITS) for mode in modes]
        for mode in modes:
            ends = record["overall_ci"][mode] or (None, None)
            row += [_rounded(end, BOARD_DIGITS) for end in ends]
        for info in board.subjects:
            entry = record["subjects"][info.name]
            for mode in modes:
                row += [
                    _rounded(entry[mode][stat], ROUNDED[stat])
                    if stat in ROUNDED
                    else cell(entry[mode][stat])
                    for stat in STAT_COLUMNS
                ]
            row.append(entry["overridden"])
        row += [record["epochs"], record["model_epoch_reduction"], record["flaky_items"]]
        if board.turn_table is not None:
            means = record["turns"] or [None] * board.turn_table.turns
            row += [_rounded(mean, BOARD_DIGITS) for mean in means]
        if board.corpus_metric is not None:
            corpus = record["corpus"] or {}
            row += [_rounded(corpus.get(k), BOARD_DIGITS) for k in ("value", "ci_low", "ci_high")]
            row.append(corpus.get("n"))
        for gap in record["gaps"] or []:
            row += [_rounded(gap["mean"], BOARD_DIGITS), gap["n"], gap["failed"]]
            # Whole tokens, as the page shows them.
            row.append(None if gap["realised"] is None else round(gap["realised"]))
        if (corrected := record["corrected"]) is not None:
            row += [
                corrected["rank"],
                corrected["tied_rank"],
                corrected["sampled"],
                corrected["reviews_needed"],
            ]
            for found in [corrected["overall"], *corrected["subjects"].values()]:
                row += [
                    _corrected_cell(found, stat) if found else None for stat in CORRECTED_COLUMNS
                ]
        row += [_cost_cell(value) for value in costs.csv_cells(record["cost"])]
        extra = []
        if board.corrected is not None:
            extra = [
                board.corrected.sample_label,
                board.corrected.key,
                board.corrected.note,
                board.corrected.policy.sample_design,
                board.corrected.target,
            ]
        writer.writerow(row + [cell(value) for value in built_with + extra])
    return [buffer.getvalue()]


def _cost_cell(value: Any) -> Any:
    """Dollars (and latencies) to 6 decimals: a ten-thousandth of a cent."""
    return round(value, 6) if isinstance(value, float) else value


def _corrected_cell(found: dict[str, Any], stat: str) -> Any:
    if stat in ("mean", "ci_low", "ci_high", "judge_mean"):
        return _rounded(found[stat], BOARD_DIGITS)
    if stat == "effective_n":
        return _rounded(found[stat], 1)
    if stat == "lambda":
        return _rounded(found[stat], 3)
    return found[stat]


CORRECTED_PAIR_HEADER = [
    "model_a",
    "model_b",
    "run_a",
    "run_b",
    "compared_on",
    "labelled",
    "items",
    "mean_diff",
    "ci_low",
    "ci_high",
    "effective_n",
    "p",
    "p_adjusted",
    "correction",
    "significantly_better",
    "sample",
]


def corrected_pairs_csv(corrected: Corrected) -> Iterable[str]:
    """Every pair of models compared on their corrected scores: the PPI++ mean of A − B per
    item, its interval, raw and Holm-adjusted p."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    buffer.write(BOM)
    writer.writerow(CORRECTED_PAIR_HEADER)
    for pair in corrected.pairs:
        found = pair.estimate
        writer.writerow(
            [
                cell(pair.a.label),
                cell(pair.b.label),
                pair.a.run.pk,
                pair.b.run.pk,
                cell(corrected.key),
                found.n if found else None,
                found.items if found else None,
                _rounded(found.mean if found else None, BOARD_DIGITS),
                _rounded(found.low if found else None, BOARD_DIGITS),
                _rounded(found.high if found else None, BOARD_DIGITS),
                _rounded(found.effective_n if found else None, 1),
                _significant(found.p if found else None),
                _significant(pair.p_adjusted),
                "holm",
                cell(pair.better.label) if pair.better else "",
                cell(corrected.sample_label),
            ]
        )
    return [buffer.getvalue()]


PAIR_HEADER = [
    "model_a",
    "model_b",
    "run_a",
    "run_b",
    "compared_on",
    "n",
    "mean_diff",
    "ci_low",
    "ci_high",
    "p",
    "test",
    "p_adjusted",
    "correction",
    "significantly_better",
]


def pairs_csv(board: Board, table: Pairs) -> Iterable[str]:
    """Every pair of the board's models: difference (A − B), its CI, raw and adjusted p."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    buffer.write(BOM)
    writer.writerow(PAIR_HEADER)
    for pair in table.pairs:
        writer.writerow(
            [
                cell(pair.a.label),
                cell(pair.b.label),
                pair.a.run.pk,
                pair.b.run.pk,
                cell(table.key),
                pair.n,
                _rounded(pair.mean_diff, BOARD_DIGITS),
                _rounded(pair.ci.low if pair.ci else None, BOARD_DIGITS),
                _rounded(pair.ci.high if pair.ci else None, BOARD_DIGITS),
                _significant(pair.p),
                pair.test_label,
                _significant(pair.p_adjusted),
                table.correction,
                cell(pair.better.label) if pair.better else "",
            ]
        )
    return [buffer.getvalue()]


def board_jsonl(board: Board) -> Iterable[str]:
    meta = board_meta(board)
    return [
        json.dumps({**meta, **record}, ensure_ascii=False) + "\n" for record in board_records(board)
    ]


# ---- agreement between people -------------------------------------------------------------
PEOPLE_HEADER = [
    "kind",
    "judge",
    "subject",
    "scale",
    "tag",
    "reviewer",
    "other_reviewer",
    "units",
    "reviews",
    "alpha",
    "fleiss_kappa",
    "percent_agreement",
    "judge_percent_agreement",
    "items",
    "median_seconds",
    "same_as_settled",
    "distance_to_settled",
    "same_as_judge",
    "distance_to_judge",
]


def people_records(found: PeopleAgreement) -> Iterator[dict[str, Any]]:
    """One record per subject, per tag of a subject, per pair of reviewers and per reviewer."""
    for s in found.subjects:
        judge = f"{s.judge.name} v{s.judge.version}"
        base = {"judge": judge, "subject": s.subject, "scale": s.level}
        yield {
            "kind": "subject",
            **base,
            "units": s.units,
            "reviews": s.reviews,
            "alpha": s.alpha,
            "fleiss_kappa": s.fleiss,
            "percent_agreement": s.percent,
            "judge_percent_agreement": s.judge_percent,
        }
        for t in s.tags:
            yield {
                "kind": "tag",
                **base,
                "tag": t["tag"],
                "units": t["units"],
                "alpha": t["alpha"],
                "fleiss_kappa": t["fleiss"],
                "percent_agreement": t["percent"],
            }
    for p in found.pairs:
        yield {
            "kind": "pair",
            "judge": f"{p.judge.name} v{p.judge.version}",
            "subject": p.subject,
            "reviewer": p.a,
            "other_reviewer": p.b,
            "units": p.n,
            "alpha": p.alpha,
            "percent_agreement": p.percent,
        }
    for r in found.reviewers:
        yield {
            "kind": "reviewer",
            "reviewer": r.username,
            "items": r.items,
            "reviews": r.reviews,
            "median_seconds": r.median_seconds,
            "same_as_settled": r.with_people,
            "distance_to_settled": r.settled_distance,
            "same_as_judge": r.with_judge,
            "distance_to_judge": r.judge_distance,
        }


def records_csv(header: list[str], records: Iterable[dict[str, Any]]) -> str:
    """Records as one CSV text under `header`: anyone's text neutralised (`cell`), None empty,
    numbers as numbers."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    buffer.write(BOM)
    writer.writerow(header)
    for record in records:
        writer.writerow(
            [
                cell(v) if isinstance(v, str) else ("" if v is None else v)
                for v in (record.get(name) for name in header)
            ]
        )
    return buffer.getvalue()


def people_csv(found: PeopleAgreement) -> Iterable[str]:
    return [records_csv(PEOPLE_HEADER, people_records(found))]


def people_json(found: PeopleAgreement) -> str:
    grouped: dict[str, list[dict[str, Any]]] = {
        "subjects": [],
        "tags": [],
        "pairs": [],
        "reviewers": [],
    }
    plural = {"subject": "subjects", "tag": "tags", "pair": "pairs", "reviewer": "reviewers"}
    for record in people_records(found):
        grouped[plural[record.pop("kind")]].append(record)
    return json.dumps(grouped, ensure_ascii=False, indent=2) + "\n"


# ---- reviews: one row per review ----------------------------------------------------------
REVIEW_HEADER = [
    "key",
    "position",
    "subject",
    "reviewer",
    "value",
    "reason",
    "seconds",
    "reviewed_at",
    "judge_value",
    "final_value",
    "settled_by",
    "adjudicated_by",
    "adjudication_reason",
]


def review_records(run: Run) -> Iterator[dict[str, Any]]:
    """Every review of the judge run's scores, with the score's judge and final value and how
    it was settled (consensus, adjudication, or still open)."""
    adjudications = {
        a.score_id: a for a in Adjudication.objects.filter(score__run=run).select_related("user")
    }
    rows = (
        Review.objects.filter(score__run=run)
        .select_related("score__item", "user")
        .order_by("score__item__position", "score__subject", "created_at", "pk")
    )
    for review in rows.iterator(chunk_size=CHUNK):
        score = review.score
        adjudication = adjudications.get(score.pk)
        if adjudication is not None and not adjudication.is_open:
            settled = "adjudication"
        elif adjudication is not None:
            settled = "waiting for adjudication"
        elif score.is_reviewed:
            settled = "consensus"
        else:
            settled = ""
        yield {
            "key": score.item.key,
            "position": score.item.position,
            "subject": score.subject,
            "reviewer": review.user.username,
            "value": review.value,
            "reason": review.reason,
            "seconds": round(review.seconds, 1),
            "reviewed_at": review.created_at.isoformat(),
            "judge_value": score.judge_value,
            "final_value": score.final_value,
            "settled_by": settled,
            "adjudicated_by": adjudication.user.username
            if adjudication is not None and adjudication.user is not None
            else "",
            "adjudication_reason": adjudication.reason if adjudication is not None else "",
        }


def reviews_csv(run: Run) -> Iterator[str]:
    yield records_csv(REVIEW_HEADER, review_records(run))


def reviews_jsonl(run: Run) -> Iterator[str]:
    for record in review_records(run):
        yield json.dumps(record, ensure_ascii=False) + "\n"


# ---- the pairwise board ------------------------------------------------------------------------
PAIRWISE_HEADER = [
    "rank",
    "model",
    "rating",
    "ci_low",
    "ci_high",
    "battles",
    "win_rate",
    "prior_sd",
    "mle_exists",
    "judge",
    "source",
    "position_consistency",
    "first_position_share",
]


LENGTH_HEADER = ["baseline", "win_rate_vs_baseline", "lc_win_rate", "length_difference"]
# Bradley–Terry with style control (#31.3): the rating at equal length and Markdown.
STYLE_HEADER = ["style_rating", "style_ci_low", "style_ci_high", "style_rank"]


def pairwise_records(board: PairwiseBoard) -> list[dict[str, Any]]:
    """The Bradley–Terry ratings (rank by CI overlap), one record per model; with a baseline,
    each model's raw and length-controlled win rate against it and the length difference."""
    judge = f"{board.judge.name} v{board.judge.version}" if board.judge else ""
    stats = board.consistency
    against = {r.model: r for r in board.length_controlled or []}
    styled = {r.model: r for r in board.style.ratings} if board.style is not None else {}
    records = []
    for r in board.ratings.ratings if board.ratings else []:
        record: dict[str, Any] = {
            "rank": r.rank,
            "model": r.model,
            "rating": round(r.rating, 1),
            "ci_low": round(r.low, 1),
            "ci_high": round(r.high, 1),
            "battles": r.battles,
            "win_rate": round(r.win_rate, 4),
            # The declared prior (Elo points) and whether the ratings would be finite without
            # it (#29.3): false when a model never lost or never won.
            "prior_sd": board.ratings.prior_sd if board.ratings else None,
            "mle_exists": board.ratings.mle_exists if board.ratings else None,
            "judge": judge,
            "source": board.source_label,
            "position_consistency": None if stats is None else _rounded(stats.rate, 4),
            "first_position_share": None if stats is None else _rounded(stats.first_share, 4),
        }
        if board.style is not None:
            eq = styled.get(r.model)
            record |= {
                "style_rating": None if eq is None else round(eq.rating, 1),
                "style_ci_low": None if eq is None else round(eq.low, 1),
                "style_ci_high": None if eq is None else round(eq.high, 1),
                "style_rank": None if eq is None else eq.rank,
            }
        if board.baseline:
            lc = against.get(r.model)
            record |= {
                "baseline": board.baseline,
                "win_rate_vs_baseline": None if lc is None else round(lc.raw, 4),
                "lc_win_rate": None if lc is None else _rounded(lc.controlled, 4),
                "length_difference": None if lc is None else round(lc.length_difference, 1),
            }
        records.append(record)
    return records


def pairwise_csv(board: PairwiseBoard) -> Iterable[str]:
    header = (
        PAIRWISE_HEADER
        + (STYLE_HEADER if board.style is not None else [])
        + (LENGTH_HEADER if board.baseline else [])
    )
    return [records_csv(header, pairwise_records(board))]


def pairwise_jsonl(board: PairwiseBoard) -> Iterable[str]:
    return [json.dumps(record, ensure_ascii=False) + "\n" for record in pairwise_records(board)]


# ---- a pairwise run: one row per comparison -------------------------------------------------------
COMPARISON_HEADER = [
    "key",
    "position",
    "model_a",
    "model_b",
    "order",
    "shown_first",
    "status",
    "said",
    "verdict",
    "winner",
    "repaired",
    "reason",
    "error",
]


def comparison_records(run: Run) -> Iterator[dict[str, Any]]:
    """Each comparison of a pairwise run: the pair, the order it was shown in, what the judge
    said of the shown order and what that means for the pair."""
    labels = set_names(list(Run.objects.response_sets().filter(task=run.task)))
    rows = (
        Comparison.objects.filter(run=run)
        .select_related("item")
        .order_by("item__position", "a_run_id", "b_run_id", "order")
    )
    for c in rows.iterator(chunk_size=CHUNK):
        a, b = labels.get(c.a_run_id, ""), labels.get(c.b_run_id, "")
        winner = {"a": a, "b": b}.get(c.verdict, "tie" if c.verdict == "tie" else "")
        yield {
            "key": c.item.key,
            "position": c.item.position,
            "model_a": a,
            "model_b": b,
            "order": c.order,
            "shown_first": a if c.order == 0 else b,
            "status": c.status,
            "said": c.shown,
            "verdict": c.verdict,
            "winner": winner,
            "repaired": c.repaired,
            "reason": c.reason,
            "error": f"{c.error_kind}: {c.error}" if c.error_kind else c.error,
        }


def comparisons_csv(run: Run) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    buffer.write(BOM)
    writer.writerow(COMPARISON_HEADER)
    for count, record in enumerate(comparison_records(run), start=1):
        writer.writerow(
            [cell(v) if isinstance(v, str) else v for v in (record[h] for h in COMPARISON_HEADER)]
        )
        if count % FLUSH == 0:
            yield _drain(buffer)
    yield _drain(buffer)
