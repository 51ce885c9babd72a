"""Forms of notifications: a webhook's URL and secret are write-only (left blank, an edit keeps
them), like an endpoint's API key."""

from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator

from apps.notifications.models import (
    CHOSEN_EVENTS,
    EmailAlert,
    Webhook,
    new_secret,
    secret_key,
)

WEB_URL = URLValidator(schemes=["http", "https"])


class EventsField(forms.MultipleChoiceField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            choices=CHOSEN_EVENTS,
            widget=forms.CheckboxSelectMultiple,
            error_messages={"required": "Choose at least one event."},
            **kwargs,
        )


class WebhookForm(forms.ModelForm):
    events = EventsField()
    url = forms.URLField(
        required=False,
        max_length=2000,
        label="URL",
        widget=forms.URLInput(attrs={"autocomplete": "off"}),
        assume_scheme="https",
        validators=[WEB_URL],
    )
    new_secret = forms.CharField(
        required=False,
        strip=True,
        label="Secret",
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Blank: evalsite makes one (a new webhook) or keeps the one it has. "
        "Shown once, on the page after saving.",
    )
    renew_secret = forms.BooleanField(required=False, label="Make a new secret")

    field_order = ["name", "url", "events", "payload", "new_secret", "renew_secret", "active"]

    class Meta:
        model = Webhook
        fields = ["name", "events", "payload", "active"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields[
                "url"
            ].help_text = (
                f"Now {self.instance.url_shown}; blank keeps it (the whole URL is never shown)."
            )
        else:
            del self.fields["renew_secret"]
        self.made_secret = ""

    def clean_url(self) -> str:
        url = self.cleaned_data["url"]
        if not url and not self.instance.pk:
            raise ValidationError("Give the URL to send to.")
        return url

    def clean_new_secret(self) -> str:
        secret = self.cleaned_data["new_secret"]
        if secret:
            secret_key(secret)  # a ValidationError names what is wrong
        return secret

    def save(self, commit: bool = True) -> Webhook:
        webhook: Webhook = super().save(commit=False)
        if self.cleaned_data["url"]:
            webhook.url = self.cleaned_data["url"]
        if self.cleaned_data["new_secret"]:
            webhook.secret = self.cleaned_data["new_secret"]  # they know it: not shown back
        elif not webhook.secret or self.cleaned_data.get("renew_secret"):
            webhook.secret = self.made_secret = new_secret()
        if commit:
            webhook.save()
        return webhook


class EmailAlertForm(forms.ModelForm):
    events = EventsField()

    class Meta:
        model = EmailAlert
        fields = ["name", "addresses", "events", "active"]
        widgets = {"addresses": forms.Textarea(attrs={"rows": 2})}
