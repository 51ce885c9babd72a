"""Pages of generated datasets: generators (admins write them), starting a generation, and the
review of a draft (reviewers decide each item; viewers look), then publishing it."""

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_POST

from apps.accounts.access import AppRequest, admin_required, reviewer_required
from apps.accounts.models import User
from apps.datasets.models import Dataset, Frozen, Task
from apps.drafting.drafts import (
    DraftError,
    create_dataset_generation_run,
    discard,
    generation_run,
    publish,
    rates_by_version,
)
from apps.drafting.forms import DatasetGenerationForm, DraftItemForm, GeneratorForm
from apps.drafting.models import DraftItem, Generator
from apps.runs.models import Endpoint, Run


# ---- generators ---------------------------------------------------------------------------------
def generator_list(request: AppRequest) -> HttpResponse:
    visible = Task.objects.for_user(request.user)
    generators = Generator.objects.latest_versions().filter(task__in=visible)
    generators = generators.select_related("task")
    task = visible.filter(slug=request.GET.get("task", "")).first()
    if task is not None:
        generators = generators.filter(task=task)
    context = {"generators": generators.order_by("task__slug", "name"), "task": task}
    return render(request, "drafting/generator_list.html", context)


@admin_required
def generator_create(request: AppRequest) -> HttpResponse:
    tasks = Task.objects.for_user(request.user, User.Role.ADMIN)
    task = tasks.filter(slug=request.GET.get("task", "")).first()
    if task is None:
        context = {"tasks": tasks, "url_name": "drafting:generator-create"}
        return render(request, "runs/pick_task.html", context)
    form = GeneratorForm(request.POST or None, task=task)
    if request.method == "POST" and form.is_valid():
        generator = form.save(commit=False)
        generator.task = task
        generator.save_as_new_version(request.user)
        messages.success(request, f"Generator {generator} saved.")
        return redirect(generator)
    return render(request, "drafting/generator_form.html", {"form": form, "task": task})


@admin_required
def generator_edit(request: AppRequest, pk: int) -> HttpResponse:
    current = get_object_or_404(Generator.objects.select_related("task"), pk=pk)
    form = GeneratorForm(request.POST or None, instance=current, task=current.task, editing=True)
    if request.method == "POST" and form.is_valid():
        generator = form.save(commit=False)
        generator.save_as_new_version(request.user)
        messages.success(request, f"Saved as {generator}; runs keep the version they used.")
        return redirect(generator)
    context = {"form": form, "task": current.task, "generator": current}
    return render(request, "drafting/generator_form.html", context)


def _generator_context(generator: Generator, form: DatasetGenerationForm) -> dict[str, Any]:
    versions = generator.versions()
    runs = list(
        Run.objects.filter(draft_setup__generator__in=versions).select_related(
            "dataset", "draft_setup__generator", "endpoint"
        )[:30]
    )
    pending = dict(
        DraftItem.objects.undecided()
        .filter(dataset__in=[run.dataset_id for run in runs], dataset__status=Dataset.Status.DRAFT)
        .values_list("dataset")
        .annotate(n=Count("pk"))
    )
    for run in runs:
        run.to_review = pending.get(run.dataset_id, 0)  # type: ignore[attr-defined]
    return {
        "generator": generator,
        "rates": rates_by_version(generator),
        "latest": versions.order_by("-version").first(),
        "runs": runs,
        "form": form,
    }


def generator_detail(request: AppRequest, pk: int) -> HttpResponse:
    generator = get_object_or_404(Generator.objects.select_related("task"), pk=pk)
    endpoints = list(Endpoint.objects.all()[:2])
    initial = {"name": generator.name, "endpoint": endpoints[0] if len(endpoints) == 1 else None}
    form = DatasetGenerationForm(initial=initial)
    return render(request, "drafting/generator_detail.html", _generator_context(generator, form))


@require_POST
@reviewer_required
def generator_generate(request: AppRequest, pk: int) -> HttpResponse:
    generator = get_object_or_404(Generator.objects.select_related("task"), pk=pk)
    form = DatasetGenerationForm(request.POST)
    if not form.is_valid():
        context = _generator_context(generator, form)
        return render(request, "drafting/generator_detail.html", context, status=400)
    run = create_dataset_generation_run(
        generator,
        form.cleaned_data["endpoint"],
        form.cleaned_data["count"],
        user=request.user,
        name=form.cleaned_data["name"],
        logging_mode=form.cleaned_data["logging_mode"],
    )
    messages.success(
        request, f"Started run #{run.pk}: {run.size_text} into draft dataset {run.dataset}."
    )
    return redirect(run)


# ---- reviewing a draft ----------------------------------------------------------------------------
def _counts(dataset: Dataset) -> dict[str, int]:
    rows = DraftItem.objects.filter(dataset=dataset).values_list("decision").annotate(n=Count("pk"))
    counts = {decision: 0 for decision in DraftItem.Decision.values}
    counts.update(dict(rows))
    counts["total"] = sum(counts.values())
    return counts


def _review_context(dataset: Dataset, params: Any) -> dict[str, Any]:
    decision = params.get("decision", "")
    items = (
        DraftItem.objects.filter(dataset=dataset)
        .select_related("unit", "decided_by")
        .order_by("unit__index", "number")
    )
    if decision in DraftItem.Decision.values:
        items = items.filter(decision=decision)
    page = Paginator(items, 40).get_page(params.get("page"))
    query = {"decision": decision} if decision in DraftItem.Decision.values else {}
    return {
        "dataset": dataset,
        "run": generation_run(dataset),
        "counts": _counts(dataset),
        "page": page,
        "decision": decision,
        "page_query": query,
        "decisions": DraftItem.Decision.choices,
    }


def draft_review(request: AppRequest, pk: int) -> HttpResponse:
    dataset = get_object_or_404(Dataset.objects.select_related("task"), pk=pk)
    if not dataset.draft_items.exists() and not dataset.is_draft:
        return redirect(dataset)
    context = _review_context(dataset, request.GET)
    if request.htmx and request.htmx.target == "draft-items":
        return render(request, "drafting/draft_review.html#items", context)
    return render(request, "drafting/draft_review.html", context)


@require_POST
@reviewer_required
def draft_decide(request: AppRequest, pk: int) -> HttpResponse:
    item = get_object_or_404(DraftItem.objects.select_related("dataset", "unit"), pk=pk)
    decision = request.POST.get("decision", "")
    form = DraftItemForm(request.POST) if decision == DraftItem.Decision.EDITED else None
    error = ""
    if decision not in DraftItem.Decision.values:
        error = "Choose approve, edit or reject."
    elif form is not None and not form.is_valid():
        error = "An edited item needs its content and question."
    else:
        try:
            item.decide(decision, request.user, **(form.cleaned_data if form else {}))
        except Frozen as exc:
            error = str(exc)
    if request.htmx:
        context = {"item": item, "dataset": item.dataset, "error": error, "edit_form": form}
        html = render_to_string("drafting/draft_review.html#item", context, request)
        counts = {"dataset": item.dataset, "counts": _counts(item.dataset), "oob": True}
        html += render_to_string("drafting/draft_review.html#counts", counts, request)
        return HttpResponse(html, status=200)
    if error:
        messages.error(request, error)
    # Back to the same filter and page (only those two: nothing else rides along).
    back = QueryDict(request.POST.get("back", ""))
    query = urlencode({k: back[k] for k in ("decision", "page") if back.get(k)})
    url = reverse("drafting:draft-review", args=[item.dataset_id])
    return redirect(f"{url}{'?' + query if query else ''}#draft-item-{item.pk}")


@require_POST
@reviewer_required
def draft_publish(request: AppRequest, pk: int) -> HttpResponse:
    dataset = get_object_or_404(Dataset, pk=pk)
    try:
        published = publish(dataset)
    except DraftError as exc:
        messages.error(request, str(exc))
        return redirect("drafting:draft-review", pk=dataset.pk)
    messages.success(
        request,
        f"Published {published}: {published.row_count} items; runs and judges may use it now.",
    )
    return redirect(published)


@require_POST
@reviewer_required
def draft_discard(request: AppRequest, pk: int) -> HttpResponse:
    dataset = get_object_or_404(Dataset.objects.select_related("task"), pk=pk)
    try:
        discarded = discard(dataset)
    except DraftError as exc:
        messages.error(request, str(exc))
        return redirect("drafting:draft-review", pk=dataset.pk)
    messages.success(
        request,
        f"Discarded {discarded}: no run will use it; its decisions still count in the "
        "generator's rates.",
    )
    return redirect(dataset.task)
