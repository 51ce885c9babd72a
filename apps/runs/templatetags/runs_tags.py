import json
from typing import Any

from django import template

register = template.Library()


@register.filter
def duration(seconds: float | None) -> str:
    """12 s, 3 min 20 s, 2 h 5 min."""
    if seconds is None:
        return "–"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


@register.filter
def usd(value: float | None) -> str:
    if not value:
        return "$0"
    return f"${value:.4f}" if value < 1 else f"${value:,.2f}"


@register.filter
def rate(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


@register.filter
def pretty_json(value: Any) -> str:
    """Indented JSON for display; the template escapes it like any other text."""
    return json.dumps(value, ensure_ascii=False, indent=2)
