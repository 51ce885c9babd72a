"""The generation start form takes a response schema (#29.12, Dynabench's verify_response):
a bad one is refused with the reason; a good one is stored on the run and shown on its page."""

import pytest
from django.test import Client
from django.urls import reverse

from apps.runs.models import Run
from tests.base import make_user


@pytest.mark.django_db
def test_the_start_form_takes_a_response_schema(
    dataset, endpoint, template, django_capture_on_commit_callbacks
):
    client = Client()
    client.force_login(make_user("reviewer"))
    form = {
        "task": "qa",
        "dataset": dataset.pk,
        "endpoint": endpoint.pk,
        "template": template.pk,
        "logging_mode": "failed",
        "chunk_size": 200,
    }
    bad = '{"keys": {"pred": "str"}}'
    refused = client.post(reverse("runs:generation-start"), {**form, "response_schema": bad})
    assert refused.status_code == 200
    assert "Key &#x27;pred&#x27; has type &#x27;str&#x27;" in refused.content.decode()
    assert not Run.objects.exists()
    schema = '{"keys": {"pred": "string", "prob": "array"}, "answer": "pred"}'
    with django_capture_on_commit_callbacks(execute=True):
        started = client.post(
            reverse("runs:generation-start"), {**form, "response_schema": schema}, follow=True
        )
    run = Run.objects.get()
    assert run.response_schema == {"keys": {"pred": "string", "prob": "array"}, "answer": "pred"}
    assert "JSON with pred (string), prob (array); judges score “pred”" in (
        started.content.decode()
    )
