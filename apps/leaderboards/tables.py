"""Every CSV export also as Excel (.xlsx) and Parquet, through pandas (#30.7).

The table is read back from the CSV the export already writes, so both files have the CSV's
rows and columns by construction: each column gets its type (whole numbers, numbers, true/false,
timestamps for ISO-dated columns; text otherwise), the CSV's formula quote comes off, and the
Excel writer marks text that would start a formula as text (Excel's own quote prefix), so a
model's "=HYPERLINK(…)" is shown, never run. Parquet keeps timestamps in UTC; Excel has no time
zones, so its timestamps are UTC wall times.
"""

import io
import re
from collections.abc import Iterable

import pandas as pd

from apps.datasets.csvsafe import FORMULA_STARTS

FORMATS = {
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "parquet": "application/vnd.apache.parquet",
}
SHEET = "export"
ISO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")


def _typed(column: pd.Series) -> pd.Series:
    """A column of CSV text as numbers, booleans or timestamps where every value is one."""
    present = column[column != ""]
    if present.empty:
        return column.replace("", None).astype("string")
    if present.isin(["true", "false"]).all():
        return column.map({"true": True, "false": False, "": None}).astype("boolean")
    numbers = pd.to_numeric(present, errors="coerce")
    if numbers.notna().all():
        values = pd.to_numeric(column.replace("", None))
        whole = (numbers % 1 == 0).all() and not present.str.contains(r"[.eE]").any()
        return values.astype("Int64" if whole else "Float64")
    if present.str.match(ISO_TIME).all():
        stamps = pd.to_datetime(column.replace("", None), utc=True, format="ISO8601")
        return stamps
    text = column.where(~column.str.startswith(tuple("'" + s for s in FORMULA_STARTS)))
    text = text.fillna(column.str.slice(1))  # the CSV's neutralising quote comes off
    return text.replace("", None).astype("string")


def frame(csv_text: str) -> pd.DataFrame:
    """The CSV export as a typed table: the same rows, in the same order."""
    raw = pd.read_csv(
        io.StringIO(csv_text.removeprefix("\ufeff")),
        dtype=str,
        keep_default_na=False,
        na_filter=False,
    )
    return pd.DataFrame({name: _typed(raw[name]) for name in raw.columns})


def _xlsx(table: pd.DataFrame) -> bytes:
    for name in table.columns:
        if isinstance(table[name].dtype, pd.DatetimeTZDtype):
            table[name] = table[name].dt.tz_convert("UTC").dt.tz_localize(None)
    buffer = io.BytesIO()
    with pd.ExcelWriter(buffer, engine="openpyxl") as writer:
        table.to_excel(writer, sheet_name=SHEET, index=False)
        sheet = writer.sheets[SHEET]
        for row in sheet.iter_rows(min_row=2):
            for cell in row:
                text = cell.value
                if isinstance(text, str) and text.startswith(FORMULA_STARTS):
                    # openpyxl took it for a formula: store it as text, shown as typed.
                    cell.value = None
                    cell._value, cell.data_type = text, "s"
                    cell.quotePrefix = True
    return buffer.getvalue()


def convert(chunks: Iterable[str], fmt: str) -> bytes:
    """A CSV export's text (its chunks) as an .xlsx or .parquet file."""
    table = frame("".join(chunks))
    if fmt == "xlsx":
        return _xlsx(table)
    buffer = io.BytesIO()
    table.to_parquet(buffer, index=False, engine="pyarrow")
    return buffer.getvalue()
