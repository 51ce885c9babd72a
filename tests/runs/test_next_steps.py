"""#11.9 and #11.15: the start and endpoint forms ask only what a person has not already said."""

import re

import pytest
from django.urls import reverse

from apps.runs.generation import create_generation_run
from apps.runs.models import Endpoint, PromptTemplate
from tests.runs.conftest import make_dataset


def start_form(client, query: str) -> dict[str, object]:
    page = client.get(reverse("runs:generation-new") + query)
    assert page.status_code == 200
    form = page.context["form"]
    return {name: form[name].value() for name in ("dataset", "endpoint", "template")}


def pk(value: object) -> int | None:
    return getattr(value, "pk", value)  # type: ignore[return-value]


@pytest.mark.django_db
def test_the_only_dataset_and_endpoint_are_preselected(
    reviewer_client, dataset, endpoint, template
):
    PromptTemplate.objects.create(task=dataset.task, name="zz-newer", user_message="{{ question }}")
    chosen = start_form(reviewer_client, f"?task={dataset.task.slug}&template={template.pk}")
    assert pk(chosen["dataset"]) == dataset.pk
    assert pk(chosen["endpoint"]) == endpoint.pk
    # Reached from a template's page, that template, not the newest one.
    assert pk(chosen["template"]) == template.pk


@pytest.mark.django_db
def test_with_several_the_last_runs_are_preselected(reviewer_client, dataset, endpoint, template):
    other_dataset = make_dataset(dataset.task, 3, name="other")
    Endpoint.objects.create(name="aaa-first", model="m", base_url=endpoint.base_url)
    create_generation_run(dataset, endpoint, template)
    chosen = start_form(reviewer_client, f"?task={dataset.task.slug}")
    assert (pk(chosen["dataset"]), pk(chosen["endpoint"])) == (dataset.pk, endpoint.pk)
    # A dataset named in the link wins over the last run's.
    chosen = start_form(reviewer_client, f"?dataset={other_dataset.pk}")
    assert pk(chosen["dataset"]) == other_dataset.pk


@pytest.mark.django_db
def test_nothing_is_guessed_among_several_never_used(reviewer_client, dataset, endpoint, template):
    make_dataset(dataset.task, 3, name="other")
    Endpoint.objects.create(name="second", model="m", base_url=endpoint.base_url)
    chosen = start_form(reviewer_client, f"?task={dataset.task.slug}")
    assert (chosen["dataset"], chosen["endpoint"]) == (None, None)


@pytest.mark.django_db
def test_the_template_page_links_to_a_start_form_for_itself(reviewer_client, template):
    page = reviewer_client.get(template.get_absolute_url()).content.decode()
    assert f"template={template.pk}" in re.search(r'href="([^"]*)">Start a generation run', page)[1]


@pytest.mark.django_db
def test_the_endpoint_form_says_base_url_with_an_example_and_explains_the_key_beside_it(
    admin_client,
):
    page = admin_client.get(reverse("runs:endpoint-create")).content.decode()
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))
    assert "Base URL" in text and "Base url" not in text
    assert "e.g. https://api.openai.com/v1 or http://localhost:8000/v1" in text
    assert 'placeholder="https://api.openai.com/v1"' in page
    # In page order: where to send, then the key's state, the key to store and the variable.
    order = [
        page.index('name="base_url"'),
        page.index('name="model"'),
        page.index('id="api-key-state"'),
        page.index('name="new_api_key"'),
        page.index('name="api_key_env"'),
        page.index('name="temperature"'),
    ]
    assert order == sorted(order), order
