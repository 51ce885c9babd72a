"""{% model_text value %}: the one way pages show model output and item fields."""

from typing import Any

from django import template
from django.utils.safestring import SafeString, mark_safe

from apps.datasets.rendering import RENDERED, show_text

register = template.Library()


@register.simple_tag(takes_context=True)
def model_text(
    context: template.Context, value: Any, css: str = "", fold: bool = True
) -> SafeString:
    """The value as the signed-in user chose to read model output (rendered or raw)."""
    user = context.get("user")
    mode = getattr(user, "text_view", RENDERED) or RENDERED
    # show_text escapes every character of the value and sanitises what Markdown made of it.
    return mark_safe(show_text(value, mode, css_class=css, fold=fold))  # noqa: S308
