from collections import abc
from typing import Any, cast

from django import forms
from django.conf import settings
from django.db.models import QuerySet

from apps.accounts.models import Project
from apps.datasets.importing import Mapping
from apps.datasets.models import Task
from apps.datasets.perturb import PERTURBATIONS
from apps.datasets.readers import DatasetError

FORMAT_CHOICES = [
    ("", "Detect from the file"),
    ("csv", "CSV"),
    ("json", "JSON"),
    ("jsonl", "JSONL"),
    ("xlsx", "Excel (.xlsx)"),
    ("parquet", "Parquet"),
]


class TaskForm(forms.ModelForm):
    """A new task, in one of the projects where its maker is a reviewer (`projects`); with
    only one, the field may be left out."""

    project = forms.ModelChoiceField(
        queryset=Project.objects.none(),
        required=False,
        help_text="Its members see the task and everything in it.",
    )

    class Meta:
        model = Task
        fields = ["project", "slug", "name", "description"]
        help_texts = {"slug": "Lowercase letters, digits and dashes, e.g. support-qa."}

    def __init__(self, *args: Any, projects: "QuerySet[Project]", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["project"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = projects
        choices = list(projects[:2])
        if len(choices) == 1:
            field.initial = choices[0]

    def clean_project(self) -> Project:
        project = self.cleaned_data.get("project")
        if project is not None:
            return project
        choices = list(self.fields["project"].queryset[:2])  # type: ignore[attr-defined]
        if len(choices) == 1:
            return choices[0]
        if not choices:
            raise forms.ValidationError("You are a reviewer in no project: ask an admin.")
        raise forms.ValidationError("Choose the project the task belongs to.")


class PerturbForm(forms.Form):
    perturbation = forms.ChoiceField(
        choices=[(p.name, f"{p.label}: {p.description}") for p in PERTURBATIONS.values()]
    )
    seed = forms.IntegerField(
        initial=0,
        min_value=0,
        max_value=2**31 - 1,
        widget=forms.NumberInput(attrs={"style": "width: 7rem"}),
    )


class UploadForm(forms.Form):
    file = forms.FileField(
        allow_empty_file=True,
        help_text="CSV, JSON (a list of objects), JSONL (one object a line), Excel (.xlsx) or "
        "Parquet.",
    )
    format = forms.ChoiceField(choices=FORMAT_CHOICES, required=False)
    name = forms.CharField(
        max_length=200,
        required=False,
        help_text="Leave empty to use the file name. An existing name makes a new version.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Lets the browser refuse a too-big file before sending it; the server checks again.
        self.fields["file"].widget.attrs["data-max-bytes"] = settings.DATASET_MAX_UPLOAD_BYTES


# The mapping form's fields besides the list roles (name, format, id, reference, tags, the CSRF
# token), with room to spare.
OTHER_FIELDS = 10


def checkbox_columns() -> int | None:
    """The widest file whose input and response columns are ticked in checkboxes (None: any).

    A browser sends one field per ticked box, and Django answers a bare "Bad Request (400)",
    before any view runs, to a post of more than DATA_UPLOAD_MAX_NUMBER_FIELDS fields. So
    every box of both lists ticked must stay under that limit; wider files name their columns
    in one text field per role, which maps any width in a bounded number of fields.
    """
    limit = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
    return None if limit is None else max(0, (limit - OTHER_FIELDS) // 2)


class ColumnNameField(forms.CharField):
    """Columns named in text, for a file too wide to choose from lists: one name, or (`many`)
    one per line in one field. The mapping's own check names any that are not in the file."""

    def __init__(self, *args: Any, columns: list[str], many: bool = False, **kwargs: Any) -> None:
        widget = (
            forms.Textarea(attrs={"rows": 6, "spellcheck": "false"})
            if many
            else forms.TextInput(attrs={"list": "column-names", "autocomplete": "off"})
        )
        super().__init__(*args, widget=widget, strip=False, required=False, **kwargs)
        self.columns = set(columns)
        self.many = many

    def prepare_value(self, value: Any) -> Any:
        return "\n".join(value) if isinstance(value, list | tuple) else value

    def to_python(self, value: Any) -> Any:
        # CSV headers are stripped when read, JSON keys are kept as written: a name matches as
        # typed, else without the spaces around it.
        lines = [
            line if line in self.columns else line.strip() for line in str(value or "").splitlines()
        ]
        names = [name for name in lines if name]
        return names if self.many else (names[0] if names else "")


SINGLE_FIELDS = ("id_column", "reference_column", "tags_column", "conversation_column")


class MappingForm(forms.Form):
    """Which columns of the file are the id, inputs, reference, tags and responses."""

    name = forms.CharField(max_length=200)
    format = forms.ChoiceField(choices=FORMAT_CHOICES[1:], widget=forms.HiddenInput)
    sheet = forms.CharField(required=False, widget=forms.HiddenInput)
    id_column = forms.ChoiceField(
        required=False, label="Id column", help_text="Leave empty to use the row position."
    )
    input_columns = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Input columns",
        help_text="What a prompt may use. None ticked: every column not mapped below, except "
        "those named like a reference answer.",
    )
    reference_column = forms.ChoiceField(required=False, label="Reference answer column")
    tags_column = forms.ChoiceField(
        required=False, label="Tags column", help_text="A list, or text split on , or ;"
    )
    response_columns = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Response columns",
        help_text="Answers some model already gave: each can be judged without generating.",
    )
    conversation_column = forms.ChoiceField(
        required=False,
        label="Conversation column",
        help_text="Chat messages (role/content), MT-Bench turns or ShareGPT from/value; with "
        "it, a reference column may hold one reference per user turn.",
    )

    def __init__(self, *args: Any, columns: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.columns = columns
        choices = [(name, name) for name in columns]
        for name in SINGLE_FIELDS:
            cast(forms.ChoiceField, self.fields[name]).choices = [("", "—"), *choices]
        widest = checkbox_columns()
        self.wide = widest is not None and len(columns) > widest
        if not self.wide:
            for name in ("input_columns", "response_columns"):
                cast(forms.ChoiceField, self.fields[name]).choices = choices
            return
        # Too wide to tick: every role is typed (the single ones with the file's column names
        # to pick from), and a select of thousands of options would make a slow page too.
        for name in SINGLE_FIELDS:
            old = self.fields[name]
            self.fields[name] = ColumnNameField(
                columns=columns, label=old.label, help_text=old.help_text
            )
        many = f"This file has {len(columns):,} columns, too many to tick: write their names"
        self.fields["input_columns"] = ColumnNameField(
            columns=columns,
            many=True,
            label="Input columns",
            help_text=f"{many}, one per line. Empty: every column not mapped elsewhere, except "
            "those named like a reference answer.",
        )
        self.fields["response_columns"] = ColumnNameField(
            columns=columns,
            many=True,
            label="Response columns",
            help_text=f"{many}, one per line: answers some model already gave.",
        )
        # An empty input list means every unmapped column: say that with an empty box rather
        # than send thousands of names to the browser and back.
        if self.initial.get("input_columns") == self._unmapped(self.initial):
            self.initial = {**self.initial, "input_columns": []}

    def _unmapped(self, data: abc.Mapping[str, Any]) -> list[str]:
        mapped = {data.get(key) for key in ("id_column", "reference_column", "tags_column")}
        mapped.update(data.get("response_columns") or [])
        return [name for name in self.columns if name not in mapped]

    @staticmethod
    def initial_for(mapping: Mapping, name: str, fmt: str, sheet: str = "") -> dict[str, Any]:
        return {"name": name, "format": fmt, "sheet": sheet, **mapping.to_dict()}

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        try:
            data["mapping"] = Mapping.from_dict(data).validated(self.columns, data.get("sheet", ""))
        except DatasetError as exc:
            raise forms.ValidationError(str(exc)) from None
        return data
