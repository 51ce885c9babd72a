"""From a read file to stored items: the column mapping, the item rows, and one atomic write.

`import_dataset` is the one entry point for the page, the CLI and other apps' loaders; the
background job imports big files with `fill_dataset_from_file`, which streams them. Whatever
is wrong with a file or a mapping stops the import with a message naming the row and field;
the write is one transaction, so no half-written dataset ever exists.
"""

import json
import logging
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction

from apps.datasets import fulltext
from apps.datasets.conversations import (
    CONVERSATION_NAMES,
    ConversationError,
    looks_like_conversation,
    parse_conversation,
    parse_turn_references,
)
from apps.datasets.models import (
    Dataset,
    Fingerprint,
    Item,
    Task,
    fingerprint_of,
    mapping_roles,
    tags_text,
)
from apps.datasets.readers import (
    DatasetError,
    RowStream,
    Table,
    Unstreamable,
    read_table,
    stream_rows,
)
from apps.datasets.signals import dataset_imported
from apps.datasets.values import as_text

log = logging.getLogger(__name__)

WRITE_BATCH = 5000
# A streamed import writes a batch once it holds this many characters of the file, however few
# rows that is: memory holds one batch (several copies of it: row dicts, JSON, search text).
WRITE_BATCH_CHARS = 4 * 1024 * 1024
# An item is found by the words of its first million characters: the search text is a second
# copy of the fields, and a 50 MB cell copied whole would hold memory (and the index) twice.
SEARCH_TEXT_CHARS = 1_000_000
LONG_ROW_CHARS = 8 * 1024 * 1024
KEY_MAX_LENGTH = Item._meta.get_field("key").max_length or 255
ID_NAMES = ("id", "uid", "qid", "key", "item_id", "question_id", "_id")
REFERENCE_NAMES = ("answer", "reference", "label", "target", "gold", "expected", "output")
TAGS_NAMES = ("tags", "tag")
RESPONSE_PREFIXES = ("response", "prediction", "completion", "model_output")

Progress = Callable[[str, int, int], None]


def sync_max_rows() -> int:
    """Uploads up to this many rows import inside the request; bigger ones in a worker."""
    return int(settings.DATASET_SYNC_MAX_ROWS)


# ---- mapping ------------------------------------------------------------------------------
LISTED_COLUMNS = 30
# Names of a reference answer beyond REFERENCE_NAMES (case, spaces and dashes aside): such a
# column is never suggested as a prompt input, so a gold answer cannot leak into prompts.
REFERENCE_LIKE_NAMES = frozenset(
    {*REFERENCE_NAMES, "answers", "ref", "solution", "ground_truth", "correct", "answer_key"}
)
REFERENCE_LIKE_PREFIXES = ("gold_", "correct_", "expected_", "reference_", "ref_", "true_")
REFERENCE_LIKE_SUFFIXES = ("_answer", "_label", "_reference", "_solution", "_target")
CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
SEPARATORS = re.compile(r"[\s\-.]+")


def reference_like(name: str) -> bool:
    """Whether a column is named like a reference answer (answer, gold_label, expectedOutput…);
    answers a model gave (response…, prediction…) are not."""
    if name.lower().startswith(RESPONSE_PREFIXES):
        return False
    norm = SEPARATORS.sub("_", CAMEL.sub("_", name.strip())).lower()
    return (
        norm in REFERENCE_LIKE_NAMES
        or norm.startswith(REFERENCE_LIKE_PREFIXES)
        or norm.endswith(REFERENCE_LIKE_SUFFIXES)
    )


@dataclass
class Mapping:
    """Which columns are the id, the inputs, the reference answer, the tags, the responses and
    the conversation (a column of chat messages; see apps/datasets/conversations.py)."""

    id_column: str | None = None
    input_columns: list[str] = field(default_factory=list)
    reference_column: str | None = None
    tags_column: str | None = None
    response_columns: list[str] = field(default_factory=list)
    conversation_column: str | None = None

    @classmethod
    def from_dict(cls, data: "dict[str, Any] | Mapping | None") -> "Mapping":
        if isinstance(data, Mapping):
            return data
        data = data or {}

        def names(key: str) -> list[str]:
            value = data.get(key) or []
            return [value] if isinstance(value, str) else [str(v) for v in value if v]

        return cls(
            id_column=data.get("id_column") or None,
            input_columns=names("input_columns"),
            reference_column=data.get("reference_column") or None,
            tags_column=data.get("tags_column") or None,
            response_columns=names("response_columns"),
            conversation_column=data.get("conversation_column") or None,
        )

    def to_dict(self) -> dict[str, Any]:
        mapping = {
            "id_column": self.id_column,
            "input_columns": list(self.input_columns),
            "reference_column": self.reference_column,
            "tags_column": self.tags_column,
            "response_columns": list(self.response_columns),
        }
        # Only when set: a mapping without one stays as it was stored (and fingerprinted).
        if self.conversation_column:
            mapping["conversation_column"] = self.conversation_column
        return mapping

    def validated(self, columns: list[str], sheet: str = "") -> "Mapping":
        """This mapping checked against the file's columns (those of `sheet`, for a workbook);
        inputs default to the unmapped ones, except those named like a reference answer."""
        known = set(columns)
        # A file may have thousands of columns: name enough of them to spot a typo.
        listing = ", ".join(columns[:LISTED_COLUMNS])
        if len(columns) > LISTED_COLUMNS:
            listing += f", … ({len(columns):,} columns in all)"
        roles = [
            ("id column", [self.id_column] if self.id_column else []),
            ("input column", self.input_columns),
            ("reference column", [self.reference_column] if self.reference_column else []),
            ("tags column", [self.tags_column] if self.tags_column else []),
            ("response column", self.response_columns),
            ("conversation column", [self.conversation_column] if self.conversation_column else []),
        ]
        for role, names in roles:
            for name in names:
                if name not in known:
                    place = f"sheet {sheet!r} of the workbook" if sheet else "the file"
                    raise DatasetError(
                        f"The {role} {name!r} is not in {place}. Its columns are: {listing}."
                    )
        # Inputs may overlap anything (a prompt may show the subject that is also a tag), but
        # a response column judged against itself as the id, reference or tags is a mistake.
        for name in self.response_columns:
            for role, names in roles[:4]:
                if role != "input column" and name in names:
                    raise DatasetError(
                        f"Column {name!r} cannot be both the {role} and a response column."
                    )
        if (chat := self.conversation_column) is not None:
            for role, names in roles:
                if role not in ("input column", "conversation column") and chat in names:
                    raise DatasetError(
                        f"Column {chat!r} cannot be both the {role} and the conversation column."
                    )
        # The conversation column stays an input by default: single-turn templates may show it.
        taken = {name for role, names in roles[:5] for name in names}
        inputs = list(dict.fromkeys(self.input_columns)) or [
            name for name in columns if name not in taken and not reference_like(name)
        ]
        return Mapping(
            self.id_column,
            inputs,
            self.reference_column,
            self.tags_column,
            list(dict.fromkeys(self.response_columns)),
            self.conversation_column,
        )

    def reference_like_inputs(self) -> list[str]:
        """Input columns named like a reference answer: prompts show them, so people are told."""
        return [name for name in self.input_columns if reference_like(name)]

    @classmethod
    def suggest(
        cls,
        columns: list[str],
        remembered: "dict[str, list[str]] | None" = None,
        rows: "list[dict[str, Any]] | None" = None,
    ) -> "Mapping":
        """The roles `remembered` for these column names (see `remembered_roles`), a guess by
        name for every other column, and the rest as inputs, except a column named like a
        reference answer: that is never suggested as an input, even if it was one before.
        A conversation column is guessed from its name and its first `rows`' values."""
        remembered = remembered or {}
        single: dict[str, str | None] = {
            "id": None,
            "reference": None,
            "tags": None,
            "conversation": None,
        }
        responses: list[str] = []
        inputs: set[str] = set()
        decided: set[str] = set()
        for name in columns:
            if name not in remembered:
                continue
            roles = [role for role in remembered[name] if role in ROLES]
            if "input" in roles and reference_like(name):
                roles.remove("input")
                if not roles:
                    continue  # the name decides instead
            applied = not roles  # kept: no role, and none guessed
            for role in roles:
                if role in single and single[role] is None:
                    single[role], applied = name, True
                elif role == "response":
                    responses.append(name)
                    applied = True
                elif role == "input":
                    inputs.add(name)
                    applied = True
            if applied:
                decided.add(name)
        fresh = [name for name in columns if name not in decided]
        lower = {name.lower(): name for name in reversed(fresh)}
        for role, candidates in (
            ("id", ID_NAMES),
            ("reference", REFERENCE_NAMES),
            ("tags", TAGS_NAMES),
        ):
            if single[role] is None:
                found = next((lower[c] for c in candidates if c in lower), None)
                if found is not None and found not in single.values():
                    single[role] = found
                    decided.add(found)
        if single["conversation"] is None and rows:
            named = [c for c in CONVERSATION_NAMES if c in lower]
            sample = rows[:SNIFFED_ROWS]
            found = next(
                (
                    lower[c]
                    for c in named
                    if looks_like_conversation([r.get(lower[c]) for r in sample])
                ),
                None,
            )
            if found is not None and found not in single.values():
                single["conversation"] = found
                decided.add(found)
                inputs.add(found)  # and an input, as `validated` leaves it by default
        for name in fresh:
            if name.lower().startswith(RESPONSE_PREFIXES) and name not in single.values():
                responses.append(name)
                decided.add(name)
        inputs.update(name for name in fresh if name not in decided and not reference_like(name))
        return cls(
            single["id"],
            [name for name in columns if name in inputs],
            single["reference"],
            single["tags"],
            [name for name in columns if name in responses],
            single["conversation"],
        )


ROLES = ("id", "input", "reference", "tags", "response", "conversation")
SNIFFED_ROWS = 20


def remembered_roles(task: Task, name: str) -> dict[str, list[str]]:
    """What each column name was in earlier uploads: the task's memory, overlaid by the roles
    in the latest version of dataset `name` (a corrected file keeps its dataset's mapping)."""
    roles = task.remembered_roles()
    named = Dataset.objects.latest_version(task, name) if name else None
    if named is not None:
        roles.update(mapping_roles(named.mapping, named.columns))
    return roles


def reference_inputs_warning(names: list[str]) -> str:
    """What people are told when a column named like a reference answer is a prompt input."""
    listed = ", ".join(repr(name) for name in names)
    one = len(names) == 1
    return (
        f"Column{'' if one else 's'} {listed} {'is' if one else 'are'} named like a reference "
        f"answer but mapped as {'an input' if one else 'inputs'}: prompts show "
        f"{'it' if one else 'them'} to the model."
    )


def suggest_mapping(
    task: Task, name: str, columns: list[str], rows: list[dict[str, Any]] | None = None
) -> Mapping:
    """The mapping offered for a file (its `rows` read so far, for a conversation column):
    the same on the page, in the API and on the command line."""
    return Mapping.suggest(columns, remembered_roles(task, name), rows)


# ---- item rows ----------------------------------------------------------------------------
TAG_SPLIT = re.compile(r"[,;]")


def split_tags(value: Any) -> list[str]:
    """A list of tags, or one string split on commas and semicolons; blanks and repeats dropped."""
    if value is None or value == "":
        return []
    if isinstance(value, list):
        parts = [as_text(v) for v in value]
    elif isinstance(value, str):
        parts = TAG_SPLIT.split(value)
    else:
        parts = [as_text(value)]
    return list(dict.fromkeys(tag for part in parts if (tag := part.strip())))


def _key_of(value: Any, table: Table, index: int, column: str) -> str:
    if isinstance(value, list | dict):
        raise DatasetError(
            f"{table.where(index, start=True)} has {'a list' if isinstance(value, list) else 'an object'} "
            f"in the id column {column!r}; an id must be a single value."
        )
    key = as_text(value).strip()
    if not key:
        raise DatasetError(
            f"{table.where(index, start=True)} has no id in the id column {column!r}."
        )
    if len(key) > KEY_MAX_LENGTH:
        raise DatasetError(
            f"{table.where(index, start=True)} has an id of {len(key)} characters in column "
            f"{column!r}; ids may have at most {KEY_MAX_LENGTH}."
        )
    return key


def _duplicate_error(table: Table, column: str, keys: list[str], key: str) -> DatasetError:
    places = [table.where(i) for i, k in enumerate(keys) if k == key]
    repeated = sum(1 for count in Counter(keys).values() if count > 1)
    shown = ", ".join(places[:10]) + (f" and {len(places) - 10} more" if len(places) > 10 else "")
    more = f" {repeated - 1} other ids are repeated too." if repeated > 1 else ""
    return DatasetError(
        f"The id {key!r} in column {column!r} appears {len(places)} times: {shown}. "
        f"Ids must be unique within a dataset.{more}"
    )


ItemRow = tuple[int, str, str, str, str, str, str, str, str]


@dataclass
class RowState:
    """What `build_item_rows` carries from one batch of a streamed import to the next."""

    seen: set[str] = field(default_factory=set)
    tag_counter: Counter[str] = field(default_factory=Counter)
    tag_cache: dict[Any, tuple[list[str], str, str]] = field(default_factory=dict)


class RepeatedId(DatasetError):
    """An id seen in an earlier batch: the message that lists every place needs the file."""


@dataclass
class ItemRows:
    """Item rows ready for one INSERT each: (position, key, fields, reference, tags, tags_text,
    search_text, conversation, turn_references), with JSON already serialised."""

    rows: list[ItemRow]
    tag_counts: dict[str, int]


def _conversation_error(
    table: Table, index: int, column: str, exc: ConversationError
) -> DatasetError:
    """ "Row 12, message 3: role 'bot' is not one of … (column 'messages')." for a person."""
    where = table.where(index, start=True)
    if exc.message is not None:
        return DatasetError(f"{where}, message {exc.message}: {exc.text} (column {column!r}).")
    return DatasetError(f"{where}: {exc.text} (column {column!r}).")


def _capped_search_text(values: Iterable[str]) -> str:
    """The values joined by newlines, cut at SEARCH_TEXT_CHARS without joining them whole."""
    parts: list[str] = []
    left = SEARCH_TEXT_CHARS
    for value in values:
        if left <= 0:
            break
        parts.append(value[:left])
        left -= len(value) + 1
    return "\n".join(parts)


def conversation_of(
    row: dict[str, Any], mapping: Mapping, table: Table, index: int
) -> tuple[list[dict[str, Any]], list[str]]:
    """The row's conversation in the canonical shape and its per-turn references (when the
    reference column holds a list); DatasetError naming the row and message otherwise."""
    column = mapping.conversation_column
    if column is None:
        return [], []
    try:
        messages = parse_conversation(row.get(column))
    except ConversationError as exc:
        raise _conversation_error(table, index, column, exc) from None
    references: list[str] = []
    if (reference := mapping.reference_column) is not None:
        value = row.get(reference)
        # A plain reference (one text for the whole conversation) stays Item.reference only.
        if isinstance(value, list) or (isinstance(value, str) and value.lstrip()[:1] == "["):
            turns = sum(1 for message in messages if message["role"] == "user")
            try:
                references = parse_turn_references(value, turns)
            except ConversationError as exc:
                raise _conversation_error(table, index, reference, exc) from None
    return messages, references


def build_item_rows(
    table: Table, mapping: Mapping, state: RowState | None = None, start: int = 0
) -> ItemRows:
    """Every item of the table as insertable values; raises on the first bad id or conversation.
    A streamed import passes each batch as a table, its `state` and the position of its first
    row (`start`); an id repeated from an earlier batch raises `RepeatedId`.

    Hot loop of a 100k-row import: one JSON encoder, tag parsing cached per distinct text
    (tags repeat), and the search text joined directly when every value is a string.
    """
    encode = json.JSONEncoder(ensure_ascii=False).encode
    id_column, reference_column = mapping.id_column, mapping.reference_column
    tags_column = mapping.tags_column
    streamed = state is not None
    state = state if state is not None else RowState()
    seen, tag_counter, tag_cache = state.seen, state.tag_counter, state.tag_cache
    no_tags: tuple[list[str], str, str] = ([], "[]", "")
    out: list[ItemRow] = []
    conversations = mapping.conversation_column is not None
    append = out.append
    for index, row in enumerate(table.rows):
        position = start + index
        if id_column is None:
            key = str(position)
        else:
            key = _key_of(row.get(id_column), table, index, id_column)
            if key in seen:
                if streamed:
                    raise RepeatedId(key)
                keys = [as_text(r.get(id_column)).strip() for r in table.rows]
                raise _duplicate_error(table, id_column, keys, key)
            seen.add(key)
        tags, tags_json, tags_joined = no_tags
        if tags_column:
            raw = row.get(tags_column)
            cacheable = raw is None or isinstance(raw, str)
            cached = tag_cache.get(raw) if cacheable else None
            if cached is None:
                parsed = split_tags(raw)
                cached = (parsed, encode(parsed), tags_text(parsed))
                if cacheable:
                    tag_cache[raw] = cached
            tags, tags_json, tags_joined = cached
            tag_counter.update(tags)
        conversation, references = "[]", "[]"
        if conversations:
            messages, turn_references = conversation_of(row, mapping, table, index)
            conversation, references = encode(messages), encode(turn_references)
        try:
            if sum(map(len, row.values())) <= SEARCH_TEXT_CHARS:
                search = "\n".join(row.values())
            else:
                search = _capped_search_text(row.values())
        except TypeError:  # JSON rows hold numbers, lists and objects too
            search = _capped_search_text(
                v if isinstance(v, str) else encode(v) for v in row.values()
            )
        append(
            (
                position,
                key,
                encode(row),
                as_text(row.get(reference_column)) if reference_column else "",
                tags_json,
                tags_joined,
                search.lower(),
                conversation,
                references,
            )
        )
    return ItemRows(out, dict(tag_counter.most_common()))


# ---- writing ------------------------------------------------------------------------------
ITEM_COLUMNS = (
    "dataset",
    "position",
    "key",
    "fields",
    "reference",
    "tags",
    "tags_text",
    "search_text",
    "conversation",
    "turn_references",
)


def _item_columns() -> str:
    """The quoted columns of ITEM_COLUMNS, from the model's own metadata."""
    quote = connection.ops.quote_name
    column_of = {field.name: str(field.column) for field in Item._meta.concrete_fields}
    return ", ".join(quote(column_of[name]) for name in ITEM_COLUMNS)


def _insert_sql() -> str:
    # SQLite stores JSON as the serialised text it is given.
    placeholders = ", ".join(["%s"] * len(ITEM_COLUMNS))
    # Only names from the model's own metadata go into the text; every value is a parameter.
    return (
        f"INSERT INTO {connection.ops.quote_name(str(Item._meta.db_table))} "  # noqa: S608
        f"({_item_columns()}) VALUES ({placeholders})"
    )


def write_items(
    dataset: Dataset, items: ItemRows, progress: Progress | None = None, copy: Any = None
) -> None:
    """Insert every item; the caller holds the transaction.

    PostgreSQL: one COPY per WRITE_BATCH rows (the jsonb columns parse the serialised text),
    3x less of the server's CPU per row than executemany's INSERT per row; or into `copy`, a
    COPY the caller keeps open (`copying_items`). SQLite: batched executemany. Raw SQL instead
    of bulk_create: 100k model instances cost more than the insert.
    """
    total = len(items.rows)
    pk = dataset.pk
    if copy is not None:
        write_row = copy.write_row
        for row in items.rows:
            write_row((pk, *row))
        if progress:
            progress("writing", total, total)
        return
    postgres = connection.vendor == "postgresql"
    sql = _copy_sql() if postgres else _insert_sql()
    with fulltext.bulk_insert(Item), connection.cursor() as cursor, _small_page_cache(items):
        for start in range(0, total, WRITE_BATCH):
            batch = items.rows[start : start + WRITE_BATCH]
            if postgres:
                # Django's wrapper does not see the driver's own copy(): wrapped here, a
                # repeated id is an IntegrityError as it is from an INSERT.
                began = time.monotonic()
                try:
                    with connection.wrap_database_errors, cursor.cursor.copy(sql) as copy:
                        write = copy.write_row
                        for row in batch:
                            write((pk, *row))
                finally:
                    _log_query(f"{sql} -- {len(batch)} rows", began)
            else:
                cursor.executemany(sql, [(pk, *row) for row in batch])
            if progress:
                progress("writing", start + len(batch), total)


@contextmanager
def copying_items() -> Iterator[Any]:
    """On PostgreSQL, one COPY open for a whole streamed import (None elsewhere): the database
    stores rows while the next are read, where a COPY per batch left each side idle while the
    other worked (the importing process waited ~45 % of its time for each COPY to end). A
    repeated id is an IntegrityError when it ends, as from an INSERT."""
    if connection.vendor != "postgresql":
        yield None
        return
    sql = _copy_sql()
    began = time.monotonic()
    try:
        with (
            connection.wrap_database_errors,
            connection.cursor() as cursor,
            cursor.cursor.copy(sql) as copy,
        ):
            yield copy
    finally:
        _log_query(sql, began)


def _log_query(sql: str, began: float) -> None:
    """Record a statement the driver ran outside Django's cursor wrapper where Django records
    its own (DEBUG, CaptureQueriesContext), so a COPY counts as the INSERTs it replaces."""
    if connection.queries_logged:
        elapsed = time.monotonic() - began
        connection.queries_log.append({"sql": sql, "time": f"{elapsed:.3f}"})


def _copy_sql() -> str:
    table = connection.ops.quote_name(str(Item._meta.db_table))
    return f"COPY {table} ({_item_columns()}) FROM STDIN"


@contextmanager
def _small_page_cache(items: ItemRows) -> Iterator[None]:
    """On SQLite, a batch that holds one huge row goes in with a 2 MB page cache: its overflow
    pages then spill to the WAL as they are written instead of filling the 64 MB cache first
    (a 50 MB cell is then in memory three times, as the driver's and the record's copies
    must be, not four)."""
    huge = connection.vendor == "sqlite" and any(len(row[2]) > LONG_ROW_CHARS for row in items.rows)
    if not huge:
        yield
        return
    with connection.cursor() as cursor:
        (size,) = cursor.execute("PRAGMA cache_size").fetchone()
        cursor.execute("PRAGMA cache_size=-2000")
        cursor.execute("PRAGMA ignore_check_constraints=ON")
        try:
            yield
        finally:
            cursor.execute(f"PRAGMA cache_size={int(size)}")
            cursor.execute("PRAGMA ignore_check_constraints=OFF")


def announce_imported(dataset: Dataset) -> tuple[str, ...]:
    """Send `dataset_imported`; a receiver that breaks is logged, the import stays. Returns
    (and keeps on `dataset.announced`) what the receivers say they started."""
    started: list[str] = []
    for receiver, answer in dataset_imported.send_robust(sender=Dataset, dataset=dataset):
        if isinstance(answer, Exception):
            log.error("dataset_imported receiver %s failed on %s: %r", receiver, dataset, answer)
        elif answer:
            started.extend(str(line) for line in answer)
    dataset.announced = tuple(started)
    return dataset.announced


def _still_importing(dataset: Dataset) -> bool:
    """Lock the dataset's row; False when another run of the same job finished first (or the
    dataset was deleted): items are written once, by whoever got here first."""
    status = (
        Dataset.objects.select_for_update()
        .filter(pk=dataset.pk)
        .values_list("status", flat=True)
        .first()
    )
    return status == Dataset.Status.IMPORTING


def _finish(
    dataset: Dataset,
    table: Table,
    mapping: Mapping,
    count: int,
    tag_counts: dict[str, int],
    fingerprint: str,
) -> None:
    """The dataset ready, its items written (inside the caller's transaction)."""
    dataset.columns = table.columns
    dataset.format = table.format
    dataset.sheet = table.sheet
    dataset.mapping = mapping.to_dict()
    dataset.row_count = count
    dataset.progress = count
    dataset.tag_counts = tag_counts
    dataset.fingerprint = fingerprint
    dataset.status = Dataset.Status.READY
    dataset.error = ""
    dataset.upload_path = ""
    dataset.save()
    dataset.task.remember_mapping(mapping.to_dict(), table.columns)
    # Later apps react once the items are visible (auto-judging of response columns).
    transaction.on_commit(lambda: announce_imported(dataset))


def _fingerprinted(items: ItemRows, rows: list[dict[str, Any]]) -> Any:
    return (
        (row[1], fields, row[3], json.loads(row[4]))
        for row, fields in zip(items.rows, rows, strict=True)
    )


def fill_dataset(
    dataset: Dataset, table: Table, mapping: Mapping, progress: Progress | None = None
) -> Dataset:
    """Check, write and finish `dataset` from `table`, atomically (all items or none)."""
    if progress:
        progress("checking", 0, len(table.rows))
    items = build_item_rows(table, mapping)
    with transaction.atomic():
        if not _still_importing(dataset):
            return dataset
        write_items(dataset, items, progress)
        fingerprint = fingerprint_of(mapping.to_dict(), _fingerprinted(items, table.rows))
        _finish(dataset, table, mapping, len(items.rows), items.tag_counts, fingerprint)
    return dataset


def fill_dataset_from_file(
    dataset: Dataset, path: Path, mapping: Mapping, progress: Progress | None = None
) -> Dataset:
    """Import the file at `path` into `dataset` as `fill_dataset` does, streaming CSV, JSONL,
    JSON (a list of objects, item by item), Parquet and Excel: rows go to the database a batch at
    a time (`WRITE_BATCH` rows or
    `WRITE_BATCH_CHARS` characters, whichever comes first) inside one transaction, so memory
    holds a batch, never the file, and a problem anywhere leaves no item. Where the stream
    meets a problem only the whole-file reader words (see apps.datasets.readers.Unstreamable),
    or a repeated id (its message lists every row that has it), the
    transaction is rolled back and the file is read whole, which says what is wrong exactly
    as a small upload is told. An Excel sheet is streamed from python-calamine's cells, which
    it holds whole (their size is bounded on upload: `UNZIPPED_FACTOR`)."""
    try:
        stream = stream_rows(path, dataset.format, dataset.sheet)
    except (Unstreamable, DatasetError):
        stream = None
    if stream is not None:
        try:
            return _fill_streamed(dataset, stream, mapping, progress)
        except (Unstreamable, RepeatedId, IntegrityError):
            pass  # rolled back: the whole-file reader below says what is wrong
        finally:
            stream.close()
    table = read_table(path, dataset.format, dataset.file_name, dataset.sheet or None)
    return fill_dataset(dataset, table, mapping, progress)


def _fill_streamed(
    dataset: Dataset, stream: RowStream, mapping: Mapping, progress: Progress | None
) -> Dataset:
    state = RowState()
    fingerprint = Fingerprint(mapping.to_dict())
    count = 0
    rows: list[dict[str, Any]] = []
    origins: list[int] = []
    chars = 0
    copying: list[Any] = [None]

    def write() -> None:
        nonlocal count, rows, origins, chars
        batch = Table(stream.format, stream.columns, rows, origins, sheet=stream.sheet)
        items = build_item_rows(batch, mapping, state, start=count)
        # Ids repeated batches apart are the database's to find (its unique (dataset, key)
        # index: an IntegrityError): a set of every id would grow with the file.
        state.seen.clear()
        fingerprint.update(_fingerprinted(items, rows))
        count += len(rows)
        # The rows as read go before the insert, which holds the batch twice more (the
        # driver's copy and the database's record): a 50 MB cell is then in memory 4 times,
        # not 5.
        del batch
        rows.clear()
        rows, origins, chars = [], [], 0
        write_items(dataset, items, copy=copying[0])
        del items
        if progress:
            progress("writing", count, _expected_rows(stream, count))

    with transaction.atomic():
        if not _still_importing(dataset):
            return dataset
        if progress:
            progress("writing", 0, stream.total or 0)
        with copying_items() as copying[0]:
            for origin, row, size in stream.rows:
                rows.append(row)
                del row  # the batch holds it, and lets go of it before the insert
                origins.append(origin)
                chars += size
                if len(rows) >= WRITE_BATCH or chars >= WRITE_BATCH_CHARS:
                    write()
            if rows:
                write()
        if not count:
            raise Unstreamable  # no data rows: the whole-file reader says so
        table = Table(stream.format, stream.columns, [], sheet=stream.sheet)
        tag_counts = dict(state.tag_counter.most_common())
        _finish(dataset, table, mapping, count, tag_counts, fingerprint.hexdigest())
    return dataset


def _expected_rows(stream: RowStream, done: int) -> int:
    """The rows a streamed file will have: its own count (Parquet), else as many as the bytes
    read so far suggest."""
    if stream.total:
        return stream.total
    read = stream.read()
    return max(done, round(done * stream.size / read)) if read else done


def import_dataset(
    task: Task,
    name: str,
    source: str | Path | bytes,
    mapping: "dict[str, Any] | Mapping | None" = None,
    fmt: str | None = None,
    user: Any = None,
    file_name: str = "",
    sheet: str | None = None,
) -> Dataset:
    """Read `source` (an Excel workbook's `sheet`, default its first), check it against
    `mapping` and store it as the next version of `name`.

    Raises DatasetError (nothing stored) for any problem with the file or the mapping.
    """
    if not name.strip():
        raise DatasetError("Give the dataset a name.")
    if isinstance(source, str | Path) and not file_name:
        file_name = Path(source).name
    table = read_table(source, fmt, file_name, sheet)
    return import_table(task, name, table, mapping, user, file_name)


def import_table(
    task: Task,
    name: str,
    table: Table,
    mapping: "dict[str, Any] | Mapping | None" = None,
    user: Any = None,
    file_name: str = "",
) -> Dataset:
    """Store a table already read as the next version of `name` (see `import_dataset`)."""
    name = name.strip()
    if not name:
        raise DatasetError("Give the dataset a name.")
    checked = Mapping.from_dict(mapping).validated(table.columns, table.sheet)
    with transaction.atomic():
        dataset = Dataset.objects.new_version(
            task,
            name,
            format=table.format,
            sheet=table.sheet,
            file_name=file_name[:255],
            columns=table.columns,
            mapping=checked.to_dict(),
            created_by=user if getattr(user, "pk", None) else None,
        )
        return fill_dataset(dataset, table, checked)


def import_file(
    task: Task,
    name: str,
    path: Path,
    head: Table,
    mapping: "dict[str, Any] | Mapping | None" = None,
    user: Any = None,
) -> Dataset:
    """Store the file at `path`, of which `head` is the first part as `read_head` read it, as
    the next version of `name`, streamed as the worker imports (`fill_dataset_from_file`):
    memory holds a batch of rows, never the file. All in one transaction: a problem anywhere
    raises DatasetError with nothing stored, as `import_table` does."""
    name = name.strip()
    if not name:
        raise DatasetError("Give the dataset a name.")
    checked = Mapping.from_dict(mapping).validated(head.columns, head.sheet)
    with transaction.atomic():
        dataset = Dataset.objects.new_version(
            task,
            name,
            format=head.format,
            sheet=head.sheet,
            file_name=path.name[:255],
            columns=head.columns,
            mapping=checked.to_dict(),
            created_by=user if getattr(user, "pk", None) else None,
        )
        return fill_dataset_from_file(dataset, path, checked)


# ---- live progress ------------------------------------------------------------------------
def _progress_key(dataset_id: int) -> str:
    return f"evalsite:dataset-import:{dataset_id}"


def progress_reporter(dataset_id: int) -> Progress:
    """Progress goes to Redis: the write transaction keeps it invisible in the database."""
    import django_rq

    conn = django_rq.get_connection("default")

    def report(stage: str, done: int, total: int) -> None:
        try:
            payload = json.dumps({"stage": stage, "done": done, "total": total})
            conn.set(_progress_key(dataset_id), payload, ex=24 * 3600)
        except Exception:  # progress is a nicety; never fail an import over it
            log.warning("could not report import progress for dataset %s", dataset_id)

    return report


def import_progress(dataset: Dataset) -> dict[str, Any]:
    """{"stage", "done", "total", "percent"} of a running import, as far as it is known."""
    import django_rq

    state: dict[str, Any] = {"stage": "queued", "done": 0, "total": 0}
    try:
        raw = django_rq.get_connection("default").get(_progress_key(dataset.pk))
        if raw:
            state.update(json.loads(raw))
    except Exception:
        log.warning("could not read import progress for dataset %s", dataset.pk)
    total = state["total"]
    # Reading and checking is the first fifth of the work, writing the rest.
    if state["stage"] == "writing" and total:
        state["percent"] = 20 + int(80 * state["done"] / total)
    else:
        state["percent"] = 10 if state["stage"] == "checking" else 0
    return state


def clear_progress(dataset_id: int) -> None:
    import django_rq

    try:
        django_rq.get_connection("default").delete(_progress_key(dataset_id))
    except Exception:
        log.warning("could not clear import progress for dataset %s", dataset_id)
