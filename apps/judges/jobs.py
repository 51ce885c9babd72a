"""Hooks of the judges app that other apps call by name (see apps/review/listing.py)."""

from collections.abc import Iterable

from django.core.exceptions import ValidationError

from apps.judges.kind import retry_items
from apps.runs.engine import LaunchError
from apps.runs.models import Run


def retry_failed_items(run_id: int, item_ids: Iterable[int]) -> int:
    """Judge again the failed rounds of these items of a judge run; returns how many items
    were queued (items that are not failed are left alone)."""
    run = Run.objects.filter(pk=run_id, kind=Run.Kind.JUDGE).first()
    if run is None:
        raise ValidationError(f"Run #{run_id} is not a judge run.")
    try:
        return retry_items(run, item_ids)
    except LaunchError as exc:
        raise ValidationError(str(exc)) from None
