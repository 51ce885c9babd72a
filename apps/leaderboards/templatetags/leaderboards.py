"""Links that change one setting of a board and keep the others."""

import math
from typing import Any

from django import template

from apps.leaderboards import formatting

register = template.Library()


@register.simple_tag(takes_context=True)
def query_with(context: dict[str, Any], **changes: Any) -> str:
    """The current query string with `changes` applied; an empty value drops the key."""
    query = context["request"].GET.copy()
    for key, value in changes.items():
        key = key.replace("__", ".")
        if value in ("", None):
            query.pop(key, None)
        else:
            query[key] = value
    encoded = query.urlencode()
    return f"?{encoded}" if encoded else "?"


@register.simple_tag(takes_context=True)
def sort_link(context: dict[str, Any], key: str) -> str:
    """Sort by `key` best-first; sorting by it again flips the direction."""
    board = context["board"]
    if board.sort == key:
        flipped = "asc" if board.direction == "desc" else "desc"
        return query_with(context, sort=key, dir=flipped)
    return query_with(context, sort=key, dir="")


@register.filter
def num(value: float | None) -> str:
    # A missing estimate's attribute reaches here as "" (the template's invalid value).
    return "—" if value is None or value == "" else f"{value:.2f}"


@register.filter
def dollars(value: float | None) -> str:
    """Dollars, "—" when unknown (no price: never shown as free); small sums keep their digits."""
    if value is None or value == "":
        return "—"
    if value == 0:
        return "$0"
    if abs(value) >= 1:
        return f"${value:,.2f}"
    return f"${value:.4f}" if abs(value) >= 0.0001 else f"${value:.6f}"


@register.filter
def saved(found: Any, kind: str) -> float | None:
    """A model's batch or cache saving (`ModelCost.saved`)."""
    return found.saved(kind) if found else None


@register.filter
def millis(value: float | None) -> str:
    """A latency: "850 ms", "12.3 s"; "—" without one."""
    if value is None or value == "":
        return "—"
    return f"{value:.0f} ms" if value < 10_000 else f"{value / 1000:.1f} s"


@register.filter
def interval(ci: Any) -> str:
    return formatting.interval(ci)


@register.filter
def pvalue(value: float | None) -> str:
    if value is None or value == "":  # "": a missing estimate's attribute (see num)
        return "—"
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


@register.filter
def percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


@register.filter
def arrow(board: Any, key: str) -> str:
    if board.sort != key:
        return ""
    return " ▼" if board.direction == "desc" else " ▲"


@register.filter
def get_item(mapping: Any, key: Any) -> Any:
    return mapping.get(key) if hasattr(mapping, "get") else None


@register.filter
def win_rows(board: Any) -> list[tuple[str, list[float | None]]]:
    """The pairwise board's win-rate matrix as rows, None where two models never met."""
    found = board.ratings
    return [
        (model, [None if math.isnan(v) else float(v) for v in row])
        for model, row in zip(found.models, found.win_rates, strict=True)
    ]
