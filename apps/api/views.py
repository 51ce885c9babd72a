"""The API's calls: the pages' workflows and forms, answered in JSON.

Each call does what its page does, through the same code: uploads go through the staged
upload and the importer, runs start through the start forms and their functions, the
leaderboard is the board the page builds, exports stream the page's generators. Role checks
are the pages' own (viewers read; reviewers upload and start runs).
"""

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal, cast

from django import forms
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import Count, Exists, OuterRef
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    QueryDict,
    StreamingHttpResponse,
)
from ninja import File, Form, Query, Router, Schema, Status
from ninja.files import UploadedFile
from pydantic import Field, ValidationError

from apps.accounts.middleware import SAFE_METHODS
from apps.accounts.models import User
from apps.api import schemas
from apps.api.errors import ApiError
from apps.datasets.forms import MappingForm, UploadForm
from apps.datasets.importing import SNIFFED_ROWS, suggest_mapping
from apps.datasets.jobs import import_staged
from apps.datasets.models import Dataset, Task
from apps.datasets.readers import DatasetError
from apps.datasets.uploads import StagedUpload, read_upload
from apps.judges import pairwise, results
from apps.judges.forms import JudgeRunForm, PairwiseRunForm
from apps.judges.launching import JudgeRunError, create_judge_run
from apps.judges.models import Comparison, Judge, TaskJudging, judge_id_of
from apps.judges.pairwise import start_pairwise_run
from apps.leaderboards import boards, corrected, exports, pairs, pairwise_board, tables
from apps.runs.engine.budget import check_budget
from apps.runs.engine.launch import LaunchError, launch
from apps.runs.engine.lifecycle import cancel
from apps.runs.forms import GenerationRunForm
from apps.runs.kinds.generation import create_generation_run
from apps.runs.kinds.scripts import create_script_run
from apps.runs.kinds.simulation import create_simulation_run
from apps.runs.models import Endpoint, ErrorKind, LoggingMode, PromptTemplate, Response, Run

router = Router()
ERRORS: dict[int, Any] = {code: schemas.Error for code in (400, 401, 403, 404, 422)}
# A run that cannot be relaunched the way asked (complete, nothing failed, still going).
CONFLICT: dict[int, Any] = {409: schemas.Error}
MAPPING_FIELDS = (
    "id_column",
    "input_columns",
    "reference_column",
    "tags_column",
    "response_columns",
    "conversation_column",
)


def need(request: HttpRequest, role: str) -> None:
    """The pages' role check (apps/accounts/access.py), with its message."""
    user = request.user
    if not isinstance(user, User) or not user.has_role(role):
        raise PermissionDenied(f"This needs the {role} role.")


def _url(request: HttpRequest, path: str) -> str:
    return request.build_absolute_uri(path)


def _task(slug: str, request: HttpRequest) -> Task:
    """A task the caller may see (and, for a change, act in): one of another project's is
    answered as one that does not exist."""
    task = Task.objects.for_user(request.user).filter(slug=slug).first()
    if task is None:
        raise Http404(f"There is no task {slug!r}.")
    user = request.user
    if request.method not in SAFE_METHODS and not (
        isinstance(user, User) and user.has_role_in(task.project_id, User.Role.REVIEWER)
    ):
        raise PermissionDenied(f"This needs the reviewer role in {task.slug}'s project.")
    return task


def _run(pk: int) -> Run:
    run = Run.objects.select_related(
        "task", "dataset", "endpoint", "judged_with__judge", "source_run"
    )
    found = run.filter(pk=pk).first()
    if found is None:
        raise Http404(f"There is no run #{pk}.")
    return found


def _bound[F: forms.Form](form_class: type[F], data: dict[str, Any], **kwargs: Any) -> F:
    """The page's form filled as a browser sends it: fields left out keep the values the page
    shows at first (chunk size, logging mode, …); a list goes in as a multi-valued field."""
    form = form_class(**kwargs)
    query = QueryDict(mutable=True)
    for name, field in form.fields.items():
        value = data.get(name)
        if value is None:
            value = field.initial() if callable(field.initial) else field.initial
        if value is None:
            continue
        values = value if isinstance(value, list) else [value]
        query.setlist(name, [str(v) for v in values if v is not None])
    return form_class(query, **kwargs)


def _valid[F: forms.Form](form: F) -> F:
    if not form.is_valid():
        raise ApiError.from_form(form)
    return form


# ---- tasks and datasets ---------------------------------------------------------------------
def task_out(request: HttpRequest, task: Task) -> dict[str, Any]:
    return {
        "slug": task.slug,
        "name": task.name,
        "description": task.description,
        "datasets": getattr(task, "dataset_count", None) or task.datasets.count(),
        "runs": getattr(task, "run_count", None) or task.runs.count(),
        "url": _url(request, task.get_absolute_url()),
    }


def dataset_out(request: HttpRequest, dataset: Dataset) -> dict[str, Any]:
    return {
        "id": dataset.pk,
        "task": dataset.task.slug,
        "name": dataset.name,
        "version": dataset.version,
        "status": dataset.status,
        "error": dataset.error,
        "format": dataset.format,
        "file_name": dataset.file_name,
        "row_count": dataset.row_count,
        "columns": dataset.columns,
        "mapping": dataset.mapping,
        "url": _url(request, dataset.get_absolute_url()),
    }


@router.get(
    "/tasks/",
    tags=["datasets"],
    response={200: list[schemas.TaskOut], **ERRORS},
    summary="List tasks",
)
def list_tasks(request: HttpRequest) -> list[dict[str, Any]]:
    tasks = Task.objects.for_user(request.user).annotate(
        dataset_count=Count("datasets", distinct=True), run_count=Count("runs", distinct=True)
    )
    return [task_out(request, task) for task in tasks]


@router.get(
    "/tasks/{slug}/",
    tags=["datasets"],
    response={200: schemas.TaskDetailOut, **ERRORS},
    summary="A task",
)
def task_detail(request: HttpRequest, slug: str) -> dict[str, Any]:
    """The task with its datasets, prompt templates and judges (newest versions): the ids
    that uploads and run starts take."""
    task = _task(slug, request)
    judges = Judge.objects.latest_versions().filter(task=task).order_by("name")
    templates = PromptTemplate.objects.latest_versions().filter(task=task).order_by("name")
    datasets = task.datasets.select_related("task").order_by("name", "-version")
    return {
        **task_out(request, task),
        "datasets_list": [dataset_out(request, d) for d in datasets],
        "templates": [{"id": t.pk, "name": t.name, "version": t.version} for t in templates],
        "judges": [
            {
                "id": j.pk,
                "name": j.name,
                "version": j.version,
                "kind": j.kind,
                "reply_format": j.reply_format if j.kind == Judge.Kind.RUBRIC else "",
                "per_turn": j.kind == Judge.Kind.RUBRIC and j.per_turn,
            }
            for j in judges
        ],
        "default_judge": TaskJudging.of(task.pk).default_judge_id,
    }


@router.post(
    "/tasks/{slug}/datasets/",
    tags=["datasets"],
    response={201: schemas.DatasetOut, 202: schemas.DatasetOut, **ERRORS},
    summary="Upload a dataset",
)
def upload_dataset(
    request: HttpRequest,
    slug: str,
    mapping: Form[schemas.UploadIn],
    file: File[UploadedFile],
) -> Status[dict[str, Any]]:
    """A CSV, JSON, JSONL, Excel or Parquet file (multipart field `file`), checked and
    imported as the upload page does: 201 with the dataset, or 202 while a big file imports
    in a worker (poll `GET /datasets/{id}/`). Errors name the file, row and column as the
    page does. (The file is a required multipart field: `File[UploadedFile] | None` made it
    a query parameter in the schema, which generated clients could not fill.)"""
    need(request, User.Role.REVIEWER)
    user = cast(User, request.user)
    task = _task(slug, request)
    form = _valid(UploadForm(request.POST, request.FILES))
    upload = form.cleaned_data["file"]
    name = form.cleaned_data["name"].strip() or Path(upload.name or "dataset").stem
    staged = None
    try:
        staged = StagedUpload.create(upload, task.slug, user.pk, name)
        table = read_upload(
            task, staged, form.cleaned_data["format"], request.POST.get("sheet", "")
        )
    except DatasetError as exc:
        if staged:
            staged.discard()
        raise ApiError(400, f"{upload.name}: {exc}", {"file": [f"{upload.name}: {exc}"]}) from None
    # The mapping step's form, filled with the columns given, else with what the page suggests.
    columns = staged.meta["columns"]
    given: dict[str, Any] = {
        key: request.POST.getlist(key) for key in MAPPING_FIELDS if key in request.POST
    }
    if not given:
        given = suggest_mapping(task, name, columns, table.rows[:SNIFFED_ROWS]).to_dict()
    if MappingForm(columns=columns).wide:
        # Too wide to tick: the page's form takes each list as names one per line.
        given = {k: "\n".join(v) if isinstance(v, list) else v for k, v in given.items()}
    mapped = _bound(
        MappingForm, {**given, "name": name, "format": staged.meta["format"]}, columns=columns
    )
    try:
        dataset = import_staged(task, staged, name, _valid(mapped).cleaned_data["mapping"], user)
    except (DatasetError, ApiError) as exc:
        staged.discard()
        error = exc if isinstance(exc, ApiError) else ApiError(400, str(exc))
        error.extra["columns"] = columns  # what the mapping may name (the page lists them)
        raise error from None
    return Status(202 if dataset.is_importing else 201, dataset_out(request, dataset))


@router.get(
    "/datasets/{pk}/",
    tags=["datasets"],
    response={200: schemas.DatasetOut, **ERRORS},
    summary="A dataset",
)
def dataset_detail(request: HttpRequest, pk: int) -> dict[str, Any]:
    dataset = Dataset.objects.select_related("task").filter(pk=pk).first()
    if dataset is None:
        raise Http404(f"There is no dataset #{pk}.")
    return dataset_out(request, dataset)


# ---- starting runs --------------------------------------------------------------------------
def _pk_by_name(model: type[Endpoint] | type[PromptTemplate], value: Any, **filters: Any) -> Any:
    """An id given as a name: the endpoint of that name, or the template's newest version."""
    if isinstance(value, str) and not value.isdigit():
        found = model.objects.filter(name=value, **filters).order_by("-pk").first()
        return found.pk if found else value
    return value


def _responses(value: int | str) -> str:
    return f"run:{value}" if isinstance(value, int) or str(value).isdigit() else str(value)


@router.post(
    "/runs/generation/",
    tags=["runs"],
    response={201: schemas.RunOut, **ERRORS},
    summary="Start a generation run",
)
def start_generation(request: HttpRequest, body: schemas.GenerationIn) -> Status[dict[str, Any]]:
    """The start form's fields: dataset, endpoint (id or name), prompt template (id, or name
    for its newest version), label, epochs, logging mode, chunk size, multi-turn."""
    need(request, User.Role.REVIEWER)
    task = _task(body.task, request)
    data = body.dict()
    data["endpoint"] = _pk_by_name(Endpoint, body.endpoint)
    data["template"] = _pk_by_name(PromptTemplate, body.template, task=task)
    form = _valid(_bound(GenerationRunForm, data, task=task))
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
        multi_turn=form.cleaned_data["multi_turn"],
    )
    return Status(201, run_out(request, run))


def _endpoint(value: int | str, field: str) -> Endpoint:
    pk = _pk_by_name(Endpoint, value)
    found = Endpoint.objects.filter(pk=pk).first() if str(pk).isdigit() else None
    if found is None:
        message = f"There is no endpoint {value!r}."
        raise ApiError(400, f"{field}: {message}", {field: [message]})
    return found


def _dialogue_run_options(
    request: HttpRequest, body: schemas.ScriptRunIn | schemas.SimulationRunIn
) -> tuple[Dataset, dict[str, Any]]:
    """What memory-script and simulated-conversation runs share: dataset, label, epochs,
    logging, budget, the person starting it."""
    dataset = Dataset.objects.filter(
        pk=body.dataset, task__in=Task.objects.for_user(request.user, User.Role.REVIEWER)
    ).first()
    if dataset is None:
        raise Http404(f"There is no dataset #{body.dataset}.")
    if body.logging_mode not in LoggingMode.values:
        known = ", ".join(LoggingMode.values)
        raise ApiError(400, f"logging_mode: one of {known}.", {"logging_mode": [known]})
    options = {
        "user": request.user,
        "label": body.label,
        "epochs": body.epochs,
        "logging_mode": body.logging_mode,
        "budget_usd": body.budget_usd,
    }
    return dataset, options


@router.post(
    "/runs/script/",
    tags=["runs"],
    response={201: schemas.RunOut, **ERRORS},
    summary="Start a memory-script run",
)
def start_script(request: HttpRequest, body: schemas.ScriptRunIn) -> Status[dict[str, Any]]:
    """Each item's statements, filler up to the information gap, then its question, in turns
    (GoodAI's LTM benchmark); refused naming the rows when items are not scripts."""
    need(request, User.Role.REVIEWER)
    dataset, options = _dialogue_run_options(request, body)
    try:
        run = create_script_run(
            dataset,
            _endpoint(body.endpoint, "endpoint"),
            statements_column=body.statements_column,
            question_column=body.question_column,
            gap_tokens=body.gap_tokens,
            gap_column=body.gap_column,
            filler_column=body.filler_column,
            filler_seed=body.filler_seed,
            system_message=body.system_message,
            **options,
        )
    except ValueError as exc:
        raise ApiError(400, str(exc)) from None
    return Status(201, run_out(request, run))


@router.post(
    "/runs/simulation/",
    tags=["runs"],
    response={201: schemas.RunOut, **ERRORS},
    summary="Start a simulated-user conversation run",
)
def start_simulation(request: HttpRequest, body: schemas.SimulationRunIn) -> Status[dict[str, Any]]:
    """Another endpoint plays the user (its instructions: persona and goal) for up to
    max_turns answers of the model, or until it says its done marker."""
    need(request, User.Role.REVIEWER)
    dataset, options = _dialogue_run_options(request, body)
    try:
        run = create_simulation_run(
            dataset,
            _endpoint(body.endpoint, "endpoint"),
            _endpoint(body.simulator, "simulator"),
            instructions=body.instructions,
            system_message=body.system_message,
            opening_column=body.opening_column,
            max_turns=body.max_turns,
            done_marker=body.done_marker,
            **options,
        )
    except ValueError as exc:
        raise ApiError(400, str(exc)) from None
    return Status(201, run_out(request, run))


def _judge(request: HttpRequest, ref: int | str, task: Task | None = None) -> Judge:
    """A judge by id, or by name as the CLI takes it: the newest version of that name (in
    `task` when given; a name used in several tasks needs the id), of a task the caller may
    see (for a change: act in)."""
    role = User.Role.VIEWER if request.method in SAFE_METHODS else User.Role.REVIEWER
    judges = Judge.objects.select_related("task").filter(
        task__in=Task.objects.for_user(request.user, role)
    )
    if isinstance(ref, str) and "\x00" in ref:  # no name holds one (PostgreSQL cannot)
        raise Http404(f"There is no judge {ref!r}.")
    if isinstance(ref, int) or ref.isdigit():
        judge = judges.filter(pk=int(ref)).first()
        if judge is None:
            raise Http404(f"There is no judge #{ref}.")
        return judge
    named = judges.filter(name=ref, **({"task": task} if task else {})).order_by("-version")
    tasks = sorted({j.task.slug for j in named})
    if not tasks:
        raise Http404(f"There is no judge {ref!r}" + (f" in {task.slug}." if task else "."))
    if len(tasks) > 1:
        raise ApiError(400, f"Judges named {ref!r} are in tasks {', '.join(tasks)}: give its id.")
    return named[0]


@router.post(
    "/runs/judge/",
    tags=["runs"],
    response={201: schemas.RunOut, **ERRORS},
    summary="Start a judge run",
)
def start_judge(request: HttpRequest, body: schemas.JudgeRunIn) -> Status[dict[str, Any]]:
    """A judge (rubric, multiple choice or metrics) over one response set, as the judge's
    page starts it."""
    need(request, User.Role.REVIEWER)
    judge = _judge(request, body.judge)
    if judge.kind == Judge.Kind.PAIRWISE:
        raise ApiError(400, f"{judge} is a pairwise judge: start a pairwise run.")
    data = body.dict() | {"responses": _responses(body.responses)}
    data["endpoint"] = _pk_by_name(Endpoint, body.endpoint)
    form = _valid(_bound(JudgeRunForm, data, judge=judge))
    try:
        run = create_judge_run(
            judge,
            endpoint=form.cleaned_data.get("endpoint"),
            user=request.user,
            label=form.cleaned_data["label"],
            logging_mode=form.cleaned_data["logging_mode"],
            chunk_size=form.cleaned_data["chunk_size"],
            batch=form.cleaned_data.get("batch", False),
            use_cache=form.cache_choice(),
            budget_usd=form.cleaned_data.get("budget_usd"),
            **form.source(),
        )
    except JudgeRunError as exc:
        raise ApiError(400, str(exc)) from None
    return Status(201, run_out(request, run))


@router.post(
    "/runs/pairwise/",
    tags=["runs"],
    response={201: schemas.RunOut, **ERRORS},
    summary="Start a pairwise run",
)
def start_pairwise(request: HttpRequest, body: schemas.PairwiseIn) -> Status[dict[str, Any]]:
    """A pairwise judge over two or more response sets of one dataset, every pair (or each
    against a baseline), as the pairwise judge's page starts it."""
    need(request, User.Role.REVIEWER)
    judge = _judge(request, body.judge)
    if judge.kind != Judge.Kind.PAIRWISE:
        raise ApiError(400, f"{judge} is not a pairwise judge: start a judge run.")
    data = body.dict() | {
        "responses": [_responses(value) for value in body.responses],
        "baseline": _responses(body.baseline) if body.baseline else "",
        "endpoint": _pk_by_name(Endpoint, body.endpoint),
    }
    form = _valid(_bound(PairwiseRunForm, data, judge=judge))
    try:
        sources, baseline = form.response_sets()
        run = start_pairwise_run(
            judge,
            sources,
            baseline,
            endpoint=form.cleaned_data["endpoint"],
            user=request.user,
            logging_mode=form.cleaned_data["logging_mode"],
            batch=form.cleaned_data["batch"],
            use_cache=form.cache_choice(),
            budget_usd=form.cleaned_data.get("budget_usd"),
        )
    except JudgeRunError as exc:
        raise ApiError(400, str(exc)) from None
    return Status(201, run_out(request, run))


# ---- a run: status, failed items, results ---------------------------------------------------
def run_out(request: HttpRequest, run: Run) -> dict[str, Any]:
    return {
        "id": run.pk,
        "kind": run.kind,
        "title": run.title,
        "label": run.label,
        "status": run.status,
        "status_label": run.status_label,
        "task": run.task.slug,
        "dataset": run.dataset_id,
        "judge": judge_id_of(run),
        "source_run": run.source_run_id,
        "source_column": run.source_column,
        "epochs": run.epochs,
        "multi_turn": run.multi_turn,
        "batch": run.batch,
        "use_cache": run.use_cache,
        "cached": run.cached_count,
        "sent": run.sent_count,
        "saved_cost": run.saved_cost,
        "budget_usd": float(run.budget_usd) if run.budget_usd is not None else None,
        "total": run.total,
        "done": run.done,
        "failed": run.failed,
        "not_run": run.not_run,
        "percent": run.percent,
        "items_per_second": run.items_per_second,
        "eta_seconds": run.eta_seconds,
        "prompt_tokens": run.prompt_tokens,
        "completion_tokens": run.completion_tokens,
        # None, not 0, for a model without a price: "$0" would read as free.
        "cost": run.cost if run.cost_known else None,
        "failure_cause": run.failure_cause,
        "created_at": run.created_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "url": _url(request, run.get_absolute_url()),
    }


@router.get(
    "/runs/{pk}/",
    tags=["runs"],
    response={200: schemas.RunOut, **ERRORS},
    summary="A run's status and progress",
)
def run_detail(request: HttpRequest, pk: int) -> dict[str, Any]:
    return run_out(request, _run(pk))


@router.post(
    "/runs/{pk}/cancel/",
    tags=["runs"],
    response={200: schemas.RunOut, **ERRORS},
    summary="Cancel a run (what is answered stays)",
)
def cancel_run(request: HttpRequest, pk: int) -> dict[str, Any]:
    """As the run page's Cancel: no new requests are sent (a batch is cancelled at the
    provider); resume finishes it later. A run that is not going is left as it is."""
    need(request, User.Role.REVIEWER)
    run = _run(pk)
    if run.is_active:
        cancel(run)
    return run_out(request, Run.objects.get(pk=run.pk))


def _optional_body[S: Schema](request: HttpRequest, schema: type[S]) -> S:
    """A JSON body that may be left out altogether (a bare `curl -X POST`), which ninja's
    body parameters refuse: read here, with the same 422 for a body that does not fit. Only
    an object is a body: `"overwrite"`, `null` or `0` once passed as "no body" and resumed."""
    if not request.body.strip():
        return schema()
    try:
        data = json.loads(request.body)
    except ValueError as exc:
        raise ApiError(422, f"body: not JSON ({exc}).", {"body": [str(exc)]}) from None
    if not isinstance(data, dict):
        message = f"the body is a JSON object (or left out), not {type(data).__name__} {data!r}"
        raise ApiError(422, f"body: {message}.", {"body": [message]})
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        fields = {".".join(map(str, e["loc"])) or "body": [e["msg"]] for e in exc.errors()}
        raise ApiError(422, "; ".join(f"{k}: {v[0]}" for k, v in fields.items()), fields) from None


def _optional(schema: type[Schema]) -> dict[str, Any]:
    """The OpenAPI entry of a body `_optional_body` reads."""
    content = {"application/json": {"schema": schema.model_json_schema()}}
    return {"requestBody": {"required": False, "content": content}}


def _relaunch_refusal(run: Run, mode: str) -> str:
    """Why the run page would not offer this relaunch of a run that has ended: resuming a
    complete run did nothing but erase its start time and speed (it answered 200)."""
    if not run.is_terminal or run.is_stalled:
        return ""
    if mode == Run.Mode.RESUME and run.status == Run.Status.COMPLETED:
        return (
            f"Run #{run.pk} is complete: nothing to resume (mode overwrite runs every item again)."
        )
    if mode == Run.Mode.RETRY_FAILED and run.failed == 0:
        return f"Run #{run.pk} has no failed items to retry."
    return ""


@router.post(
    "/runs/{pk}/resume/",
    tags=["runs"],
    response={200: schemas.RunOut, **ERRORS, **CONFLICT},
    summary="Resume a run, retry its failed items or run it again",
    openapi_extra=_optional(schemas.RelaunchIn),
)
def resume_run(request: HttpRequest, pk: int) -> dict[str, Any]:
    """As the run page's buttons, with the same refusals (409 for a complete run's resume, or
    retrying a run with nothing failed); a `budget_usd` replaces the budget first (a run
    stopped by its budget goes on once it is raised). The body may be left out."""
    need(request, User.Role.REVIEWER)
    body = _optional_body(request, schemas.RelaunchIn)
    run = _run(pk)
    if refusal := _relaunch_refusal(run, body.mode):
        raise ApiError(409, refusal)
    try:
        with transaction.atomic():
            if body.budget_usd is not None:
                run.set_budget(check_budget(body.budget_usd, run.endpoint))
            launch(run, body.mode)
    except (LaunchError, ValueError) as exc:
        raise ApiError(400, str(exc)) from None
    return run_out(request, Run.objects.get(pk=run.pk))


class FailedQuery(Schema):
    kind: schemas.ErrorKindName = ""  # an error kind, as on the failed items page
    page: int = Field(1, ge=1)


@router.get(
    "/runs/{pk}/failed/",
    tags=["runs"],
    response={200: schemas.FailedOut, **ERRORS},
    summary="A run's failed items",
    # Optional fields appear only where they apply (a traceback for admins, a view shown).
    exclude_unset=True,
)
def failed_items(request: HttpRequest, pk: int, query: Query[FailedQuery]) -> dict[str, Any]:
    """A judge run's failed items grouped by error kind, with each failed round's error, raw
    reply and the messages sent (the failed items page); a generation run's failed responses
    (its page's "failed" filter); a pairwise run's failed comparisons, a pair of an item per
    entry with both orders as rounds. 100 a page."""
    run = _run(pk)
    kind = query.kind if query.kind in ErrorKind.values else ""
    if run.kind == Run.Kind.JUDGE:
        return _failed_judged(request, run, kind, query.page)
    if run.kind == Run.Kind.PAIRWISE:
        return _failed_pairs(run, kind, query.page)
    responses = run.responses.filter(status=Response.Status.FAILED).select_related("item")
    if kind:
        responses = responses.filter(error_kind=kind)
    page = Paginator(responses.order_by("item__position", "epoch"), 100).get_page(query.page)
    counts = (
        run.responses.filter(status=Response.Status.FAILED)
        .values_list("error_kind")
        .annotate(count=Count("pk"))
        .order_by("-count", "error_kind")
    )
    labels = dict(ErrorKind.choices)
    return {
        "run": run.pk,
        "kind": kind,
        "count": page.paginator.count,
        "page": page.number,
        "pages": page.paginator.num_pages,
        "groups": [{"kind": k, "label": labels.get(k, k), "count": n} for k, n in counts],
        "items": [
            {
                "item_id": r.item_id,
                "key": r.item.key,
                "position": r.item.position,
                "epoch": r.epoch,
                "error_kind": r.error_kind,
                "error": r.error,
                "attempts": r.attempts,
            }
            for r in page
        ],
    }


def _failed_judged(request: HttpRequest, run: Run, kind: str, number: int) -> dict[str, Any]:
    counts = results.failed_groups(run)
    groups = [g for g in counts if g.kind == kind] if kind else list(counts)
    page = results.failed_page(run, groups, kind, number)
    admin = isinstance(request.user, User) and request.user.is_admin
    items = []
    for group in groups:
        for entry in group.items:
            item = entry.score.item
            rounds = []
            for failed in entry.rounds:
                log = failed.log
                rounds.append(
                    {
                        "round": failed.round.round,
                        "error_kind": failed.round.error_kind,
                        "error": failed.round.error,
                        "raw_reply": failed.round.raw_reply or (log.raw_reply if log else ""),
                        "messages": log.request_messages if log else None,
                        # Server paths and code: for admins only, as on the page.
                        **({"traceback": log.traceback if log else ""} if admin else {}),
                    }
                )
            items.append(
                {
                    "item_id": item.pk,
                    "key": item.key,
                    "position": item.position,
                    "error_kind": entry.score.error_kind,
                    "error": entry.score.error,
                    "rounds": rounds,
                }
            )
    return {
        "run": run.pk,
        "kind": kind,
        "count": page.paginator.count,
        "page": page.number,
        "pages": page.paginator.num_pages,
        "groups": [
            {"kind": g.kind, "label": g.label, "count": g.count, "retryable": g.retryable}
            for g in counts
        ],
        "items": items,
    }


def _failed_pairs(run: Run, kind: str, number: int) -> dict[str, Any]:
    """A pairwise run's failed units (an item and a pair of models, judged in both orders):
    they live in its comparisons, not in responses, so this once answered 0 items."""
    failed = Comparison.objects.filter(run=run, status=Comparison.Status.FAILED)
    unit_kinds: dict[tuple[int, int, int], str] = {}  # a unit counts once, by its first order
    for unit in failed.order_by("order").values_list(
        "item_id", "a_run_id", "b_run_id", "error_kind"
    ):
        unit_kinds.setdefault(unit[:3], unit[3])
    counts = Counter(unit_kinds.values()).items()
    units = pairwise.unit_lines(run, "failed")
    if kind:
        units = units.filter(
            Exists(
                failed.filter(
                    item_id=OuterRef("item_id"),
                    a_run_id=OuterRef("a_run_id"),
                    b_run_id=OuterRef("b_run_id"),
                    error_kind=kind,
                )
            )
        )
    page = Paginator(units, 100).get_page(number)
    labels = dict(ErrorKind.choices)
    items = []
    for line in pairwise.lines(run, list(page)):
        failed_orders = [c for c in line.orders if c.status == Comparison.Status.FAILED]
        first = failed_orders[0] if failed_orders else line.first
        items.append(
            {
                "item_id": line.first.item_id,
                "key": line.first.item.key,
                "position": line.first.item.position,
                "error_kind": first.error_kind,
                "error": first.error,
                "model_a": line.a_name,
                "model_b": line.b_name,
                "run_a": line.first.a_run_id,
                "run_b": line.first.b_run_id,
                "rounds": [
                    {
                        "round": c.order,
                        "error_kind": c.error_kind,
                        "error": c.error,
                        "raw_reply": c.raw_reply,
                    }
                    for c in failed_orders
                ],
            }
        )
    return {
        "run": run.pk,
        "kind": kind,
        "count": page.paginator.count,
        "page": page.number,
        "pages": page.paginator.num_pages,
        "groups": [
            {"kind": k, "label": labels.get(k, k), "count": n}
            for k, n in sorted(counts, key=lambda kn: (-kn[1], kn[0]))
        ],
        "items": items,
    }


def _stream(chunks: Iterable[str], fmt: str, name: str) -> HttpResponseBase:
    """The export in `fmt`: CSV and JSONL streamed; .xlsx and .parquet made from the CSV
    `chunks` (apps/leaderboards/tables.py), whole."""
    if fmt in tables.FORMATS:
        response: HttpResponseBase = HttpResponse(
            tables.convert(chunks, fmt), content_type=tables.FORMATS[fmt]
        )
    else:
        response = StreamingHttpResponse(chunks, content_type=exports.FORMATS[fmt])
    response["Content-Disposition"] = f'attachment; filename="{name}.{fmt}"'
    return response


def _exported(what: str) -> dict[str, Any]:
    """The OpenAPI entry of an export's 200: its media types (it once declared none)."""
    kinds = [*exports.FORMATS.values(), *tables.FORMATS.values()]
    text = {"schema": {"type": "string"}}
    binary = {"schema": {"type": "string", "format": "binary"}}
    types = {
        kind.split(";")[0]: text if "text" in kind or "json" in kind else binary for kind in kinds
    }
    return {"responses": {200: {"description": what, "content": types}}}


@router.get(
    "/runs/{pk}/export/",
    tags=["runs"],
    response={200: None, **ERRORS},
    summary="Export a run's results",
    openapi_extra=_exported("The run's results, one row per item"),
)
def run_export(
    request: HttpRequest, pk: int, format: schemas.ExportFormat = "csv"
) -> HttpResponseBase:
    """Per item: a judge run's scores, or a generation run's responses; CSV (formula cells
    neutralised) or JSONL, streamed, as the run's export link gives it."""
    run = _run(pk)
    fmt = format
    chunks = exports.results_jsonl(run) if fmt == "jsonl" else exports.results_csv(run)
    return _stream(chunks, fmt, f"{run.task.slug}-run-{run.pk}-results")


# ---- the leaderboard ------------------------------------------------------------------------
class BoardQuery(Schema):
    """The board page's query: the same names and values."""

    judge: schemas.JudgeRef | None = None  # an id, or a name (its newest version with runs)
    judge_version: int | None = None  # with a judge name
    dataset: int | None = None
    values: schemas.BoardValues = "both"
    scoring: schemas.Scoring = "strict"
    sort: str = "overall"  # "overall" or a subject's name
    dir: schemas.SortDirection | None = None
    tag: str | None = None
    common: Literal["", "0", "1"] = ""  # "1": only the items every model has
    cluster: str | None = None
    epochs: str | None = Field(None, pattern=schemas.EPOCHS_PATTERN)
    correction: schemas.Correction = "holm"  # p-values of the pairs of models
    # Export: "1" for every pair of models, "corrected" on corrected scores (CSV).
    pairs: Literal["", "0", "1", "corrected"] = ""
    # An interval width for the corrected scores: the reviews each model needs to reach it.
    target: float | None = Field(None, gt=0, allow_inf_nan=False)


def _board(request: HttpRequest, slug: str, query: BoardQuery) -> tuple[boards.Board, pairs.Pairs]:
    """The board as the page builds it; comparing every pair of models gives the tied ranks."""
    task = _task(slug, request)
    params = boards.Params.from_query(request.GET)
    named = query.judge is not None and not str(query.judge).isdigit()
    if named:
        params = replace(params, judge_name=str(query.judge), judge_version=query.judge_version)
    built = boards.build(task, params)
    if built.judge is None:
        if named:
            raise Http404(f"No judge {query.judge!r} has judged anything in {task.slug}.")
        raise Http404("This task has no judged runs yet.")
    matrix = pairs.build(built, query.correction)
    built.corrected = corrected.build(built, query.target)
    return built, matrix


@router.get(
    "/leaderboards/{slug}/",
    tags=["leaderboards"],
    response={200: schemas.BoardOut, **ERRORS},
    summary="A task's leaderboard",
    # Optional fields appear only where they apply (a traceback for admins, a view shown).
    exclude_unset=True,
)
def leaderboard(request: HttpRequest, slug: str, query: Query[BoardQuery]) -> dict[str, Any]:
    """The board the page shows, built from the same query: how it was built (judge,
    scoring, scales, the overall's formula), then one row per model, ranked, with each
    subject's mean, 95% CI, strict and answered-only means, coverage, n, failed and missing
    per view (judge-only and human-corrected), as in the JSONL export; where the review
    policy draws a random sample, `corrected` (PPI++ scores, pairs, the ranking note) too."""
    built, _ = _board(request, slug, query)
    return {
        **exports.board_meta(built),
        "judges": [
            {"id": j.pk, "name": j.name, "version": j.version, "per_turn": j.per_turn}
            for j in built.judges
        ],
        "rows": list(exports.board_records(built)),
    }


@router.get(
    "/leaderboards/{slug}/export/",
    tags=["leaderboards"],
    response={200: None, **ERRORS},
    summary="Export a leaderboard",
    openapi_extra=_exported("The board, one row per model (or per pair of models)"),
)
def leaderboard_export(
    request: HttpRequest, slug: str, query: Query[BoardQuery], format: schemas.ExportFormat = "csv"
) -> HttpResponseBase:
    """The board's export (CSV, formula cells neutralised, or JSONL), streamed."""
    fmt = format
    built, matrix = _board(request, slug, query)
    assert built.judge is not None
    name = f"{built.task.slug}-{built.judge.name}-v{built.judge.version}-leaderboard"
    if query.pairs == "corrected" and fmt != "jsonl":
        if built.corrected is None:
            raise Http404("This task's review policy draws no random sample: no corrected scores.")
        return _stream(exports.corrected_pairs_csv(built.corrected), fmt, f"{name}-corrected-pairs")
    if query.pairs == "1" and fmt != "jsonl":
        return _stream(exports.pairs_csv(built, matrix), fmt, f"{name}-pairs")
    chunks = exports.board_jsonl(built) if fmt == "jsonl" else exports.board_csv(built)
    return _stream(chunks, fmt, name)


class PairwiseQuery(Schema):
    """The pairwise board page's query."""

    # A pairwise judge's id or name (default: the newest with runs).
    judge: schemas.JudgeRef | None = None
    source: schemas.PairwiseSource = "judge"
    baseline: int | None = None  # a response set's run id: win rates against it


def _pairwise_board(
    request: HttpRequest, slug: str, query: PairwiseQuery
) -> pairwise_board.PairwiseBoard:
    task = _task(slug, request)
    judge = None if query.judge is None else _judge(request, query.judge, task).pk
    built = pairwise_board.build(task, judge, query.source, query.baseline)
    if built.ratings is None:
        raise Http404(f"No pairwise run of {task.slug} has finished a comparison.")
    return built


@router.get(
    "/leaderboards/{slug}/pairwise/",
    tags=["leaderboards"],
    response={200: schemas.PairwiseBoardOut, **ERRORS},
    summary="A task's pairwise board",
    # Optional fields appear only where they apply (a traceback for admins, a view shown).
    exclude_unset=True,
)
def pairwise_leaderboard(
    request: HttpRequest, slug: str, query: Query[PairwiseQuery]
) -> dict[str, Any]:
    """Bradley–Terry ratings with bootstrap CIs from the pairwise runs, as the pairwise board
    page and its export give them (one record per model)."""
    built = _pairwise_board(request, slug, query)
    return {
        "task": built.task.slug,
        "judge": built.judge.pk if built.judge else None,
        "source": built.source,
        "rows": exports.pairwise_records(built),
    }


@router.get(
    "/leaderboards/{slug}/pairwise/export/",
    tags=["leaderboards"],
    response={200: None, **ERRORS},
    summary="Export a pairwise board",
    openapi_extra=_exported("The pairwise board, one row per model"),
)
def pairwise_export(
    request: HttpRequest,
    slug: str,
    query: Query[PairwiseQuery],
    format: schemas.ExportFormat = "csv",
) -> HttpResponseBase:
    built = _pairwise_board(request, slug, query)
    fmt = format
    chunks = exports.pairwise_jsonl(built) if fmt == "jsonl" else exports.pairwise_csv(built)
    return _stream(chunks, fmt, f"{built.task.slug}-pairwise")
