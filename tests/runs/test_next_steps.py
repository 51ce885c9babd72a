"""#11.9 and #11.15: the start and endpoint forms ask only what a person has not already said."""

import re

import pytest
from django.urls import reverse

from apps.datasets.models import Dataset, Item
from apps.runs.kinds.generation import create_generation_run
from apps.runs.models import Endpoint, PromptTemplate
from tests.factories import make_qa_dataset


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
    other_dataset = make_qa_dataset(dataset.task, 3, name="other")
    Endpoint.objects.create(name="aaa-first", model="m", base_url=endpoint.base_url)
    create_generation_run(dataset, endpoint, template)
    chosen = start_form(reviewer_client, f"?task={dataset.task.slug}")
    assert (pk(chosen["dataset"]), pk(chosen["endpoint"])) == (dataset.pk, endpoint.pk)
    # A dataset named in the link wins over the last run's.
    chosen = start_form(reviewer_client, f"?dataset={other_dataset.pk}")
    assert pk(chosen["dataset"]) == other_dataset.pk


@pytest.mark.django_db
def test_nothing_is_guessed_among_several_never_used(reviewer_client, dataset, endpoint, template):
    make_qa_dataset(dataset.task, 3, name="other")
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


def make_prose_dataset(task, name: str = "prose"):
    """A newer dataset of the task without the fields a question template uses."""
    dataset = Dataset.objects.create(
        task=task,
        name=name,
        format=Dataset.Format.CSV,
        status=Dataset.Status.READY,
        columns=["passage", "summary"],
        mapping={"input_columns": ["passage"], "reference_column": "summary"},
        row_count=1,
    )
    Item.objects.create(
        dataset=dataset, position=0, key="p0", fields={"passage": "Text.", "summary": "S."}
    )
    return dataset


@pytest.mark.django_db
def test_the_preview_opens_where_the_template_fits_then_where_it_last_ran(
    reviewer_client, dataset, endpoint, template
):
    """#11.9: the preview opened on the alphabetically first dataset, in red ("This item has
    no question"). Now: the dataset of the template's latest run, else one whose items have
    the fields it uses."""
    make_prose_dataset(dataset.task, name="aaa-prose")  # first by name, and newest
    page = reviewer_client.get(template.get_absolute_url())
    assert page.context["preview_dataset"] == dataset
    assert not page.context["preview"].missing

    other = make_qa_dataset(dataset.task, 2, name="zz-later")
    create_generation_run(other, endpoint, template)
    assert reviewer_client.get(template.get_absolute_url()).context["preview_dataset"] == other


@pytest.mark.django_db
def test_the_editor_lists_the_chosen_datasets_fields(reviewer_client, dataset, template):
    prose = make_prose_dataset(dataset.task)
    url = reverse("runs:template-create") + f"?task={dataset.task.slug}"
    page = reviewer_client.get(url)
    fields = re.search(r'<ul id="field-names".*?</ul>', page.content.decode(), re.S)[0]
    assert "{{ passage }}" in fields and "{{ question }}" not in fields  # the newest one

    # Choosing another dataset swaps the list in place (htmx), or reloads without JavaScript.
    partial = reviewer_client.get(
        url + f"&dataset={dataset.pk}",
        headers={"HX-Request": "true", "HX-Target": "template-fields"},
    ).content.decode()
    assert partial.lstrip().startswith('<aside class="card" id="template-fields">')
    assert "{{ question }}" in partial and "{{ answer }}" in partial and "<html" not in partial

    # Editing a template starts from the dataset its preview uses; saving opens the preview there.
    edit = reverse("runs:template-edit", args=[template.pk])
    assert reviewer_client.get(edit).context["fields_dataset"] == dataset
    saved = reviewer_client.post(
        url,
        {
            "name": "p",
            "user_message": "{{ passage }}",
            "fewshot_k": 0,
            "fewshot_seed": 0,
            "dataset": str(prose.pk),
        },
    )
    assert saved.status_code == 302
    assert saved["Location"].endswith(f"?dataset={prose.pk}#template-preview")
    assert reviewer_client.get(saved["Location"]).context["preview_dataset"] == prose
