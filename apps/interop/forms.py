from typing import Any

from django import forms

from apps.interop.models import Import


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """Several files in one field (Django's documented recipe)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data: Any, initial: Any = None) -> Any:
        single = super().clean
        if isinstance(data, list | tuple):
            return [single(d, initial) for d in data]
        return [single(data, initial)]


class ImportForm(forms.Form):
    tool = forms.ChoiceField(choices=Import.Tool.choices)
    uploads = MultipleFileField(
        help_text=(
            "Inspect AI: one log per model (.eval or .json). promptfoo: results.json. "
            "lm-eval: the samples_*.jsonl and results_*.json files. "
            "OpenAI Evals: oaieval's run log (.jsonl) per model."
        )
    )
    name = forms.CharField(
        max_length=200, required=False, help_text="Blank: the task name the files give."
    )
