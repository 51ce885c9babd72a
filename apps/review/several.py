"""Pages for several reviewers per item: submitting one's own review, the adjudication queue
and deciding an adjudication, and the task's review policy (admins)."""

import secrets
import time
from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.accounts.access import AppRequest, admin_required, reviewer_required
from apps.accounts.models import User
from apps.datasets.models import Task
from apps.judges.models import Score, TaskJudging
from apps.review import views
from apps.review.forms import AdjudicationForm, PolicyForm, ReviewForm
from apps.review.models import Adjudication, Review, ReviewClaim, ReviewPolicy, settle_task
from apps.review.queue import Queue


@require_POST
@reviewer_required
def submit_review(request: AppRequest, score_id: int) -> HttpResponse:
    """The reviewer's own value for one subject; the item's claim ends with its last subject."""
    score = views.score_for_change(score_id)
    queue = Queue.from_params(score.run, request.user, request.POST)
    form = ReviewForm(request.POST)
    typed = {"value": request.POST.get("value", ""), "reason": request.POST.get("reason", "")}
    try:
        if not form.is_valid():
            raise ValidationError(form.errors.as_data())
        shown_at = form.cleaned_data["shown_at"]
        seconds = time.time() - shown_at if shown_at else 0.0
        Review.submit(
            score,
            request.user,
            form.cleaned_data["value"],
            form.cleaned_data["reason"],
            seconds,
            blind=queue.blind,
        )
    except ValidationError as error:
        return views.answer(request, score, queue, ok=False, error=error, **typed)
    left = Score.objects.filter(run=score.run, item=score.item).exclude(reviews__user=request.user)
    if not left.exists():
        ReviewClaim.release(score.run, score.item, request.user)
    return views.answer(request, score, queue, ok=True, saved="review submitted")


@require_GET
def adjudication_list(request: AppRequest, slug: str) -> HttpResponse:
    """The task's scores whose reviewers disagreed, every review side by side."""
    task = get_object_or_404(Task, slug=slug)
    policy = ReviewPolicy.of(task.pk)
    state = request.GET.get("state", "open")
    adjudications = Adjudication.objects.filter(score__run__task=task).select_related(
        "score__run__judged_with__judge", "score__item", "user"
    )
    adjudications = adjudications.filter(settled_at__isnull=state == "open")
    rows = list(adjudications[:200])
    reviews: dict[int, list[Review]] = {}
    for review in Review.objects.filter(score__in=[a.score_id for a in rows]).select_related(
        "user"
    ):
        reviews.setdefault(review.score_id, []).append(review)
    context = {
        "task": task,
        "policy": policy,
        "state": state,
        "rows": [(a, reviews.get(a.score_id, [])) for a in rows],
        "may_adjudicate": policy.may_adjudicate(request.user),
    }
    return render(request, "review/adjudication.html", context)


@require_POST
@reviewer_required
def adjudicate(request: AppRequest, pk: int) -> HttpResponse:
    adjudication = get_object_or_404(Adjudication.objects.select_related("score__run"), pk=pk)
    score = views.score_for_change(adjudication.score_id)
    queue = Queue.from_params(score.run, request.user, request.POST)
    form = AdjudicationForm(request.POST)
    try:
        if not form.is_valid():
            raise ValidationError(form.errors.as_data())
        adjudication.decide(form.cleaned_data["value"], request.user, form.cleaned_data["reason"])
    except ValidationError as error:
        return views.answer(request, score, queue, ok=False, error=error)
    if request.POST.get("next") == "list" and not request.htmx:
        messages.success(request, f"{score.subject} of item {score.item.key}: adjudicated.")
        return redirect("review:adjudication", score.run.task.slug)
    return views.answer(request, score, queue, ok=True, saved="adjudicated")


def sample_fields(current: ReviewPolicy, data: dict[str, Any]) -> dict[str, Any]:
    """The random sample's percent and seed as saved: a blank seed is drawn, and the time is
    recorded whenever the sample changes."""
    percent, seed = data.get("sample_percent"), data.get("sample_seed")
    # Blank (a task file, which does not name the design): the design stays as it was.
    design = data.get("sample_design") or current.sample_design
    if not percent:
        return {
            "sample_percent": None,
            "sample_seed": 0,
            "sample_set_at": None,
            "sample_design": ReviewPolicy.Design.UNIFORM,
        }
    if seed is None:
        seed = secrets.randbelow(2**31)
    changed = (percent, seed, design) != (
        current.sample_percent,
        current.sample_seed,
        current.sample_design,
    )
    return {
        "sample_design": design,
        "sample_percent": percent,
        "sample_seed": seed,
        "sample_set_at": timezone.now() if changed else current.sample_set_at,
    }


@require_http_methods(["GET", "POST"])
@admin_required
def policy(request: AppRequest, slug: str) -> HttpResponse:
    task = get_object_or_404(Task, slug=slug)
    current = ReviewPolicy.of(task.pk)
    judging = TaskJudging.of(task.pk)  # the rule for "needs a person" is judges' (#14.4)
    initial = {
        "reviews_per_item": current.reviews_per_item,
        "thresholds": ", ".join(f"{k}={v:g}" for k, v in sorted(current.thresholds.items())),
        "adjudicator": current.adjudicator_id,
        "sample_percent": current.sample_percent,
        "sample_seed": current.sample_seed if current.has_sample else None,
        "sample_design": current.sample_design,
        "doubt_spread": judging.doubt_spread,
        "doubt_repaired": judging.doubt_repaired,
        "doubt_confidence": judging.doubt_confidence,
    }
    form = PolicyForm(request.POST or None, initial=initial)
    form.fields["adjudicator"].queryset = User.objects.filter(  # type: ignore[attr-defined]
        is_active=True, role__in=[User.Role.REVIEWER, User.Role.ADMIN]
    ).order_by("username")
    if request.method == "POST" and form.is_valid():
        with transaction.atomic():
            ReviewPolicy.objects.update_or_create(
                task=task,
                defaults={
                    "reviews_per_item": form.cleaned_data["reviews_per_item"],
                    "thresholds": form.cleaned_data["thresholds"],
                    "adjudicator": form.cleaned_data["adjudicator"],
                    **sample_fields(current, form.cleaned_data),
                },
            )
            rule = TaskJudging.for_task(task)
            rule.doubt_spread = form.cleaned_data["doubt_spread"]
            rule.doubt_repaired = form.cleaned_data["doubt_repaired"]
            rule.doubt_confidence = form.cleaned_data["doubt_confidence"]
            rule.save(update_fields=["doubt_spread", "doubt_repaired", "doubt_confidence"])
        settled = settle_task(task.pk)
        note = f" {settled} waiting score{'s' if settled != 1 else ''} settled." if settled else ""
        messages.success(request, f"Review policy of {task.slug} saved.{note}")
        return redirect(reverse("review:policy", args=[task.slug]))
    return render(request, "review/policy.html", {"task": task, "form": form, "policy": current})
