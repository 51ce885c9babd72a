"""The API's calls that set a task up and gate a release (#30.3, #30.4): endpoints, prompt
templates, judges and generators (create, list, new version), the review of generated drafts,
and the release gate.

A body has the fields of a task file's entry (apps/configs/taskfile.py) and is checked by the
same code, so the messages are the pages' own. Creating refuses a name that exists; a new
version takes the fields given over the newest version's (an unchanged one is no new version).
Roles are the pages': admins change endpoints and generators, reviewers templates, judges and
drafts, and run the gate; everyone signed in reads. An endpoint's key is write-only: `api_key` is stored, and
answers only say whether one is (`has_key`).
"""

from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404, HttpRequest
from ninja import Body, Router, Schema, Status

from apps.accounts.middleware import SAFE_METHODS
from apps.accounts.models import User
from apps.api.errors import ApiError
from apps.configs.taskfile import ConfigError, entry_of, save_entry
from apps.datasets.models import Dataset, Frozen, Task
from apps.drafting.drafts import DraftError, discard, publish
from apps.drafting.models import DraftItem, Generator
from apps.judges.models import Judge
from apps.leaderboards.gate import GateError, compare, gate_judge, junit, markdown, side
from apps.runs.models import Endpoint, PromptTemplate

router = Router(tags=["setup"])
# A body that is a task file's entry (a JSON object; its fields are checked by apply's code).
ENTRY = Body(...)


class Problem(Schema):
    detail: str
    errors: Any = None


ERRORS: dict[int, Any] = {code: Problem for code in (400, 401, 403, 404, 409, 422)}


class EndpointOut(Schema):
    name: str
    config: dict[str, Any]  # the task file's entry: every field not at its default
    has_key: bool  # a key is stored (never shown); else the key is read from api_key_env


class VersionOut(Schema):
    id: int
    task: str
    name: str
    version: int
    config: dict[str, Any]  # the task file's entry
    created_at: str


class SavedOut(Schema):
    action: str  # "create", "update", "new version" or "unchanged"
    changed: str  # the fields that changed, comma-separated
    endpoint: EndpointOut | None = None
    version: VersionOut | None = None


class DraftItemOut(Schema):
    id: int
    key: str
    content: str
    question: str
    reference: str
    decision: str


class DraftOut(Schema):
    dataset: int
    name: str
    status: str
    counts: dict[str, int]
    items: list[DraftItemOut]


class DecisionIn(Schema):
    decision: str  # "approved", "edited", "rejected" or "pending"
    content: str | None = None
    question: str | None = None
    reference: str | None = None


class GateIn(Schema):
    task: str
    baseline: str  # a run id or a model label
    candidate: str
    subject: str | None = None
    margin: float = 0.0
    alpha: float = 0.05
    judge: str | None = None


class GateSubjectOut(Schema):
    subject: str
    n: int
    mean_baseline: float | None
    mean_candidate: float | None
    mean_change: float | None
    ci_low: float | None
    ci_high: float | None
    p_adjusted: float | None
    test: str | None
    items_needed: int | None
    verdict: str
    regressed_items: list[str]


class GateOut(Schema):
    status: str  # "done", or "waiting" (ask again: the judge runs are not finished)
    exit_code: int | None = None  # 0 holds, 1 regressed, 2 not enough items
    verdict: str | None = None
    waiting_for: list[str] = []
    baseline_run: int | None = None
    candidate_run: int | None = None
    subjects: list[GateSubjectOut] = []
    markdown: str = ""
    junit: str = ""


def _need(request: HttpRequest, role: str) -> User:
    user = request.user
    if not isinstance(user, User) or not user.has_role(role):
        raise PermissionDenied(f"This needs the {role} role.")
    return user


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


def _refused(exc: ConfigError) -> ApiError:
    return ApiError(400, " ".join(exc.problems))


def _endpoint_out(endpoint: Endpoint) -> dict[str, Any]:
    return {
        "name": endpoint.name,
        "config": entry_of("endpoints", endpoint),
        "has_key": endpoint.has_secret,
    }


def _version_out(section: str, row: Any) -> dict[str, Any]:
    return {
        "id": row.pk,
        "task": row.task.slug,
        "name": row.name,
        "version": row.version,
        "config": entry_of(section, row),
        "created_at": row.created_at.isoformat(),
    }


# ---- endpoints (admins) ------------------------------------------------------------------------
@router.get("/endpoints/", response={200: list[EndpointOut], **ERRORS})
def endpoint_list(request: HttpRequest) -> list[dict[str, Any]]:
    """Every endpoint's settings, for anyone signed in (runs name them on every page); keys
    never, only whether one is stored."""
    return [_endpoint_out(e) for e in Endpoint.objects.order_by("name")]


def _save_endpoint(request: HttpRequest, body: dict[str, Any], existing: Endpoint | None) -> Any:
    _need(request, User.Role.ADMIN)
    key = body.pop("api_key", None)
    entry = {**(entry_of("endpoints", existing) if existing else {}), **body}
    try:
        with transaction.atomic():
            change = save_entry("endpoints", None, entry)
            endpoint = Endpoint.objects.get(name=entry["name"])
            if key:
                endpoint.api_key_secret = str(key)
                endpoint.save(update_fields=["api_key_secret"])
    except ConfigError as exc:
        raise _refused(exc) from None
    action = change.action if not key or change.action == "create" else "update"
    saved = {"action": action, "changed": change.detail, "endpoint": _endpoint_out(endpoint)}
    return Status(201 if action == "create" else 200, saved)


@router.post("/endpoints/", response={201: SavedOut, **ERRORS})
def endpoint_create(request: HttpRequest, body: dict[str, Any] = ENTRY) -> Any:
    """A new endpoint: the task file's fields, and `api_key` (stored, never shown again)."""
    _need(request, User.Role.ADMIN)
    if Endpoint.objects.filter(name=str(body.get("name", ""))).exists():
        raise ApiError(
            409,
            f"An endpoint named {body['name']} exists; post to /endpoints/{body['name']}/ to change it.",
        )
    return _save_endpoint(request, body, None)


@router.post("/endpoints/{name}/", response={200: SavedOut, **ERRORS})
def endpoint_edit(request: HttpRequest, name: str, body: dict[str, Any] = ENTRY) -> Any:
    """Change an endpoint in place: the fields given, the others kept (and its key, unless
    `api_key` gives a new one)."""
    _need(request, User.Role.ADMIN)
    existing = Endpoint.objects.filter(name=name).first()
    if existing is None:
        raise Http404(f"There is no endpoint {name!r}.")
    return _save_endpoint(request, {**body, "name": name}, existing)


# ---- versioned: templates, judges, generators ---------------------------------------------------
VERSIONED: dict[str, tuple[type[Any], str]] = {
    "templates": (PromptTemplate, User.Role.REVIEWER),
    "judges": (Judge, User.Role.REVIEWER),
    "generators": (Generator, User.Role.ADMIN),
}


def _list(
    request: HttpRequest, section: str, slug: str, every_version: bool
) -> list[dict[str, Any]]:
    model, _ = VERSIONED[section]
    rows = model.objects.filter(task=_task(slug, request)).select_related("task")
    if not every_version:
        rows = rows.latest_versions()
    return [_version_out(section, row) for row in rows.order_by("name", "-version")]


def _create(request: HttpRequest, section: str, slug: str, body: dict[str, Any]) -> Any:
    model, role = VERSIONED[section]
    user = _need(request, role)
    task = _task(slug, request)
    if model.objects.filter(task=task, name=str(body.get("name", ""))).exists():
        raise ApiError(
            409, f"{task.slug} has a {section[:-1]} named {body['name']}; post a new version to it."
        )
    return _saved(section, task, body, user)


def _new_version(request: HttpRequest, section: str, pk: int, body: dict[str, Any]) -> Any:
    model, role = VERSIONED[section]
    user = _need(request, role)
    current = model.objects.select_related("task").filter(pk=pk).first()
    if current is None:
        raise Http404(f"There is no {section[:-1]} #{pk}.")
    newest = current.versions().order_by("-version").first()
    entry = {**entry_of(section, newest), **body, "name": current.name}
    return _saved(section, current.task, entry, user)


def _saved(section: str, task: Task, entry: dict[str, Any], user: User) -> Any:
    try:
        change = save_entry(section, task, entry, user)
    except ConfigError as exc:
        raise _refused(exc) from None
    model, _ = VERSIONED[section]
    row = model.objects.filter(task=task, name=entry["name"]).order_by("-version").first()
    saved = {
        "action": change.action,
        "changed": change.detail,
        "version": _version_out(section, row),
    }
    return Status(201 if change.action != "unchanged" else 200, saved)


@router.get("/tasks/{slug}/templates/", response={200: list[VersionOut], **ERRORS})
def template_list(request: HttpRequest, slug: str, all_versions: bool = False) -> Any:
    return _list(request, "templates", slug, all_versions)


@router.post("/tasks/{slug}/templates/", response={201: SavedOut, **ERRORS})
def template_create(request: HttpRequest, slug: str, body: dict[str, Any] = ENTRY) -> Any:
    return _create(request, "templates", slug, body)


@router.post("/templates/{pk}/versions/", response={200: SavedOut, 201: SavedOut, **ERRORS})
def template_version(request: HttpRequest, pk: int, body: dict[str, Any] = ENTRY) -> Any:
    return _new_version(request, "templates", pk, body)


@router.get("/tasks/{slug}/judges/", response={200: list[VersionOut], **ERRORS})
def judge_list(request: HttpRequest, slug: str, all_versions: bool = False) -> Any:
    return _list(request, "judges", slug, all_versions)


@router.post("/tasks/{slug}/judges/", response={201: SavedOut, **ERRORS})
def judge_create(request: HttpRequest, slug: str, body: dict[str, Any] = ENTRY) -> Any:
    return _create(request, "judges", slug, body)


@router.post("/judges/{pk}/versions/", response={200: SavedOut, 201: SavedOut, **ERRORS})
def judge_version(request: HttpRequest, pk: int, body: dict[str, Any] = ENTRY) -> Any:
    return _new_version(request, "judges", pk, body)


@router.get("/tasks/{slug}/generators/", response={200: list[VersionOut], **ERRORS})
def generator_list(request: HttpRequest, slug: str, all_versions: bool = False) -> Any:
    return _list(request, "generators", slug, all_versions)


@router.post("/tasks/{slug}/generators/", response={201: SavedOut, **ERRORS})
def generator_create(request: HttpRequest, slug: str, body: dict[str, Any] = ENTRY) -> Any:
    return _create(request, "generators", slug, body)


@router.post("/generators/{pk}/versions/", response={200: SavedOut, 201: SavedOut, **ERRORS})
def generator_version(request: HttpRequest, pk: int, body: dict[str, Any] = ENTRY) -> Any:
    return _new_version(request, "generators", pk, body)


# ---- drafts: review generated items, then publish or discard ----------------------------------
def _draft(pk: int) -> Dataset:
    dataset = Dataset.objects.filter(pk=pk).first()
    if dataset is None or not (dataset.is_draft or dataset.draft_items.exists()):
        raise Http404(f"There is no draft dataset #{pk}.")
    return dataset


def _draft_out(dataset: Dataset, decision: str | None = None) -> dict[str, Any]:
    items = DraftItem.objects.filter(dataset=dataset).select_related("unit")
    counts = {value: 0 for value in DraftItem.Decision.values}
    for value in items.values_list("decision", flat=True):
        counts[value] += 1
    if decision:
        items = items.filter(decision=decision)
    return {
        "dataset": dataset.pk,
        "name": dataset.name,
        "status": dataset.status,
        "counts": counts,
        "items": [_item_out(item) for item in items.order_by("unit__index", "number")],
    }


def _item_out(item: DraftItem) -> dict[str, Any]:
    return {
        "id": item.pk,
        "key": item.key,
        "content": item.content,
        "question": item.question,
        "reference": item.reference,
        "decision": item.decision,
    }


@router.get("/drafts/{pk}/", response={200: DraftOut, **ERRORS})
def draft_detail(request: HttpRequest, pk: int, decision: str | None = None) -> Any:
    """A draft dataset's generated items and each one's decision (?decision= filters)."""
    if decision and decision not in DraftItem.Decision.values:
        raise ApiError(400, f"decision is one of {', '.join(DraftItem.Decision.values)}.")
    return _draft_out(_draft(pk), decision)


@router.post("/drafts/items/{pk}/", response={200: DraftItemOut, **ERRORS})
def draft_decide(request: HttpRequest, pk: int, body: DecisionIn) -> Any:
    """Approve, reject or edit one generated item (an edit gives content/question/reference)."""
    user = _need(request, User.Role.REVIEWER)
    item = DraftItem.objects.select_related("dataset", "unit").filter(pk=pk).first()
    if item is None:
        raise Http404(f"There is no draft item #{pk}.")
    texts = {
        name: getattr(body, name)
        for name in DraftItem.TEXT_FIELDS
        if getattr(body, name) is not None
    }
    if body.decision == DraftItem.Decision.EDITED and not (
        (texts.get("content", item.content) or "").strip()
        and (texts.get("question", item.question) or "").strip()
    ):
        raise ApiError(400, "An edited item needs its content and question.")
    try:
        item.decide(body.decision, user, **texts)
    except ValueError:
        raise ApiError(400, "decision: choose approved, edited, rejected or pending.") from None
    except Frozen as exc:
        raise ApiError(409, str(exc)) from None
    return _item_out(item)


@router.post("/drafts/{pk}/publish/", response={200: DraftOut, **ERRORS})
def draft_publish(request: HttpRequest, pk: int) -> Any:
    """The approved and edited items become the dataset's items; the dataset is ready."""
    _need(request, User.Role.REVIEWER)
    try:
        dataset = publish(_draft(pk))
    except DraftError as exc:
        raise ApiError(409, str(exc)) from None
    return _draft_out(dataset)


@router.post("/drafts/{pk}/discard/", response={200: DraftOut, **ERRORS})
def draft_discard(request: HttpRequest, pk: int) -> Any:
    _need(request, User.Role.REVIEWER)
    try:
        dataset = discard(_draft(pk))
    except DraftError as exc:
        raise ApiError(409, str(exc)) from None
    return _draft_out(dataset)


# ---- the release gate ------------------------------------------------------------------------------
@router.post("/gate/", response={200: GateOut, 202: GateOut, **ERRORS})
def gate(request: HttpRequest, body: GateIn) -> Any:
    """`manage.py gate` in one call: 200 with the verdict, its exit code, the Markdown summary
    and the JUnit XML; or 202 while a judge run is not finished (one is started on the task's
    default judge for a run of answers that has none): ask again."""
    _need(request, User.Role.REVIEWER)
    if not 0 < body.alpha < 1 or body.margin < 0:
        raise ApiError(400, "alpha is between 0 and 1, margin 0 or more.")
    task = _task(body.task, request)
    try:
        judge = gate_judge(task, body.judge)
        sides = [side(task, spec, judge) for spec in (body.baseline, body.candidate)]
        waiting = [s.waiting_for for s in sides if not s.ready]
        if waiting:
            return Status(202, {"status": "waiting", "waiting_for": waiting})
        result = compare(sides[0].judged, sides[1].judged, body.subject, body.margin, body.alpha)  # type: ignore[arg-type]
    except (GateError, ValueError) as exc:
        raise ApiError(400, str(exc)) from None
    subjects = [
        {
            "subject": s.subject,
            "n": s.n,
            "mean_baseline": s.mean_baseline,
            "mean_candidate": s.mean_candidate,
            "mean_change": s.mean_change,
            "ci_low": s.ci.low if s.ci else None,
            "ci_high": s.ci.high if s.ci else None,
            "p_adjusted": s.p_adjusted,
            "test": s.test,
            "items_needed": s.needed,
            "verdict": s.verdict,
            "regressed_items": [item.key for item in s.worse] if s.verdict == "regressed" else [],
        }
        for s in result.subjects
    ]
    return Status(
        200,
        {
            "status": "done",
            "exit_code": result.exit_code,
            "verdict": result.verdict,
            "baseline_run": result.baseline.pk,
            "candidate_run": result.candidate.pk,
            "subjects": subjects,
            "markdown": markdown(result),
            "junit": junit(result),
        },
    )
