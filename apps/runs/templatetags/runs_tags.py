from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from apps.datasets.values import as_text
from apps.runs.models import Endpoint, Response, Run
from apps.runs.models import usd as money

register = template.Library()


@register.filter
def invalid_because(response: Response, run: Run) -> str:
    """Why an answered response breaks its run's response schema ("" when it does not)."""
    if response.status != Response.Status.OK or not run.response_schema:
        return ""
    return run.response_problem(response.text)


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
    return money(float(value) if value is not None else None)


@register.simple_tag
def cost(spent: Any, endpoint: Endpoint | None = None, hint: bool = True) -> str | SafeString:
    """What a run (or one response, given its run's endpoint) cost, or "—" when the model has
    no price: a $0 that only means "unknown" must not read as free. The hint says how to set
    prices (beside the dash, or only on hover with hint=False in tight tables)."""
    endpoint = endpoint if endpoint is not None else getattr(spent, "endpoint", None)
    if endpoint is None or endpoint.cost_is_known(
        spent.cost, spent.prompt_tokens, spent.completion_tokens
    ):
        return usd(spent.cost)
    why = f"Cost unknown: {endpoint.unknown_cost_hint()}"
    if not hint:
        return format_html('<span class="cost-unknown" title="{}">—</span>', why)
    return format_html(
        '<span class="cost-unknown">—</span> <small class="muted cost-hint">{}</small>', why
    )


@register.filter
def any_cost_unknown(runs: Any) -> bool:
    """Whether a list of runs shows a "—" cost, so that it explains the dash once."""
    return any(not run.cost_known for run in runs)


@register.filter
def rate(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


@register.filter
def pretty_json(value: Any) -> str:
    """Indented JSON for display; the template escapes it like any other text."""
    return as_text(value, indent=2)


@register.filter
def percent(value: float | None) -> str:
    """A share as a whole percentage ("–" when there is nothing to divide)."""
    return "–" if value is None else f"{value:.0%}"
