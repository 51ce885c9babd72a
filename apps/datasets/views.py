import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.db.models import Count
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from apps.accounts.access import AppRequest, admin_required, reviewer_required
from apps.accounts.models import Project, User
from apps.datasets import csvsafe
from apps.datasets.browse import conversation_view, item_page, item_view_fields
from apps.datasets.forms import FORMAT_CHOICES, MappingForm, PerturbForm, TaskForm, UploadForm
from apps.datasets.importing import (
    SNIFFED_ROWS,
    import_progress,
    reference_inputs_warning,
    reference_like,
    suggest_mapping,
    sync_max_rows,
)
from apps.datasets.jobs import import_job_lost, import_staged, start_background_perturb
from apps.datasets.models import Dataset, Frozen, Item, Task
from apps.datasets.perturb import (
    PERTURBATIONS,
    PerturbError,
    changed_count,
    existing_copy,
    perturb_dataset,
)
from apps.datasets.readers import DatasetError
from apps.datasets.uploads import StagedUpload, read_upload
from apps.datasets.values import as_text
from evalsite.sizes import human_size

PREVIEW_ROWS = 10
# A file may have thousands of columns; a preview of them all is unreadable and slow to build.
PREVIEW_COLUMNS = 100
LISTED_REFERENCE_LIKE = 10


def task_list(request: AppRequest) -> HttpResponse:
    tasks = list(
        Task.objects.for_user(request.user)
        .select_related("project")
        .annotate(
            dataset_count=Count("datasets", distinct=True), run_count=Count("runs", distinct=True)
        )
    )
    # A project column only where it tells tasks apart.
    several = len({task.project_id for task in tasks}) > 1
    return render(request, "datasets/task_list.html", {"tasks": tasks, "several_projects": several})


@reviewer_required
def task_create(request: AppRequest) -> HttpResponse:
    projects = Project.objects.for_user(request.user, User.Role.REVIEWER)
    form = TaskForm(request.POST or None, projects=projects)
    if request.method == "POST" and form.is_valid():
        task = form.save(commit=False)
        task.created_by = request.user
        task.save()
        messages.success(request, f"Task {task.slug} created.")
        return redirect(task)
    return render(request, "datasets/task_form.html", {"form": form})


def task_detail(request: AppRequest, slug: str) -> HttpResponse:
    task = get_object_or_404(Task, slug=slug)
    context = {
        "task": task,
        "datasets": task.datasets.annotate(run_count=Count("runs")),
        "runs": task.runs.with_names()[:50],
    }
    return render(request, "datasets/task_detail.html", context)


@require_POST
@admin_required
def task_new_data(request: AppRequest, slug: str) -> HttpResponse:
    """Turn "evaluate every model on new data" on or off (admins: it spends on every upload)."""
    task = get_object_or_404(Task, slug=slug)
    task.evaluate_new_data = request.POST.get("evaluate_new_data") == "on"
    task.save(update_fields=["evaluate_new_data"])
    state = "on" if task.evaluate_new_data else "off"
    messages.success(request, f"Evaluate every model on new data: {state}.")
    return redirect(task)


@reviewer_required
def dataset_upload(request: AppRequest, slug: str) -> HttpResponse:
    """Step 1: pick a file. It is staged and read whole, so file errors show right here."""
    task = get_object_or_404(Task, slug=slug)
    form = UploadForm(
        request.POST or None, request.FILES or None, initial={"name": request.GET.get("name", "")}
    )
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        name = form.cleaned_data["name"].strip() or Path(upload.name or "dataset").stem
        staged = None
        try:
            staged = StagedUpload.create(upload, task.slug, request.user.pk, name)
            read_upload(task, staged, form.cleaned_data["format"])
        except DatasetError as exc:
            if staged and staged.sheets:
                # One sheet of a workbook is unreadable: the next step offers the others.
                return redirect("datasets:dataset-map", slug=task.slug, token=staged.token)
            if staged:
                staged.discard()
            form.add_error("file", f"{upload.name}: {exc}")
        else:
            return redirect("datasets:dataset-map", slug=task.slug, token=staged.token)
    context = {
        "task": task,
        "form": form,
        "max_size": human_size(settings.DATASET_MAX_UPLOAD_BYTES),
    }
    return render(request, "datasets/upload.html", context)


@reviewer_required
def dataset_map(request: AppRequest, slug: str, token: str) -> HttpResponse:
    """Step 2: preview the rows, map the columns, import (here if small, else in a worker)."""
    task = get_object_or_404(Task, slug=slug)
    staged = StagedUpload.load(token, task.slug, request.user.pk)
    if staged is None:
        messages.error(request, "That upload is no longer here; please upload the file again.")
        return redirect("datasets:dataset-upload", slug=task.slug)
    if request.method == "POST":
        try:
            # The sheet this mapping was made for, even if another tab read another since.
            if request.POST.get("sheet") and request.POST["sheet"] != staged.sheet:
                staged.read(staged.meta.get("format"), request.POST["sheet"])
        except DatasetError:
            return _render_map(request, task, staged, staged.meta.get("format"), None)
        form = MappingForm(request.POST, columns=staged.meta.get("columns", []))
        if form.is_valid():
            try:
                return _import_staged(request, task, staged, form.cleaned_data)
            except DatasetError as exc:
                form.add_error(None, str(exc))
        return _render_map(request, task, staged, staged.meta.get("format"), form)
    return _render_map(
        request, task, staged, request.GET.get("format"), None, request.GET.get("sheet")
    )


def _import_staged(
    request: AppRequest, task: Task, staged: StagedUpload, data: dict[str, Any]
) -> HttpResponse:
    dataset = import_staged(task, staged, data["name"], data["mapping"], request.user)
    if dataset.is_importing:
        messages.success(request, f"Importing {dataset} in the background.")
        return redirect(dataset)
    messages.success(request, f"Imported {dataset.row_count} items into {dataset}.")
    if shown := data["mapping"].reference_like_inputs():
        messages.warning(request, reference_inputs_warning(shown))
    if (same := dataset.unchanged_from()) is not None:
        messages.info(request, f"{dataset} has the same items as {same}: nothing was started.")
    elif dataset.announced:
        messages.info(request, f"Started on the new items: {'; '.join(dataset.announced)}.")
    return redirect(dataset)


def _render_map(
    request: AppRequest,
    task: Task,
    staged: StagedUpload,
    fmt: str | None,
    form: MappingForm | None,
    sheet: str | None = None,
) -> HttpResponse:
    context: dict[str, Any] = {
        "task": task,
        "staged": staged,
        "size": human_size(staged.meta["size"]),
        "format_choices": FORMAT_CHOICES[1:],
    }
    try:
        table = staged.read(fmt or staged.meta.get("format"), sheet)
    except DatasetError as exc:
        context.update(read_error=str(exc), current_format=fmt or staged.meta.get("format"))
        return render(request, "datasets/map.html", context)
    context["current_format"] = table.format
    if form is None:
        name = staged.meta.get("name", "")
        suggested = suggest_mapping(task, name, table.columns, table.rows[:SNIFFED_ROWS])
        initial = MappingForm.initial_for(
            suggested, staged.meta.get("name", ""), table.format, table.sheet
        )
        form = MappingForm(initial=initial, columns=table.columns)
    name = (form["name"].value() or "").strip()
    columns, width = table.columns[:PREVIEW_COLUMNS], len(table.columns)
    context.update(
        table=table,
        form=form,
        preview_columns=columns,
        columns_note=f"The preview shows the first {len(columns)} of the {width:,} columns."
        if len(columns) < width
        else "",
        preview=[[as_text(row.get(c)) for c in columns] for row in table.rows[:PREVIEW_ROWS]],
        latest=Dataset.objects.latest_version(task, name) if name else None,
        background=staged.imports_in_background,
        # Besides the reference itself: columns left out of the inputs for their name.
        reference_like=[
            c for c in table.columns if reference_like(c) and c != form["reference_column"].value()
        ][:LISTED_REFERENCE_LIKE],
    )
    return render(request, "datasets/map.html", context)


def dataset_list(request: AppRequest) -> HttpResponse:
    datasets = (
        Dataset.objects.filter(task__in=Task.objects.for_user(request.user))
        .select_related("task")
        .annotate(run_count=Count("runs"))
    )
    return render(request, "datasets/dataset_list.html", {"datasets": datasets})


def dataset_detail(request: AppRequest, pk: int) -> HttpResponse:
    dataset = get_object_or_404(Dataset.objects.select_related("task", "previous"), pk=pk)
    target = request.htmx.target if request.htmx else None
    if target == "import-progress":
        if not dataset.is_importing:
            return HttpResponse(headers={"HX-Refresh": "true"})
        return render(request, "datasets/dataset_detail.html#progress", _progress(dataset))
    context = {"dataset": dataset, **item_page(dataset, request.GET)}
    if target == "items":
        return render(request, "datasets/dataset_detail.html#items", context)
    context.update(
        _progress(dataset) if dataset.is_importing else {},
        frozen=dataset.is_frozen,
        next_versions=dataset.next_versions.all(),
        unchanged_from=dataset.unchanged_from(),
        perturbed_copies=dataset.perturbed_copies.ready().order_by(
            "perturbation", "perturbation_seed"
        ),
        changed=changed_count(dataset) if dataset.perturbation else None,
        perturbation=PERTURBATIONS.get(dataset.perturbation),
        perturb_form=PerturbForm(),
    )
    return render(request, "datasets/dataset_detail.html", context)


@require_POST
@admin_required
def dataset_perturb(request: AppRequest, pk: int) -> HttpResponse:
    """Make (or find) a perturbed copy of the dataset and go to it."""
    original = get_object_or_404(Dataset.objects.select_related("task"), pk=pk)
    form = PerturbForm(request.POST)
    if not form.is_valid():
        errors = "; ".join(f"{name}: {' '.join(map(str, e))}" for name, e in form.errors.items())
        messages.error(request, f"Not perturbed: {errors}")
        return redirect(original)
    name, seed = form.cleaned_data["perturbation"], form.cleaned_data["seed"]
    before = set(original.perturbed_copies.values_list("pk", flat=True))
    try:
        if original.row_count > sync_max_rows() and not existing_copy(original, name, seed):
            start_background_perturb(original, name, seed, request.user)
            messages.success(
                request,
                f"Making the {name} copy of {original.row_count:,} items in the background: "
                "it appears under Perturbed copies when it is ready.",
            )
            return redirect(original)
        copy = perturb_dataset(original, name, seed, request.user)
    except PerturbError as exc:
        messages.error(request, str(exc))
        return redirect(original)
    if copy.pk in before:
        messages.info(request, f"{copy} was made before with this perturbation and seed.")
    else:
        changed = changed_count(copy)
        messages.success(request, f"Made {copy}: {changed} of {copy.row_count} items changed.")
    return redirect(copy)


def _progress(dataset: Dataset) -> dict[str, Any]:
    return {
        "dataset": dataset,
        "progress": import_progress(dataset),
        "lost": import_job_lost(dataset),
    }


def item_detail(request: AppRequest, pk: int, position: int) -> HttpResponse:
    item = get_object_or_404(
        Item.objects.select_related("dataset__task"), dataset_id=pk, position=position
    )
    dataset = item.dataset
    context = {
        "item": item,
        "dataset": dataset,
        "fields": item_view_fields(dataset, item),
        "conversation": conversation_view(item),
        "previous": dataset.items.filter(position__lt=position).order_by("-position").first(),
        "next": dataset.items.filter(position__gt=position).order_by("position").first(),
    }
    return render(request, "datasets/item_detail.html", context)


def download_rows(dataset: Dataset) -> Iterator[dict[str, Any]]:
    """Each item's fields in position order, its conversation column as stored: canonical chat
    messages whatever shape the file had (the one shape exports write)."""
    items = dataset.items.order_by("position")
    column = dataset.conversation_column
    if column is None:
        yield from items.values_list("fields", flat=True).iterator(chunk_size=2000)
        return
    for fields, conversation in items.values_list("fields", "conversation").iterator(
        chunk_size=2000
    ):
        yield {**fields, column: conversation}


def dataset_download(request: AppRequest, pk: int, fmt: str) -> StreamingHttpResponse:
    """Every item's fields back as CSV (formula cells neutralised) or JSONL, streamed."""
    dataset = get_object_or_404(Dataset.objects.select_related("task"), pk=pk)
    if fmt not in ("csv", "jsonl") or dataset.status != Dataset.Status.READY:
        raise Http404("No such download.")
    base = f"{dataset.task.slug}-{dataset.name}-v{dataset.version}"
    if fmt == "csv":
        columns = dataset.columns
        rows = ([row.get(c) for c in columns] for row in download_rows(dataset))
        return csvsafe.csv_response(f"{base}.csv", columns, rows)
    lines = (json.dumps(row, ensure_ascii=False) + "\n" for row in download_rows(dataset))
    response = StreamingHttpResponse(lines, content_type="application/x-ndjson; charset=utf-8")
    response["Content-Disposition"] = (
        f'attachment; filename="{csvsafe.attachment_name(base)}.jsonl"'
    )
    return response


@require_POST
@reviewer_required
def dataset_delete(request: AppRequest, pk: int) -> HttpResponse:
    dataset = get_object_or_404(Dataset.objects.select_related("task"), pk=pk)
    try:
        dataset.delete()
    except Frozen as exc:
        messages.error(request, str(exc))
        return redirect(dataset)
    if dataset.upload_path:
        Path(dataset.upload_path).unlink(missing_ok=True)
        Path(dataset.upload_path).with_suffix(".json").unlink(missing_ok=True)
    messages.success(request, f"Deleted {dataset}.")
    return redirect(reverse("datasets:task-detail", args=[dataset.task.slug]))
