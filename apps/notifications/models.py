"""Notifications (#32.3): what happened in a project (a `Notice`), where the project wants to
hear of it (a `Webhook`, signed, or an `EmailAlert`), and each attempt to tell one of them (a
`Delivery`, retried with backoff from a worker: apps/notifications/delivery.py)."""

import base64
import secrets
import uuid
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import models
from django.db.models import F, Q
from django.utils import timezone

from apps.accounts.models import Project, User
from apps.datasets.models import Task


class Event(models.TextChoices):
    """The kinds of notice; the value is the `type` of a webhook's JSON and its event header."""

    RUN_FINISHED = "run.finished", "Run finished"
    RUN_FAILED = "run.failed", "Run failed"
    RUN_BUDGET = "run.budget_stopped", "Run stopped by its budget"
    AGREEMENT = "agreement.below_threshold", "Judge agreement below the task's threshold"
    GATE = "gate.result", "Release gate result"
    # Sent by a person from the page, to one destination, to see that it works.
    TEST = "test", "Test message"


# The events a destination may choose (a test message goes to the one it is sent to).
CHOSEN_EVENTS = [(value, label) for value, label in Event.choices if value != Event.TEST]


SECRET_PREFIX = "whsec_"
SECRET_BYTES = 24


def new_secret() -> str:
    """A signing secret in Standard Webhooks' form: whsec_ and base64 of random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def secret_key(secret: str) -> bytes:
    """The HMAC key a secret stands for (Standard Webhooks: base64 after the whsec_ prefix)."""
    text = secret.removeprefix(SECRET_PREFIX)
    try:
        key = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except ValueError:
        raise ValidationError(
            "A secret is whsec_ and base64 (as evalsite makes them); leave it blank for a new one."
        ) from None
    if len(key) < 16:
        raise ValidationError("A secret needs at least 16 bytes (24 base64 characters).")
    return key


def validate_events(value: Any) -> None:
    known = {value for value, _ in CHOSEN_EVENTS}
    if not isinstance(value, list) or not value or not set(value) <= known:
        raise ValidationError("Choose at least one event.")


class Destination(models.Model):
    """What a webhook and an email alert share: the project, the events, on or off."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=100)
    events = models.JSONField(default=list, validators=[validate_events])
    active = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True
        ordering = ["name", "pk"]

    def __str__(self) -> str:
        return self.name

    def wants(self, event: str) -> bool:
        return self.active and event in self.events

    @property
    def event_labels(self) -> list[str]:
        return [Event(e).label for e in self.events if e in Event.values]


class Webhook(Destination):
    """An HTTPS endpoint told of the project's events by a signed POST (Standard Webhooks'
    headers: webhook-id, webhook-timestamp, webhook-signature). Its URL and secret are
    write-only: a page shows the URL's origin only (a Slack URL is itself a credential) and
    never the secret after the page that made it."""

    class Payload(models.TextChoices):
        JSON = "json", "evalsite JSON"
        SLACK = "slack", 'Slack-compatible ({"text": …})'

    url = models.URLField(max_length=2000)
    secret = models.CharField(max_length=200)
    payload = models.CharField(max_length=8, choices=Payload.choices, default=Payload.JSON)

    @property
    def url_shown(self) -> str:
        """The URL with its path hidden: https://hooks.slack.com/…"""
        parts = urlsplit(self.url)
        hidden = "/…" if parts.path.strip("/") or parts.query else ""
        return f"{parts.scheme}://{parts.netloc}{hidden}"


class EmailAlert(Destination):
    """Addresses mailed the project's events through Django's mail settings (EMAIL_* in
    .env.example)."""

    addresses = models.TextField(help_text="One or more addresses, separated by commas.")

    @property
    def address_list(self) -> list[str]:
        return [a.strip() for a in self.addresses.replace("\n", ",").split(",") if a.strip()]

    def clean(self) -> None:
        found = self.address_list
        if not found:
            raise ValidationError({"addresses": "Give at least one address."})
        for address in found:
            try:
                validate_email(address)
            except ValidationError:
                raise ValidationError({"addresses": f"{address!r} is not an address."}) from None


class Notice(models.Model):
    """One thing that happened in a project, told to every destination that wants its event.
    `key` names the occurrence (a run's launch, an alarm's week), so that telling it twice
    (a job run twice, a signal sent again) makes no second notice."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    task = models.ForeignKey(
        Task, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    event = models.CharField(max_length=40, choices=Event.choices)
    key = models.CharField(max_length=200)
    title = models.CharField(max_length=300)  # one line: an email's subject, Slack's first line
    text = models.TextField()  # plain words: an email's body, Slack's message
    data = models.JSONField(default=dict)  # the webhook JSON's `data`
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(fields=["project", "key"], name="one_notice_per_occurrence")
        ]

    def __str__(self) -> str:
        return self.title


# Seconds to wait after each failed attempt: the sixth failure gives up (~8 h after the
# first), as Stripe and GitHub keep trying for hours, not seconds.
RETRY_DELAYS = (30, 120, 600, 3600, 4 * 3600)
MAX_ATTEMPTS = len(RETRY_DELAYS) + 1


def retry_delay(attempts: int) -> timedelta:
    """How long after its `attempts`-th failed attempt a delivery is tried again."""
    return timedelta(seconds=RETRY_DELAYS[min(attempts, len(RETRY_DELAYS)) - 1])


class DeliveryQuerySet(models.QuerySet["Delivery"]):
    def due(self, now: datetime) -> "DeliveryQuerySet":
        return self.filter(state=Delivery.State.PENDING, next_attempt_at__lte=now)

    def of_project(self, project: Project) -> "DeliveryQuerySet":
        return self.filter(notice__project=project)


class Delivery(models.Model):
    """Telling one destination of one notice: the attempts so far and how the last one went.
    A pending delivery is tried at `next_attempt_at`; each attempt claims it by its count of
    attempts, so a job run twice sends once."""

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        DELIVERED = "delivered", "Delivered"
        FAILED = "failed", "Gave up"

    notice = models.ForeignKey(Notice, on_delete=models.CASCADE, related_name="deliveries")
    webhook = models.ForeignKey(
        Webhook, null=True, blank=True, on_delete=models.CASCADE, related_name="deliveries"
    )
    email = models.ForeignKey(
        EmailAlert, null=True, blank=True, on_delete=models.CASCADE, related_name="deliveries"
    )
    # The webhook-id header: the same on every attempt, so a receiver can drop a repeat.
    message_id = models.CharField(max_length=40, unique=True, default="", editable=False)
    state = models.CharField(max_length=12, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    response_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)  # the last attempt's, in one line
    delivered_at = models.DateTimeField(null=True, blank=True)

    objects = DeliveryQuerySet.as_manager()

    class Meta:
        ordering = ["-pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(webhook__isnull=False, email__isnull=True)
                | Q(webhook__isnull=True, email__isnull=False),
                name="delivery_to_one_destination",
            ),
            models.UniqueConstraint(fields=["notice", "webhook"], name="one_delivery_per_webhook"),
            models.UniqueConstraint(fields=["notice", "email"], name="one_delivery_per_email"),
        ]

    def __str__(self) -> str:
        return f"{self.notice.event} to {self.destination}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self.message_id:
            self.message_id = f"msg_{uuid.uuid4().hex}"
        super().save(*args, **kwargs)

    @property
    def destination(self) -> Webhook | EmailAlert:
        return self.webhook if self.webhook is not None else self.email  # type: ignore[return-value]

    def claim(self, now: datetime) -> bool:
        """Take the next attempt (False: delivered, given up, not due, or taken by another job)."""
        taken = Delivery.objects.filter(
            pk=self.pk, state=self.State.PENDING, attempts=self.attempts, next_attempt_at__lte=now
        ).update(attempts=F("attempts") + 1, last_attempt_at=now)
        self.refresh_from_db()
        return bool(taken)

    def succeeded(self, code: int | None, now: datetime) -> None:
        self._record(state=self.State.DELIVERED, response_code=code, error="", delivered_at=now)

    def failed(self, error: str, code: int | None, now: datetime) -> None:
        """The attempt failed: try again after the backoff, or give up after MAX_ATTEMPTS."""
        if self.attempts >= MAX_ATTEMPTS:
            self._record(state=self.State.FAILED, response_code=code, error=error[:500])
        else:
            self._record(
                response_code=code,
                error=error[:500],
                next_attempt_at=now + retry_delay(self.attempts),
            )

    def send_again(self, now: datetime) -> None:
        """A person asks for one more try now (after giving up, or instead of waiting)."""
        self._record(state=self.State.PENDING, next_attempt_at=now)

    def _record(self, **fields: Any) -> None:
        Delivery.objects.filter(pk=self.pk).update(**fields)
        self.refresh_from_db()
