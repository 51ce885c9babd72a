"""The notifications page (#32.3): a project's admins add webhooks and email alerts; the
signing secret is shown once and the URL's path never (it may be a credential); bad input is
refused naming the field; the delivery log says how each delivery went and sends one again;
nobody but the project's admins sees any of it."""

import re

import pytest
from django.core import mail
from django.urls import reverse

from apps.notifications.models import Delivery, EmailAlert, Event, Webhook, new_secret
from apps.runs.engine.lifecycle import finalize
from tests import factories as f
from tests.notifications.test_webhooks import running_run, work_all

pytestmark = pytest.mark.django_db

SLACK_URL = "https://hooks.slack.com/services/T000/B000/XXXXSECRETPATH"


def page_of(project) -> str:
    return reverse("notifications:project", args=[project.slug])


def test_an_admin_adds_a_webhook_and_sees_its_secret_once(admin_client, project):
    url = reverse("notifications:webhook-new", args=[project.slug])
    answer = admin_client.post(
        url,
        {"name": "slack", "url": SLACK_URL, "events": [Event.RUN_FAILED, Event.GATE],
         "payload": "slack", "active": "on"},
    )  # fmt: skip
    assert answer.status_code == 201
    webhook = Webhook.objects.get()
    assert (webhook.project, webhook.url, webhook.events) == (
        project,
        SLACK_URL,
        [Event.RUN_FAILED, Event.GATE],
    )
    assert webhook.secret.startswith("whsec_") and len(webhook.secret) == 38
    assert webhook.secret in answer.content.decode()
    shown = admin_client.get(page_of(project)).content.decode()
    assert webhook.secret not in shown and "SECRETPATH" not in shown
    assert "https://hooks.slack.com/…" in shown and "Run failed, Release gate result" in shown


def test_an_edit_keeps_the_url_and_secret_left_blank_and_can_renew_the_secret(
    admin_client, project, webhook
):
    edit = reverse("notifications:webhook-edit", args=[project.slug, webhook.pk])
    form = admin_client.get(edit).content.decode()
    assert webhook.secret not in form and "/hooks/evalsite" not in form
    old_url, old_secret = webhook.url, webhook.secret
    answer = admin_client.post(
        edit, {"name": "ci-renamed", "events": [Event.RUN_FINISHED], "payload": "json"}
    )
    assert answer.status_code == 302
    webhook.refresh_from_db()
    assert (webhook.name, webhook.url, webhook.secret) == ("ci-renamed", old_url, old_secret)
    assert webhook.active is False  # unticked
    answer = admin_client.post(
        edit,
        {"name": "ci", "events": [Event.RUN_FINISHED], "payload": "json", "renew_secret": "on"},
    )
    webhook.refresh_from_db()
    assert webhook.secret != old_secret and webhook.secret in answer.content.decode()
    mine = new_secret()
    admin_client.post(
        edit, {"name": "ci", "events": [Event.RUN_FINISHED], "payload": "json", "new_secret": mine}
    )
    webhook.refresh_from_db()
    assert webhook.secret == mine


def test_bad_input_is_refused_naming_the_field(admin_client, project):
    url = reverse("notifications:webhook-new", args=[project.slug])
    answer = admin_client.post(url, {"name": "x", "url": "ftp://example.com/", "payload": "json"})
    page = answer.content.decode()
    assert answer.status_code == 400
    assert (
        "Enter a valid URL." in page
    )  # an ftp:// one is no webhook and "Choose at least one event." in page
    answer = admin_client.post(
        url,
        {"name": "x", "url": "https://example.com/h", "events": [Event.GATE], "payload": "json",
         "new_secret": "not base64!"},
    )  # fmt: skip
    assert "A secret is whsec_ and base64" in answer.content.decode()
    answer = admin_client.post(
        reverse("notifications:email-new", args=[project.slug]),
        {"name": "team", "addresses": "a@example.com, nobody", "events": [Event.GATE]},
    )
    assert answer.status_code == 400 and "&#x27;nobody&#x27; is not an address." in (
        answer.content.decode()
    )
    assert not Webhook.objects.exists() and not EmailAlert.objects.exists()


def test_the_delivery_log_says_how_it_went_and_sends_again(
    admin_client, task, project, webhook, receiver, django_capture_on_commit_callbacks
):
    receiver.status = 500
    dataset = f.make_qa_dataset(task, 2)
    with django_capture_on_commit_callbacks(execute=True):
        finalize(running_run(dataset, answered=2, label="<b>model</b>").pk, 1)
    work_all(django_capture_on_commit_callbacks)
    delivery = Delivery.objects.get()
    page = admin_client.get(page_of(project)).content.decode()
    row = re.search(rf'<tr id="delivery-{delivery.pk}".*?</tr>', page, re.S)[0]
    assert "Pending" in row and "<td>HTTP 500</td>" in row and "&lt;b&gt;model&lt;/b&gt;" in row
    receiver.status = 204
    send = reverse("notifications:delivery-send", args=[project.slug, delivery.pk])
    with django_capture_on_commit_callbacks(execute=True):
        assert admin_client.post(send).status_code == 302
    work_all(django_capture_on_commit_callbacks)
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts, len(receiver.got)) == ("delivered", 2, 2)
    row = re.search(
        rf'<tr id="delivery-{delivery.pk}".*?</tr>',
        admin_client.get(page_of(project)).content.decode(),
        re.S,
    )[0]
    assert "Delivered" in row and "Send now" not in row


def test_only_the_projects_admins_see_or_change_it(client, project, webhook, reviewer_user):
    client.force_login(reviewer_user)
    project.add_member(reviewer_user, "reviewer")
    for url in (
        page_of(project),
        reverse("notifications:webhook-edit", args=[project.slug, webhook.pk]),
    ):
        assert client.get(url).status_code == 404
    delete = reverse("notifications:destination-delete", args=[project.slug, "webhook", webhook.pk])
    assert client.post(delete).status_code == 404
    assert Webhook.objects.filter(pk=webhook.pk).exists()
    assert "team-a" not in client.get(reverse("notifications:index")).content.decode()


def test_a_test_message_reaches_the_destination_it_is_sent_to(
    admin_client, project, webhook, receiver, django_capture_on_commit_callbacks
):
    alert = EmailAlert.objects.create(
        project=project, name="team", addresses="team@example.com", events=[Event.GATE]
    )
    with django_capture_on_commit_callbacks(execute=True):
        for kind, pk in (("webhook", webhook.pk), ("email", alert.pk)):
            url = reverse("notifications:destination-test", args=[project.slug, kind, pk])
            assert admin_client.post(url).status_code == 302
    work_all(django_capture_on_commit_callbacks)
    (got,) = receiver.got
    assert got.verified and got.event == "test"
    assert (got.json["title"], got.json["data"]["sent_by"]) == ("Test message to ci", "admin")
    (sent,) = mail.outbox
    assert (sent.to, sent.subject) == (["team@example.com"], "[evalsite] Test message to team")
    assert sorted(Delivery.objects.values_list("state", flat=True)) == ["delivered"] * 2
