"""Configuration as code (#30.3): one YAML file describes a task, `apply` makes it so.

    task: {slug, name, description, evaluate_new_data}
    endpoints: [{name, base_url, model, api_key_env, temperature, …}]   # keys: env var names only
    templates: [{name, system_message, user_message | messages, fewshot_*}]
    judges: [{name, kind, subjects: ["accuracy 1 5"], system_prompt, user_prompt, …}]
    generators: [{name, system_message, content_prompt, questions_prompt, answers_prompt}]
    default_judge: {judge, endpoint}
    review: {reviews_per_item, thresholds, adjudicator, doubt_spread, doubt_repaired,
             doubt_confidence}

Each entry is checked by the form its page uses (the same messages, named by the file's
section, position and name), and the whole file is applied in one transaction or not at all.
Endpoints are edited in place, as their page does; a template, judge or generator whose content
differs from its newest version is saved as the next version (never an edit: runs keep the
version they used), and one that is the same is left alone. A field left out takes its default:
the file is the whole truth of what it names. `export` writes a task back in the same form (the
fields at their defaults left out), so an exported file applied again changes nothing.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml
from django import forms
from django.db import models, transaction

from apps.accounts.models import User
from apps.configs.models import AppliedConfig
from apps.datasets.models import Dataset, Task, Versioned
from apps.drafting.forms import GeneratorForm
from apps.drafting.models import Generator
from apps.judges.forms import JudgeForm, subjects_text
from apps.judges.models import Judge, TaskJudging
from apps.review.forms import PolicyForm
from apps.review.models import ReviewPolicy, settle_task
from apps.review.several import sample_fields
from apps.runs.forms import CHAT, CONVERSATION, PLAIN, EndpointForm, PromptTemplateForm, chat_text
from apps.runs.models import Endpoint, PromptTemplate

SECTIONS = ("task", "endpoints", "templates", "judges", "generators", "default_judge", "review")
TASK_FIELDS = ("slug", "name", "description", "evaluate_new_data")
ENDPOINT_FIELDS = tuple(EndpointForm.Meta.fields)
# What a file must never hold: a key goes in the environment, the file names the variable.
SECRET_FIELDS = ("api_key", "api_key_secret", "new_api_key", "key", "secret")
TEMPLATE_FIELDS = (
    "name",
    "system_message",
    "user_message",
    "messages",
    "fewshot_k",
    "fewshot_dataset",
    "fewshot_seed",
    "fewshot_format",
)
JUDGE_FIELDS = (
    "name",
    "kind",
    "subjects",
    *(name for name in Judge.CONTENT_FIELDS if name not in ("kind", "subjects", "examples")),
)
GENERATOR_FIELDS = ("name", *Generator.CONTENT_FIELDS)
DEFAULT_JUDGE_FIELDS = ("judge", "endpoint")
REVIEW_FIELDS = (
    "reviews_per_item",
    "thresholds",
    "adjudicator",
    "sample_percent",
    "sample_seed",
    "sample_design",  # uniform (the default) or active (#31.2)
    "doubt_spread",
    "doubt_repaired",
    "doubt_confidence",
)
# The task's "needs a person" rule (judges' TaskJudging); the rest is review's ReviewPolicy.
RULE_FIELDS = ("doubt_spread", "doubt_repaired", "doubt_confidence")
HEADER = "# evalsite task configuration: manage.py apply FILE [--dry-run]; export_config TASK\n"


class ConfigError(Exception):
    """The file cannot be applied: every problem, each naming its section, entry and field."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Change:
    what: str  # "endpoint", "template", …
    name: str
    action: str  # "create", "update", "new version", "unchanged"
    detail: str = ""

    @property
    def line(self) -> str:
        detail = f" ({self.detail})" if self.detail else ""
        return f"{self.action:<12} {self.what} {self.name}{detail}"

    @property
    def changes(self) -> bool:
        return self.action != "unchanged"


@dataclass
class Plan:
    task: str
    changes: list[Change] = field(default_factory=list)

    @property
    def lines(self) -> list[str]:
        return [change.line for change in self.changes]

    @property
    def changed(self) -> int:
        return sum(1 for change in self.changes if change.changes)


class _DryRun(Exception):
    """Raised inside the transaction to roll a dry run back."""


# ---- reading -----------------------------------------------------------------------------------
def read(text: str) -> dict[str, Any]:
    """The file's mapping; a YAML error is named by its line."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise ConfigError([f"{where}not valid YAML: {getattr(exc, 'problem', exc)}"]) from None
    if not isinstance(data, dict):
        raise ConfigError(["The file must be a mapping with a task: section."])
    unknown = sorted(set(data) - set(SECTIONS))
    problems = [f"{name}: unknown section (known: {', '.join(SECTIONS)})" for name in unknown]
    if not isinstance(data.get("task"), dict) or not data["task"].get("slug"):
        problems.append("task: give the task's slug (task: {slug: my-task, name: …}).")
    if problems:
        raise ConfigError(problems)
    return data


def _entries(data: dict[str, Any], section: str) -> list[tuple[str, dict[str, Any]]]:
    """A list section's entries, each with the label its messages use ("judges[2] (accuracy)")."""
    value = data.get(section) or []
    if not isinstance(value, list):
        raise ConfigError([f"{section}: give a list of entries (each starting “- name: …”)."])
    out, seen, problems = [], set(), []
    for i, entry in enumerate(value):
        label = f"{section}[{i}]"
        if not isinstance(entry, dict) or not entry.get("name"):
            problems.append(f"{label}: each entry is a mapping with a name.")
            continue
        label = f"{label} ({entry['name']})"
        if entry["name"] in seen:
            problems.append(f"{label}: the name is given twice in {section}.")
        seen.add(entry["name"])
        out.append((label, entry))
    if problems:
        raise ConfigError(problems)
    return out


def _unknown(label: str, entry: dict[str, Any], known: tuple[str, ...]) -> list[str]:
    problems = []
    for key in entry:
        if key in SECRET_FIELDS:
            problems.append(
                f"{label}: {key}: an API key never goes in the file; put it in an environment "
                "variable and name the variable in api_key_env."
            )
        elif key not in known:
            problems.append(f"{label}: {key}: unknown field (known: {', '.join(known)})")
    return problems


def _form_data(values: dict[str, Any]) -> dict[str, Any]:
    """Values as a browser posts them: booleans as a ticked box or nothing, JSON as text."""
    data: dict[str, Any] = {}
    for name, value in values.items():
        if value is None or value is False:
            continue
        if value is True:
            data[name] = "on"
        elif isinstance(value, dict | list):
            data[name] = json.dumps(value)
        else:
            data[name] = str(value)
    return data


def _form_problems(label: str, form: forms.BaseForm, renamed: dict[str, str]) -> list[str]:
    return [
        f"{label}: {message}"
        if name == "__all__"
        else f"{label}: {renamed.get(name, name)}: {message}"
        for name, messages in form.errors.items()
        for message in messages
    ]


def _differences(before: dict[str, Any], after: dict[str, Any]) -> str:
    return ", ".join(name for name in after if before.get(name) != after[name])


# ---- applying ----------------------------------------------------------------------------------
def apply(text: str, user: User | None = None, *, dry_run: bool = False) -> Plan:
    """Apply a configuration file: every entry checked, then everything saved in one
    transaction, or nothing (a dry run checks and plans the same way, then rolls back)."""
    data = read(text)
    plan = Plan(task=str(data["task"]["slug"]))
    try:
        with transaction.atomic():
            _apply(data, text, user, plan)
            if dry_run:
                raise _DryRun
    except _DryRun:
        pass
    return plan


def _apply(data: dict[str, Any], text: str, user: User | None, plan: Plan) -> None:
    problems: list[str] = []
    task = _task(data["task"], plan, problems)
    endpoints = _collect(data, "endpoints", ENDPOINT_FIELDS, problems)
    if task is None:
        raise ConfigError(problems)
    if user is not None and not user.has_role_in(task.project_id, User.Role.REVIEWER):
        # As on the pages: a task of another project is one that does not exist for them.
        raise ConfigError([f"task: {user.username} is not a reviewer in {task.slug}'s project."])
    for label, entry in endpoints:
        _endpoint(label, entry, plan, problems)
    steps: list[tuple[str, tuple[str, ...], Callable[..., None]]] = [
        ("templates", TEMPLATE_FIELDS, _template),
        ("judges", JUDGE_FIELDS, _judge),
        ("generators", GENERATOR_FIELDS, _generator),
    ]
    for section, known, step in steps:
        for label, entry in _collect(data, section, known, problems):
            step(task, label, entry, user, plan, problems)
    _default_judge(task, data.get("default_judge"), plan, problems)
    _review(task, data.get("review"), plan, problems)
    if problems:
        raise ConfigError(problems)
    AppliedConfig.objects.update_or_create(
        task=task,
        defaults={
            "endpoints": [entry["name"] for _, entry in endpoints],
            "text": text,
            "applied_by": user if getattr(user, "pk", None) else None,
        },
    )


def _collect(
    data: dict[str, Any], section: str, known: tuple[str, ...], problems: list[str]
) -> list[tuple[str, dict[str, Any]]]:
    try:
        entries = _entries(data, section)
    except ConfigError as exc:
        problems.extend(exc.problems)
        return []
    good = []
    for label, entry in entries:
        unknown = _unknown(label, entry, known)
        problems.extend(unknown)
        if not unknown:
            good.append((label, entry))
    return good


def _task(entry: dict[str, Any], plan: Plan, problems: list[str]) -> Task | None:
    unknown = _unknown("task", entry, TASK_FIELDS)
    if unknown:
        problems.extend(unknown)
        return None
    values = {
        "name": str(entry.get("name") or entry["slug"]),
        "description": str(entry.get("description") or ""),
        "evaluate_new_data": bool(entry.get("evaluate_new_data", False)),
    }
    task = Task.objects.filter(slug=entry["slug"]).first()
    if task is None:
        task = Task(slug=str(entry["slug"]), **values)
        try:
            # A new task goes to the default project (Task.save).
            task.full_clean(exclude=["created_by", "project"])
        except Exception as exc:
            problems.extend(f"task: {message}" for message in _messages(exc))
            return None
        task.save()
        plan.changes.append(Change("task", task.slug, "create"))
        return task
    before = {name: getattr(task, name) for name in values}
    changed = _differences(before, values)
    if changed:
        for name, value in values.items():
            setattr(task, name, value)
        task.save(update_fields=list(values))
    plan.changes.append(Change("task", task.slug, "update" if changed else "unchanged", changed))
    return task


def _messages(exc: Exception) -> list[str]:
    errors = getattr(exc, "message_dict", None)
    if errors:
        return [f"{name}: {' '.join(messages)}" for name, messages in errors.items()]
    return [str(exc)]


def _endpoint(label: str, entry: dict[str, Any], plan: Plan, problems: list[str]) -> None:
    endpoint = Endpoint.objects.filter(name=entry["name"]).first() or Endpoint()
    creating = endpoint.pk is None
    defaults = {name: _default(Endpoint, name) for name in ENDPOINT_FIELDS}
    values = {**defaults, **entry}
    before = {name: getattr(endpoint, name) for name in ENDPOINT_FIELDS}
    form = EndpointForm(_form_data(values), instance=endpoint)
    if not form.is_valid():
        problems.extend(_form_problems(label, form, {}))
        return
    after = {name: form.cleaned_data[name] for name in ENDPOINT_FIELDS}
    changed = _differences(before, after)
    if creating or changed:
        form.save()
    action = "create" if creating else "update" if changed else "unchanged"
    plan.changes.append(Change("endpoint", entry["name"], action, "" if creating else changed))


def _default(model: type[models.Model], name: str) -> Any:
    """The value a field of `model` has when the file leaves it out."""
    found = model._meta.get_field(name)
    default = found.get_default()  # type: ignore[union-attr]
    return default


def _version(
    task: Task,
    what: str,
    current: Versioned | None,
    new: Versioned,
    fields: tuple[str, ...],
    before: dict[str, Any],
    user: User | None,
    plan: Plan,
) -> None:
    """Save `new` as the next version when its content differs from `current`'s."""
    after = {name: getattr(new, name) for name in fields}
    changed = _differences(before, after) if current is not None else ""
    if current is not None and not changed:
        plan.changes.append(Change(what, f"{new.name} v{current.version}", "unchanged"))
        return
    new.save_as_new_version(user)
    action = "new version" if current is not None else "create"
    plan.changes.append(Change(what, f"{new.name} v{new.version}", action, changed))


def _latest[V: Versioned](model: type[V], task: Task, name: str) -> V | None:
    return model._default_manager.filter(task=task, name=name).order_by("-version").first()


def _snapshot(row: Versioned | None, fields: tuple[str, ...]) -> dict[str, Any]:
    return {name: getattr(row, name) for name in fields} if row is not None else {}


def _template(
    task: Task,
    label: str,
    entry: dict[str, Any],
    user: User | None,
    plan: Plan,
    problems: list[str],
) -> None:
    current = _latest(PromptTemplate, task, entry["name"])
    before = _snapshot(current, PromptTemplate.CONTENT_FIELDS)
    values: dict[str, Any] = {
        "name": entry["name"],
        "system_message": entry.get("system_message") or "",
        "user_message": entry.get("user_message") or "",
        "fewshot_k": entry.get("fewshot_k", 0),
        "fewshot_seed": entry.get("fewshot_seed", 0),
        "fewshot_format": entry.get("fewshot_format") or "",
        "shape": PLAIN,
    }
    messages = entry.get("messages") or []
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        problems.append(f"{label}: messages: give a list of {{role: …, content: …}} messages.")
        return
    roles = [m.get("role") for m in messages]
    if roles in ([CONVERSATION], ["system", CONVERSATION]):
        values["shape"] = CONVERSATION
        values["system_message"] = messages[0].get("content", "") if len(roles) == 2 else ""
    elif messages:
        values["shape"] = CHAT
        values["chat_messages"] = chat_text(messages)
    if entry.get("fewshot_dataset"):
        dataset = (
            Dataset.objects.ready()
            .filter(task=task, name=entry["fewshot_dataset"])
            .order_by("-version")
            .first()
        )
        if dataset is None:
            problems.append(
                f"{label}: fewshot_dataset: {task.slug} has no ready dataset named "
                f"{entry['fewshot_dataset']!r}."
            )
            return
        values["fewshot_dataset"] = dataset.pk
    form = PromptTemplateForm(
        _form_data(values), task=task, instance=current, editing=current is not None
    )
    if not form.is_valid():
        problems.extend(_form_problems(label, form, {"chat_messages": "messages"}))
        return
    template = form.save(commit=False)
    template.task = task
    _version(task, "template", current, template, PromptTemplate.CONTENT_FIELDS, before, user, plan)


def _judge(
    task: Task,
    label: str,
    entry: dict[str, Any],
    user: User | None,
    plan: Plan,
    problems: list[str],
) -> None:
    current = _latest(Judge, task, entry["name"])
    before = _snapshot(current, Judge.CONTENT_FIELDS)
    subjects = entry.get("subjects") or []
    if not isinstance(subjects, list):
        problems.append(f"{label}: subjects: give a list, e.g. [accuracy 1 5, clarity 1 5].")
        return
    values = {name: _default(Judge, name) for name in JUDGE_FIELDS if name != "subjects"}
    values.update({k: v for k, v in entry.items() if k != "subjects"})
    values["subjects_text"] = "\n".join(
        s if isinstance(s, str) else subjects_text([s]) for s in subjects
    )
    form = JudgeForm(_form_data(values), task=task, instance=current, editing=current is not None)
    if not form.is_valid():
        problems.extend(_form_problems(label, form, {"subjects_text": "subjects"}))
        return
    judge = form.build()
    _version(task, "judge", current, judge, Judge.CONTENT_FIELDS, before, user, plan)


def _generator(
    task: Task,
    label: str,
    entry: dict[str, Any],
    user: User | None,
    plan: Plan,
    problems: list[str],
) -> None:
    current = _latest(Generator, task, entry["name"])
    before = _snapshot(current, Generator.CONTENT_FIELDS)
    form = GeneratorForm(
        _form_data(entry), task=task, instance=current, editing=current is not None
    )
    if not form.is_valid():
        problems.extend(_form_problems(label, form, {}))
        return
    generator = form.save(commit=False)
    generator.task = task
    _version(task, "generator", current, generator, Generator.CONTENT_FIELDS, before, user, plan)


def _default_judge(task: Task, entry: Any, plan: Plan, problems: list[str]) -> None:
    entry = entry or {}
    if not isinstance(entry, dict):
        problems.append("default_judge: give {judge: NAME, endpoint: NAME}.")
        return
    problems_before = len(problems)
    problems.extend(_unknown("default_judge", entry, DEFAULT_JUDGE_FIELDS))
    judge = endpoint = None
    if entry.get("judge"):
        judge = _latest(Judge, task, str(entry["judge"]))
        if judge is None:
            problems.append(f"default_judge: judge: {task.slug} has no judge {entry['judge']!r}.")
    if entry.get("endpoint"):
        endpoint = Endpoint.objects.filter(name=entry["endpoint"]).first()
        if endpoint is None:
            problems.append(f"default_judge: endpoint: there is no endpoint {entry['endpoint']!r}.")
    if judge is not None and judge.uses_llm and not entry.get("endpoint"):
        problems.append(f"default_judge: {judge} is an LLM judge: name the endpoint that judges.")
    if len(problems) > problems_before:
        return
    judging = TaskJudging.of(task.pk)
    old = (judging.default_judge_id, judging.default_judge_endpoint_id)
    new = (
        judge.pk if judge else None,
        endpoint.pk if endpoint and judge and judge.uses_llm else None,
    )
    name = f"{judge.name} v{judge.version}" if judge else "none"
    if old == new:
        plan.changes.append(Change("default judge", name, "unchanged"))
        return
    TaskJudging.for_task(task).choose(judge, endpoint if new[1] else None)
    plan.changes.append(Change("default judge", name, "update"))


def _review(task: Task, entry: Any, plan: Plan, problems: list[str]) -> None:
    entry = entry or {}
    if not isinstance(entry, dict):
        problems.append("review: give a mapping (reviews_per_item: 2, …).")
        return
    unknown = _unknown("review", entry, REVIEW_FIELDS)
    if unknown:
        problems.extend(unknown)
        return
    thresholds = entry.get("thresholds") or {}
    if not isinstance(thresholds, dict):
        problems.append("review: thresholds: give a mapping, e.g. {accuracy: 1}.")
        return
    adjudicator = None
    if entry.get("adjudicator"):
        adjudicator = User.objects.filter(username=entry["adjudicator"]).first()
        if adjudicator is None:
            problems.append(f"review: adjudicator: there is no user {entry['adjudicator']!r}.")
            return
    values = {
        "reviews_per_item": entry.get("reviews_per_item", 1),
        "thresholds": ", ".join(f"{k}={v}" for k, v in thresholds.items()),
        "adjudicator": adjudicator.pk if adjudicator else None,
        "sample_percent": entry.get("sample_percent"),
        "sample_seed": entry.get("sample_seed"),
        "sample_design": entry.get("sample_design") or "",
        "doubt_spread": entry.get("doubt_spread"),
        "doubt_repaired": entry.get("doubt_repaired", False),
        "doubt_confidence": entry.get("doubt_confidence"),
    }
    form = PolicyForm(_form_data(values))
    form.fields["adjudicator"].queryset = User.objects.filter(  # type: ignore[attr-defined]
        is_active=True, role__in=[User.Role.REVIEWER, User.Role.ADMIN]
    )
    if not form.is_valid():
        problems.extend(_form_problems("review", form, {}))
        return
    cleaned = dict(form.cleaned_data)
    policy, judging = ReviewPolicy.of(task.pk), TaskJudging.of(task.pk)
    if not cleaned["sample_percent"]:
        cleaned["sample_seed"] = 0
    elif cleaned["sample_seed"] is None and cleaned["sample_percent"] == policy.sample_percent:
        # No seed in the file: the sample drawn before stays (applying again draws no other).
        cleaned["sample_seed"] = policy.sample_seed
    before = {
        "reviews_per_item": policy.reviews_per_item,
        "thresholds": policy.thresholds,
        "adjudicator": policy.adjudicator_id,
        "sample_percent": policy.sample_percent,
        "sample_seed": policy.sample_seed,
        "sample_design": policy.sample_design,
        **{name: getattr(judging, name) for name in RULE_FIELDS},
    }
    after = {name: cleaned[name] for name in REVIEW_FIELDS}
    # A file that names no design keeps the policy's (sample_fields); no sample is uniform.
    after["sample_design"] = (
        (cleaned["sample_design"] or policy.sample_design)
        if cleaned["sample_percent"]
        else ReviewPolicy.Design.UNIFORM
    )
    after["adjudicator"] = cleaned["adjudicator"].pk if cleaned["adjudicator"] else None
    changed = _differences(before, after)
    if not changed:
        plan.changes.append(Change("review policy", task.slug, "unchanged"))
        return
    ReviewPolicy.objects.update_or_create(
        task=task,
        defaults={
            **{name: cleaned[name] for name in REVIEW_FIELDS[:3]},
            **sample_fields(policy, cleaned),
        },
    )
    rule = TaskJudging.for_task(task)
    for name in RULE_FIELDS:
        setattr(rule, name, cleaned[name])
    rule.save(update_fields=list(RULE_FIELDS))
    transaction.on_commit(lambda: settle_task(task.pk))
    plan.changes.append(Change("review policy", task.slug, "update", changed))


# ---- exporting ---------------------------------------------------------------------------------
def export(task: Task) -> str:
    """The task as a configuration file: what `apply` reads, the defaults left out. Entries
    come in the order of the file last applied, then the others by name."""
    applied = AppliedConfig.objects.filter(task=task).first()
    order = _applied_order(applied.text if applied else "")
    data: dict[str, Any] = {"task": _present(task, TASK_FIELDS, Task, keep=("slug", "name"))}
    sections: list[tuple[str, list[Any], Callable[[Any], dict[str, Any]]]] = [
        ("endpoints", _task_endpoints(task, applied), _endpoint_entry),
        (
            "templates",
            list(PromptTemplate.objects.filter(task=task).latest_versions()),
            _template_entry,
        ),
        ("judges", list(Judge.objects.filter(task=task).latest_versions()), _judge_entry),
        (
            "generators",
            list(Generator.objects.filter(task=task).latest_versions()),
            _generator_entry,
        ),
    ]
    for section, rows, entry in sections:
        known = order.get(section, [])
        rows.sort(
            key=lambda row: (0, known.index(row.name)) if row.name in known else (1, row.name)
        )
        if rows:
            data[section] = [entry(row) for row in rows]
    judging = TaskJudging.of(task.pk)
    if judging.default_judge is not None:
        data["default_judge"] = {"judge": judging.default_judge.name}
        if judging.default_judge_endpoint is not None:
            data["default_judge"]["endpoint"] = judging.default_judge_endpoint.name
    if review := _review_entry(task, judging):
        data["review"] = review
    return HEADER + yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)


def _applied_order(text: str) -> dict[str, list[str]]:
    """Each list section's names in the order the file gave them."""
    try:
        data = yaml.safe_load(text) if text else {}
    except yaml.YAMLError:
        return {}
    order: dict[str, list[str]] = {}
    for section, entries in (data or {}).items():
        if isinstance(entries, list):
            order[section] = [str(e.get("name")) for e in entries if isinstance(e, dict)]
    return order


def _endpoint_entry(endpoint: Endpoint) -> dict[str, Any]:
    return _present(endpoint, ENDPOINT_FIELDS, Endpoint, keep=("name",))


def _generator_entry(generator: Generator) -> dict[str, Any]:
    return _present(generator, GENERATOR_FIELDS, Generator, keep=("name",))


def _present(
    row: models.Model, fields: tuple[str, ...], model: type[models.Model], keep: tuple[str, ...]
) -> dict[str, Any]:
    """The fields of `row` that differ from their defaults (and those in `keep`, always)."""
    out = {}
    for name in fields:
        value = getattr(row, name)
        if name in keep or value != _default(model, name):
            out[name] = value
    return out


def _task_endpoints(task: Task, applied: AppliedConfig | None) -> list[Endpoint]:
    """The endpoints the task's file named when last applied, and those its runs and its
    default judge use."""
    named = list(applied.endpoints) if applied else []
    used = set(
        Endpoint.objects.filter(
            models.Q(runs__task=task)
            | models.Q(pk=TaskJudging.of(task.pk).default_judge_endpoint_id)
        ).values_list("name", flat=True)
    )
    order = named + sorted(used - set(named))
    found = {e.name: e for e in Endpoint.objects.filter(name__in=order)}
    return [found[name] for name in order if name in found]


def _template_entry(template: PromptTemplate) -> dict[str, Any]:
    out = _present(template, ("name", "system_message", "user_message"), PromptTemplate, ("name",))
    if template.messages:
        out["messages"] = template.messages
    for name in ("fewshot_k", "fewshot_seed", "fewshot_format"):
        if getattr(template, name) != _default(PromptTemplate, name):
            out[name] = getattr(template, name)
    if template.fewshot_dataset_id is not None:
        out["fewshot_dataset"] = template.fewshot_dataset.name  # type: ignore[union-attr]
    return out


def _judge_entry(judge: Judge) -> dict[str, Any]:
    """A judge's name, kind and subjects, then the settings of its kind that are not defaults."""
    out: dict[str, Any] = {"name": judge.name, "kind": judge.kind}
    if judge.kind not in (Judge.Kind.PAIRWISE, Judge.Kind.CHOICE) and judge.subjects:
        out["subjects"] = subjects_text(judge.subjects).split("\n")
    for kinds, names in Judge.KIND_FIELDS:
        if judge.kind not in kinds:
            continue
        for name in names:
            if getattr(judge, name) != _default(Judge, name):
                out[name] = getattr(judge, name)
    return out


def _review_entry(task: Task, judging: TaskJudging) -> dict[str, Any]:
    policy = ReviewPolicy.of(task.pk)
    out: dict[str, Any] = {}
    if policy.reviews_per_item != 1:
        out["reviews_per_item"] = policy.reviews_per_item
    if policy.thresholds:
        out["thresholds"] = dict(sorted(policy.thresholds.items()))
    if policy.adjudicator is not None:
        out["adjudicator"] = policy.adjudicator.username
    if policy.sample_percent:
        out["sample_percent"] = policy.sample_percent
        out["sample_seed"] = policy.sample_seed
        if policy.sample_design != ReviewPolicy.Design.UNIFORM:
            out["sample_design"] = policy.sample_design
    for name in RULE_FIELDS:
        if getattr(judging, name) != _default(TaskJudging, name):
            out[name] = getattr(judging, name)
    return out


class _Dumper(yaml.SafeDumper):
    """Prompts as literal blocks, as people write them; everything else as PyYAML would."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)


# ---- one entry at a time (the REST API) --------------------------------------------------------
ENTRY_FIELDS = {
    "endpoints": ENDPOINT_FIELDS,
    "templates": TEMPLATE_FIELDS,
    "judges": JUDGE_FIELDS,
    "generators": GENERATOR_FIELDS,
}
_STEPS: dict[str, Callable[..., None]] = {
    "templates": _template,
    "judges": _judge,
    "generators": _generator,
}


def entry_of(section: str, row: Any) -> dict[str, Any]:
    """A saved endpoint, template, judge or generator as its file entry."""
    entries: dict[str, Callable[[Any], dict[str, Any]]] = {
        "endpoints": _endpoint_entry,
        "templates": _template_entry,
        "judges": _judge_entry,
        "generators": _generator_entry,
    }
    return entries[section](row)


def save_entry(
    section: str, task: Task | None, entry: dict[str, Any], user: User | None = None
) -> Change:
    """Check and save one entry as `apply` would (an endpoint edited, a changed template,
    judge or generator as its next version); ConfigError names every problem."""
    label = str(entry.get("name") or "entry")
    problems = _unknown(label, entry, ENTRY_FIELDS[section])
    if not entry.get("name"):
        problems.append("name: give the name.")
    if problems:
        raise ConfigError(problems)
    plan = Plan(task=task.slug if task else "")
    with transaction.atomic():
        if section == "endpoints":
            _endpoint(label, entry, plan, problems)
        else:
            _STEPS[section](task, label, entry, user, plan, problems)
        if problems:
            raise ConfigError(problems)
    return plan.changes[0]
