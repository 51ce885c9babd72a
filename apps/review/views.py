"""Human review of judge runs: the list, the queue, the item page and per-score changes."""

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from apps.accounts.access import AppRequest, reviewer_required
from apps.datasets.models import Item, Task
from apps.judges.models import RunItemQuerySet, Score, StaleScore
from apps.review import display, listing, search
from apps.review.forms import BlindForm, BulkForm, ListFilterForm, OverrideForm, RevisionForm
from apps.review.models import (
    BlindEntry,
    ReviewClaim,
    ReviewLock,
    ReviewPolicy,
    review_progress,
)
from apps.review.queue import Queue, last_event_id, orders_for, review_counts
from apps.runs.models import Run


# ---- lookups -----------------------------------------------------------------------------
def _judge_run(run_id: int) -> Run:
    runs = Run.objects.judging().select_related(
        "task", "judged_with__judge", "dataset", "source_run"
    )
    return get_object_or_404(runs, pk=run_id)


def score_for_change(score_id: int) -> Score:
    scores = Score.objects.select_related(
        "run__judged_with__judge", "run__dataset", "item", "override_by", "confirmed_by"
    )
    return get_object_or_404(scores, pk=score_id)


def item_url(run: Run, item: Item, queue: Queue, anchor: str = "") -> str:
    url = reverse("review:item", args=[run.pk, item.pk]) + "?" + urlencode(queue.params())
    return f"{url}#{anchor}" if anchor else url


# ---- the list of judge runs and the review list of one run --------------------------------
@require_GET
def task_search(request: AppRequest, slug: str) -> HttpResponse:
    """A task's items and responses holding the words searched for (#28.5)."""
    task = get_object_or_404(Task, slug=slug)
    q = request.GET.get("q", "").strip()[:200]
    page, hits = search.search(task, q, request.GET.get("page")) if q else (None, [])
    context = {"task": task, "q": q, "page": page, "hits": hits, "page_query": {"q": q}}
    return render(
        request, "review/search.html#results" if request.htmx else "review/search.html", context
    )


@require_GET
def index(request: AppRequest) -> HttpResponse:
    runs = Run.objects.judging().with_names().filter(task__in=Task.objects.for_user(request.user))
    runs = runs.select_related("task")
    page = Paginator(runs, 25).get_page(request.GET.get("page"))
    last_event = last_event_id()
    rows = [(run, review_counts(run, last_event)) for run in page]
    return render(request, "review/index.html", {"page": page, "rows": rows, "page_query": {}})


@require_GET
def run_review(request: AppRequest, run_id: int) -> HttpResponse:
    run = _judge_run(run_id)
    policy = ReviewPolicy.of(run.task_id)
    form = ListFilterForm(request.GET)
    filters = form.values()
    page = listing.page_of(run, request.user, filters, request.GET.get("page"))
    context = {
        "run": run,
        "form": form,
        "filters": filters,
        "page": page,
        "rows": listing.rows(run, list(page)),
        "can_edit": request.user.can_edit,
        # Joined by hand per row: reversing a URL 500 times costs more than the queries.
        "item_base": reverse("review:item", args=[run.pk, 0]).removesuffix("0/"),
        "counts": review_counts(run),
        "policy": policy,
        "progress": review_progress(run, policy.reviews_per_item) if policy.several else None,
        "orders": orders_for(run),
        "reviewers": listing.reviewers(request.user),
        "tags": sorted((run.dataset.tag_counts or {}).keys()),
    }
    template = "review/run.html#table" if request.htmx else "review/run.html"
    return render(request, template, context)


@require_POST
@reviewer_required
def bulk(request: AppRequest, run_id: int) -> HttpResponse:
    run = _judge_run(run_id)
    form = BulkForm(request.POST)
    back = reverse("review:run", args=[run.pk]) + "?" + ListFilterForm(request.POST).urlencoded()
    if not form.is_valid():
        messages.error(request, "Choose an action.")
        return redirect(back)
    action, ids = form.cleaned_data["action"], form.item_ids()
    items = RunItemQuerySet.of(run).filter(pk__in=ids)
    if action != "retry_all" and not ids:
        messages.error(request, "Tick the items to act on first.")
    elif action == "confirm":
        listing.bulk_confirm(request, run, items)
    elif action in ("retry", "retry_all"):
        listing.retry_failed(request, run, None if action == "retry_all" else items)
    else:
        listing.bulk_assign(request, run, items, action, form.cleaned_data["assignee"])
    return redirect(back)


# ---- the queue ---------------------------------------------------------------------------
def _current(run: Run, params: QueryDict) -> Item | None:
    after = params.get("after", "")
    return RunItemQuerySet.of(run).filter(pk=int(after)).first() if after.isdigit() else None


def _queue_end(
    request: AppRequest, run: Run, current: Item | None, queue: Queue, forward: bool
) -> HttpResponse:
    messages.info(
        request,
        f"No more items in this queue ({queue.label})." if forward else "This is the first item.",
    )
    if current is not None:
        return redirect(item_url(run, current, queue))
    return redirect("review:run", run.pk)


@require_GET
def next_item(request: AppRequest, run_id: int) -> HttpResponse:
    """Look at the next item of a queue without claiming it (how viewers walk a queue)."""
    run = _judge_run(run_id)
    queue = Queue.from_params(run, request.user, request.GET)
    current, forward = _current(run, request.GET), request.GET.get("dir") != "prev"
    found = queue.neighbours(current, forward, limit=1)
    if not found:
        return _queue_end(request, run, current, queue, forward)
    return redirect(item_url(run, found[0], queue))


@require_POST
@reviewer_required
def claim_item(request: AppRequest, run_id: int) -> HttpResponse:
    """Serve the next item of a queue and lock it, so no other reviewer gets it meanwhile."""
    run = _judge_run(run_id)
    queue = Queue.from_params(run, request.user, request.POST)
    current, forward = _current(run, request.POST), request.POST.get("dir") != "prev"
    item = queue.claim_next(current, forward)
    if item is None:
        return _queue_end(request, run, current, queue, forward)
    return redirect(item_url(run, item, queue))


@require_POST
@reviewer_required
def renew_lock(request: AppRequest, run_id: int, item_id: int) -> HttpResponse:
    """Keep the item claimed while its page is open (the page asks every minute)."""
    run = _judge_run(run_id)
    item = get_object_or_404(RunItemQuerySet.of(run), pk=item_id)
    policy = ReviewPolicy.of(run.task_id)
    if policy.several:
        # Not exclusive: a reservation among the target's reviewers (see ReviewClaim).
        held = ReviewClaim.claim(run, item, request.user, policy.reviews_per_item)
        if not request.htmx:
            return redirect("review:item", run.pk, item.pk)
        context = {"run": run, "item": item, "claim": held, "policy": policy}
        return render(request, "review/_lock.html", context)
    claimed = ReviewLock.claim(run, item, request.user)
    if claimed and request.POST.get("opened") == "1":
        # A page just opened on this item: the reviewer has moved on from any other.
        ReviewLock.release_others(run, request.user, keep_item_id=item.pk)
    if not request.htmx:
        return redirect("review:item", run.pk, item.pk)
    lock = ReviewLock.holder(run, item)
    return render(request, "review/_lock.html", {"run": run, "item": item, "lock": lock})


# ---- the item page -----------------------------------------------------------------------
def _item_page(
    request: AppRequest, run: Run, item: Item, queue: Queue, **overrides: Any
) -> dict[str, Any]:
    context = display.item_context(run, item, request.user, queue.blind)
    if overrides.get("subject") is not None:
        # A failed no-JS POST: show that card with its message, the others as they are.
        replaced = overrides["subject"]
        context["subjects"] = [
            replaced if view.score.pk == replaced.score.pk else view for view in context["subjects"]
        ]
    position = queue.position_of(item)
    return {**context, "queue": queue, "queue_params": queue.params(), "position": position}


@require_GET
def item_page(request: AppRequest, run_id: int, item_id: int) -> HttpResponse:
    run = _judge_run(run_id)
    item = get_object_or_404(RunItemQuerySet.of(run), pk=item_id)
    queue = Queue.from_params(run, request.user, request.GET)
    return render(request, "review/item.html", _item_page(request, run, item, queue))


# ---- changing one score ------------------------------------------------------------------
def answer(
    request: AppRequest, score: Score, queue: Queue, ok: bool, **outcome: Any
) -> HttpResponse:
    """The subject's card for HTMX; otherwise back to the page (or the page with the error)."""
    score.refresh_from_db()
    view = display.with_outcome(
        display.subject_view(score, score.run, request.user, queue.blind), **outcome
    )
    if request.htmx:
        html: str = render_to_string(
            "review/_score.html", {"sv": view, "queue_params": queue.params()}, request
        )
        if outcome.get("saved") == "blind":
            html += _evidence_oob(request, score, queue)
        return HttpResponse(html)
    if ok:
        messages.success(request, f"{score.subject}: {outcome.get('saved', 'saved')}.")
        return redirect(item_url(score.run, score.item, queue, f"score-{score.pk}"))
    context = _item_page(request, score.run, score.item, queue, subject=view)
    status = 409 if outcome.get("stale") else 400
    return render(request, "review/item.html", context, status=status)


def _evidence_oob(request: AppRequest, score: Score, queue: Queue) -> str:
    """Once the last blind subject is entered, the judge's rounds appear too."""
    views = display.subject_views(score.run, score.item, request.user, queue.blind)
    if any(view.hidden for view in views):
        return ""
    evidence = display.evidence_context(score.run, score.item, revealed=True)
    context = {"evidence": evidence, "oob": True, "run": score.run}
    html: str = render_to_string("review/_evidence.html", context, request)
    html += render_to_string("review/_judge_says.html", context, request)
    if verdicts := display.turn_verdicts(evidence["rounds"]):
        # A judge that scored turn by turn: its verdicts beside each answer appear too.
        response = display.response_of(score.run, score.item, verdicts)
        html += render_to_string(
            "review/_response.html", {**context, "response": response}, request
        )
    return html


def _change(request: AppRequest, score_id: int, form_class: type, apply: Any) -> HttpResponse:
    score = score_for_change(score_id)
    ReviewPolicy.of(score.run.task_id).check_direct_change(request.user)
    queue = Queue.from_params(score.run, request.user, request.POST)
    form = form_class(request.POST)
    typed = {"value": request.POST.get("value", ""), "reason": request.POST.get("reason", "")}
    try:
        if not form.is_valid():
            raise ValidationError(form.errors.as_data())
        saved = apply(score, form.cleaned_data)
    except StaleScore as stale:
        return answer(request, score, queue, ok=False, stale=stale, **typed)
    except ValidationError as error:
        return answer(request, score, queue, ok=False, error=error, **typed)
    return answer(request, score, queue, ok=True, saved=saved)


@require_POST
@reviewer_required
def override(request: AppRequest, score_id: int) -> HttpResponse:
    def apply(score: Score, data: dict[str, Any]) -> str:
        score.override(data["value"], request.user, data["reason"], data["revision"])
        return "overridden"

    return _change(request, score_id, OverrideForm, apply)


@require_POST
@reviewer_required
def confirm(request: AppRequest, score_id: int) -> HttpResponse:
    def apply(score: Score, data: dict[str, Any]) -> str:
        score.confirm(request.user, data["revision"], reason=data["reason"].strip())
        return "confirmed"

    return _change(request, score_id, RevisionForm, apply)


@require_POST
@reviewer_required
def revert(request: AppRequest, score_id: int) -> HttpResponse:
    if not score_for_change(score_id).may_revert(request.user):
        raise PermissionDenied("Only an admin may revert someone else's change.")

    def apply(score: Score, data: dict[str, Any]) -> str:
        score.revert(request.user, data["reason"].strip(), data["revision"])
        return "reverted to the judge's value"

    return _change(request, score_id, RevisionForm, apply)


@require_POST
@reviewer_required
def blind_entry(request: AppRequest, score_id: int) -> HttpResponse:
    """The reviewer's own value, given before the judge's is shown; then both show."""

    def apply(score: Score, data: dict[str, Any]) -> str:
        bounds = score.value_range()
        value = data["value"]
        if bounds and not bounds[0] <= value <= bounds[1]:
            raise ValidationError(
                {
                    "value": f"{value:g} is outside {score.subject}'s range {bounds[0]:g}–{bounds[1]:g}."
                }
            )
        BlindEntry.objects.get_or_create(score=score, user=request.user, defaults={"value": value})
        return "blind"

    return _change(request, score_id, BlindForm, apply)
