from django import forms

from apps.datasets.models import Task


class TaskForm(forms.ModelForm):
    class Meta:
        model = Task
        fields = ["slug", "name", "description"]
        help_texts = {"slug": "Lowercase letters, digits and dashes, e.g. support-qa."}
