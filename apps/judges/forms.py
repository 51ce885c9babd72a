"""Forms of the judges app: judges (versioned), judge runs, and a task's default judge."""

import re
from typing import Any, cast

from django import forms
from django.core.validators import MaxValueValidator, MinValueValidator

from apps.datasets.models import Dataset, Task
from apps.judges import plugins
from apps.judges.judge_prompts import PromptError, check_template, placeholders
from apps.judges.metrics import METRICS, POSTPROCESSORS, get_metric
from apps.judges.models import CHOICE_SUBJECTS, Judge, JudgeRun, TaskJudging
from apps.judges.scoring import JudgeSpec
from apps.runs.forms import CostFields, PromptTextField, batch_field, check_batch
from apps.runs.models import Endpoint, LoggingMode, Run

# Names every judge prompt may use besides the item's own fields (see apps/judges/judge_prompts.py).
_DIALOGUE = {"conversation", "reference_conversation", "turns", "turn", "item"}
PROMPT_NAMES: dict[str, set[str]] = {
    Judge.Kind.RUBRIC: {
        "inputs",
        "response",
        "reference",
        "subjects",
        "subject_names",
        "json_format",
        "score_lines",
        *_DIALOGUE,
    },
    Judge.Kind.MCQ: {"inputs", "response", "reference", "labels", "label_count", *_DIALOGUE},
    Judge.Kind.PAIRWISE: {
        "inputs",
        "reference",
        "response_a",
        "response_b",
        "conversation_a",
        "conversation_b",
        "reference_conversation",
        "turns",
        "item",
    },
}
# What shows the judge the response(s): one of these sets must be used by a custom user prompt.
_SHOWS_RESPONSES: dict[str, list[set[str]]] = {
    Judge.Kind.PAIRWISE: [
        {"response_a", "response_b"},
        {"conversation_a", "conversation_b"},
        {"turns"},
    ],
}
_SHOWS_RESPONSE = [{"response"}, {"conversation"}, {"turns"}, {"turn"}]
_SUBJECT_LINE = re.compile(
    r"^\s*(?P<name>[^:\s][^:]*?)\s*(?::\s*|\s+)"
    r"(?P<min>[-+]?\d+(?:\.\d+)?)\s*(?:-|–|to|\s)\s*(?P<max>[-+]?\d+(?:\.\d+)?)\s*$"
)
_NAME_ONLY = re.compile(r"^\s*([^:\s][^:]*?)\s*$")
_TRAILING_NUMBER = re.compile(r"(?:^|[\s:])[-+]?\d+(?:\.\d+)?\s*$")


def parse_subjects(text: str) -> list[dict[str, Any]]:
    """One subject per line: "accuracy 1 5", "accuracy: 1-5" or "accuracy 1 to 5"; a line
    with a name only gives that name (its range comes from the judge's kind)."""
    subjects = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        match = _SUBJECT_LINE.match(line)
        if match:
            low, high = float(match["min"]), float(match["max"])
            subjects.append(
                {
                    "name": match["name"].strip(),
                    "min": int(low) if low.is_integer() else low,
                    "max": int(high) if high.is_integer() else high,
                }
            )
            continue
        name = _NAME_ONLY.match(line)
        if name is None or _TRAILING_NUMBER.search(line):
            raise forms.ValidationError(
                f"Line {number} ({line.strip()!r}): write a subject as name min max, "
                "for example “accuracy 1 5”."
            )
        subjects.append({"name": name.group(1)})
    return subjects


def subjects_text(subjects: list[dict[str, Any]]) -> str:
    lines = []
    for subject in subjects:
        if "min" in subject and "max" in subject:
            low, high = float(subject["min"]), float(subject["max"])
            lines.append(f"{subject['name']} {low:g} {high:g}")
        else:
            lines.append(str(subject["name"]))
    return "\n".join(lines)


def _plain(number: float) -> int | float:
    return int(number) if float(number).is_integer() else number


def plugin_subjects(metric: plugins.Plugin, subjects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A plug-in metric's subjects: those typed (one per value of the dict it returns), else
    one named after it; a subject typed without a range takes the plug-in's declared one, and
    each its direction and unit, so boards sort and label them right."""
    low, high = (_plain(bound) for bound in metric.range) if metric.range else (None, None)
    declared = {"min": low, "max": high} if metric.range else {}
    extra = {
        "higher_is_better": metric.higher_is_better,
        **({"unit": metric.unit} if metric.unit else {}),
    }
    typed = subjects or [{"name": metric.name}]
    return [{**declared, **subject, **extra} for subject in typed]


class JudgeForm(forms.ModelForm):
    """Create a judge, or edit one (saved as its next version; the name stays)."""

    subjects_text = forms.CharField(
        label="Subjects",
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "placeholder": "accuracy 1 5\nclarity 1 5"}),
        help_text=(
            "One per line: name, lowest and highest score (“accuracy 1 5”). A rubric judge "
            "must give every one. Multiple-choice and metric judges give one value: leave this "
            "blank, or name it on one line. A Python plug-in metric that returns a dict gives "
            "one value per subject listed here."
        ),
    )
    metric = forms.ChoiceField(required=False)
    postprocess = forms.ChoiceField(required=False, label="Post-processing of the response")
    metric_options = forms.JSONField(
        required=False,
        initial=dict,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text='As JSON, e.g. {"ignore_case": false}. Blank: the metric\'s defaults.',
    )

    class Meta:
        model = Judge
        # What makes a new version, but subjects: those are typed as text (subjects_text).
        # Examples are drafted from reviews on their own page (apps/judges/learning.py) and
        # carried over to the versions edited here.
        fields = [
            "name",
            *(
                name
                for name in Judge.CONTENT_FIELDS
                if name not in ("subjects", "examples", "plugin_code")
            ),
        ]
        labels = {
            "n_iter": "Rounds per item",
            "use_structured_output": "Ask for structured output where the endpoint supports it",
            "ask_confidence": "Ask the judge how sure it is (a confidence from 0 to 1)",
            "reply_format": "How the reply is read",
            "reply_pattern": "Reply pattern (regular expression)",
            "postprocess_reference": "Post-process the reference too",
            "per_turn": "Score each turn of a conversation",
        }
        help_texts = {
            "system_prompt": "Blank: the built-in prompt for the kind.",
            "user_prompt": (
                "Blank: the item's inputs, the reference and the response (for pairwise judges "
                "both responses), each in its own tag; for a multi-turn dialogue, the whole "
                "conversation. Use {{ response }} (pairwise: {{ response_a }} and "
                "{{ response_b }}), {{ reference }}, {{ inputs }} and any item field by name. "
                "Dialogues: {{ conversation }} (as MT-Bench writes it; pairwise "
                "{{ conversation_a }} and {{ conversation_b }}), {{ reference_conversation }}, "
                "{{ turns[1].question }}, {{ turns[1].answer }}, {{ turns[1].reference }} and "
                "{{ turn }} (the turn judged). Jinja2 tags work too: "
                '{% if category in ["math", "coding"] %}…{% endif %}.'
            ),
            "n_iter": "LLM judges only; rule-based judges always do one round.",
            "aggregation": "How rounds combine. Mode ties go to the smallest most frequent value.",
            "reply_format": (
                "JSON: an object with every subject. [[N]]: MT-Bench's “Rating: [[8]]”. "
                "[RESULT] N: Prometheus's feedback then “[RESULT] 4”. Score: N/M: “Score: 4/5” "
                "(several subjects: “accuracy: 4/5” each). [[N]], [RESULT] and the last number "
                "score one subject. Reasoning in <think> blocks is set aside and the last "
                "verdict counts."
            ),
            "reply_pattern": (
                "For the regular-expression format: one named group per subject, its name in "
                "lower case with _ for other characters, e.g. Accuracy: (?P<accuracy>\\d+); "
                "optionally (?P<reason>…). The last match counts. (?i) ignores case."
            ),
        }
        field_classes = {"system_prompt": PromptTextField, "user_prompt": PromptTextField}
        widgets = {
            "system_prompt": forms.Textarea(attrs={"rows": 5}),
            "user_prompt": forms.Textarea(attrs={"rows": 5}),
            "reply_pattern": forms.TextInput(
                attrs={"placeholder": r"Accuracy: (?P<accuracy>\d+)", "spellcheck": "false"}
            ),
        }

    def __init__(self, *args: Any, task: Task, editing: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.task = task
        self.editing = editing
        installed = plugins.registry()
        metric_choices: list[Any] = [("", "—")] + [
            (
                m.name,
                f"{m.display_name} ({m.unit}, {'higher' if m.higher_is_better else 'lower'} is better)",
            )
            for m in METRICS.values()
        ]
        post_choices: list[Any] = [("", "none")] + [
            (p.name, p.display_name) for p in POSTPROCESSORS.values()
        ]
        if found := installed.of_kind(plugins.METRIC):
            metric_choices.append(("Python plug-ins", [(p.name, p.label) for p in found]))
        if found := installed.of_kind(plugins.POSTPROCESSOR):
            post_choices.append(("Python plug-ins", [(p.name, p.label) for p in found]))
        cast(forms.ChoiceField, self.fields["metric"]).choices = metric_choices
        cast(forms.ChoiceField, self.fields["postprocess"]).choices = post_choices
        for name, group in (
            ("converter", plugins.CONVERTER),
            ("dataset_metric", plugins.DATASET_METRIC),
        ):
            self.fields[name] = forms.ChoiceField(
                required=False,
                label=self.fields[name].label,
                help_text=self.fields[name].help_text,
                choices=[("", "none")] + [(p.name, p.label) for p in installed.of_kind(group)],
            )
        self.fields["n_iter"].validators += [MinValueValidator(1), MaxValueValidator(20)]
        self.fields["label_count"].validators.append(MinValueValidator(1))
        # Imported scores come with their import (apps/interop), never from this form.
        kind = cast(forms.ChoiceField, self.fields["kind"])
        kind.choices = [c for c in cast(Any, kind.choices) if c[0] != Judge.Kind.IMPORTED]
        # Blank is JSON, as before reply formats existed (older scripts post no format).
        self.fields["reply_format"].required = False
        if self.instance.pk:
            self.initial.setdefault("subjects_text", subjects_text(self.instance.subjects or []))
        if editing:
            self.fields["name"].disabled = True

    def fieldsets(self) -> list[tuple[str, list[str], list[forms.BoundField]]]:
        """(legend, kinds, fields): the settings every kind has, then one group per
        Judge.KIND_FIELDS entry, its legend naming its kinds, so that without JavaScript (which
        hides the groups of other kinds) the form still says which setting is for which kind."""
        grouped = {name for _, names in Judge.KIND_FIELDS for name in names} | {"subjects_text"}
        groups: list[tuple[str, list[str], list[forms.BoundField]]] = [
            ("", [], [self[name] for name in self.fields if name not in grouped]),
            # A pairwise judge says which answer is better: it scores no subjects; a choice
            # judge always gives accuracy and accuracy_norm.
            (
                "Subjects (every kind but pairwise and log-likelihood choices)",
                [
                    str(kind)
                    for kind in Judge.Kind
                    if kind not in (Judge.Kind.PAIRWISE, Judge.Kind.CHOICE, Judge.Kind.IMPORTED)
                ],
                [self["subjects_text"]],
            ),
        ]
        labels = dict(Judge.Kind.choices)
        for kinds, names in Judge.KIND_FIELDS:
            words = [
                w if w.startswith("LLM") else w[0].lower() + w[1:]
                for w in (str(labels[kind]) for kind in kinds)
            ]
            legend = "For " + " and ".join(words) + " judges" + (" only" if len(kinds) == 1 else "")
            groups.append((legend, [str(kind) for kind in kinds], [self[name] for name in names]))
        return groups

    def clean_name(self) -> str:
        name = self.cleaned_data["name"]
        if not self.editing and Judge.objects.filter(task=self.task, name=name).exists():
            raise forms.ValidationError(
                f"A judge named {name} exists in {self.task.slug}; edit it to make a new version."
            )
        return name

    def clean_metric_options(self) -> dict[str, Any]:
        value = self.cleaned_data.get("metric_options") or {}
        if not isinstance(value, dict):
            raise forms.ValidationError('Give a JSON object, e.g. {"ignore_case": false}.')
        return value

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        kind = data.get("kind")
        if not kind or self.errors:
            return data
        try:
            subjects = parse_subjects(data.get("subjects_text") or "")
        except forms.ValidationError as error:
            self.add_error("subjects_text", error)
            return data
        if kind != Judge.Kind.METRIC:
            data["metric"], data["metric_options"], data["postprocess"] = "", {}, ""
            data["postprocess_reference"] = False
            data["converter"], data["dataset_metric"] = "", ""
        if kind not in (Judge.Kind.MCQ, Judge.Kind.MCQ_RULE):
            data["label_type"], data["label_count"] = Judge.LabelType.UPPER, 4
        if kind not in (Judge.Kind.RUBRIC, Judge.Kind.MCQ):
            data["n_iter"] = 1
        data["reply_format"] = data.get("reply_format") or "json"
        if kind != Judge.Kind.RUBRIC:
            data["ask_confidence"] = False
            data["per_turn"] = False
            data["reply_format"], data["reply_pattern"] = "json", ""
        elif data.get("reply_format") != "json" and data.get("ask_confidence"):
            self.add_error(
                "ask_confidence",
                "A confidence is read from JSON replies only: read the reply as JSON, or do not "
                "ask for one.",
            )
            return data
        elif data.get("ask_confidence") and any(
            s["name"].strip().lower() == "confidence" for s in subjects
        ):
            self.add_error(
                "ask_confidence",
                "A subject is named confidence: rename it to ask the judge for its confidence.",
            )
            return data
        if kind not in (Judge.Kind.RUBRIC, Judge.Kind.MCQ, Judge.Kind.PAIRWISE):
            data["system_prompt"], data["user_prompt"] = "", ""
        if kind == Judge.Kind.PAIRWISE:
            # A verdict between two answers, not values per subject: nothing for boards.
            data["subjects"] = []
            self._check_prompts(kind, data)
            return data
        try:
            data["subjects"] = self._subjects(kind, subjects, data)
            if data.get("reply_format") != "regex":
                data["reply_pattern"] = ""
            if data.get("reply_format") not in (None, "json"):
                data["use_structured_output"] = False  # a JSON schema would contradict it
            spec = JudgeSpec(
                kind=kind,
                reply_format=data.get("reply_format") or "json",
                reply_pattern=data.get("reply_pattern") or "",
                subjects=tuple(data["subjects"]),
                label_type=data.get("label_type") or "upper",
                label_count=int(data.get("label_count") or 0),
                metric=data.get("metric") or "",
                metric_options=data.get("metric_options") or {},
                postprocess=data.get("postprocess") or "",
                postprocess_reference=bool(data.get("postprocess_reference")),
                converter=data.get("converter") or "",
            )
            spec.check()
        except ValueError as exc:
            self.add_error(None, str(exc))
            return data
        self._check_prompts(kind, data)
        return data

    def _subjects(
        self, kind: str, subjects: list[dict[str, Any]], data: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """Every judge stores its subjects with ranges, so boards and charts know them."""
        if kind == Judge.Kind.RUBRIC:
            for subject in subjects:
                if "min" not in subject:
                    raise ValueError(f"Subject '{subject['name']}' needs a range, e.g. 1 5.")
            return subjects
        if kind == Judge.Kind.CHOICE:
            return [dict(subject) for subject in CHOICE_SUBJECTS]
        if kind == Judge.Kind.METRIC and data.get("metric") and data["metric"] not in METRICS:
            return plugin_subjects(plugins.registry().get(plugins.METRIC, data["metric"]), subjects)
        if len(subjects) > 1:
            raise ValueError("This kind of judge gives one value: list at most one subject.")
        if kind == Judge.Kind.METRIC:
            if not data.get("metric"):
                raise ValueError("Choose the metric.")
            metric = get_metric(data["metric"])
            name = subjects[0]["name"] if subjects else metric.name
            return [{"name": name, "min": metric.range[0], "max": metric.range[1]}]
        name = subjects[0]["name"] if subjects else "score"
        return [{"name": name, "min": 0, "max": 100}]

    def plugin_list(self) -> list[dict[str, Any]]:
        """The installed plug-ins with their docstrings, shown with the metric settings."""
        return plugins.installed_summary()

    def plugin_problems(self) -> list[str]:
        """Plug-ins that could not be loaded, and why (a missing module, a name taken)."""
        return list(plugins.registry().problems)

    def _check_prompts(self, kind: str, data: dict[str, Any]) -> None:
        known = PROMPT_NAMES.get(kind)
        if known is None:
            return
        columns = {
            column
            for columns in Dataset.objects.filter(task=self.task).values_list("columns", flat=True)
            for column in columns or []
        }
        for field in ("system_prompt", "user_prompt"):
            try:
                check_template(data.get(field) or "", "The prompt")
            except PromptError as exc:
                self.add_error(field, str(exc))
                continue
            used = placeholders(data.get(field) or "")
            unknown = [name for name in used if name not in known and name not in columns]
            if unknown and columns:
                names = ", ".join("{{ %s }}" % name for name in unknown)  # noqa: UP031
                available = ", ".join(sorted(known | columns))
                self.add_error(
                    field,
                    f"Uses {names}, which neither the judge nor any dataset of this task has; "
                    f"available: {available}.",
                )
        user = data.get("user_prompt") or ""
        named = set(placeholders(user))
        shows = _SHOWS_RESPONSES.get(kind, _SHOWS_RESPONSE)
        if user.strip() and "user_prompt" not in self.errors and not any(s <= named for s in shows):
            closest = min(shows, key=lambda names: len(names - named))
            missing = sorted(closest - named)
            names = " and ".join("{{ %s }}" % name for name in missing)  # noqa: UP031
            self.add_error("user_prompt", f"Include {names}: the judge must see the responses.")

    def build(self) -> Judge:
        """The judge as an unsaved row (save it with `save_as_new_version`)."""
        judge = self.save(commit=False)
        judge.task = self.task
        judge.subjects = self.cleaned_data["subjects"]
        for name in (
            "metric",
            "metric_options",
            "postprocess",
            "postprocess_reference",
            "converter",
            "dataset_metric",
            "label_type",
            "label_count",
        ):
            setattr(judge, name, self.cleaned_data[name])
        # The plug-ins' code as it is now: the version scores with this code only.
        judge.plugin_code = (
            plugins.code_record(self.cleaned_data) if judge.kind == Judge.Kind.METRIC else {}
        )
        for name in ("n_iter", "system_prompt", "user_prompt"):
            setattr(judge, name, self.cleaned_data[name])
        return judge


class JudgeRunForm(CostFields):
    """Start a judge run: which responses, which endpoint (LLM judges), cache and budget,
    how to log."""

    responses = forms.ChoiceField(label="Responses to judge")
    endpoint = forms.ModelChoiceField(queryset=Endpoint.objects.all(), required=False)
    label = forms.CharField(
        required=False, max_length=200, help_text="The model's name on leaderboards (optional)."
    )
    logging_mode = forms.ChoiceField(
        choices=LoggingMode.choices, initial=LoggingMode.FAILED, label="Keep attempt logs"
    )
    chunk_size = forms.IntegerField(
        initial=200, validators=[MinValueValidator(1), MaxValueValidator(100_000)]
    )
    batch = batch_field()
    field_order = [
        "responses",
        "endpoint",
        "label",
        "use_cache",
        "budget_usd",
        "logging_mode",
        "chunk_size",
        "batch",
    ]

    def __init__(self, *args: Any, judge: Judge, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.judge = judge
        cast(forms.ChoiceField, self.fields["responses"]).choices = response_choices(
            judge.task, choices_only=judge.kind == Judge.Kind.CHOICE
        )
        if judge.uses_llm:
            self.fields["endpoint"].required = True
            # The task's judging endpoint, else the only endpoint there is.
            only = list(Endpoint.objects.values_list("pk", flat=True)[:2])
            self.fields["endpoint"].initial = TaskJudging.of(
                judge.task_id
            ).default_judge_endpoint_id or (only[0] if len(only) == 1 else None)
        else:
            del self.fields["endpoint"]
            del self.fields["batch"]

    def clean(self) -> dict[str, Any]:
        super().clean()
        check_batch(self, self.cleaned_data.get("endpoint"))
        self.check_budget(self.cleaned_data.get("endpoint") if self.judge.uses_llm else None)
        return self.cleaned_data

    def unsaved_run(self) -> Run:
        """The run these choices make, unsaved (for the cost estimate)."""
        source = self.source()
        run = source.get("source_run")
        unsaved = Run(
            task=self.judge.task,
            kind=Run.Kind.JUDGE,
            dataset=run.dataset if run is not None else source["dataset"],
            endpoint=self.cleaned_data.get("endpoint") if self.judge.uses_llm else None,
            source_run=run,
            source_column=source.get("source_column", ""),
            use_cache=self.cache_choice() is not False,
        )
        unsaved.judged_with = JudgeRun(run=unsaved, judge=self.judge)
        return unsaved

    def source(self) -> dict[str, Any]:
        """create_judge_run's source arguments for the chosen responses."""
        value = self.cleaned_data["responses"]
        kind, _, rest = value.partition(":")
        if kind == "run":
            return {"source_run": Run.objects.get(pk=int(rest))}
        dataset_id, _, column = rest.partition(":")
        return {"dataset": Dataset.objects.get(pk=int(dataset_id)), "source_column": column}


class PairwiseRunForm(CostFields):
    """Start a pairwise run: which response sets of one dataset (generation runs or response
    columns of the file), a baseline or every pair."""

    responses = forms.MultipleChoiceField(
        widget=forms.CheckboxSelectMultiple,
        label="Response sets to compare",
        help_text="Two or more generation runs or response columns of the same dataset "
        "(runs with several epochs are compared on their first answer to each item).",
    )
    baseline = forms.ChoiceField(
        required=False, help_text="Compare each response set with this one only."
    )
    endpoint = forms.ModelChoiceField(queryset=Endpoint.objects.all())
    logging_mode = forms.ChoiceField(
        choices=LoggingMode.choices, initial=LoggingMode.FAILED, label="Keep attempt logs"
    )
    batch = batch_field()
    field_order = [
        "responses",
        "baseline",
        "endpoint",
        "use_cache",
        "budget_usd",
        "logging_mode",
        "batch",
    ]

    def __init__(self, *args: Any, judge: Judge, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.judge = judge
        runs = [
            (f"run:{run.pk}", f"#{run.pk} {run.label} · {run.dataset}")
            for run in Run.objects.generation()
            .filter(task=judge.task, status__in=Run.TERMINAL_STATUSES)
            .select_related("dataset")
            .order_by("-pk")[:200]
        ]
        columns = [
            (source, f"column {column} · {dataset}")
            for dataset in Dataset.objects.ready().filter(task=judge.task).order_by("-pk")
            for column, source in dataset.response_sources
        ]
        cast(forms.ChoiceField, self.fields["responses"]).choices = runs + columns
        cast(forms.ChoiceField, self.fields["baseline"]).choices = [
            ("", "None: every pair"),
            *runs,
            *columns,
        ]
        only = list(Endpoint.objects.values_list("pk", flat=True)[:2])
        self.fields["endpoint"].initial = TaskJudging.of(
            judge.task_id
        ).default_judge_endpoint_id or (only[0] if len(only) == 1 else None)

    def clean(self) -> dict[str, Any]:
        super().clean()
        check_batch(self, self.cleaned_data.get("endpoint"))
        self.check_budget(self.cleaned_data.get("endpoint"))
        return self.cleaned_data

    def response_sets(self) -> tuple[list[str], str]:
        """The chosen sources ("run:ID" or "column:DATASET:COLUMN") and the baseline's."""
        return list(self.cleaned_data["responses"]), self.cleaned_data.get("baseline") or ""


def response_choices(task: Task, choices_only: bool = False) -> list[tuple[str, Any]]:
    """The task's response sets: generation and choice-scoring runs that have ended, and
    response columns; `choices_only`: choice-scoring runs (what a choice judge scores)."""
    kinds = [Run.Kind.CHOICE] if choices_only else list(Run.JUDGEABLE_KINDS)
    runs = [
        (f"run:{run.pk}", f"Run #{run.pk} {run.label} ({run.get_status_display().lower()})")
        for run in Run.objects.filter(kind__in=kinds, task=task)
        .exclude(status__in=Run.ACTIVE_STATUSES)
        .order_by("-pk")[:200]
    ]
    columns = [
        (source, f"{dataset} · column {column}")
        for dataset in Dataset.objects.ready().filter(task=task).order_by("name", "-version")
        for column, source in dataset.response_sources
        if not choices_only
    ]
    choices: list[tuple[str, Any]] = []
    if runs:
        choices.append(("Runs", runs))
    if columns:
        choices.append(("Response columns of datasets", columns))
    return choices


class DefaultJudgeForm(forms.Form):
    """Evaluate every model: the judge (and endpoint) each new response set gets by itself."""

    judge = forms.ModelChoiceField(
        queryset=Judge.objects.none(), required=False, empty_label="— none (judge by hand) —"
    )
    endpoint = forms.ModelChoiceField(
        queryset=Endpoint.objects.all(),
        required=False,
        empty_label="—",
        help_text="Needed for LLM judges.",
    )

    def __init__(self, *args: Any, task: Task, **kwargs: Any) -> None:
        judging = TaskJudging.of(task.pk)
        kwargs.setdefault(
            "initial",
            {"judge": judging.default_judge_id, "endpoint": judging.default_judge_endpoint_id},
        )
        super().__init__(*args, **kwargs)
        self.task = task
        cast(forms.ModelChoiceField, self.fields["judge"]).queryset = (
            Judge.objects.filter(task=task).latest_versions().order_by("name")
        )

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        judge = data.get("judge")
        if judge is not None and judge.uses_llm and data.get("endpoint") is None:
            self.add_error("endpoint", f"{judge} is an LLM judge: choose the endpoint that judges.")
        return data

    def save(self) -> None:
        judge = self.cleaned_data["judge"]
        TaskJudging.for_task(self.task).choose(
            judge, self.cleaned_data["endpoint"] if judge else None
        )
