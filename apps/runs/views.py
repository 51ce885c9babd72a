import contextlib
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST
from redis.exceptions import RedisError

from apps.accounts.access import AppRequest, admin_required, reviewer_required
from apps.accounts.models import User
from apps.datasets.models import Dataset, Item, Task
from apps.runs import jobs
from apps.runs.engine.budget import check_budget
from apps.runs.engine.contract import is_registered, plugin_for
from apps.runs.engine.launch import LaunchError, launch
from apps.runs.engine.lifecycle import cancel
from apps.runs.engine.limits import provider_limits
from apps.runs.engine.llm import test_connection
from apps.runs.estimate import Estimate, estimate
from apps.runs.forms import (
    ChoiceRunForm,
    DialogueRunForm,
    EndpointForm,
    GenerationRunForm,
    PromptTemplateForm,
    ScriptRunForm,
    SimulationRunForm,
)
from apps.runs.kinds.choices import ChoiceRunError, create_choice_run
from apps.runs.kinds.generation import create_generation_run
from apps.runs.kinds.scripts import create_script_run
from apps.runs.kinds.simulation import create_simulation_run
from apps.runs.models import (
    AttemptLog,
    Endpoint,
    LoggingMode,
    PromptTemplate,
    Response,
    Run,
    Turn,
    WorkerCheck,
)
from apps.runs.prompts import ItemData, PromptError, PromptRenderer, fits
from evalsite.enqueue import enqueue


# ---- runs -----------------------------------------------------------------------------------
def run_list(request: AppRequest) -> HttpResponse:
    runs = Run.objects.with_names().filter(task__in=Task.objects.for_user(request.user))
    runs = runs.select_related("task", "template")
    if task := request.GET.get("task"):
        runs = runs.filter(task__slug=task)
    return render(request, "runs/run_list.html", {"runs": runs[:200], "task": task})


def _run(pk: int) -> Run:
    return get_object_or_404(
        Run.objects.select_related("task", "dataset", "endpoint", "judged_with__judge", "template"),
        pk=pk,
    )


def run_detail(request: AppRequest, pk: int) -> HttpResponse:
    run = _run(pk)
    if request.htmx and request.htmx.target == "run-progress":
        response = render(request, "runs/run_detail.html#progress", {"run": run})
        if not run.is_active and request.GET.get("was_active"):
            response["HX-Refresh"] = "true"  # the run just ended: show its final table
        return response
    status = request.GET.get("status", "")
    responses = run.responses.select_related("item").order_by("item__position", "epoch")
    if status in (Response.Status.OK, Response.Status.FAILED):
        responses = responses.filter(status=status)
    page = Paginator(responses, 50).get_page(request.GET.get("page"))
    context = {
        "run": run,
        "page": page,
        "status": status,
        "page_query": {"status": status} if status else {},
    }
    if request.htmx and request.htmx.target == "responses":
        return render(request, "runs/run_detail.html#responses", context)
    if is_registered(run.kind):
        context.update(plugin_for(run).page_context(run))
    return render(request, "runs/run_detail.html", context)


@require_POST
@reviewer_required
def run_cancel(request: AppRequest, pk: int) -> HttpResponse:
    run = _run(pk)
    if run.is_active:
        cancel(run)
        messages.info(request, "Cancelled: no new requests are sent. Resume to finish it later.")
    return redirect(run)


def _relaunch(request: AppRequest, pk: int, mode: str, done_message: str) -> HttpResponse:
    run = _run(pk)
    try:
        with transaction.atomic():
            if (budget := request.POST.get("budget_usd", "").strip()) != "":
                run.set_budget(check_budget(budget, run.endpoint))  # raised to go on
            count = launch(run, mode)
    except (LaunchError, ValueError) as exc:
        messages.error(request, str(exc))
        return redirect(run)
    messages.success(request, done_message.format(count=count) if count else "Nothing left to do.")
    return redirect(run)


@require_POST
@reviewer_required
def run_resume(request: AppRequest, pk: int) -> HttpResponse:
    return _relaunch(request, pk, Run.Mode.RESUME, "Resumed: {count} items without a response.")


@require_POST
@reviewer_required
def run_retry_failed(request: AppRequest, pk: int) -> HttpResponse:
    return _relaunch(
        request, pk, Run.Mode.RETRY_FAILED, "Retrying {count} failed items; their logs stay."
    )


@require_POST
@reviewer_required
def run_overwrite(request: AppRequest, pk: int) -> HttpResponse:
    return _relaunch(
        request, pk, Run.Mode.OVERWRITE, "Running all {count} items again; the logs stay."
    )


def response_detail(request: AppRequest, pk: int, item_id: int) -> HttpResponse:
    run = _run(pk)
    item = get_object_or_404(Item, pk=item_id, dataset_id=run.dataset_id)
    responses = list(Response.objects.filter(run=run, item=item).order_by("epoch"))
    turns = Turn.objects.filter(run=run, item=item)
    for response in responses:  # a multi-turn item's turns, with each epoch's response
        response.turn_rows = [t for t in turns if t.epoch == response.epoch]  # type: ignore[attr-defined]
    context = {
        "run": run,
        "item": item,
        "responses": responses,
        # Turns of an item still going (no response yet) show on their own.
        "open_turns": [t for t in turns if t.epoch not in {r.epoch for r in responses}],
        "logs": AttemptLog.objects.filter(run=run, item=item).order_by("created_at", "pk"),
    }
    return render(request, "runs/response_detail.html", context)


@reviewer_required
def generation_new(request: AppRequest) -> HttpResponse:
    """The start form, reached from a dataset (?dataset=ID) or a task (?task=SLUG)."""
    task, dataset = _task_and_dataset(request)
    if task is None:
        return _pick_task(request, "runs:generation-new")
    form = GenerationRunForm(task=task, initial=_generation_defaults(task, dataset, request.GET))
    context = {"form": form, "task": task, "estimate": _estimate(form)}
    return render(request, "runs/generation_new.html", context)


def _estimate(form: GenerationRunForm) -> Estimate | None:
    """The cost estimate of the form's choices (its defaults before anything was chosen)."""
    if not form.is_bound:
        values = {name: form.initial.get(name) for name in ("dataset", "endpoint", "template")}
        if any(value is None for value in values.values()):
            return None
        data = {name: getattr(value, "pk", value) for name, value in values.items()}
        form = GenerationRunForm(
            {**data, "logging_mode": LoggingMode.FAILED, "chunk_size": 200}, task=form.task
        )
    return estimate(form.unsaved_run()) if form.is_valid() else None


@require_POST
@reviewer_required
def generation_start(request: AppRequest) -> HttpResponse:
    task = get_object_or_404(_tasks(request), slug=request.POST.get("task", ""))
    form = GenerationRunForm(request.POST, task=task)
    if request.POST.get("estimate") or (request.htmx and request.htmx.target == "cost-estimate"):
        # The estimate of the choices so far: its partial (HTMX), or the form with it (no JS).
        context = {"form": form, "task": task, "estimate": _estimate(form)}
        partial = "#estimate" if request.htmx else ""
        return render(request, f"runs/generation_new.html{partial}", context)
    if not form.is_valid():
        context = {"form": form, "task": task, "estimate": None}
        return render(request, "runs/generation_new.html", context)
    run = create_generation_run(
        form.cleaned_data["dataset"],
        form.cleaned_data["endpoint"],
        form.cleaned_data["template"],
        user=request.user,
        label=form.cleaned_data["label"],
        logging_mode=form.cleaned_data["logging_mode"],
        chunk_size=form.cleaned_data["chunk_size"],
        epochs=form.cleaned_data["epochs"],
        batch=form.cleaned_data["batch"],
        use_cache=form.cache_choice(),
        budget_usd=form.cleaned_data.get("budget_usd"),
        response_schema=form.cleaned_data.get("response_schema"),
        multi_turn=form.cleaned_data["multi_turn"],
    )
    messages.success(request, f"Started run #{run.pk}: {run.size_text}.")
    return redirect(run)


@reviewer_required
def choice_new(request: AppRequest) -> HttpResponse:
    """The choice-scoring start form, reached like the generation form."""
    task, dataset = _task_and_dataset(request)
    if task is None:
        return _pick_task(request, "runs:choice-new")
    form = ChoiceRunForm(task=task, initial=_generation_defaults(task, dataset, request.GET))
    return render(request, "runs/choice_new.html", {"form": form, "task": task})


@require_POST
@reviewer_required
def choice_start(request: AppRequest) -> HttpResponse:
    task = get_object_or_404(_tasks(request), slug=request.POST.get("task", ""))
    form = ChoiceRunForm(request.POST, task=task)
    if form.is_valid():
        data = form.cleaned_data
        try:
            run = create_choice_run(
                data["dataset"],
                data["endpoint"],
                data["template"],
                option_columns=data["option_columns"] or None,
                label_type=data["label_type"] or None,
                user=request.user,
                label=data["label"],
                logging_mode=data["logging_mode"],
                chunk_size=data["chunk_size"],
            )
        except ChoiceRunError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Started run #{run.pk}: {run.size_text}.")
            return redirect(run)
    return render(request, "runs/choice_new.html", {"form": form, "task": task})


# Memory scripts and simulated users: one form page each, what the CLI and API take.
DIALOGUE_FORMS: dict[str, type[DialogueRunForm]] = {
    "script": ScriptRunForm,
    "simulation": SimulationRunForm,
}


@reviewer_required
def dialogue_new(request: AppRequest, kind: str) -> HttpResponse:
    """The memory-script or simulated-conversation start form, reached like the others."""
    task, dataset = _task_and_dataset(request)
    if task is None:
        return _pick_task(request, f"runs:{kind}-new")
    defaults = _generation_defaults(task, dataset, request.GET)
    form = DIALOGUE_FORMS[kind](task=task, initial=defaults)
    context = {"form": form, "task": task, "kind": kind, "estimate": None}
    return render(request, "runs/dialogue_new.html", context)


def _dialogue_estimate(form: DialogueRunForm) -> Estimate | None:
    """The cost estimate of the form's choices; None until they make a run (templates that
    do not compile are said when it starts)."""
    if not form.is_valid():
        return None
    try:
        return estimate(form.unsaved_run())
    except (PromptError, ValueError):
        return None


@require_POST
@reviewer_required
def dialogue_start(request: AppRequest, kind: str) -> HttpResponse:
    task = get_object_or_404(_tasks(request), slug=request.POST.get("task", ""))
    form = DIALOGUE_FORMS[kind](request.POST, task=task)
    if request.POST.get("estimate") or (request.htmx and request.htmx.target == "cost-estimate"):
        # As on the generation form: the estimate's partial (HTMX), or the form with it.
        context = {"form": form, "task": task, "kind": kind, "estimate": _dialogue_estimate(form)}
        partial = "#estimate" if request.htmx else ""
        return render(request, f"runs/dialogue_new.html{partial}", context)
    if form.is_valid():
        data, options = form.cleaned_data, form.options()
        try:
            if isinstance(form, ScriptRunForm):
                run = create_script_run(
                    data["dataset"], data["endpoint"], user=request.user, **form.script(), **options
                )
            else:
                assert isinstance(form, SimulationRunForm)
                simulation = form.simulation()
                run = create_simulation_run(
                    data["dataset"], data["endpoint"], data["simulator"], user=request.user,
                    **simulation, **options,
                )  # fmt: skip
        except ValueError as exc:  # what the items say: rows that are not scripts, templates
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Started run #{run.pk}: {run.size_text}.")
            return redirect(run)
    context = {"form": form, "task": task, "kind": kind, "estimate": None}
    return render(request, "runs/dialogue_new.html", context)


def _tasks(request: AppRequest) -> QuerySet[Task]:
    """The tasks the user may start something in: reviewer in their project."""
    return Task.objects.for_user(request.user, User.Role.REVIEWER)


def _pick_task(request: AppRequest, url_name: str) -> HttpResponse:
    context = {"tasks": _tasks(request), "url_name": url_name}
    return render(request, "runs/pick_task.html", context)


def _task_and_dataset(request: AppRequest) -> tuple[Task | None, Dataset | None]:
    dataset = None
    if (dataset_id := request.GET.get("dataset", "")).isdigit():
        dataset = (
            Dataset.objects.filter(task__in=_tasks(request))
            .select_related("task")
            .filter(pk=dataset_id)
            .first()
        )
    if dataset is not None:
        return dataset.task, dataset
    slug = request.GET.get("task", "")
    return _tasks(request).filter(slug=slug).first() if slug else None, None


def _generation_defaults(task: Task, dataset: Dataset | None, params: Any) -> dict[str, Any]:
    """What a person would pick anyway: the dataset and endpoint when there is only one (else
    the ones this task's last run used), and the template they came from, else the newest."""
    last_run = task.runs.generation().order_by("-created_at").first()
    datasets = list(Dataset.objects.ready().filter(task=task)[:2])
    endpoints = list(Endpoint.objects.all()[:2])
    templates = PromptTemplate.objects.filter(task=task)
    template = None
    if params.get("template", "").isdigit():
        template = templates.filter(pk=params["template"]).first()
    if dataset is None:
        dataset = datasets[0] if len(datasets) == 1 else last_run.dataset if last_run else None
    return {
        "dataset": dataset,
        "endpoint": endpoints[0] if len(endpoints) == 1 else last_run and last_run.endpoint,
        "template": template or templates.order_by("-created_at").first(),
    }


# ---- endpoints (admins) ---------------------------------------------------------------------
@admin_required
def endpoint_list(request: AppRequest) -> HttpResponse:
    endpoints = list(Endpoint.objects.all())
    told: dict[int, tuple[int | None, int | None]] = {}
    with contextlib.suppress(RedisError, OSError):  # the page lists endpoints without Redis
        told = provider_limits(endpoints)
    rows = [(e, *told.get(e.pk, (None, None))) for e in endpoints]
    return render(request, "runs/endpoint_list.html", {"rows": rows})


@admin_required
def endpoint_create(request: AppRequest) -> HttpResponse:
    return _endpoint_form(request, Endpoint())


@admin_required
def endpoint_edit(request: AppRequest, pk: int) -> HttpResponse:
    return _endpoint_form(request, get_object_or_404(Endpoint, pk=pk))


def _endpoint_form(request: AppRequest, endpoint: Endpoint) -> HttpResponse:
    form = EndpointForm(request.POST or None, instance=endpoint)
    if request.method == "POST" and form.is_valid():
        endpoint = form.save()
        messages.success(request, f"Endpoint {endpoint.name} saved.")
        return redirect("runs:endpoint-list")
    return render(request, "runs/endpoint_form.html", {"form": form, "endpoint": endpoint})


@require_POST
@admin_required
def endpoint_test(request: AppRequest, pk: int) -> HttpResponse:
    endpoint = get_object_or_404(Endpoint, pk=pk)
    check = test_connection(endpoint)
    if request.htmx:
        return render(request, "runs/_endpoint_test.html", {"endpoint": endpoint, "check": check})
    (messages.success if check.ok else messages.error)(request, f"{endpoint.name}: {check.message}")
    return redirect("runs:endpoint-list")


# ---- prompt templates -------------------------------------------------------------------------
def template_list(request: AppRequest) -> HttpResponse:
    visible = Task.objects.for_user(request.user)
    templates = PromptTemplate.objects.latest_versions().filter(task__in=visible)
    templates = templates.select_related("task")
    task = visible.filter(slug=request.GET.get("task", "")).first()
    if task is not None:
        templates = templates.filter(task=task)
    context = {"templates": templates.order_by("task__slug", "name"), "task": task}
    return render(request, "runs/template_list.html", context)


@reviewer_required
def template_create(request: AppRequest) -> HttpResponse:
    task = _tasks(request).filter(slug=request.GET.get("task", "")).first()
    if task is None:
        return _pick_task(request, "runs:template-create")
    form = PromptTemplateForm(request.POST or None, task=task)
    if request.method == "POST" and form.is_valid():
        template = form.save(commit=False)
        template.task = task
        if _wants_preview(request):
            return _template_form(request, {"form": form, "task": task, "draft": template}, None)
        template.save_as_new_version(request.user)
        messages.success(request, f"Template {template} saved.")
        return _to_template_page(template, request.POST)
    return _template_form(request, {"form": form, "task": task}, None)


@reviewer_required
def template_edit(request: AppRequest, pk: int) -> HttpResponse:
    current = get_object_or_404(PromptTemplate.objects.select_related("task"), pk=pk)
    form = PromptTemplateForm(
        request.POST or None, instance=current, task=current.task, editing=True
    )
    if request.method == "POST" and form.is_valid():
        template = form.save(commit=False)
        if _wants_preview(request):
            context = {"form": form, "task": current.task, "template": current, "draft": template}
            return _template_form(request, context, current)
        template.save_as_new_version(request.user)
        messages.success(request, f"Saved as {template}; runs keep the version they used.")
        return _to_template_page(template, request.POST)
    return _template_form(
        request, {"form": form, "task": current.task, "template": current}, current
    )


def _template_form(
    request: AppRequest, context: dict[str, Any], current: PromptTemplate | None
) -> HttpResponse:
    """The editor, with the field names of a dataset of the task beside it (?dataset=ID, else
    the one its preview would use)."""
    datasets = Dataset.objects.ready().filter(task=context["task"])
    chosen = request.GET.get("dataset") or request.POST.get("dataset", "")
    dataset = datasets.filter(pk=chosen).first() if chosen.isdigit() else None
    if dataset is None:
        dataset = (
            _preview_dataset(current, datasets)
            if current
            else datasets.order_by("-created_at").first()
        )
    context.update(field_datasets=datasets.order_by("name", "-version"), fields_dataset=dataset)
    if (draft := context.get("draft")) is not None and dataset is not None:
        context.update(
            _preview(draft, datasets, {"dataset": str(dataset.pk), **request.POST.dict()})
        )
    if request.htmx and request.htmx.target == "template-fields":
        return render(request, "runs/template_form.html#fields", context)
    return render(request, "runs/template_form.html", context)


def _wants_preview(request: AppRequest) -> bool:
    """The editor's Preview button: render the unsaved wording, make no version (#28.6)."""
    return request.POST.get("action") == "preview"


def _to_template_page(template: PromptTemplate, data: Any) -> HttpResponse:
    """After saving, the preview opens on the dataset whose fields were beside the editor."""
    chosen = data.get("dataset", "")
    suffix = f"?dataset={chosen}#template-preview" if chosen.isdigit() else ""
    return redirect(template.get_absolute_url() + suffix)


def template_detail(request: AppRequest, pk: int) -> HttpResponse:
    template = get_object_or_404(PromptTemplate.objects.select_related("task"), pk=pk)
    datasets = Dataset.objects.ready().filter(task=template.task)
    context: dict[str, Any] = {
        "template": template,
        "versions": template.versions().order_by("-version"),
        "datasets": datasets,
        "runs": template.runs.all()[:20],
    }
    context.update(_preview(template, datasets, request.GET))
    return render(request, "runs/template_detail.html", context)


def _preview(
    template: PromptTemplate, datasets: QuerySet[Dataset], params: Mapping[str, str]
) -> dict[str, Any]:
    """The template rendered on a real item (the chosen one, else the first of a dataset)."""
    chosen = params.get("dataset", "")
    dataset = datasets.filter(pk=int(chosen)).first() if chosen.isdigit() else None
    dataset = dataset or _preview_dataset(template, datasets)
    if dataset is None:
        return {}
    # Rows are counted from 1 on the page, as everywhere people see them.
    row_asked = params.get("row", "")
    position = max(int(row_asked) - 1, 0) if row_asked.isdigit() else 0
    row = (
        dataset.items.filter(position__gte=position)
        .order_by("position")
        .values(*ItemData.VALUES)
        .first()
    )
    if row is None:
        return {"preview_dataset": dataset}
    item = ItemData.from_values(row)
    try:
        rendered = PromptRenderer.for_template(template, dataset.pk).render(item, preview=True)
    except PromptError as exc:
        return {"preview_dataset": dataset, "preview_item": item, "preview_error": str(exc)}
    return {"preview_dataset": dataset, "preview_item": item, "preview": rendered}


def _preview_dataset(template: PromptTemplate, datasets: QuerySet[Dataset]) -> Dataset | None:
    """Where a preview makes sense: the dataset this template's latest run used, else the newest
    one whose items have the fields the template uses, else the newest one."""
    last_run = (
        Run.objects.filter(template__task=template.task, template__name=template.name)
        .filter(dataset__in=datasets)
        .select_related("dataset")
        .order_by("-created_at")
        .first()
    )
    if last_run is not None:
        return last_run.dataset
    newest = list(datasets.order_by("-created_at")[:20])
    return next((ds for ds in newest if fits(template, ds)), newest[0] if newest else None)


# ---- system ---------------------------------------------------------------------------------
def system(request: AppRequest) -> HttpResponse:
    import django_rq
    from rq import Worker

    checks = list(WorkerCheck.objects.select_related("requested_by")[:10])
    waiting = any(check.is_waiting for check in checks)
    if request.htmx and request.htmx.target == "worker-round-trip":
        context = {"checks": checks, "waiting": waiting}
        return render(request, "runs/system.html#round-trip", context)
    queues = [django_rq.get_queue(name) for name in settings.RQ_QUEUES]
    context = {
        "checks": checks,
        "waiting": waiting,
        "queues": [(queue.name, queue.count) for queue in queues],
        "queued_jobs": sum(queue.count for queue in queues),
        "workers": Worker.all(connection=queues[0].connection),
        "active_runs": Run.objects.active()
        .filter(task__in=Task.objects.for_user(request.user))
        .select_related("task")[:50],
    }
    return render(request, "runs/system.html", context)


@require_POST
@reviewer_required
def check_worker(request: AppRequest) -> HttpResponse:
    check = WorkerCheck.objects.create(requested_by=request.user)
    enqueue(
        jobs.check_worker, check.pk, queue="default", job_id=f"worker-check-{check.pk}", timeout=60
    )
    messages.info(request, "Asked a worker to answer; its reply shows below when it comes.")
    return redirect("runs:system")
