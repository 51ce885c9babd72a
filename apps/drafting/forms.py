from typing import Any

from django import forms

from apps.datasets.models import Task
from apps.drafting.models import Generator
from apps.runs.forms import PromptTextField
from apps.runs.models import Endpoint, LoggingMode
from apps.runs.prompts import validate_template_sources


class GeneratorForm(forms.ModelForm):
    """A generator's three prompts; editing one saves the next version."""

    class Meta:
        model = Generator
        fields = ["name", "system_message", "content_prompt", "questions_prompt", "answers_prompt"]
        field_classes = {
            "system_message": PromptTextField,
            "content_prompt": PromptTextField,
            "questions_prompt": PromptTextField,
            "answers_prompt": PromptTextField,
        }
        help_texts = {
            "system_message": "Sent before each of the three prompts (optional).",
            "content_prompt": "What to write about, e.g. ten facts about a fictional world. "
            "{{ unit }} is the unit's number (1…N), {{ count }} is N.",
            "questions_prompt": "Questions about {{ content }}; ask for a numbered list (or a "
            "JSON list), one question per fact. Without {{ content }} it follows the content "
            'reply in one conversation, as in GoodAI\'s LTM prompts ("from the content above").',
            "answers_prompt": "The expected answer to each of {{ questions }} (a numbered list) "
            "about {{ content }}, as a numbered list in the same order. Without {{ questions }} "
            "it continues the conversation.",
        }
        widgets = {
            "system_message": forms.Textarea(attrs={"rows": 2}),
            "content_prompt": forms.Textarea(attrs={"rows": 4}),
            "questions_prompt": forms.Textarea(attrs={"rows": 5}),
            "answers_prompt": forms.Textarea(attrs={"rows": 5}),
        }

    def __init__(self, *args: Any, task: Task, editing: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.task = task
        if editing:
            self.fields["name"].disabled = True

    def clean_name(self) -> str:
        name = self.cleaned_data["name"]
        if (
            not self.fields["name"].disabled
            and Generator.objects.filter(task=self.task, name=name).exists()
        ):
            raise forms.ValidationError(
                "A generator with this name exists in this task; edit it to make a new version."
            )
        return name

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        for error in validate_template_sources(
            ("System message", data.get("system_message") or ""),
            ("Content prompt", data.get("content_prompt") or ""),
            ("Questions prompt", data.get("questions_prompt") or ""),
            ("Answers prompt", data.get("answers_prompt") or ""),
        ):
            self.add_error(None, error)
        return data


class DatasetGenerationForm(forms.Form):
    endpoint = forms.ModelChoiceField(queryset=Endpoint.objects.all())
    count = forms.IntegerField(
        min_value=1,
        max_value=1000,
        initial=10,
        label="Units",
        help_text="How many times to ask the three prompts; each unit's questions become items. "
        "With a seed on the endpoint, unit i is asked with seed + i.",
    )
    name = forms.CharField(
        required=False,
        max_length=200,
        label="Dataset name",
        help_text="Blank: the generator's name (a new version when it exists).",
    )
    logging_mode = forms.ChoiceField(choices=LoggingMode.choices, initial=LoggingMode.FAILED)


class DraftItemForm(forms.Form):
    content = PromptTextField(widget=forms.Textarea(attrs={"rows": 5}))
    question = PromptTextField(widget=forms.Textarea(attrs={"rows": 2}))
    reference = PromptTextField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
