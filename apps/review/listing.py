"""The review list of a judge run, and its bulk actions.

A page costs the same number of queries whatever its size: items, then their scores,
assignments and locks in one query each. Which items a filter lists, in order, is read once per
state of the run's results, reviews and assignments and kept (see `listed_ids`), so any page
of any filter is a slice of it.
"""

import hashlib
from array import array
from typing import Any

from django.contrib import messages
from django.core.cache import cache
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Page, Paginator
from django.db.models import Count, Exists, Max, OuterRef, Q, QuerySet

from apps.accounts.access import AppRequest
from apps.accounts.models import User
from apps.datasets import fulltext
from apps.datasets.models import Item
from apps.judges.launching import retry_failed_items
from apps.judges.models import RunItemQuerySet, Score, judge_of
from apps.review.models import ReviewAssignment, ReviewLock, ReviewPolicy
from apps.review.queue import last_event_id
from apps.review.templatetags.review import num
from apps.runs.models import Response, Run, Turn


def filtered(run: Run, user: Any, filters: dict[str, str]) -> RunItemQuerySet:
    qs = RunItemQuerySet.of(run).in_state(filters.get("status", ""))
    match filters.get("review"):
        case "unreviewed":
            qs = qs.unreviewed()
        case "reviewed":
            qs = qs.reviewed()
        case "overridden":
            qs = qs.overridden()
    assignments = ReviewAssignment.objects.filter(run=run, item=OuterRef("pk"))
    match filters.get("assigned"):
        case "me":
            qs = qs.filter(Exists(assignments.filter(user_id=user.pk)))
        case "none":
            qs = qs.exclude(Exists(assignments))
    return searched(qs.tagged(filters.get("tag", "")), run, filters.get("q", ""))


# A search lists at most SEARCH_CAP items (the page says "more than"): counting every item
# holding a word found in every answer read the index's whole list, seconds at 100k items.
SEARCH_CAP = 1000
# Index matches above which each item is looked up on its own (see review/search.py).
COMMON = 5000


def searched(qs: RunItemQuerySet, run: Run, text: str) -> RunItemQuerySet:
    """Items whose fields or judged answer hold the words of `text` (full-text, #28.5)."""
    if not fulltext.terms(text):
        return qs
    multi_turn = run.source_run is not None and run.source_run.multi_turn
    models_searched = (Item, Response, *((Turn,) if multi_turn else ()))
    per_row = any(fulltext.more_than(model, text, COMMON) for model in models_searched)
    found = fulltext.condition(Item, text, per_row=per_row)
    if run.source_run_id:
        answers = Response.objects.filter(run_id=run.source_run_id)
        turns = Turn.objects.filter(run_id=run.source_run_id)
        if per_row:
            found |= Q(Exists(answers.filter(item_id=OuterRef("pk")).filter(
                fulltext.condition(Response, text, per_row=True))))  # fmt: skip
            if multi_turn:  # every turn's answer
                found |= Q(Exists(turns.filter(item_id=OuterRef("pk")).filter(
                    fulltext.condition(Turn, text, per_row=True))))  # fmt: skip
        else:
            found |= Q(pk__in=fulltext.matching(answers, text).values("item_id"))
            if multi_turn:  # every turn's answer
                found |= Q(pk__in=fulltext.matching(turns, text).values("item_id"))
    return qs.filter(found)


class ListPaginator(Paginator):
    """Pages of a list of item ids; `capped`: a search found more than SEARCH_CAP items, and
    the first SEARCH_CAP are listed."""

    capped = False


LIST_SECONDS = 3600
ITEM_COLUMNS = ("pk", "position", "key", "tags")


def _list_state(run: Run, user: Any, filters: dict[str, str]) -> str:
    """What a filtered list depends on: the run's results always; people's changes (each
    leaves a ScoreEvent) for the review filter only, so the whole list and the status and tag
    filters stay kept while people review; the run's assignments (counted, and the newest:
    assigning replaces rows, unassigning deletes them) and who asks ("assigned to me") for the
    assignment filter; the judged answers' run for a search."""
    parts: list[Any] = [run.results_fingerprint]
    if filters.get("review"):
        parts.append(last_event_id())
    if filters.get("assigned"):
        found = ReviewAssignment.objects.filter(run=run).aggregate(n=Count("pk"), last=Max("pk"))
        parts += [found["n"], found["last"], user.pk]
    if filters.get("q") and run.source_run is not None:
        parts.append(run.source_run.results_fingerprint)
    parts += sorted((k, v) for k, v in filters.items() if k not in ("per_page", "page"))
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def listed_ids(run: Run, user: Any, filters: dict[str, str]) -> array:
    """The ids of the items a filter lists, in order (a search's first SEARCH_CAP + 1).

    Counting a filter's items and skipping to a deep page both read every item of the run
    (an EXISTS over its scores per item): 0.3–0.8 s at 100k items × 5 subjects in a 10M-score
    database, on every page. Kept per state instead, as 8 bytes an id, any page is a slice.
    """
    key = f"review:list:{run.pk}:{_list_state(run, user, filters)}"
    ids = cache.get(key)
    if ids is None:
        listed = filtered(run, user, filters).order_by("position").values_list("pk", flat=True)
        if fulltext.terms(filters.get("q", "")):
            listed = listed[: SEARCH_CAP + 1]
        ids = array("q", listed.iterator(chunk_size=10_000))
        cache.set(key, ids, LIST_SECONDS)
    return ids


def page_of(run: Run, user: Any, filters: dict[str, str], number: str | None) -> Page:
    ids = listed_ids(run, user, filters)
    searching = bool(fulltext.terms(filters.get("q", "")))
    paginator = ListPaginator(
        ids[:SEARCH_CAP] if searching else ids, int(filters.get("per_page") or 50)
    )
    paginator.capped = searching and len(ids) > SEARCH_CAP
    page = paginator.get_page(number)
    shown = list(page.object_list)
    # Plain dicts, not models: a 500-row page should not build 500 model instances.
    items = Item.objects.filter(pk__in=shown).values(*ITEM_COLUMNS)
    by_pk = {item["pk"]: item for item in items}
    page.object_list = [by_pk[pk] for pk in shown if pk in by_pk]
    return page


STATUS = {
    "failed": ("badge-bad", "failed"),
    "ok": ("badge-ok", "ok"),
    "pending": ("", "not judged"),
}


def rows(run: Run, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Plain strings per row: the template of a 500-row page should only print them
    (numbers given as text skip the template's number localisation)."""
    ids = [item["pk"] for item in items]
    failed = set(RunItemQuerySet.of(run).failed().filter(pk__in=ids).values_list("pk", flat=True))
    by_item: dict[int, dict[str, tuple]] = {}
    score_rows = Score.objects.filter(run=run, item_id__in=ids).values_list(
        "item_id", "subject", "final_value", "judge_value", "override_value", "confirmed_at"
    )
    for item_id, subject, final, judge, override, confirmed in score_rows:
        by_item.setdefault(item_id, {})[subject] = (final, judge, override, confirmed)
    assignees = dict(
        ReviewAssignment.objects.filter(run=run, item_id__in=ids).values_list(
            "item_id", "user__username"
        )
    )
    holders = dict(
        ReviewLock.objects.live()
        .filter(run=run, item_id__in=ids)
        .values_list("item_id", "user__username")
    )
    subjects = judge_of(run).subject_names
    out = []
    for item in items:
        pk = item["pk"]
        scores = by_item.get(pk, {})
        status = "failed" if pk in failed else "ok" if scores else "pending"
        cells = []
        for name in subjects:
            final, judge, override, _ = scores.get(name, (None, None, None, None))
            text = "—" if name not in scores else num(final, "✗")
            cells.append((text, num(judge) if override is not None else ""))
        out.append(
            {
                "pk": str(pk),
                "position": str(item["position"]),
                "row": str(item["position"] + 1),
                "key": item["key"],
                "tags": ", ".join(str(tag) for tag in item["tags"] or []),
                "status_class": STATUS[status][0],
                "status": STATUS[status][1],
                "cells": cells,
                "reviewed": bool(scores)
                and all(o is not None or c is not None for _, _, o, c in scores.values()),
                "assignee": assignees.get(pk, ""),
                "holder": holders.get(pk, ""),
            }
        )
    return out


def reviewers(user: Any) -> QuerySet[User]:
    """People an admin may hand items to; nobody else assigns."""
    if not user.is_admin:
        return User.objects.none()
    return User.objects.filter(
        is_active=True, role__in=[User.Role.REVIEWER, User.Role.ADMIN]
    ).order_by("username")


# ---- bulk actions ------------------------------------------------------------------------
def bulk_confirm(request: AppRequest, run: Run, items: QuerySet[Item]) -> None:
    ReviewPolicy.of(run.task_id).check_direct_change(request.user)
    scores = Score.objects.filter(run=run, item__in=items)
    confirmed = scores.bulk_confirm(request.user)
    still_open = scores.unreviewed().count()
    message = f"Confirmed {confirmed} judge score{'s' if confirmed != 1 else ''}."
    if still_open:
        message += f" {still_open} failed score{'s' if still_open != 1 else ''} need an override."
    messages.success(request, message)


def retry_failed(request: AppRequest, run: Run, items: QuerySet[Item] | None) -> None:
    """Queue exactly the failed items (of those ticked, or all) to be judged again."""
    failed = RunItemQuerySet.of(run).failed()
    if items is not None:
        failed = failed.filter(pk__in=items.values("pk"))
    ids = list(failed.order_by("position").values_list("pk", flat=True))
    if not ids:
        messages.info(request, "No failed items to retry.")
        return
    try:
        queued = retry_failed_items(run.pk, ids)
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
        return
    messages.success(request, f"Queued {queued} failed item{'s' if queued != 1 else ''} again.")


def bulk_assign(
    request: AppRequest, run: Run, items: QuerySet[Item], action: str, assignee_id: int | None
) -> None:
    if not request.user.is_admin:
        raise PermissionDenied("Only admins assign items.")
    ids = list(items.values_list("pk", flat=True))
    if action == "unassign":
        removed = ReviewAssignment.unassign(run, ids)
        messages.success(request, f"Unassigned {removed} item{'s' if removed != 1 else ''}.")
        return
    assignee = (
        reviewers(request.user).filter(pk=assignee_id).first() if assignee_id is not None else None
    )
    if assignee is None:
        messages.error(request, "Choose a reviewer to assign the items to.")
        return
    count = ReviewAssignment.assign(run, ids, assignee, request.user)
    messages.success(request, f"Assigned {count} item{'s' if count != 1 else ''} to {assignee}.")
