"""Pages: endpoints with a write-only key, templates with versions and preview, the start form,
the live run page."""

import logging
import re

import pytest
from django.urls import reverse

from apps.runs.models import AttemptLog, Endpoint, PromptTemplate, Response, Run
from tests.runs.conftest import SECRET

ENDPOINT_POST = {
    "name": "local",
    "model": "test-model",
    "api_key_env": "OPENAI_API_KEY",
    "concurrency_limit": 4,
    "timeout_seconds": 5,
    "max_retries": 2,
    "extra_params": "{}",
}


@pytest.mark.django_db
def test_the_stored_key_is_write_only(admin_client, llm_server):
    response = admin_client.post(
        reverse("runs:endpoint-create"),
        {**ENDPOINT_POST, "base_url": llm_server.base_url, "new_api_key": SECRET},
    )
    assert response.status_code == 302
    endpoint = Endpoint.objects.get()
    assert endpoint.api_key_secret == SECRET
    for url in (reverse("runs:endpoint-edit", args=[endpoint.pk]), reverse("runs:endpoint-list")):
        page = admin_client.get(url).content.decode()
        assert SECRET not in page and "stored secret: set" in page
    # Saving without a new key keeps it; a new one replaces it; "forget" clears it.
    edit = reverse("runs:endpoint-edit", args=[endpoint.pk])
    admin_client.post(edit, {**ENDPOINT_POST, "base_url": llm_server.base_url, "model": "m2"})
    endpoint.refresh_from_db()
    assert (endpoint.model, endpoint.api_key_secret) == ("m2", SECRET)
    admin_client.post(edit, {**ENDPOINT_POST, "new_api_key": "sk-newer-key-000"})
    endpoint.refresh_from_db()
    assert endpoint.api_key_secret == "sk-newer-key-000"
    admin_client.post(edit, {**ENDPOINT_POST, "clear_api_key": "on"})
    endpoint.refresh_from_db()
    assert endpoint.api_key_secret == "" and not endpoint.has_secret


@pytest.mark.django_db
def test_a_bad_form_does_not_echo_the_key(admin_client):
    response = admin_client.post(
        reverse("runs:endpoint-create"),
        {**ENDPOINT_POST, "concurrency_limit": 0, "new_api_key": SECRET},
    )
    assert response.status_code == 200 and SECRET not in response.content.decode()


@pytest.mark.django_db
def test_test_connection_shows_plain_words_and_logs_no_key(
    admin_client, endpoint, llm_server, caplog
):
    url = reverse("runs:endpoint-test", args=[endpoint.pk])
    with caplog.at_level(logging.DEBUG):
        ok = admin_client.post(url, HTTP_HX_REQUEST="true").content.decode()
        llm_server.configure(require_key="sk-other")
        refused = admin_client.post(url, HTTP_HX_REQUEST="true").content.decode()
        llm_server.configure(require_key=None, script=[{"status": 404}])
        missing = admin_client.post(url, follow=True).content.decode()
    assert "Connected: test-model answered" in ok and "msg-success" in ok
    assert "the API key was refused (401)" in refused and "msg-error" in refused
    assert "model “test-model” not found" in missing
    for text in (ok, refused, missing, caplog.text):
        assert SECRET not in text


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["runs:endpoint-list", "runs:endpoint-create"])
def test_endpoints_are_for_admins_only(reviewer_client, name):
    assert reviewer_client.get(reverse(name)).status_code == 403
    assert reviewer_client.post(reverse(name), ENDPOINT_POST).status_code == 403
    assert not Endpoint.objects.exists()


@pytest.mark.django_db
def test_templates_are_versioned_and_previewed_on_a_real_item(reviewer_client, task, dataset):
    response = reviewer_client.post(
        reverse("runs:template-create") + "?task=qa",
        {"name": "qa", "user_message": "Q: {{ question }}", "fewshot_k": 0, "fewshot_seed": 0},
    )
    assert response.status_code == 302
    v1 = PromptTemplate.objects.get()
    page = reviewer_client.get(v1.get_absolute_url() + "?row=3").content.decode()
    assert "Q: What is 2 + 2?" in page and "v1" in page and "(row 3)" in page
    response = reviewer_client.post(
        reverse("runs:template-edit", args=[v1.pk]),
        {
            "name": "ignored",
            "user_message": "Question: {{ question }} {{ context }}",
            "fewshot_k": 0,
            "fewshot_seed": 0,
        },
    )
    v2 = PromptTemplate.objects.get(version=2)
    assert response["Location"] == v2.get_absolute_url() and v2.name == "qa"
    v1.refresh_from_db()
    assert v1.user_message == "Q: {{ question }}"
    page = reviewer_client.get(v2.get_absolute_url()).content.decode()
    assert "Question: What is 0 + 0?" in page and 'id="preview-missing"' in page


@pytest.mark.django_db
def test_a_template_reaching_for_python_is_refused(reviewer_client, task):
    response = reviewer_client.post(
        reverse("runs:template-create") + "?task=qa",
        {"name": "bad", "user_message": "{{ item.__class__ }}", "fewshot_k": 0, "fewshot_seed": 0},
    )
    assert response.status_code == 200
    assert "User message line 1:" in response.content.decode()
    assert not PromptTemplate.objects.exists()


@pytest.mark.django_db
def test_the_start_form_starts_a_run_and_enqueues_its_chunks(
    reviewer_client, dataset, endpoint, template, redis_conn, django_capture_on_commit_callbacks
):
    page = reviewer_client.get(reverse("runs:generation-new") + f"?dataset={dataset.pk}")
    assert f'<option value="{dataset.pk}" selected>' in page.content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = reviewer_client.post(
            reverse("runs:generation-start"),
            {
                "task": "qa",
                "dataset": dataset.pk,
                "endpoint": endpoint.pk,
                "template": template.pk,
                "logging_mode": "all",
                "chunk_size": 10,
            },
        )
    run = Run.objects.get()
    assert response["Location"] == run.get_absolute_url()
    assert (run.template, run.endpoint, run.total, run.logging_mode) == (
        template,
        endpoint,
        30,
        "all",
    )
    import django_rq

    assert django_rq.get_queue("runs").job_ids == [f"run-{run.pk}-l1-chunk-{n}" for n in range(3)]
    assert redis_conn.llen(f"evalsite:run:{run.pk}:l1:todo") == 30


@pytest.mark.django_db
def test_the_start_form_refuses_a_template_using_missing_fields(
    reviewer_client, dataset, endpoint, task
):
    template = PromptTemplate.objects.create(task=task, name="ctx", user_message="{{ context }}")
    response = reviewer_client.post(
        reverse("runs:generation-start"),
        {
            "task": "qa",
            "dataset": dataset.pk,
            "endpoint": endpoint.pk,
            "template": template.pk,
            "logging_mode": "failed",
            "chunk_size": 200,
        },
    )
    assert response.status_code == 200 and not Run.objects.exists()
    assert (
        "The template uses context, which item q0 of this dataset does not have."
        in response.content.decode()
    )


@pytest.mark.django_db
def test_viewers_get_no_start_form_and_cannot_start(viewer_client, dataset, endpoint, template):
    """#11.13: viewers got the form with a disabled button; now the app's 403 page."""
    page = viewer_client.get(reverse("runs:generation-new") + "?task=qa")
    assert page.status_code == 403 and b"generation-form" not in page.content
    assert b"Not allowed" in page.content
    response = viewer_client.post(
        reverse("runs:generation-start"),
        {"task": "qa", "dataset": dataset.pk, "endpoint": endpoint.pk, "template": template.pk},
    )
    assert response.status_code == 403 and not Run.objects.exists()


def _run(dataset, endpoint, template, **fields) -> Run:
    return Run.objects.create(
        task=dataset.task,
        kind="generation",
        dataset=dataset,
        endpoint=endpoint,
        template=template,
        total=30,
        launch=1,
        **fields,
    )


@pytest.mark.django_db
def test_the_progress_partial_polls_only_while_active(reviewer_client, dataset, endpoint, template):
    run = _run(dataset, endpoint, template, status="running", done=12, failed=3)
    headers = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "run-progress"}
    part = reviewer_client.get(run.get_absolute_url(), **headers).content.decode()
    assert part.lstrip().startswith('<section class="card" id="run-progress"')
    assert 'hx-trigger="every 2s"' in part and 'aria-valuenow="50"' in part
    assert 'id="run-done">12<' in part and "<h1>" not in part
    Run.objects.filter(pk=run.pk).update(status="completed", done=30, failed=0)
    done = reviewer_client.get(run.get_absolute_url() + "?was_active=1", **headers)
    assert done["HX-Refresh"] == "true" and "hx-trigger" not in done.content.decode()


@pytest.mark.django_db
def test_model_output_is_escaped_and_tracebacks_are_for_admins(
    client, admin_user, reviewer_user, dataset, endpoint, template
):
    run = _run(dataset, endpoint, template, status="completed_with_failures", done=1, failed=1)
    items = list(dataset.items.order_by("position")[:2])
    Response.objects.create(run=run, item=items[0], status="ok", text="<script>alert(1)</script>")
    Response.objects.create(
        run=run, item=items[1], status="failed", error_kind="api_error", error="boom"
    )
    AttemptLog.objects.create(
        run=run,
        item=items[1],
        ok=False,
        error="boom",
        raw_reply="<img src=x onerror=alert(2)>",
        traceback="Traceback (most recent call last): SecretFrame",
    )
    client.force_login(reviewer_user)
    page = client.get(run.get_absolute_url()).content.decode()
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)" in page
    assert 'id="retry-failed"' in page and 'id="resume-run"' in page
    detail = reverse("runs:response-detail", args=[run.pk, items[1].pk])
    page = client.get(detail).content.decode()
    assert "<img src=x" not in page and "&lt;img src=x" in page and "SecretFrame" not in page
    client.force_login(admin_user)
    assert "SecretFrame" in client.get(detail).content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize(("k", "text"), [(1, "1 example from"), (3, "3 examples from")])
def test_few_shot_counts_read_as_english(admin_client, k: int, text: str) -> None:
    """'1 examples' read wrong on the template pages (#28.6)."""
    from tests.factories import make_task

    template = PromptTemplate.objects.create(
        task=make_task(), name="fs", user_message="{{ question }}", fewshot_k=k
    )
    detail = admin_client.get(reverse("runs:template-detail", args=[template.pk])).content.decode()
    listing = admin_client.get(reverse("runs:template-list")).content.decode()
    assert text in detail and f">{text.removesuffix(' from')}<" in listing


@pytest.mark.django_db
def test_a_running_run_with_items_done_does_not_say_no_responses(admin_client) -> None:
    """'Done 113' stood above 'No responses yet.' while a chunk's answers were still being
    written (#28.6): the table says what is done and that the answers follow."""
    from tests.factories import make_generation_run, make_qa_dataset, make_task

    run = make_generation_run(make_qa_dataset(make_task(), 5), {}, status=Run.Status.RUNNING)
    Run.objects.filter(pk=run.pk).update(done=3)
    page = admin_client.get(run.get_absolute_url()).content.decode()
    assert "3 items done: answers are written here" in page and "No responses yet" not in page
    Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED)
    assert "No responses yet." in admin_client.get(run.get_absolute_url()).content.decode()


@pytest.mark.django_db
def test_a_batch_left_behind_by_a_failed_run_does_not_read_as_preparing(admin_client) -> None:
    """The batch table said 'preparing' and 'waiting' after the run had failed (#28.6)."""
    from apps.runs.models import RunBatch
    from tests.factories import make_generation_run, make_qa_dataset, make_task

    run = make_generation_run(make_qa_dataset(make_task(), 4), {}, status=Run.Status.FAILED)
    Run.objects.filter(pk=run.pk).update(batch=True)
    RunBatch.objects.create(run=run, launch=1, part=0, requests=4)
    RunBatch.objects.create(run=run, launch=1, part=1, requests=4, status="in_progress")
    table = admin_client.get(run.get_absolute_url()).content.decode().split('id="batch-table"')[1]
    assert "never sent" in table and "in_progress when the run ended" in table
    assert ">preparing<" not in table and "waiting" not in table and "not written" in table


def test_a_wording_is_previewed_before_it_is_saved(reviewer_client, task, dataset) -> None:
    """Every wording try made a version, since only a saved template could be previewed
    (#28.6): the editor's 'Preview without saving' renders it and saves nothing."""
    fields = {
        "name": "qa",
        "user_message": "Try: {{ question }}",
        "fewshot_k": 0,
        "fewshot_seed": 0,
    }
    url = reverse("runs:template-create") + "?task=qa"
    page = reviewer_client.post(url, {**fields, "action": "preview"}).content.decode()
    assert 'id="draft-preview"' in page, re.findall(
        r'class="(?:error|msg msg-error)"[^>]*>(.*?)<', page
    )
    assert "Try: What is 0 + 0?" in page
    assert not PromptTemplate.objects.exists()
    reviewer_client.post(url, fields)
    v1 = PromptTemplate.objects.get()
    edit = reverse("runs:template-edit", args=[v1.pk])
    changed = {**fields, "user_message": "Answer: {{ question }}", "action": "preview"}
    page = reviewer_client.post(edit, changed).content.decode()
    assert "Answer: What is 0 + 0?" in page and PromptTemplate.objects.count() == 1
    v1.refresh_from_db()
    assert v1.user_message == "Try: {{ question }}"
