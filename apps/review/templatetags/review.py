from django import template

register = template.Library()


@register.filter
def num(value: object, empty: str = "—") -> str:
    """A score as people write it: 4, 3.75, 0.333; `empty` when there is none."""
    if value is None or value == "":
        return empty
    try:
        return f"{round(float(value), 3):g}"  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(value)


@register.filter
def get_name(names: dict[int, str], run_id: int) -> str:
    """A response set's label (its run id when it has none), for the A/B page."""
    return names.get(run_id) or f"run #{run_id}"
