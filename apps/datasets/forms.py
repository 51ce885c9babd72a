from typing import Any

from django import forms
from django.conf import settings

from apps.datasets.importing import Mapping
from apps.datasets.models import Task
from apps.datasets.readers import DatasetError

FORMAT_CHOICES = [
    ("", "Detect from the file"),
    ("csv", "CSV"),
    ("json", "JSON"),
    ("jsonl", "JSONL"),
]


class TaskForm(forms.ModelForm):
    class Meta:
        model = Task
        fields = ["slug", "name", "description"]
        help_texts = {"slug": "Lowercase letters, digits and dashes, e.g. support-qa."}


class UploadForm(forms.Form):
    file = forms.FileField(
        allow_empty_file=True,
        help_text="CSV, JSON (a list of objects) or JSONL (one object a line).",
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


class MappingForm(forms.Form):
    """Which columns of the file are the id, inputs, reference, tags and responses."""

    name = forms.CharField(max_length=200)
    format = forms.ChoiceField(choices=FORMAT_CHOICES[1:], widget=forms.HiddenInput)
    id_column = forms.ChoiceField(
        required=False, label="Id column", help_text="Leave empty to use the row position."
    )
    input_columns = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Input columns",
        help_text="What a prompt may use. None ticked: every column not mapped below.",
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

    def __init__(self, *args: Any, columns: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.columns = columns
        choices = [(name, name) for name in columns]
        for name in ("id_column", "reference_column", "tags_column"):
            self.fields[name].choices = [("", "—"), *choices]
        for name in ("input_columns", "response_columns"):
            self.fields[name].choices = choices

    @staticmethod
    def initial_for(mapping: Mapping, name: str, fmt: str) -> dict[str, Any]:
        return {"name": name, "format": fmt, **mapping.to_dict()}

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        try:
            data["mapping"] = Mapping.from_dict(data).validated(self.columns)
        except DatasetError as exc:
            raise forms.ValidationError(str(exc)) from None
        return data
