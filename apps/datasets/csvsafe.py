"""CSV output that a spreadsheet cannot execute: shared by every CSV export.

A cell whose text starts with = + - @ tab or CR can run as a formula in Excel, LibreOffice or
Google Sheets; such text gets a leading single quote. Numbers stay numbers (a JSON -1 is not a
formula); the same text as a string is quoted.
"""

import csv
import re
from collections.abc import Iterable, Iterator
from typing import Any

from django.http import StreamingHttpResponse

from apps.datasets.values import as_text

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
ROWS_PER_CHUNK = 500


def neutralise(text: str) -> str:
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def cell(value: Any) -> str:
    """One value as safe CSV text: lists and objects as JSON, None as empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return neutralise(as_text(value))


class _Line:
    """A file-like object whose write returns what was written, so csv.writer yields lines."""

    def write(self, value: str) -> str:
        return value


def line_writer() -> Any:
    """A csv.writer whose writerow returns the line it wrote (with its "\\r\\n")."""
    return csv.writer(_Line())


def csv_lines(header: list[Any], rows: Iterable[Iterable[Any]], bom: bool = True) -> Iterator[str]:
    """The CSV text of `header` and `rows`, every cell neutralised, in chunks of many rows.

    The BOM makes Excel read the file as UTF-8 (Chinese text and all); readers that do not
    want it strip it, as ours does.
    """
    writer = line_writer()
    yield ("\ufeff" if bom else "") + writer.writerow([cell(name) for name in header])
    chunk: list[str] = []
    for row in rows:
        chunk.append(writer.writerow([cell(value) for value in row]))
        if len(chunk) >= ROWS_PER_CHUNK:
            yield "".join(chunk)
            chunk = []
    if chunk:
        yield "".join(chunk)


def attachment_name(name: str) -> str:
    """A file name safe inside a Content-Disposition header (no quotes, no path, ASCII)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "export"


def csv_response(
    file_name: str, header: list[Any], rows: Iterable[Iterable[Any]]
) -> StreamingHttpResponse:
    """A streamed CSV download: rows are read and written as they go, never all in memory."""
    response = StreamingHttpResponse(
        csv_lines(header, rows), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{attachment_name(file_name)}"'
    return response
