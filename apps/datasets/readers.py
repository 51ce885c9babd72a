"""Turn an uploaded file (CSV, JSON, JSONL, Excel .xlsx or Parquet) into columns and rows, or say in
plain words why not.

Pure: no database, no Django models. Every error is a `DatasetError` whose message names the
row, line, item or field a person has to fix.

CSV is read with the standard `csv` module rather than `pandas.read_csv`: pandas silently pads
short rows with empty cells and truncates long ones under `index_col=False`, and its "line"
numbers ignore quoted newlines, so a precise ragged-row message needs a csv-module pass anyway;
that single pass already yields every value, and measured faster than pre-scan + pandas
(0.58 s against 0.68 s for 100k rows x 6 columns). Values stay text: "007" and "NA" are kept
as written.

Excel and Parquet files are read with the libraries `pandas.read_excel(engine="calamine")` and
`pandas.read_parquet` use underneath (python-calamine, pyarrow), without the DataFrame between:
pandas turns an integer column with a blank cell into floats (3 → "3.0"), drops blank rows
(so row numbers no longer match the sheet) and renames repeated headers ("a.1") where a person
should be told. Their values become text as a person saw them; see `cell_text` and
`parquet_texts` for the rules.
"""

from __future__ import annotations

import csv
import datetime
import decimal
import io
import json
import posixpath
import re
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from xml.etree import ElementTree

import numpy
import python_calamine
from django.conf import settings

if TYPE_CHECKING:
    # pyarrow (Parquet) and openpyxl (Excel's built-in number formats) are imported by the
    # functions that read those files, not at start-up: every process imports this module
    # (run kinds → importing) and they cost ~0.15 s of CPU together (#26.7).
    import pyarrow
    import pyarrow.parquet

from evalsite.sizes import human_size, sizes_apart

FORMATS = ("csv", "json", "jsonl", "xlsx", "parquet")
TEXT_FORMATS = ("csv", "json", "jsonl")
# What a file name's extension says; .txt says nothing (it is sniffed, like a name without one).
EXTENSIONS = {
    ".csv": "csv",
    ".tsv": "csv",
    ".json": "json",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".xlsx": "xlsx",
    ".xlsm": "xlsx",
    ".parquet": "parquet",
    ".pq": "parquet",
}
FORMAT_NAMES = "csv, json, jsonl, xlsx or parquet"
UTF8_FIX = "Save it as UTF-8 (in Excel: File → Save As → “CSV UTF-8”) and upload it again."
# These scan without copying: a 200 MB file is not stripped or split just to look at its start.
BLANK = re.compile(r"\s*\Z")
BLANK_BYTES = re.compile(rb"\s*\Z")
LEADING_SPACE = re.compile(r"\s*")
# csv's default field limit (128 KiB) is too small for long documents in one cell.
csv.field_size_limit(512 * 1024 * 1024)


class DatasetError(ValueError):
    """A file or mapping that cannot become a dataset; the message is shown to people as is."""


@dataclass
class Table:
    """What a file holds: its columns in order and one dict per row."""

    format: str
    columns: list[str]
    rows: list[dict[str, Any]]
    # Where each row came from, for messages: the spreadsheet row (CSV, header = row 1),
    # the line (JSONL) or the 1-based item of the array (JSON).
    origins: list[int] = field(default_factory=list)
    # False when only the start of a big file was read (a preview); the import reads it all.
    complete: bool = True
    # For a preview: the row (CSV) or line (JSONL) where reading stopped, and what was left out.
    cut_at: int | None = None
    preview_note: str = ""
    # Excel: the sheet read, and every worksheet of the workbook (for the preview's choice).
    sheet: str = ""
    sheets: list[str] = field(default_factory=list)

    def where(self, index: int, start: bool = False) -> str:
        """Name row `index` (0-based) the way a person finds it in the file; `start`: to begin
        a sentence (not str.capitalize(), which would lower a sheet's name)."""
        origin = self.origins[index] if index < len(self.origins) else index + 1
        unit = self._unit()
        return (unit.capitalize() if start else unit) + f" {origin}" + self.in_sheet()

    def where_cut(self) -> str:
        return f"{self._unit()} {self.cut_at}"

    def in_sheet(self) -> str:
        return f" of sheet {self.sheet!r}" if self.sheet else ""

    def _unit(self) -> str:
        return {"csv": "row", "jsonl": "line", "json": "item"}.get(self.format, "row")


def check_size(size: int) -> None:
    limit = settings.DATASET_MAX_UPLOAD_BYTES
    if size > limit:
        shown, most = sizes_apart(size, limit)
        raise DatasetError(
            f"The file is {shown}; the limit is {most}. "
            "Split it into smaller files, or ask an admin to raise DATASET_MAX_UPLOAD_BYTES."
        )


def load_bytes(source: str | Path | bytes) -> bytes:
    """The file's bytes, refusing anything over the size limit before reading it."""
    if isinstance(source, bytes):
        check_size(len(source))
        return source
    path = Path(source)
    try:
        check_size(path.stat().st_size)
        return path.read_bytes()
    except FileNotFoundError:
        raise DatasetError(f"There is no file at {path}.") from None
    except IsADirectoryError:
        raise DatasetError(f"{path} is a folder, not a file.") from None


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def decode(data: bytes) -> str:
    """UTF-8 text (a BOM is dropped), or a message saying what the bytes are instead."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise DatasetError(f"The file is UTF-16 text, not UTF-8. {UTF8_FIX}")
    if data.startswith(b"PK\x03\x04"):
        raise DatasetError(
            "The file is a ZIP archive or an Excel workbook (.xlsx), not CSV, JSON or JSONL text. "
            "Choose the format “Excel (.xlsx)”, or name the file .xlsx."
        )
    nul = data.find(b"\x00")
    if nul >= 0:
        raise DatasetError(
            f"The file contains NUL bytes (the first on line {_line_of(data, nul)}): it is binary "
            "data, not CSV, JSON or JSONL text."
        )
    bom = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    try:
        return str(memoryview(data)[bom:], "utf-8")
    except UnicodeDecodeError as exc:
        offset = exc.start + bom
        bad = data[offset : offset + 1].hex().upper()
        raise DatasetError(
            f"The file is not UTF-8 text: line {_line_of(data, offset)} has the byte 0x{bad}, "
            f"which is not valid UTF-8 (the file was probably saved as Latin-1 or Windows-1252). "
            f"{UTF8_FIX}"
        ) from None


def detect_format(file_name: str, text: str) -> str:
    """csv, json or jsonl: the file name's extension first, the content only where it says nothing.

    A name ending .csv or .tsv is CSV whatever its first character ("[id]" is a fine header
    cell). A name ending .json, .jsonl or .ndjson is never read as CSV: a file of numbers or
    strings named x.jsonl is a broken JSONL file, and saying so beats importing it as a
    one-column table. Within JSON the content still tells a list from one object per line,
    because people name JSONL files .json (and the reverse); each reader then names the line or
    item that is wrong. Only a name without a known extension (or .txt) is sniffed in full.
    """
    by_extension = EXTENSIONS.get(Path(file_name or "").suffix.lower())
    if by_extension == "csv":
        return "csv"
    begin = LEADING_SPACE.match(text).end()  # type: ignore[union-attr]
    start = text[begin : begin + 1]
    end = text.find("\n", begin)
    end = len(text) if end < 0 else end
    if start == "[":
        # A .jsonl file whose first line is a whole list is JSONL with a wrong line, not JSON.
        if by_extension == "jsonl" and not BLANK.match(text, end):
            try:
                json.loads(text[begin:end])
                return "jsonl"
            except ValueError:
                pass
        return "json"
    if start == "{":
        try:
            one_object_per_line = isinstance(json.loads(text[begin:end]), dict)
        except ValueError:
            one_object_per_line = False
        if one_object_per_line:
            # One object on one line is a one-row JSONL file, unless it is named .json.
            more_lines = not BLANK.match(text, end)
            return "json" if by_extension == "json" and not more_lines else "jsonl"
        # A pretty-printed object, or a JSONL file whose first line is broken.
        return "jsonl" if by_extension == "jsonl" else "json"
    # Neither a list nor an object: a JSON-named file stays JSON, to be refused as such.
    return by_extension if by_extension in ("json", "jsonl") else "csv"


def binary_format(source: str | Path | bytes, file_name: str) -> str | None:
    """xlsx or parquet when the name's extension or the first bytes say so, else None (text).

    A name with a text extension (.csv, .json…) is read as text even when it holds a workbook:
    the text readers then say what the bytes are."""
    by_extension = EXTENSIONS.get(Path(file_name or "").suffix.lower())
    if by_extension in ("xlsx", "parquet"):
        return by_extension
    if by_extension is not None:
        return None
    head = source[:8] if isinstance(source, bytes) else _head(Path(source), 8)
    if head.startswith(PARQUET_MAGIC):
        return "parquet"
    if head.startswith((ZIP_MAGIC, OLE_MAGIC)):
        return "xlsx"
    return None


def _head(path: Path, size: int) -> bytes:
    try:
        with path.open("rb") as handle:
            return handle.read(size)
    except FileNotFoundError:
        raise DatasetError(f"There is no file at {path}.") from None
    except IsADirectoryError:
        raise DatasetError(f"{path} is a folder, not a file.") from None


def read_table(
    source: str | Path | bytes,
    fmt: str | None = None,
    file_name: str = "",
    sheet: str | None = None,
) -> Table:
    """Read a whole file into a Table; `fmt` overrides detection, `sheet` picks an Excel sheet
    (default: the first)."""
    if isinstance(source, str | Path) and not file_name:
        file_name = Path(source).name
    fmt = (fmt or "").lower() or binary_format(source, file_name)
    if fmt == "xlsx":
        return read_xlsx(_sized(source), sheet)
    if fmt == "parquet":
        return read_parquet(_sized(source))
    data = load_bytes(source)
    text = decode(data)
    del data  # a 200 MB upload need not be held twice
    return _parse(text, fmt, file_name)


def _parse(text: str, fmt: str | None, file_name: str) -> Table:
    if BLANK.match(text):
        raise DatasetError("The file is empty.")
    fmt = (fmt or "").lower() or detect_format(file_name, text)
    if fmt not in TEXT_FORMATS:
        raise DatasetError(f"Unknown format {fmt!r}: choose {FORMAT_NAMES}.")
    reader = {"csv": _read_csv, "json": _read_json, "jsonl": _read_jsonl}[fmt]
    return reader(text, file_name)


def read_head(
    path: str | Path,
    fmt: str | None = None,
    file_name: str = "",
    max_bytes: int = 4 * 1024 * 1024,
    sheet: str | None = None,
) -> Table:
    """Read a file for its preview: whole when small, else only its first `max_bytes`.

    A 200 MB upload is not parsed in the web request: the preview shows its first rows
    (errors in them are real errors), and the import in the worker reads and checks it all.
    A JSON document is previewed from its first items when it is one list of objects (else
    read whole, whose reader says what is wrong). `preview_note` says in words what the
    preview leaves out.
    """
    path = Path(path)
    file_name = file_name or path.name
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise DatasetError(f"There is no file at {path}.") from None
    check_size(size)
    fmt = (fmt or "").lower() or binary_format(path, file_name)
    if fmt == "xlsx":
        return read_xlsx(path, sheet, None if size <= max_bytes else HEAD_ROWS)
    if fmt == "parquet":
        return read_parquet(path, None if size <= max_bytes else HEAD_ROWS)
    if size <= max_bytes:
        return read_table(path, fmt, file_name)
    if fmt == "json" or (not fmt and _starts_a_list(path, file_name)):
        return _json_head(path, file_name, max_bytes)
    data = _head_bytes(path, max_bytes)
    if len(data) >= size:  # its first line was the whole file
        return _parse(decode(data), fmt, file_name)
    text = decode(data)
    fmt = (fmt or "").lower() or detect_format(file_name, text)
    if fmt == "json":
        return _json_head(path, file_name, max_bytes)
    if fmt not in TEXT_FORMATS:
        raise DatasetError(f"Unknown format {fmt!r}: choose {FORMAT_NAMES}.")
    if fmt == "csv":
        table = _read_csv(text, file_name, partial=True)
    else:
        table = _read_jsonl(text, file_name)
        table.cut_at = text.count("\n") + 1
    table.complete = False
    window = human_size(max_bytes)
    if len(data) > max_bytes:
        # Not one line ended inside the window, so `_head_bytes` read the first line whole: the
        # mapping step needs its columns, and the worker reads that line whole anyway. It is
        # not shown: the preview shows only what fits in the window.
        first = "The header row" if fmt == "csv" else f"Line {table.origins[0]}"
        table.rows, table.origins = [], []
        table.preview_note = (
            f"{first} is longer than the {window} preview window, so the preview shows no "
            "rows; the columns were read from it whole. The import reads the whole file."
        )
    else:
        count = len(table.rows)
        shown = {0: "no rows", 1: "the first row"}.get(count, f"the first {count:,} rows")
        table.preview_note = (
            f"The preview shows {shown}: the file is larger than the {window} preview window, "
            f"and {table.where_cut()} is the first that does not fit in it. "
            "The import reads the whole file."
        )
    return table


def _starts_a_list(path: Path, file_name: str) -> bool:
    """Whether `detect_format` would call this file JSON by its start: "[" first, in a file
    whose name says neither CSV nor JSONL (read without its first line, which may be the
    whole file)."""
    if EXTENSIONS.get(Path(file_name).suffix.lower()) in ("csv", "jsonl"):
        return False
    return _head(path, 64 * 1024).removeprefix(b"\xef\xbb\xbf").lstrip()[:1] == b"["


def _json_head(path: Path, file_name: str, max_bytes: int) -> Table:
    """The first items of a big JSON list, as many as `max_bytes` of text hold (at least one),
    for the preview."""
    rows: list[dict[str, Any]] = []
    origins: list[int] = []
    read, cut = 0, None
    try:
        stream = stream_rows(path, "json")
        assert stream is not None
        try:
            for number, row, size in stream.rows:
                if rows and read + size > max_bytes:
                    cut = number
                    break
                rows.append(row)
                origins.append(number)
                read += size
        finally:
            stream.close()
    except Unstreamable:
        return read_table(path, "json", file_name)
    table = Table("json", _columns_of(rows), rows, origins)
    if cut is not None:
        table.complete, table.cut_at = False, cut
        shown = "the first item" if len(rows) == 1 else f"the first {len(rows):,} items"
        table.preview_note = (
            f"The preview shows {shown}: the file is larger than the {human_size(max_bytes)} "
            f"preview window, and {table.where_cut()} is the first that does not fit in it. "
            "The import reads the whole file."
        )
    return table


def _head_bytes(path: Path, max_bytes: int) -> bytes:
    """The first `max_bytes` of a file, cut after their last complete line (never inside a
    UTF-8 character, a JSONL line or a CSV header). When no line with content ends inside them,
    read on to the end of the first one that has content, however long: a preview of no
    columns would leave nothing to map. Reading on to a later, shorter line instead would take
    the columns from a different record than the first, which a person would not expect."""
    with path.open("rb") as handle:
        buffer = bytearray(handle.read(max_bytes))
        end = buffer.rfind(b"\n") + 1
        while BLANK_BYTES.match(buffer, 0, end):
            newline = buffer.find(b"\n", end)
            if newline >= 0:
                end = newline + 1
                continue
            chunk = handle.read(1024 * 1024)
            if not chunk:
                return bytes(buffer)  # the end of the file
            buffer += chunk
    return bytes(buffer[:end])


# ---- CSV ----------------------------------------------------------------------------------
def _delimiter(header_line: str, file_name: str) -> str:
    if Path(file_name).suffix.lower() == ".tsv":
        return "\t"
    counts = {sep: header_line.count(sep) for sep in (",", ";", "\t")}
    if counts[","] == 0 and max(counts.values()) > 0:
        return max(counts, key=counts.__getitem__)
    return ","


def _csv_error(exc: csv.Error, row: int, line: int) -> DatasetError:
    text = str(exc)
    if "unexpected end of data" in text or "EOF" in text:
        return DatasetError(
            f"Row {row} (line {line}) opens a quoted field that is never closed: "
            'a " has no matching " before the end of the file.'
        )
    if "expected after" in text:
        return DatasetError(
            f"Row {row} (line {line}) has a stray quote: inside a quoted field write a quote "
            'as two quotes ("").'
        )
    return DatasetError(f"Row {row} (line {line}) cannot be read as CSV: {text}.")


def _read_csv(text: str, file_name: str, partial: bool = False) -> Table:
    newline = text.find("\n")
    delimiter = _delimiter(text[:newline] if newline >= 0 else text, file_name)

    def reader() -> Any:
        return csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)

    # Fast path: parse everything at C speed; find lines only when something is wrong.
    try:
        records = list(reader())
    except csv.Error:
        # The start of a big file may end inside a quoted field: keep the rows before it.
        cut = _records_before_cut(reader()) if partial else None
        if cut is None:
            _locate_csv_problem(reader(), None, delimiter)
        records = cut or []
    # Spreadsheet numbering: the header is row 1, and blank lines count as rows.
    numbered = [(number, record) for number, record in enumerate(records, start=1) if record]
    if not numbered:
        raise DatasetError("The file is empty.")
    header = _check_header(numbered[0][1])
    width = len(header)
    if any(len(record) != width for _, record in numbered):
        _locate_csv_problem(reader(), width, delimiter)
    data = numbered[1:]
    # The start of a big file may hold no whole data row (the first one is longer than the
    # window): the header still gives the columns, and the import reads the rows.
    if not data and not partial:
        raise DatasetError(
            f"The file has only a header row ({', '.join(header)}) and no data rows."
        )
    rows = [dict(zip(header, record, strict=True)) for _, record in data]
    table = Table("csv", header, rows, [number for number, _ in data])
    if partial:
        table.cut_at = len(records) + 1
    return table


def _records_before_cut(reader: Any) -> list[list[str]] | None:
    records: list[list[str]] = []
    try:
        records.extend(reader)
    except csv.Error as exc:
        return records if "unexpected end of data" in str(exc) else None
    return records


def _locate_csv_problem(reader: Any, width: int | None, delimiter: str) -> None:
    """Slow path: walk the records again, tracking lines, and raise for the first bad one."""
    row_number, line = 0, 1
    try:
        for record in reader:
            row_number += 1
            start_line, line = line, reader.line_num + 1
            if not record:
                continue
            if width is None:
                width = len(record)
            elif len(record) != width:
                raise DatasetError(
                    f"Row {row_number} (line {start_line}) has {len(record)} fields, but the "
                    f"header has {width} columns. Look for an unquoted "
                    f"{'comma' if delimiter == ',' else repr(delimiter)} or a missing field in "
                    "that row."
                )
    except csv.Error as exc:
        raise _csv_error(exc, row_number + 1, line) from None
    raise DatasetError("The CSV could not be read.")  # the fast path saw a problem; never here


def _check_header(record: list[str]) -> list[str]:
    header = [name.strip() for name in record]
    seen: dict[str, int] = {}
    for number, name in enumerate(header, start=1):
        if not name:
            raise DatasetError(
                f"Column {number} of the header row has no name. Name it, or delete the column."
            )
        if name in seen:
            raise DatasetError(
                f"The header names column {name!r} twice (columns {seen[name]} and {number}). "
                "Rename one of them."
            )
        seen[name] = number
    return header


# ---- JSON ---------------------------------------------------------------------------------
EXPECTED_JSON = '[{"question": ...}, {"question": ...}]'


def _kind(value: Any) -> str:
    return {
        list: "a list",
        dict: "an object",
        str: "a string",
        bool: "true/false",
        int: "a number",
        float: "a number",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def _columns_of(rows: list[dict[str, Any]]) -> list[str]:
    # Rows may leave out optional keys: the columns are every key, in order of first use.
    columns: dict[str, None] = {}
    for row in rows:
        if len(row) != len(columns) or any(key not in columns for key in row):
            columns.update(dict.fromkeys(row))
    return list(columns)


def _read_json(text: str, file_name: str) -> Table:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        hint = ""
        if exc.msg == "Extra data":
            # Several values one after another: name the first, so the top level is clear.
            begin = LEADING_SPACE.match(text).end()  # type: ignore[union-attr]
            first, _ = json.JSONDecoder().raw_decode(text, begin)
            if isinstance(first, dict):
                hint = " It looks like JSONL (one object per line): choose the JSONL format."
            else:
                hint = (
                    f" The file starts with {_kind(first)} and goes on after it; a JSON file "
                    f"must hold one list of objects, like {EXPECTED_JSON}."
                )
        raise DatasetError(
            f"The JSON is not valid at line {exc.lineno}, column {exc.colno}: {exc.msg}.{hint}"
        ) from None
    if isinstance(value, dict):
        keys = ", ".join(repr(key) for key in list(value)[:5])
        raise DatasetError(
            f"The JSON file holds one object (keys {keys}), not a list of objects. "
            f"Expected {EXPECTED_JSON}; put the rows in a list, or "
            "save them as JSONL, one object per line."
        )
    if not isinstance(value, list):
        raise DatasetError(
            f"The JSON file holds {_kind(value)}, not a list of objects. Expected "
            f"{EXPECTED_JSON}: one object per row."
        )
    if not value:
        raise DatasetError("The JSON file holds an empty list: there are no rows.")
    for number, row in enumerate(value, start=1):
        if not isinstance(row, dict):
            raise DatasetError(
                f"Item {number} of the JSON list is {_kind(row)}, not an object; every item "
                'must be an object like {"question": ...}.'
            )
    return Table("json", _columns_of(value), value, list(range(1, len(value) + 1)))


def _read_jsonl(text: str, file_name: str) -> Table:
    rows: list[dict[str, Any]] = []
    origins: list[int] = []
    loads = json.loads
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(
                f"Line {number} is not valid JSON: {exc.msg} at column {exc.colno}. "
                "Each line of a JSONL file must be one complete JSON object."
            ) from None
        if not isinstance(row, dict):
            raise DatasetError(
                f"Line {number} is {_kind(row)}, not a JSON object; each line of a JSONL file "
                'must be one object like {"question": ...}.'
            )
        rows.append(row)
        origins.append(number)
    if not rows:
        raise DatasetError("The file is empty.")
    return Table("jsonl", _columns_of(rows), rows, origins)


# ---- reading row by row (the import in a worker) --------------------------------------------
# A big upload is imported from a stream of rows, so memory holds a batch of rows and never the
# file (apps.datasets.importing.fill_dataset_from_file). The stream reads only files it can
# read exactly as the whole-file readers above do; anything else it meets (a ragged CSV row, a
# JSONL line that is not an object, bytes that are not UTF-8, NUL…) ends it with `Unstreamable`,
# and the file is read whole instead, so that every message stays that reader's, word for word.
# A JSON document is streamed item by item when it is one list of objects; an Excel sheet row by
# row from python-calamine's cells, which hold the sheet (bounded: `UNZIPPED_FACTOR`).
STREAM_CHUNK = 1024 * 1024


class Unstreamable(Exception):
    """The stream met what only the whole-file reader words: read the file whole instead."""


@dataclass
class RowStream:
    """A file's rows as (origin, row, characters) in order; `columns` grows for JSONL (keys in
    order of first use, as `_columns_of`), `read` is how many bytes were read so far."""

    format: str
    columns: list[str]
    rows: Iterator[tuple[int, dict[str, Any], int]]
    size: int
    handle: Any = None
    total: int | None = None  # rows, when the file says (Parquet, about so for Excel)
    sheet: str = ""  # the worksheet read, for a workbook

    def read(self) -> int:
        return self.handle.buffer.tell() if self.handle is not None else 0

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()


def stream_rows(path: Path, fmt: str, sheet: str = "") -> RowStream | None:
    """The rows of the CSV, JSON, JSONL, Parquet or Excel file at `path` (format `fmt`, as the
    upload settled it; `sheet` of a workbook, default its first) one by one; None for a format
    that is read whole. DatasetError for a file too big or missing, or what the whole-file
    reader says of a workbook's cells; Unstreamable for one to read whole."""
    _sized(path)
    length = path.stat().st_size
    if fmt == "parquet":
        parquet, columns, total = _open_parquet(path)
        return RowStream("parquet", columns, _parquet_rows(parquet, columns), length, total=total)
    if fmt == "xlsx":
        return _xlsx_stream(path, sheet, length)
    if fmt not in ("csv", "jsonl", "json"):
        return None
    with path.open("rb") as raw:
        head = raw.read(4)
    if not head or head.startswith((b"\xff\xfe", b"\xfe\xff", ZIP_MAGIC)):
        raise Unstreamable
    # JSONL lines end at "\n" only (as `_read_jsonl` splits); CSV is split as csv wants it.
    handle = path.open(
        encoding="utf-8-sig", errors="strict", newline="\n" if fmt == "jsonl" else ""
    )
    try:
        columns = []
        if fmt == "csv":
            columns, rows = _csv_stream(handle, path.name)
        elif fmt == "json":
            rows = _json_stream(handle, columns)
        else:
            rows = _jsonl_stream(handle, columns)
    except BaseException:
        handle.close()
        raise
    return RowStream(fmt, columns, rows, length, handle)


def _checked_lines(lines: Iterable[str]) -> Iterator[str]:
    try:
        for line in lines:
            if "\x00" in line:
                raise Unstreamable
            # Handed over without a name left on it here: a paused generator keeps its locals,
            # and a 50 MB line would stay in memory until the next one is read.
            held = [line]
            del line
            yield held.pop()
    except UnicodeDecodeError:
        raise Unstreamable from None


# A record whose first line is longer than this (characters) is split by `_split_long`, not by
# the csv module, which builds each field in a buffer of 4 bytes a character (a 50 MB cell
# took 250 MB there).
LONG_RECORD = 1024 * 1024


def _csv_stream(
    handle: Any, file_name: str
) -> tuple[list[str], Iterator[tuple[int, dict[str, Any], int]]]:
    lines = _checked_lines(handle)
    first = next(lines, "")
    if not first or (first.endswith("\r") and not first.endswith("\r\n")):
        raise Unstreamable  # empty, or old Mac line ends: `_read_csv` reads its header line
    delimiter = _delimiter(first.rstrip("\r\n"), file_name)
    sized: list[int] = [0]
    # `starts`: the next line read begins a record (rows() sets it before each record);
    # `long`: the record `_split_long` read there, which the csv reader sees as a blank line.
    starts: list[bool] = [False]
    long: list[list[str]] = []

    def measured() -> Iterator[str]:
        yield first
        for line in lines:
            sized[0] += len(line)
            if starts[0] and len(line) > LONG_RECORD:
                long.append(_split_long(line, lines, delimiter, sized))
                del line  # the record's fields are all that is kept of it
                yield "\n"
                continue
            starts[0] = False
            yield line

    reader = csv.reader(measured(), delimiter=delimiter, strict=True)
    numbered = enumerate(reader, start=1)
    try:
        header = next(((n, r) for n, r in numbered if r), None)
    except csv.Error:
        raise Unstreamable from None
    if header is None:
        raise Unstreamable
    columns = _check_header(header[1])

    def rows() -> Iterator[tuple[int, dict[str, Any], int]]:
        width, seen = len(columns), 0
        try:
            while True:
                starts[0] = True
                try:
                    number, record = next(numbered)
                except StopIteration:
                    return
                if not record and long:
                    record = long.pop()
                if not record:
                    continue
                if len(record) != width:
                    raise Unstreamable
                held = [(number, dict(zip(columns, record, strict=True)), sized[0] - seen)]
                del record  # (see _checked_lines)
                yield held.pop()
                seen = sized[0]
        except csv.Error:
            raise Unstreamable from None

    return columns, rows()


def _split_long(line: str, more: Iterator[str], delimiter: str, sized: list[int]) -> list[str]:
    """The fields of the record that begins with `line` (reading on from `more` while a quoted
    field goes on over a line's end), exactly as `csv.reader(strict=True)` splits them:
    a field that begins with a quote ends at the next lone quote, "" inside it being one quote,
    and must be followed by the delimiter or the line's end; any other field runs to the next
    delimiter, its quotes as they are. Unstreamable for what the csv module would refuse (or
    read otherwise): the whole-file reader says what is wrong. Each field is one slice of its
    line where it can be (no quotes doubled, no line ends inside), so a long cell is copied
    once."""
    if line in ("\n", "\r", "\r\n"):
        return []  # a blank line, as the csv module reads it
    fields: list[str] = []
    at = 0
    while True:
        if not line.startswith('"', at):
            end = line.find(delimiter, at)
            if end >= 0:
                value = line[at:end]
                at = end + len(delimiter)
            else:
                value = line[at:].removesuffix("\n").removesuffix("\r")
            if "\n" in value or "\r" in value:
                raise Unstreamable
            fields.append(value)
            if end < 0:
                return fields
            continue
        parts: list[str] = []
        start = at + 1
        while (quote := line.find('"', start)) < 0 or line.startswith('"', quote + 1):
            if quote < 0:  # the field goes on over the line's end
                parts.append(line[start:])
                line = next(more, "")
                if not line:
                    raise Unstreamable  # the file ends inside quotes
                sized[0] += len(line)
                start = 0
            else:
                parts.append(line[start : quote + 1])
                start = quote + 2
        parts.append(line[start:quote])
        fields.append(parts[0] if len(parts) == 1 else "".join(parts))
        del parts
        at = quote + 1
        if line.startswith(delimiter, at):
            at += len(delimiter)
            continue
        if line[at:] in ("", "\n", "\r", "\r\n"):
            return fields
        raise Unstreamable  # strict: a quoted field ends at a delimiter or the line's end


def _jsonl_stream(handle: Any, columns: list[str]) -> Iterator[tuple[int, dict[str, Any], int]]:
    known: set[str] = set()
    loads = json.loads
    for number, line in enumerate(_checked_lines(handle), start=1):
        if not line.strip():
            continue
        try:
            row = loads(line)
        except json.JSONDecodeError:
            raise Unstreamable from None
        if not isinstance(row, dict):
            raise Unstreamable
        if len(row) != len(known) or any(key not in known for key in row):
            for key in row:
                if key not in known:
                    known.add(key)
                    columns.append(key)
        held = [(number, row, len(line))]
        del row, line  # (see _checked_lines)
        yield held.pop()


# A JSON document is read this many characters at a time (more while one item is unfinished).
# Kept small: the buffer holds text at up to 4 bytes a character and is copied when its rest is
# carried over (1M rows peaked at +70 MB with chunks of 1M characters, +60 MB with these).
JSON_CHUNK = 256 * 1024
JSON_SPACE = re.compile(r"[ \t\n\r]*")


def _json_stream(handle: Any, columns: list[str]) -> Iterator[tuple[int, dict[str, Any], int]]:
    """The objects of a JSON document that is one list of objects, one at a time, as
    `_read_json` reads them (numbered from 1, columns in order of first use). The buffer holds
    the item being read and what was read past it, never the file. Anything else (another
    top level, an item that is not an object, invalid JSON, an empty list) is Unstreamable."""
    decode = json.JSONDecoder().raw_decode
    buffer, at, ended = "", 0, False

    def more(want: int) -> bool:
        nonlocal buffer, at, ended
        if ended:
            return False
        try:
            chunk = handle.read(max(want, JSON_CHUNK))
        except UnicodeDecodeError:
            raise Unstreamable from None
        if "\x00" in chunk:
            raise Unstreamable
        ended = len(chunk) == 0
        buffer, at = buffer[at:] + chunk, 0
        return not ended

    def skip_space() -> str:
        """The next character after white space ("" at the end of the file)."""
        nonlocal at
        while True:
            at = JSON_SPACE.match(buffer, at).end()  # type: ignore[union-attr]
            if at < len(buffer) or not more(JSON_CHUNK):
                return buffer[at : at + 1]

    if skip_space() != "[":
        raise Unstreamable
    at += 1
    known: set[str] = set()
    number = 0
    while True:
        if (following := skip_space()) == "]" and number == 0:
            raise Unstreamable  # an empty list: `_read_json` says so
        if following != "{":
            raise Unstreamable
        while True:
            try:
                row, end = decode(buffer, at)
                break
            except json.JSONDecodeError as exc:
                # Unfinished where the buffer ends: read as much again as the item has so far.
                # Invalid before that: the whole-file reader says where.
                unfinished = exc.pos >= len(buffer) - 6 or exc.msg.startswith("Unterminated")
                if not unfinished or not more(len(buffer) - at):
                    raise Unstreamable from None
        number += 1
        size, at = end - at, end
        if at > JSON_CHUNK:  # a long item's text goes before its row is handed on
            buffer, at = buffer[at:], 0
        if len(row) != len(known) or any(key not in known for key in row):
            for key in row:
                if key not in known:
                    known.add(key)
                    columns.append(key)
        held = [(number, row, size)]
        del row  # (see _checked_lines)
        yield held.pop()
        following = skip_space()
        if following == "]":
            at += 1
            if skip_space() != "":
                raise Unstreamable  # more after the list
            return
        if following != ",":
            raise Unstreamable
        at += 1


def _parquet_rows(
    parquet: pyarrow.parquet.ParquetFile, columns: list[str]
) -> Iterator[tuple[int, dict[str, Any], int]]:
    import pyarrow

    number = 0
    try:
        # Batches of rows, or of fewer when rows are long (the file says how long, per group).
        groups = parquet.metadata
        per_row = max(
            (
                groups.row_group(i).total_byte_size / max(groups.row_group(i).num_rows, 1)
                for i in range(groups.num_row_groups)
            ),
            default=1,
        )
        size = int(max(1, min(PARQUET_BATCH, STREAM_CHUNK * 2 // max(per_row, 1))))
        pool = pyarrow.default_memory_pool()
        for batch in _parquet_batches(parquet, columns, size):
            # The allocator keeps freed pages for reuse; handed back, memory stays a batch's.
            pool.release_unused()
            for row in batch:
                number += 1
                yield number, row, sum(len(v) for v in row.values())
    except (pyarrow.ArrowException, OSError):
        raise Unstreamable from None


# ---- Excel (.xlsx) ------------------------------------------------------------------------
ZIP_MAGIC = b"PK\x03\x04"
# An encrypted .xlsx is an OLE compound file, as is an Excel 97–2003 .xls.
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
PARQUET_MAGIC = b"PAR1"
# A big workbook or Parquet file is previewed from this many first rows (the worker reads all).
HEAD_ROWS = 200
# An .xlsx is zipped XML: refuse one that unpacks to more than this many times the upload limit
# (a "zip bomb", or a sheet too big to read in memory), before reading any of it.
UNZIPPED_FACTOR = 5


def _sized(source: str | Path | bytes) -> Path | bytes:
    """The file as a path or bytes, after the same size check as a text file."""
    if isinstance(source, bytes):
        check_size(len(source))
        return source
    path = Path(source)
    try:
        check_size(path.stat().st_size)
    except FileNotFoundError:
        raise DatasetError(f"There is no file at {path}.") from None
    if path.is_dir():
        raise DatasetError(f"{path} is a folder, not a file.")
    return path


def column_letter(index: int) -> str:
    """Excel's name of the 0-based column `index`: A, …, Z, AA, …"""
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(65 + rest) + letters
    return letters


def _damaged(exc: Exception) -> DatasetError:
    return DatasetError(
        f"The Excel workbook is damaged and cannot be read ({exc}). Open it in Excel, save it "
        "again and upload it again."
    )


def _open_workbook(source: Path | bytes) -> python_calamine.CalamineWorkbook:
    head = source[:8] if isinstance(source, bytes) else _head(source, 8)
    if not head:
        raise DatasetError("The file is empty.")
    if head.startswith(OLE_MAGIC):
        raise DatasetError(
            "The workbook is password-protected (encrypted), or it is an old Excel 97–2003 .xls "
            "file: either way it is not a plain .xlsx workbook. In Excel remove the password "
            "(File → Info → Protect Workbook → Encrypt with Password, and clear it) or use "
            "File → Save As → “Excel Workbook (.xlsx)”, then upload it again."
        )
    if not head.startswith(ZIP_MAGIC):
        raise DatasetError(
            "The file is not an Excel workbook: an .xlsx file is a ZIP archive, and this one is "
            "not. If it is CSV or JSON text, choose that format (or name the file .csv or "
            ".json); else save it from Excel as .xlsx."
        )
    try:
        with zipfile.ZipFile(io.BytesIO(source) if isinstance(source, bytes) else source) as zipped:
            members = zipped.infolist()
    except (zipfile.BadZipFile, OSError, EOFError):
        raise DatasetError(
            "The Excel workbook is damaged: its ZIP structure cannot be read (was it cut short "
            "while copying or uploading?). Open it in Excel, save it again and upload it again."
        ) from None
    if not any(member.filename == "xl/workbook.xml" for member in members):
        raise DatasetError(
            "The file is a ZIP archive but not an Excel workbook (it holds no xl/workbook.xml). "
            "Upload the .xlsx file itself."
        )
    unzipped = sum(member.file_size for member in members)
    limit = settings.DATASET_MAX_UPLOAD_BYTES * UNZIPPED_FACTOR
    if unzipped > limit:
        raise DatasetError(
            f"The workbook unpacks to {human_size(unzipped)}, more than the {human_size(limit)} "
            "evalsite reads from one workbook. Split it into smaller workbooks, or save the "
            "sheet as CSV or Parquet."
        )
    try:
        if isinstance(source, bytes):
            return python_calamine.CalamineWorkbook.from_filelike(io.BytesIO(source))
        return python_calamine.CalamineWorkbook.from_path(source)
    except python_calamine.CalamineError as exc:
        raise _damaged(exc) from None


def _worksheets(workbook: python_calamine.CalamineWorkbook) -> list[str]:
    return [
        meta.name
        for meta in workbook.sheets_metadata
        if meta.typ == python_calamine.SheetTypeEnum.WorkSheet
    ]


def _xlsx_stream(path: Path, sheet: str, length: int) -> RowStream:
    """A worksheet's rows one by one, as `read_xlsx` reads them (the same header, numbers,
    formats and messages), without the sheet as Python rows in between: python-calamine still
    holds the sheet's cells (~40 bytes each and their text), but not a list and a dict per row
    of all of them."""
    workbook = _open_workbook(path)
    sheets = _worksheets(workbook)
    name = sheet or (sheets[0] if sheets else "")
    if name not in sheets:
        raise Unstreamable  # `read_xlsx` says which sheets there are
    try:
        cells = workbook.get_sheet_by_name(name)
    except python_calamine.CalamineError:
        raise Unstreamable from None
    if cells.start is None:
        raise Unstreamable
    left = cells.start[1]

    def grid() -> Iterator[list[Any]]:
        # As to_python(skip_empty_area=False): iter_rows() starts at row 1 but at the first
        # column that has a value (python-calamine 0.9), so the columns before it are added.
        pad = [""] * left
        try:
            for row in cells.iter_rows():
                yield pad + row if left else row
        except python_calamine.CalamineError:
            raise Unstreamable from None

    columns, rows = _sheet_rows(grid(), name, number_formats(path, name))
    return RowStream("xlsx", columns, rows, length, total=max(cells.height - 1, 1), sheet=name)


def workbook_sheets(source: str | Path | bytes) -> list[str]:
    """The worksheets of an Excel workbook, in order, without reading any of them."""
    return _worksheets(_open_workbook(_sized(source)))


def read_xlsx(source: Path | bytes, sheet: str | None = None, limit: int | None = None) -> Table:
    """One worksheet (default the first) as a Table; `limit` reads only its first rows.

    The first row with any value is the header. Rows are numbered as Excel numbers them (the
    number at the left of the sheet, header included, blank rows counted), so "row 7 of sheet
    'Answers'" is the row a person finds by scrolling to 7.
    """
    workbook = _open_workbook(source)
    sheets = _worksheets(workbook)
    if not sheets:
        raise DatasetError("The workbook has no worksheets (only charts or macro sheets).")
    name = sheet or sheets[0]
    if name not in sheets:
        listed = ", ".join(repr(each) for each in sheets)
        raise DatasetError(f"The workbook has no sheet {name!r}; its sheets are {listed}.")
    try:
        cells = workbook.get_sheet_by_name(name)
        start = cells.start
        # Rows from row 1 and columns from A, so that list positions are Excel's numbers.
        grid = (
            cells.to_python(skip_empty_area=False, nrows=None if limit is None else limit + 50)
            if start is not None
            else []
        )
        table = _sheet_table(grid, name, limit, number_formats(source, name))
    except python_calamine.CalamineError as exc:
        raise _damaged(exc) from None
    if limit is not None and not table.complete:
        table.preview_note = (
            f"The preview shows the first {len(table.rows):,} rows of sheet {name!r}: the "
            f"workbook is larger than the preview window. The import reads the whole sheet "
            f"(about {max(cells.height - table.origins[0] + 1, 0):,} rows)."
        )
    table.sheets = sheets
    return table


def _sheet_table(
    grid: Iterable[list[Any]],
    sheet: str,
    limit: int | None,
    formats: dict[tuple[int, int], str] | None = None,
) -> Table:
    header, numbered_rows = _sheet_rows(grid, sheet, formats)
    rows: list[dict[str, Any]] = []
    origins: list[int] = []
    complete = True
    for number, row, _ in numbered_rows:
        if limit is not None and len(rows) >= limit:
            complete = False
            break
        rows.append(row)
        origins.append(number)
    if not rows and complete:
        raise DatasetError(
            f"Sheet {sheet!r} has only a header row ({', '.join(header)}) and no data rows."
        )
    return Table("xlsx", header, rows, origins, complete=complete, sheet=sheet)


def _sheet_rows(
    grid: Iterable[list[Any]], sheet: str, formats: dict[tuple[int, int], str] | None
) -> tuple[list[str], Iterator[tuple[int, dict[str, Any], int]]]:
    """The header of a sheet's cells (`grid`: rows from row 1, columns from A) and its rows as
    (Excel row, row, characters); DatasetError naming the cell for what is wrong."""
    numbered = enumerate(grid, start=1)
    header_number, header_cells = next(
        ((number, cells) for number, cells in numbered if any(v != "" for v in cells)),
        (0, None),
    )
    if header_cells is None:
        raise DatasetError(
            f"Sheet {sheet!r} is empty: it has no header row and no rows. Choose another sheet, "
            "or fill this one."
        )
    header = [cell_text(value).strip() for value in header_cells]
    while header and not header[-1]:
        header.pop()  # formatted but empty columns at the right; a value under one is refused
    # A table may start right of column A: empty columns before its header are not read.
    first = next(index for index, column in enumerate(header) if column)
    seen: dict[str, int] = {}
    for index in range(first, len(header)):
        column, letter = header[index], column_letter(index)
        if not column:
            raise DatasetError(
                f"Cell {letter}{header_number} of sheet {sheet!r} is empty, but it is in the "
                f"header row (row {header_number}): name column {letter}, or delete it."
            )
        if column in seen:
            raise DatasetError(
                f"The header row (row {header_number} of sheet {sheet!r}) names column "
                f"{column!r} twice (columns {column_letter(seen[column])} and {letter}). "
                "Rename one of them."
            )
        seen[column] = index
    end = len(header)
    header = header[first:]
    formatted_rows = {number for number, _ in formats or {}}

    def rows() -> Iterator[tuple[int, dict[str, Any], int]]:
        for number, cells in numbered:
            values = [v if type(v) is str else cell_text(v) for v in cells]
            if number in formatted_rows:
                _apply_formats(values, cells, number, formats or {})
            if not any(values):
                continue  # a blank row: skipped, but still counted, as Excel numbers it
            if (first and any(values[:first])) or (len(values) > end and any(values[end:])):
                index = next(i for i, v in enumerate(values) if v and not first <= i < end)
                letter = column_letter(index)
                raise DatasetError(
                    f"Cell {letter}{number} of sheet {sheet!r} holds {values[index][:40]!r}, but "
                    f"column {letter} has no name in the header row (row {header_number}). Name "
                    "the column, or delete the value."
                )
            # zip stops at the header's end: the columns after it were checked empty above.
            row = dict(zip(header, values[first:] if first else values, strict=False))
            yield number, row, sum(map(len, values))

    return header, rows()


def _apply_formats(
    values: list[str], cells: list[Any], number: int, formats: dict[tuple[int, int], str]
) -> None:
    for index, cell in enumerate(cells):
        code = formats.get((number, index))
        if code is not None and type(cell) in (int, float):
            values[index] = number_display(cell, code) or values[index]


def cell_text(value: Any) -> str:
    """An Excel cell's value as the sheet shows it in the General format.

    Whole numbers without ".0" (Excel stores every number as a float); other numbers at Excel's
    15 significant digits (=0.1+0.2 shows 0.3, not 0.30000000000000004); a date cell as
    2024-01-05, a date and time as 2024-01-05T13:45:00 (milliseconds only when there are
    some), a time as 13:45:00, a duration as 30:00:00; TRUE / FALSE. Numbers styled as
    percentages, currency or fixed decimals get their format on top (`number_formats`).
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return number_text(value)
    if isinstance(value, datetime.datetime):
        value = _to_millisecond(value)
        return value.isoformat(timespec="milliseconds" if value.microsecond else "seconds")
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, datetime.time):
        moment = _to_millisecond(datetime.datetime.combine(datetime.date(2000, 1, 1), value))
        return moment.time().isoformat(timespec="milliseconds" if moment.microsecond else "seconds")
    if isinstance(value, datetime.timedelta):
        seconds = round(value.total_seconds())
        sign, seconds = ("-", -seconds) if seconds < 0 else ("", seconds)
        return f"{sign}{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    return str(value)


def number_text(value: float) -> str:
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(f"{value:.15g}"))


def _to_millisecond(value: datetime.datetime) -> datetime.datetime:
    # A date-time is a fraction of a day in the file: 13:45 may come back as 13:44:59.999999.
    micro = round(value.microsecond / 1000) * 1000
    return value.replace(microsecond=0) + datetime.timedelta(microseconds=micro)


# ---- Parquet ------------------------------------------------------------------------------
PARQUET_BATCH = 20_000
PARQUET_BUFFER = 1024 * 1024


def read_parquet(source: Path | bytes, limit: int | None = None) -> Table:
    """A Parquet file as a Table (`limit`: only its first rows), read in batches of rows.

    Rows are numbered from 1, the first record being row 1 (a Parquet file has no header row).
    """
    import pyarrow

    parquet, columns, total = _open_parquet(source)
    rows: list[dict[str, Any]] = []
    try:
        for batch in _parquet_batches(parquet, columns, limit or PARQUET_BATCH):
            rows.extend(batch)
            if limit is not None:
                break
    except (pyarrow.ArrowException, OSError) as exc:
        raise DatasetError(
            f"The Parquet file is damaged: the rows after row {len(rows)} cannot be read "
            f"({exc}). Write it again and upload it again."
        ) from None
    table = Table("parquet", columns, rows, list(range(1, len(rows) + 1)))
    if len(rows) < total:
        table.complete = False
        table.preview_note = (
            f"The preview shows the first {len(rows):,} of the file's {total:,} rows. "
            "The import reads them all."
        )
    return table


def _parquet_batches(
    parquet: pyarrow.parquet.ParquetFile, columns: list[str], size: int
) -> Iterator[list[dict[str, Any]]]:
    """The file's rows as dicts of text, `size` rows at a time."""
    schema = parquet.schema_arrow
    converters = [parquet_texts(schema.field(i).type) for i in range(len(columns))]
    for batch in parquet.iter_batches(batch_size=size, use_threads=False):
        texts = [convert(array) for convert, array in zip(converters, batch.columns, strict=True)]
        yield [dict(zip(columns, values, strict=True)) for values in zip(*texts, strict=True)]


def _open_parquet(source: Path | bytes) -> tuple[pyarrow.parquet.ParquetFile, list[str], int]:
    """The file opened, its columns and its number of rows, or DatasetError saying why not."""
    import pyarrow
    import pyarrow.parquet

    head = source[:4] if isinstance(source, bytes) else _head(source, 4)
    if not head:
        raise DatasetError("The file is empty.")
    if not head.startswith(PARQUET_MAGIC):
        raise DatasetError(
            "The file is not a Parquet file: it does not start with the Parquet mark “PAR1”. "
            "If it is CSV, JSON or Excel, choose that format (or give the file its extension)."
        )
    try:
        # Column chunks are read a buffer at a time, not whole: a file written as one row group
        # (pandas' default up to 1M rows) would otherwise be in memory whole, decompressed.
        parquet = pyarrow.parquet.ParquetFile(
            pyarrow.BufferReader(source) if isinstance(source, bytes) else str(source),
            buffer_size=PARQUET_BUFFER,
            pre_buffer=False,
        )
    except (pyarrow.ArrowException, OSError) as exc:
        raise DatasetError(
            f"The Parquet file is damaged and cannot be read ({exc}). Write it again and upload "
            "it again."
        ) from None
    schema = parquet.schema_arrow
    columns = list(schema.names)
    if not columns:
        raise DatasetError("The Parquet file has no columns.")
    seen: set[str] = set()
    for number, column in enumerate(columns, start=1):
        if not column.strip():
            raise DatasetError(f"Column {number} of the Parquet file has no name.")
        if column in seen:
            raise DatasetError(f"The Parquet file has two columns named {column!r}.")
        seen.add(column)
    total = parquet.metadata.num_rows
    if total == 0:
        raise DatasetError(f"The Parquet file has columns ({', '.join(columns)}) but no rows.")
    return parquet, columns, total


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)  # Decimal, timedelta


def _nested_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=_json_default)


def parquet_texts(kind: pyarrow.DataType) -> Callable[[pyarrow.Array], list[str]]:
    """How one Parquet column's values become text, as pandas would show them, never changed
    by a null elsewhere in the column: integers stay integers ("3", not "3.0"), floats as
    their shortest form (a float32 0.1 is "0.1"), decimals with their scale ("1.50"),
    timestamps, dates and times in ISO 8601 (a time zone as its offset), true / false,
    lists, structs and maps as JSON text; a null is empty."""
    import pyarrow

    if pyarrow.types.is_dictionary(kind):
        kind = kind.value_type  # to_pylist() gives the values, not their codes
    convert: Callable[[Any], str]
    if (
        pyarrow.types.is_string(kind)
        or pyarrow.types.is_large_string(kind)
        or pyarrow.types.is_string_view(kind)
    ):
        return _strings
    if pyarrow.types.is_boolean(kind):
        convert = _bool_text
    elif pyarrow.types.is_integer(kind) or pyarrow.types.is_decimal(kind):
        convert = str
    elif pyarrow.types.is_float16(kind) or pyarrow.types.is_float32(kind):
        # A float32 read into Python is 0.10000000149011612; numpy prints it as written.
        convert = _float32_text
    elif pyarrow.types.is_floating(kind):
        convert = repr
    elif pyarrow.types.is_temporal(kind) and not pyarrow.types.is_duration(kind):
        convert = _iso_text
    elif pyarrow.types.is_binary(kind) or pyarrow.types.is_large_binary(kind):
        convert = _bytes_text
    elif pyarrow.types.is_null(kind):
        return _nulls
    elif pyarrow.types.is_nested(kind):
        convert = _nested_text
    else:
        convert = str  # durations and anything rarer
    return _converting(convert)


def _converting(convert: Callable[[Any], str]) -> Callable[[pyarrow.Array], list[str]]:
    def texts(array: pyarrow.Array) -> list[str]:
        return ["" if value is None else convert(value) for value in array.to_pylist()]

    return texts


def _strings(array: pyarrow.Array) -> list[str]:
    values = array.to_pylist()
    return [v if v is not None else "" for v in values] if array.null_count else values


def _nulls(array: pyarrow.Array) -> list[str]:
    return [""] * len(array)


def _bool_text(value: bool) -> str:
    return "true" if value else "false"


def _float32_text(value: float) -> str:
    return str(numpy.float32(value))


def _iso_text(value: Any) -> str:
    return str(value.isoformat())


def _bytes_text(value: bytes) -> str:
    return value.decode("utf-8", "replace")


# ---- Excel number formats -----------------------------------------------------------------
# python-calamine gives a cell's value, not how it is shown. Where the workbook styles numbers
# as percentages, currency, fixed decimals or with thousands separators, those cells' formats
# are read from the workbook's XML (styles.xml, then one pass of a regular expression over the
# chosen sheet's cells that carry such a style) and applied: 0.15 styled 0% arrives as "15%",
# 1234.5 styled "$"#,##0.00 as "$1,234.50". A workbook without such styles costs nothing more.
# Formats this does not understand (scientific, fractions, conditions, text) leave the value
# as cell_text() gives it.
MAIN_NS = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
REL_ID = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"
PACKAGE_RELS_NS = "{http://schemas.openxmlformats.org/package/2006/relationships}"
STYLED_CELL = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?c\s([^>]*)>")
CELL_REFERENCE = re.compile(rb'\br="([A-Z]{1,3})([0-9]+)"')
CELL_STYLE = re.compile(rb'\bs="([0-9]+)"')
FORMAT_TOKEN = re.compile(r'"([^"]*)"|\\(.)|\[\$([^\]-]*)[^\]]*\]|(\[[^\]]*\])|[_*].|(.)', re.S)
NUMBER_CHARS = frozenset("0#?,.")
LITERAL_CHARS = frozenset("$-+/():!^&'~{}<>= ")


def number_display(value: float, code: str) -> str | None:
    """`value` as Excel shows it in number format `code`, or None for a format not understood."""
    sections = code.split(";")
    if value < 0 and len(sections) > 1:
        shown = _display_section(-value, sections[1])  # the negative section writes its own sign
        return shown
    if value == 0 and len(sections) > 2:
        return _display_section(0.0, sections[2])
    shown = _display_section(abs(value), sections[0])
    return None if shown is None else ("-" + shown if value < 0 else shown)


def _display_section(value: float, section: str) -> str | None:
    pieces: list[str] = []
    pattern, percent, slot = "", 0, -1
    for match in FORMAT_TOKEN.finditer(section):
        quoted, escaped, currency, bracket, char = match.groups()
        if bracket is not None:
            if bracket[1:2] in ("<", ">", "="):
                return None  # a condition: beyond this reader
            continue  # a colour
        literal = quoted if quoted is not None else escaped if escaped is not None else currency
        if literal is not None:
            pieces.append(literal)
        elif char is None:
            continue  # _x (padding) or *x (fill)
        elif char in NUMBER_CHARS:
            if slot == -1:
                slot = len(pieces)
                pieces.append("")
            elif slot != len(pieces) - 1:
                return None  # two groups of digits: a fraction, or a format beyond this reader
            pattern += char
        elif char == "%":
            percent += 1
            pieces.append("%")
        elif char in LITERAL_CHARS or not char.isascii():
            pieces.append(char)  # $ - ( ) space, and symbols such as € £ ¥
        else:
            return None  # letters: General, dates, E+ (scientific), @ (text)
    if slot == -1 or pattern.endswith(","):
        return None  # no digits, or a trailing comma that scales by thousands
    whole, _, decimals = pattern.partition(".")
    if "," in decimals:
        return None
    most = sum(decimals.count(c) for c in "0#?")
    least = decimals.count("0")
    exact = decimal.Decimal(repr(value)) * 100**percent
    rounded = exact.quantize(decimal.Decimal(1).scaleb(-most), rounding=decimal.ROUND_HALF_UP)
    text = format(rounded, ",f" if "," in whole else "f")
    if not rounded and "0" not in pattern:
        text = ""  # ? and # show no digit for a zero (accounting formats then show just "-")
    if most > least:
        text = text.rstrip("0")
        dot = text.find(".")
        if dot >= 0 and len(text) - dot - 1 < least:
            text += "0" * (least - (len(text) - dot - 1))
        text = text.rstrip(".")
    pieces[slot] = text
    return "".join(pieces)


def _column_index(letters: bytes) -> int:
    index = 0
    for letter in letters:
        index = index * 26 + letter - 64
    return index - 1


def number_formats(source: Path | bytes, sheet: str) -> dict[tuple[int, int], str]:
    """(Excel row, 0-based column) → number format, for the cells of `sheet` whose format
    changes how a number shows. Empty when there are none, or when the workbook's XML is not as
    expected (those cells then arrive as their plain values)."""
    try:
        with zipfile.ZipFile(io.BytesIO(source) if isinstance(source, bytes) else source) as book:
            styles = _display_styles(book)
            if not styles:
                return {}
            xml = book.read(_sheet_part(book, sheet))
    except (
        KeyError,
        ValueError,
        OSError,
        StopIteration,
        zipfile.BadZipFile,
        ElementTree.ParseError,
    ):
        return {}
    found: dict[tuple[int, int], str] = {}
    for match in STYLED_CELL.finditer(xml):
        attributes = match.group(1)
        if b's="' not in attributes:
            continue
        style = CELL_STYLE.search(attributes)
        code = styles.get(int(style.group(1))) if style else None
        if code is None:
            continue
        reference = CELL_REFERENCE.search(attributes)
        if reference is None:
            return {}  # cells without references: their places are unknown
        found[(int(reference.group(2)), _column_index(reference.group(1)))] = code
    return found


def _display_styles(book: zipfile.ZipFile) -> dict[int, str]:
    """Cell style index → number format code, for the styles whose format shows numbers
    differently from General."""
    # ElementTree never fetches external entities, and expat >= 2.4 (Python 3.12 ships 2.5+)
    # refuses entity amplification; the parts' unpacked size was checked on opening.
    from openpyxl.styles.numbers import BUILTIN_FORMATS

    root = ElementTree.fromstring(book.read("xl/styles.xml"))  # noqa: S314
    codes: dict[int, str] = dict(BUILTIN_FORMATS)
    for number_format in root.iter(f"{MAIN_NS}numFmt"):
        codes[int(number_format.get("numFmtId", "-1"))] = number_format.get("formatCode", "")
    cell_styles = root.find(f"{MAIN_NS}cellXfs")
    styles: dict[int, str] = {}
    for index, style in enumerate([] if cell_styles is None else cell_styles):
        code = codes.get(int(style.get("numFmtId", "0")), "General")
        if number_display(1.5, code) is not None:
            styles[index] = code
    return styles


def _sheet_part(book: zipfile.ZipFile, sheet: str) -> str:
    workbook = ElementTree.fromstring(book.read("xl/workbook.xml"))  # noqa: S314
    relation = next(
        each.get(REL_ID, "")
        for each in workbook.iter(f"{MAIN_NS}sheet")
        if each.get("name") == sheet
    )
    relations = ElementTree.fromstring(book.read("xl/_rels/workbook.xml.rels"))  # noqa: S314
    target = next(
        each.get("Target", "")
        for each in relations.iter(f"{PACKAGE_RELS_NS}Relationship")
        if each.get("Id") == relation
    )
    return target.lstrip("/") if target.startswith("/") else posixpath.normpath("xl/" + target)
