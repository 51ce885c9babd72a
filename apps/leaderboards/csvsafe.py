"""CSV cells that a spreadsheet cannot run as formulas.

A text cell starting with =, +, -, @, tab or carriage return may be read as a formula
(CSV injection), so it gets a leading single quote. Numbers we write ourselves (int/float)
are numbers and are written as they are. A text cell that is nothing but a plain decimal
number ("-3", "+1.5", "-2e3") is left alone too: spreadsheets read it as that number, it
cannot hold a formula, and quoting it would turn data like "-3" into text.
"""

import json
import math
import re
from typing import Any

TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
_FIRST = frozenset(TRIGGERS)
PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def neutralise(value: str) -> str:
    if value and value[0] in _FIRST and not PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


def text(value: str | None) -> str:
    """A text cell from the database (None is empty)."""
    return neutralise(value) if value else ""


def cell(value: Any) -> Any:
    """One value ready for csv.writer: numbers stay numbers, everything else is safe text."""
    if type(value) is str:  # the common case first: exports call this per cell
        return neutralise(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return "" if not math.isfinite(value) else value
    if not isinstance(value, str):
        value = json.dumps(value, ensure_ascii=False)
    return neutralise(value)
