"""Full-text search behind one function (#28.5): `matching(queryset, text)` keeps the rows whose
indexed text holds every word and "quoted phrase" of `text`; a word ending in * is a prefix.

Words, not substrings, so a search is an index lookup at 100k+ rows: on SQLite an FTS5 table
over the column (external content, kept by triggers), on PostgreSQL a stored tsvector column
with a GIN index. Both tokenise alike (no stemming, case folded, accents kept: unicode61 without
remove_diacritics / the 'simple' configuration), so a query finds the same rows on both.
Chinese and Japanese are written without spaces, which neither tokeniser splits into words: a
term in those scripts is matched as a substring instead (a scan of the rows left by the rest).

The index is made by `ensure_index` after every `migrate` (post_migrate), not by a migration:
SQLite's ALTER TABLE emulation copies a table and drops the old one, triggers included, so a
later migration of the table would silently stop the indexing; `ensure_index` puts them back
and rebuilds the index when anything was missing.
"""

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.db import connections, models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.sql.compiler import SQLCompiler

# Scripts written without spaces between words (Han, kana, CJK compatibility ideographs).
_UNSPACED = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_TERM = re.compile(r'"([^"]*)"?|(\S+)')
_WORD_CHAR = re.compile(r"\w")
_PREFIXABLE = re.compile(r"[^\W_]+")
VECTOR = "fts_vector"  # PostgreSQL's tsvector column beside the indexed one
# Prefix lengths (in characters) SQLite's FTS5 keeps an index of: a prefix of one of these
# lengths is one lookup, like a word, so it can be tested row by row; a longer one merges the
# lists of every word it starts (300 ms over a million answers, read once, never per row).
# Measured on 100k bench answers: 1.9x the index's size and 2.2x its insert time of no prefix
# lists ('2 3 4' alone: 1.4x, 1.2x). PostgreSQL's GIN index finds `word:*` in its sorted keys.
PREFIX_LENGTHS = tuple(range(1, 13))

# model -> its indexed column; filled by `register` in each app's ready().
INDEXED: dict[type[models.Model], str] = {}


@dataclass(frozen=True)
class Term:
    text: str  # lowercased: one word, or several (a phrase)
    prefix: bool = False


def terms(text: str) -> list[Term]:
    """The query's words and "phrases", lowercased; punctuation-only terms are dropped."""
    out = []
    for match in _TERM.finditer(text.lower()):
        phrase, word = match.group(1), match.group(2)
        if word is not None:
            prefix = word.endswith("*") and bool(_PREFIXABLE.fullmatch(word.rstrip("*")))
            term = Term(word.rstrip("*") if prefix else word.strip('"'), prefix)
        else:
            term = Term(" ".join(phrase.split()))
        if _WORD_CHAR.search(term.text):
            out.append(term)
    return out


def indexed_prefix(term: Term) -> bool:
    """Whether SQLite's index has a prefix list of this term's length (a prefix term)."""
    return len(term.text) in PREFIX_LENGTHS


def fts_table(model: type[models.Model]) -> str:
    return f"{model._meta.db_table}_fts"


def register(model: type[models.Model], column: str) -> None:
    INDEXED[model] = column


def matching(queryset: models.QuerySet[Any], text: str) -> models.QuerySet[Any]:
    """Rows of `queryset` whose indexed text matches `text` (all rows for an empty query)."""
    return queryset.filter(condition(queryset.model, text)) if terms(text) else queryset


def condition(
    model: type[models.Model], text: str, prefix: str = "", *, per_row: bool = False
) -> models.Q:
    """The filter `matching` applies, to combine with others (`prefix`: the path to the model,
    e.g. "item__").

    `per_row`: each row is looked up in the index on its own, instead of the index's whole
    list of matches being read first. Slower per row, but what a query that stops early
    (LIMIT, EXISTS) over a word found in most rows wants: on SQLite the list is otherwise read
    whole (a million rowids for a word in every answer) before the first row is tested.
    PostgreSQL tests its stored vector per row either way. Not for a prefix longer than the
    index keeps (PREFIX_LENGTHS): SQLite would merge the lists of every word with that prefix
    for each row (60 s where the list read once takes 2), so a query with one reads the list."""
    found = terms(text)
    if not found:
        return models.Q()
    per_row = per_row and all(indexed_prefix(term) for term in found if term.prefix)
    lookup = "fulltext_row" if per_row else "fulltext"
    return models.Q(**{f"{prefix}{INDEXED[model]}__{lookup}": text})


def more_than(model: type[models.Model], text: str, n: int, using: str = "default") -> bool:
    """Whether more than `n` rows of the whole table match `text`'s indexed words: stops at
    n + 1, so it costs little whatever the word (which query plan suits a search)."""
    indexed = [t for t in terms(text) if not _UNSPACED.search(t.text)]
    if not indexed:
        return False
    connection = connections[using]
    if connection.vendor == "sqlite":
        table = connection.ops.quote_name(fts_table(model))
        query = " ".join(_fts5(term) for term in indexed)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {table} MATCH %s LIMIT %s)",  # noqa: S608
                [query, n + 1],
            )
            return bool(cursor.fetchone()[0] > n)
    return model._default_manager.using(using).filter(condition(model, text))[: n + 1].count() > n


@models.TextField.register_lookup
class FullText(models.Lookup):
    """`column__fulltext=text` on a registered model's indexed column (see `matching`)."""

    lookup_name = "fulltext"
    prepare_rhs = False
    per_row = False  # see `condition`

    def as_sql(
        self, compiler: SQLCompiler, connection: BaseDatabaseWrapper
    ) -> tuple[str, tuple[Any, ...]]:
        lhs, lhs_params = self.process_lhs(compiler, connection)
        model = self.lhs.target.model
        if INDEXED.get(model) != self.lhs.target.column:
            raise ValueError(f"{model.__name__}.{self.lhs.target.name} has no full-text index")
        quote = connection.ops.quote_name
        row = f"{quote(self.lhs.alias)}.{quote(model._meta.pk.column)}"
        parts: list[str] = []
        params: list[Any] = []
        indexed = [t for t in terms(self.rhs) if not _UNSPACED.search(t.text)]
        for term in terms(self.rhs):
            if _UNSPACED.search(term.text):
                # lower(): SQLite's folds ASCII only, which is all these scripts have of case.
                find = "instr" if connection.vendor == "sqlite" else "strpos"
                parts.append(f"{find}(lower({lhs}), %s) > 0")
                params += [*lhs_params, term.text]
        if indexed and connection.vendor == "sqlite":
            table = quote(fts_table(model))
            # Names from the model's metadata; the query is a parameter.
            if self.per_row:
                parts.append(
                    f"EXISTS (SELECT 1 FROM {table} WHERE {table} MATCH %s AND rowid = {row})"  # noqa: S608
                )
            else:
                parts.append(f"{row} IN (SELECT rowid FROM {table} WHERE {table} MATCH %s)")  # noqa: S608
            params.append(" ".join(_fts5(term) for term in indexed))
        elif indexed:
            vector = f"{quote(self.lhs.alias)}.{quote(VECTOR)}"
            queries = []
            for term in indexed:
                if term.prefix:
                    queries.append("to_tsquery('simple'::regconfig, %s)")
                    params.append(f"{term.text}:*")
                else:
                    queries.append("phraseto_tsquery('simple'::regconfig, %s)")
                    params.append(term.text)
            parts.append(f"{vector} @@ ({' && '.join(queries)})")
        return " AND ".join(parts) or "1 = 1", tuple(params)


@models.TextField.register_lookup
class FullTextPerRow(FullText):
    """`column__fulltext_row=text`: as `fulltext`, each row looked up on its own."""

    lookup_name = "fulltext_row"
    per_row = True


def _fts5(term: Term) -> str:
    """One FTS5 string (a phrase when it holds several words); quoted, so nothing the user
    types is FTS5 syntax."""
    quoted = '"' + term.text.replace('"', '""') + '"'
    return f"{quoted} *" if term.prefix else quoted


# ---- the index ----------------------------------------------------------------------------
_PREFIX_OPTION = " ".join(map(str, PREFIX_LENGTHS))


def _sqlite_names(model: type[models.Model], quote: Any) -> tuple[str, str, str, str, str]:
    """(table, column, fts table, pk, the insert trigger), quoted. Names come from the model's
    metadata, never from input."""
    fts = fts_table(model)
    return (
        quote(model._meta.db_table),
        quote(INDEXED[model]),
        quote(fts),
        quote(str(model._meta.pk.column)),
        quote(f"{fts}_insert"),
    )


def _insert_trigger(model: type[models.Model], quote: Any) -> str:
    t, c, f, p, trigger = _sqlite_names(model, quote)
    body = f"INSERT INTO {f}(rowid, {c}) VALUES (new.{p}, new.{c});"  # noqa: S608
    return f"CREATE TRIGGER IF NOT EXISTS {trigger} AFTER INSERT ON {t} BEGIN {body} END"


@contextmanager
def bulk_insert(model: type[models.Model], using: str = "default") -> Iterator[None]:
    """Around many INSERTs in one transaction (an import): on SQLite the per-row trigger is
    dropped and the new rows indexed at the end in one INSERT … SELECT, 4-5× less time than a
    trigger per row. Safe because DDL is transactional there and the transaction holds the
    database's only write lock: no other writer can add a row meanwhile. PostgreSQL computes
    the tsvector column per row whatever happens."""
    connection = connections[using]
    if connection.vendor != "sqlite" or model not in INDEXED:
        yield
        return
    if not connection.in_atomic_block:
        raise RuntimeError("fulltext.bulk_insert needs a transaction (atomic)")
    t, c, f, p, trigger = _sqlite_names(model, connection.ops.quote_name)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT max({p}) FROM {t}")  # noqa: S608
        before = cursor.fetchone()[0] or 0
        cursor.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            # AUTOINCREMENT: every new row's id is above the largest before.
            cursor.execute(
                f"INSERT INTO {f}(rowid, {c}) SELECT {p}, {c} FROM {t} WHERE {p} > %s",  # noqa: S608
                [before],
            )
            cursor.execute(_insert_trigger(model, connection.ops.quote_name))


def ensure_index(model: type[models.Model], using: str = "default") -> bool:
    """Create the model's full-text index where missing (and fill it); True if it did."""
    connection = connections[using]
    column = INDEXED[model]
    table = model._meta.db_table
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            fts = fts_table(model)
            wanted = [fts, f"{fts}_insert", f"{fts}_delete", f"{fts}_update"]
            cursor.execute(
                "SELECT count(*) FROM sqlite_master WHERE name IN (%s, %s, %s, %s) "
                "AND (name != %s OR sql LIKE %s)",
                [*wanted, fts, f"%prefix='{_PREFIX_OPTION}'%"],
            )
            # An index made before the prefix lists (or with others) is made again.
            if cursor.fetchone()[0] == len(wanted):
                return False
            t, c, f, p, _ = _sqlite_names(model, quote)
            cursor.execute(f"DROP TABLE IF EXISTS {f}")  # rebuilt below, with every option
            cursor.execute(
                f"CREATE VIRTUAL TABLE {f} USING fts5({c}, content={t}, content_rowid={p}, "
                f"tokenize='unicode61 remove_diacritics 0', prefix='{_PREFIX_OPTION}')"
            )
            delete = f"INSERT INTO {f}({f}, rowid, {c}) VALUES ('delete', old.{p}, old.{c});"  # noqa: S608
            insert = f"INSERT INTO {f}(rowid, {c}) VALUES (new.{p}, new.{c});"  # noqa: S608
            cursor.execute(_insert_trigger(model, quote))
            for name, when, body in (
                ("delete", "AFTER DELETE", delete),
                ("update", f"AFTER UPDATE OF {c}", delete + " " + insert),
            ):
                cursor.execute(
                    f"CREATE TRIGGER IF NOT EXISTS {quote(f'{fts}_{name}')} {when} ON {t} "
                    f"BEGIN {body} END"
                )
            cursor.execute(f"INSERT INTO {f}({f}) VALUES ('rebuild')")  # noqa: S608
            return True
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT 1 FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND table_name = %s AND column_name = %s",
                [table, VECTOR],
            )
            if cursor.fetchone():
                return False
            cursor.execute(
                f"ALTER TABLE {quote(table)} ADD COLUMN IF NOT EXISTS {quote(VECTOR)} tsvector "
                f"GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, "
                f"coalesce({quote(column)}, ''))) STORED"
            )
            cursor.execute(
                f"CREATE INDEX IF NOT EXISTS {quote(f'{table}_fts')} ON {quote(table)} "
                f"USING gin ({quote(VECTOR)})"
            )
            return True
    raise NotImplementedError(f"full-text search on {connection.vendor}")


def ensure_indexes(using: str = "default", **kwargs: Any) -> None:
    """post_migrate: every registered model's index, once its table exists."""
    connection = connections[using]
    tables = set(connection.introspection.table_names())
    for model in INDEXED:
        if model._meta.db_table in tables:
            ensure_index(model, using)
