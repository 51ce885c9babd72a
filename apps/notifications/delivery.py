"""Telling a destination of a notice: one attempt (`attempt`), signed for webhooks.

A webhook gets a POST with Standard Webhooks' headers (https://www.standardwebhooks.com/), so
that a receiver can check it with that spec's libraries or a few lines of its own:

    webhook-id: msg_…           the same on every attempt of one delivery (drop repeats by it)
    webhook-timestamp: 1764391200   seconds since 1970, when this attempt was signed
    webhook-signature: v1,<base64 of HMAC-SHA256(key, "<id>.<timestamp>.<body>")>

where key is the base64 after the secret's whsec_ prefix, decoded. A receiver recomputes the
HMAC over the raw body, compares in constant time, and refuses a timestamp more than five
minutes away from its clock (a replay). `X-Evalsite-Event` names the event too.

Any 2xx answer delivers; anything else (a status, a refused connection, no answer within
settings.NOTIFY_TIMEOUT) fails the attempt, and the delivery is tried again after its backoff
(models.RETRY_DELAYS). Redirects are not followed: a webhook's URL is where it goes.
"""

import base64
import hashlib
import hmac
import json
import time
from datetime import datetime

import httpx2
from django.conf import settings
from django.core.mail import send_mail

from apps.notifications.models import Delivery, EmailAlert, Notice, Webhook, secret_key

USER_AGENT = "evalsite-webhooks/1"


def signature(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """The webhook-signature header's value (Standard Webhooks, v1)."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return f"v1,{base64.b64encode(digest).decode()}"


def webhook_body(notice: Notice, webhook: Webhook) -> bytes:
    if webhook.payload == Webhook.Payload.SLACK:
        return json.dumps({"text": slack_text(notice)}).encode()
    return json.dumps(
        {
            "type": notice.event,
            "timestamp": notice.created_at.isoformat(),
            "project": notice.project.slug,
            "task": notice.task.slug if notice.task else None,
            "title": notice.title,
            "data": notice.data,
        },
        sort_keys=True,
    ).encode()


def slack_text(notice: Notice) -> str:
    """Slack's mrkdwn: the title in bold, then the text. Names come from people and models:
    &, < and > are escaped as Slack asks, so none can make a link or a mention."""
    return f"*{_slack_escape(notice.title)}*\n{_slack_escape(notice.text)}"


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def attempt(delivery: Delivery, now: datetime) -> bool | None:
    """Make the delivery's next attempt if it is due and no other job took it, and record how
    it went: True delivered, False failed, None not attempted."""
    if not delivery.claim(now):
        return None
    notice = Notice.objects.select_related("project", "task").get(pk=delivery.notice_id)
    webhook, email = delivery.webhook, delivery.email
    if webhook is not None:
        ok, code, error = _post(notice, webhook, delivery)
    elif email is not None:
        ok, code, error = _mail(notice, email)
    else:  # its destination was deleted as it was claimed
        return None
    if ok:
        delivery.succeeded(code, now)
    else:
        delivery.failed(error, code, now)
    return ok


def _post(notice: Notice, webhook: Webhook, delivery: Delivery) -> tuple[bool, int | None, str]:
    body = webhook_body(notice, webhook)
    timestamp = int(time.time())
    headers = {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        "webhook-id": delivery.message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(webhook.secret, delivery.message_id, timestamp, body),
        "x-evalsite-event": notice.event,
    }
    try:
        answer = httpx2.post(
            webhook.url,
            content=body,
            headers=headers,
            timeout=settings.NOTIFY_TIMEOUT,
            follow_redirects=False,
        )
    except httpx2.HTTPError as exc:
        # The exception's words only: never the request (its headers carry the signature).
        return False, None, f"{type(exc).__name__}: {exc}".splitlines()[0]
    if 200 <= answer.status_code < 300:
        return True, answer.status_code, ""
    said = " ".join(answer.text[:200].split())
    return False, answer.status_code, f"HTTP {answer.status_code}" + (f": {said}" if said else "")


def _mail(notice: Notice, alert: EmailAlert) -> tuple[bool, int | None, str]:
    body = notice.text
    if notice.task is not None:
        body += f"\n\nProject {notice.project.slug}, task {notice.task.slug}."
    try:
        send_mail(
            f"[evalsite] {notice.title}",
            body,
            settings.DEFAULT_FROM_EMAIL,
            alert.address_list,
            fail_silently=False,
        )
    except Exception as exc:  # smtplib's errors, OSError, a refused connection
        return False, None, f"{type(exc).__name__}: {exc}".splitlines()[0]
    return True, None, ""
