"""Turn an uploaded file (CSV, JSON or JSONL) into columns and rows, or say in plain words why not.

Pure: no database, no Django models. Every error is a `DatasetError` whose message names the
row, line, item or field a person has to fix.

CSV is read with the standard `csv` module rather than `pandas.read_csv`: pandas silently pads
short rows with empty cells and truncates long ones under `index_col=False`, and its "line"
numbers ignore quoted newlines, so a precise ragged-row message needs a csv-module pass anyway;
that single pass already yields every value, and measured faster than pre-scan + pandas
(0.58 s against 0.68 s for 100k rows x 6 columns). Values stay text: "007" and "NA" are kept
as written.
"""

import csv
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

FORMATS = ("csv", "json", "jsonl")
# What a file name's extension says; .txt says nothing (it is sniffed, like a name without one).
EXTENSIONS = {
    ".csv": "csv",
    ".tsv": "csv",
    ".json": "json",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
}
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

    def where(self, index: int) -> str:
        """Name row `index` (0-based) the way a person finds it in the file."""
        origin = self.origins[index] if index < len(self.origins) else index + 1
        return self._unit() + f" {origin}"

    def where_cut(self) -> str:
        return f"{self._unit()} {self.cut_at}"

    def _unit(self) -> str:
        return {"csv": "row", "jsonl": "line", "json": "item"}[self.format]


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("bytes", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{int(value)} {unit}" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} bytes"


def check_size(size: int) -> None:
    limit = settings.DATASET_MAX_UPLOAD_BYTES
    if size > limit:
        raise DatasetError(
            f"The file is {human_size(size)}; the limit is {human_size(limit)}. "
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
            "In Excel use File → Save As → “CSV UTF-8”."
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


def read_table(source: str | Path | bytes, fmt: str | None = None, file_name: str = "") -> Table:
    """Read a whole file into a Table; `fmt` overrides detection."""
    if isinstance(source, str | Path) and not file_name:
        file_name = Path(source).name
    data = load_bytes(source)
    text = decode(data)
    del data  # a 200 MB upload need not be held twice
    return _parse(text, fmt, file_name)


def _parse(text: str, fmt: str | None, file_name: str) -> Table:
    if BLANK.match(text):
        raise DatasetError("The file is empty.")
    fmt = (fmt or "").lower() or detect_format(file_name, text)
    if fmt not in FORMATS:
        raise DatasetError(f"Unknown format {fmt!r}: choose csv, json or jsonl.")
    reader = {"csv": _read_csv, "json": _read_json, "jsonl": _read_jsonl}[fmt]
    return reader(text, file_name)


def read_head(
    path: str | Path,
    fmt: str | None = None,
    file_name: str = "",
    max_bytes: int = 4 * 1024 * 1024,
) -> Table:
    """Read a file for its preview: whole when small, else only its first `max_bytes`.

    A 200 MB upload is not parsed in the web request: the preview shows its first rows
    (errors in them are real errors), and the import in the worker reads and checks it all.
    A JSON document cannot be read in part, so JSON is always read whole. `preview_note` says
    in words what the preview leaves out.
    """
    path = Path(path)
    file_name = file_name or path.name
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise DatasetError(f"There is no file at {path}.") from None
    check_size(size)
    if size <= max_bytes:
        return read_table(path, fmt, file_name)
    data = _head_bytes(path, max_bytes)
    if len(data) >= size:  # its first line was the whole file
        return _parse(decode(data), fmt, file_name)
    text = decode(data)
    fmt = (fmt or "").lower() or detect_format(file_name, text)
    if fmt == "json":
        return read_table(path, fmt, file_name)
    if fmt not in FORMATS:
        raise DatasetError(f"Unknown format {fmt!r}: choose csv, json or jsonl.")
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
