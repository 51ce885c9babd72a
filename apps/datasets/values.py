"""Item field values as text. Plain Python, no Django: the judge's core modules (reply parsing,
prompt building) use it and stay importable without settings."""

import json
from typing import Any


def as_text(value: Any, indent: int | None = None) -> str:
    """A field value as text: strings as they are, nothing as "", anything else as JSON
    (non-ASCII kept; `indent` for reading on a page). The one rendering prompts, pages and
    imports share, so a list field reads the same in a judge prompt and on the review page."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=indent)
