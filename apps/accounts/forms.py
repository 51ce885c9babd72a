from django import forms

from apps.accounts.models import ApiToken


class ApiTokenForm(forms.ModelForm):
    class Meta:
        model = ApiToken
        fields = ["name"]
        help_texts = {"name": "What it is for, e.g. “nightly eval script”."}
