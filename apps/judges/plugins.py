"""Python plug-ins: scoring code an admin deploys beside evalsite (never uploaded through the web).

Four kinds, each a plain function (the contract, docs/judges.md "Python plug-ins"):

- metric: `score(prediction: str, references: list[str], item: dict) -> float | dict` scores one
  response; a dict gives a value per subject ({"precision": 0.5, "recall": 1.0}) and may add a
  "reason" (text);
- dataset metric: `score(predictions: list[str], references: list[list[str]], items:
  list[dict]) -> float`, one number for a whole run (as corpus BLEU), on the board beside the
  mean;
- post-processor: `process(text: str) -> str`, applied to the response before the metric;
- field converter: `convert(item: dict) -> str | list[str]`, the item's reference answers from
  its fields (Dynabench's label field converter), instead of the reference column.

`item` is a copy of the item's fields as uploaded (column → value). A metric may declare
`display_name`, `unit`, `higher_is_better` and `range` (lowest, highest) as attributes of the
function; the docstring is what the judge form shows.

They are found two ways: Python entry points in the groups of GROUPS (a package's
pyproject.toml, `[project.entry-points."evalsite.metrics"]`), and the modules the
EVALSITE_PLUGINS setting lists, each with dicts named as in MODULE_DICTS (name → function).
Every plug-in is recorded by name and a hash of its module's source, so a judge version knows
the code it scores with (`code_record`) and refuses to run once that code changed (`changed`).
Loading happens once per process (`registry`); a plug-in that cannot be loaded is left out and
named in `Registry.problems`, it never stops the site.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import importlib
import inspect
import logging
import marshal
import math
import re
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from apps.judges.metrics import METRICS, POSTPROCESSORS, evaluate, validate_options
from apps.judges.metrics import postprocess as builtin_postprocess
from apps.judges.parsing import JudgeReplyError, RubricResult, validate_subjects

log = logging.getLogger(__name__)

METRIC, DATASET_METRIC, POSTPROCESSOR, CONVERTER = (
    "metric",
    "dataset_metric",
    "postprocessor",
    "converter",
)
GROUPS = {
    METRIC: "evalsite.metrics",
    DATASET_METRIC: "evalsite.dataset_metrics",
    POSTPROCESSOR: "evalsite.postprocessors",
    CONVERTER: "evalsite.converters",
}
MODULE_DICTS = {
    METRIC: "EVALSITE_METRICS",
    DATASET_METRIC: "EVALSITE_DATASET_METRICS",
    POSTPROCESSOR: "EVALSITE_POSTPROCESSORS",
    CONVERTER: "EVALSITE_CONVERTERS",
}
KIND_WORDS = {
    METRIC: "metric",
    DATASET_METRIC: "dataset metric",
    POSTPROCESSOR: "post-processor",
    CONVERTER: "field converter",
}
OWN_PACKAGES = ("apps", "evalsite")
# Stored in Judge.metric / postprocess / converter / dataset_metric (CharFields of 50).
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,49}$")


class PluginError(ValueError):
    """A plug-in asked for that is not installed, or whose code changed since it was recorded."""


class PluginRaised(Exception):
    """A plug-in raised while scoring an item: the item fails with `message`; `trace` (the
    traceback) goes to the attempt log, which only admins see."""

    def __init__(self, message: str, trace: str) -> None:
        super().__init__(message)
        self.message = message
        self.trace = trace


@dataclass(frozen=True)
class Plugin:
    kind: str
    name: str
    func: Callable[..., Any]
    origin: str  # where it came from: an entry point of a distribution, or a module
    code_hash: str
    display_name: str = ""
    doc: str = ""
    unit: str = ""
    higher_is_better: bool = True
    range: tuple[float, float] | None = None

    @property
    def label(self) -> str:
        return self.display_name or self.name


@dataclass
class Registry:
    plugins: dict[tuple[str, str], Plugin] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def of_kind(self, kind: str) -> list[Plugin]:
        return sorted((p for p in self.plugins.values() if p.kind == kind), key=lambda p: p.name)

    def get(self, kind: str, name: str) -> Plugin:
        try:
            return self.plugins[(kind, name)]
        except KeyError:
            known = ", ".join(p.name for p in self.of_kind(kind)) or "none"
            raise PluginError(
                f"No {KIND_WORDS[kind]} plug-in named {name!r} is installed (installed: {known})."
            ) from None

    def add(self, kind: str, name: str, func: Any, origin: str) -> None:
        where = f"{KIND_WORDS[kind]} plug-in {name!r} ({origin})"
        if not _NAME.match(name):
            self.problems.append(
                f"{where}: a name is 1–50 lower-case letters, digits, “_”, “.” or “-”."
            )
        elif not callable(func):
            self.problems.append(f"{where}: {func!r} is not a function.")
        elif (kind, name) in self.plugins:
            first = self.plugins[(kind, name)].origin
            self.problems.append(f"{where}: the name is taken by {first}; left out.")
        elif kind == POSTPROCESSOR and name in POSTPROCESSORS:
            self.problems.append(f"{where}: a built-in post-processor has that name; left out.")
        elif kind == METRIC and name in METRICS:
            self.problems.append(f"{where}: a built-in metric has that name; left out.")
        else:
            self.plugins[(kind, name)] = _describe(kind, name, func, origin)


def _describe(kind: str, name: str, func: Callable[..., Any], origin: str) -> Plugin:
    bounds = getattr(func, "range", None)
    try:
        low, high = (float(bounds[0]), float(bounds[1])) if bounds is not None else (0.0, 0.0)
        declared: tuple[float, float] | None = (low, high) if high > low else None
    except (TypeError, ValueError, IndexError):
        declared = None
    return Plugin(
        kind=kind,
        name=name,
        func=func,
        origin=origin,
        code_hash=code_hash(func),
        display_name=str(getattr(func, "display_name", "") or ""),
        doc=inspect.cleandoc(func.__doc__ or ""),
        unit=str(getattr(func, "unit", "") or ""),
        higher_is_better=bool(getattr(func, "higher_is_better", True)),
        range=declared,
    )


def code_hash(func: Callable[..., Any]) -> str:
    """A hash of the source of the module that defines `func` (helpers it calls change the
    score as much as its own lines), else of its compiled code."""
    module = inspect.getmodule(func)
    try:
        text = inspect.getsource(module if module is not None else func).encode()
    except (OSError, TypeError):
        code = getattr(func, "__code__", None)
        text = marshal.dumps(code) if code is not None else repr(func).encode()
    return hashlib.sha256(text).hexdigest()[:16]


def load(modules: Sequence[str]) -> Registry:
    """Every plug-in of the installed packages' entry points, then of `modules`."""
    found = Registry()
    for kind, group in GROUPS.items():
        for point in sorted(entry_points(group=group), key=lambda p: p.name):
            dist = point.dist
            origin = f"entry point {point.value}" + (
                f" of {dist.name} {dist.version}" if dist is not None else ""
            )
            try:
                func = point.load()
            except Exception as exc:  # a broken package must not take the site down
                found.problems.append(
                    f"{KIND_WORDS[kind]} plug-in {point.name!r} ({origin}) could not be loaded: "
                    f"{type(exc).__name__}: {exc}"
                )
                continue
            found.add(kind, point.name, func, origin)
    for dotted in modules:
        if dotted.split(".")[0] in OWN_PACKAGES:
            # Our own code is wired by imports the import graph can follow, not by a setting.
            found.problems.append(
                f"Plug-in module {dotted!r} (EVALSITE_PLUGINS) is part of evalsite; "
                "plug-ins live in a package or module of their own."
            )
            continue
        try:
            module = importlib.import_module(dotted)
        except Exception as exc:
            found.problems.append(
                f"Plug-in module {dotted!r} (EVALSITE_PLUGINS) could not be imported: "
                f"{type(exc).__name__}: {exc}"
            )
            continue
        listed = False
        for kind, attribute in MODULE_DICTS.items():
            table = getattr(module, attribute, None)
            if table is None:
                continue
            listed = True
            if not isinstance(table, Mapping):
                found.problems.append(
                    f"{dotted}.{attribute} must be a dict of name → function, not "
                    f"{type(table).__name__}."
                )
                continue
            for name, func in table.items():
                found.add(kind, str(name), func, f"module {dotted}")
        if not listed:
            found.problems.append(
                f"Plug-in module {dotted!r} defines none of {', '.join(MODULE_DICTS.values())}."
            )
    for problem in found.problems:
        log.warning("%s", problem)
    return found


@functools.cache
def registry() -> Registry:
    """The plug-ins of this process, loaded on first use."""
    from django.conf import settings  # this module is otherwise free of Django (scoring.py)

    return load(list(getattr(settings, "EVALSITE_PLUGINS", [])))


def reload() -> Registry:
    """Load again (after installing a package into a running process: tests)."""
    registry.cache_clear()
    importlib.invalidate_caches()
    return registry()


# ---- what a judge version records --------------------------------------------------------------
def used_by(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(kind, name) of each plug-in a metric judge's settings name (`values`: Judge fields)."""
    used = []
    if (metric := values.get("metric")) and metric not in METRICS:
        used.append((METRIC, str(metric)))
    if (post := values.get("postprocess")) and post not in POSTPROCESSORS:
        used.append((POSTPROCESSOR, str(post)))
    if converter := values.get("converter"):
        used.append((CONVERTER, str(converter)))
    if dataset_metric := values.get("dataset_metric"):
        used.append((DATASET_METRIC, str(dataset_metric)))
    return [(kind, name) for kind, name in used if name]


def code_record(values: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """What a judge version stores of its plug-ins: kind → name, code hash and origin."""
    record = {}
    for kind, name in used_by(values):
        plugin = registry().get(kind, name)
        record[kind] = {"name": name, "hash": plugin.code_hash, "origin": plugin.origin}
    return record


def changed(record: Mapping[str, Mapping[str, str]]) -> list[str]:
    """Why the installed plug-ins differ from those a judge version recorded (empty: same)."""
    why = []
    for kind, entry in record.items():
        try:
            plugin = registry().get(kind, entry["name"])
        except PluginError as exc:
            why.append(str(exc))
            continue
        if plugin.code_hash != entry.get("hash"):
            why.append(
                f"The {KIND_WORDS[kind]} plug-in {entry['name']!r} changed since this version "
                f"was saved (code {entry.get('hash')} then, {plugin.code_hash} now): save the "
                "judge again to make a version with the new code."
            )
    return why


def check(spec: Any) -> None:
    """Raise ValueError naming the first problem of a metric judge that uses plug-ins (`spec`:
    a JudgeSpec): a plug-in not installed, code changed since the version was saved, options
    given to a plug-in metric, or subjects a plug-in metric cannot fill."""
    values = {
        "metric": spec.metric,
        "postprocess": spec.postprocess,
        "converter": spec.converter,
    }
    installed = registry()
    if spec.metric not in METRICS and (METRIC, spec.metric) not in installed.plugins:
        known = sorted({*METRICS, *(p.name for p in installed.of_kind(METRIC))})
        raise PluginError(f"Unknown metric {spec.metric!r}; known metrics: {', '.join(known)}.")
    post = spec.postprocess
    if post and post not in POSTPROCESSORS and (POSTPROCESSOR, post) not in installed.plugins:
        known = sorted({*POSTPROCESSORS, *(p.name for p in installed.of_kind(POSTPROCESSOR))})
        raise PluginError(
            f"Unknown post-processor {post!r}; known post-processors: {', '.join(known)}."
        )
    for kind, name in used_by(values):
        installed.get(kind, name)
    if why := changed({k: v for k, v in spec.plugin_code.items() if k != DATASET_METRIC}):
        raise PluginError(why[0])
    if spec.metric in METRICS:
        if len(spec.subjects) > 1:
            raise ValueError("A built-in metric gives one value; list at most one subject.")
        validate_options(spec.metric, spec.metric_options)
    elif spec.metric_options:
        raise ValueError(f"The metric plug-in {spec.metric!r} takes no options; leave them blank.")
    if spec.subjects:
        for subject in spec.subjects:
            if "min" in subject or "max" in subject:
                validate_subjects([subject])


# ---- scoring ---------------------------------------------------------------------------------
def _call(plugin: Plugin, *args: Any) -> Any:
    try:
        return plugin.func(*args)
    except Exception as exc:
        message = (
            f"The {KIND_WORDS[plugin.kind]} plug-in {plugin.name!r} raised "
            f"{type(exc).__name__}: {exc}"
        )
        raise PluginRaised(message[:1000], "".join(traceback.format_exception(exc))) from exc


def item_copy(fields: Mapping[str, Any] | None) -> dict[str, Any]:
    """The item as plug-ins get it: its fields, copied so that no plug-in changes another's."""
    return copy.deepcopy(dict(fields or {}))


def references_of(converter: str, fields: Mapping[str, Any] | None, given: list[str]) -> list[str]:
    """The item's references: the converter's answer, or `given` (the reference column)."""
    if not converter:
        return list(given)
    plugin = registry().get(CONVERTER, converter)
    value = _call(plugin, item_copy(fields))
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return ["" if ref is None else str(ref) for ref in value]
    raise PluginRaised(
        f"The field converter plug-in {converter!r} returned {type(value).__name__}; "
        "a converter returns text or a list of texts.",
        "",
    )


def process(name: str, text: str) -> str:
    """Post-process with a built-in post-processor or a plug-in one."""
    if not name:
        return text
    if name in POSTPROCESSORS:
        return builtin_postprocess(name, text)
    value = _call(registry().get(POSTPROCESSOR, name), text)
    if not isinstance(value, str):
        raise PluginRaised(
            f"The post-processor plug-in {name!r} returned {type(value).__name__}, not text.", ""
        )
    return value


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def score_item(
    spec: Any, prediction: str, references: list[str], fields: Mapping[str, Any] | None
) -> RubricResult:
    """One item scored by a metric judge that uses plug-ins (`spec`: a JudgeSpec): references
    from the converter or the item, the response post-processed, then the metric (built-in or
    plug-in). A plug-in that raises raises PluginRaised; a value that is not a number, a
    missing subject or a value out of the subject's range raise JudgeReplyError, as a rubric
    judge's reply would; a built-in metric refusing the data raises MetricError."""
    refs = references_of(spec.converter, fields, references)
    text = process(spec.postprocess, prediction)
    if spec.postprocess_reference:
        refs = [process(spec.postprocess, ref) for ref in refs]
    names = spec.subject_names
    if spec.metric in METRICS:
        return RubricResult({names[0]: evaluate(spec.metric, text, refs, spec.metric_options)})
    metric = registry().get(METRIC, spec.metric)
    value = _call(metric, text, refs, item_copy(fields))
    reason = ""
    if isinstance(value, Mapping):
        raw_reason = value.get("reason")
        reason = "" if raw_reason is None else str(raw_reason)
        missing = [name for name in names if name not in value]
        if missing:
            given = ", ".join(map(repr, (k for k in value if k != "reason"))) or "nothing"
            raise JudgeReplyError(
                "missing_subject",
                f"The metric plug-in {spec.metric!r} gave no {', '.join(map(repr, missing))} "
                f"(it gave {given}).",
            )
        raw = {name: value[name] for name in names}
    elif len(names) == 1:
        raw = {names[0]: value}
    else:
        raise JudgeReplyError(
            "missing_subject",
            f"The metric plug-in {spec.metric!r} gave one number; this judge has "
            f"{len(names)} subjects: it must return a dict with each.",
        )
    values = {}
    for name, given_value in raw.items():
        number = _number(given_value)
        if number is None:
            raise JudgeReplyError(
                "unparseable",
                f"The metric plug-in {spec.metric!r} gave {given_value!r} for {name}, "
                "not a finite number.",
            )
        subject: Mapping[str, Any] = next((s for s in spec.subjects if s.get("name") == name), {})
        low, high = subject.get("min"), subject.get("max")
        if low is not None and high is not None and not low <= number <= high:
            raise JudgeReplyError(
                "out_of_range",
                f"The metric plug-in {spec.metric!r} gave {number:g} for {name}, outside "
                f"its range {low:g}–{high:g}.",
            )
        values[name] = number
    return RubricResult(values, reason)


def score_dataset(
    name: str,
    predictions: list[str],
    references: list[list[str]],
    items: list[dict[str, Any]],
) -> float:
    """A dataset metric's value; PluginRaised when it raises or gives no finite number."""
    value = _call(registry().get(DATASET_METRIC, name), predictions, references, items)
    number = _number(value)
    if number is None:
        raise PluginRaised(
            f"The dataset metric plug-in {name!r} gave {value!r}, not a finite number.", ""
        )
    return number


def installed_summary() -> list[dict[str, Any]]:
    """Every plug-in, for pages: kind word, name, label, origin, hash and docstring."""
    return [
        {
            "kind": KIND_WORDS[p.kind],
            "name": p.name,
            "label": p.label,
            "origin": p.origin,
            "hash": p.code_hash,
            "doc": p.doc,
            # The docstring's paragraphs with their lines joined: pages wrap them to fit.
            "paragraphs": [" ".join(par.split()) for par in p.doc.split("\n\n") if par.strip()],
        }
        for kind in GROUPS
        for p in registry().of_kind(kind)
    ]
