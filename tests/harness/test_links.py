"""The pages link the flow together: task → datasets, generation, judges, leaderboard; run → exports."""

import pytest
from django.urls import reverse

from apps.datasets.models import Dataset, Task


@pytest.fixture
def task(db):
    task = Task.objects.create(slug="support-qa", name="Support QA")
    Dataset.objects.create(task=task, name="qa", format="csv", status="ready", columns=["q"])
    return task


def test_task_page_links_every_stage_for_a_reviewer(reviewer_client, task):
    page = reviewer_client.get(reverse("datasets:task-detail", args=[task.slug])).content.decode()
    assert reverse("leaderboards:task", args=[task.slug]) in page
    assert f"{reverse('judges:list')}?task=support-qa" in page
    assert f"{reverse('runs:template-list')}?task=support-qa" in page
    assert f"{reverse('runs:generation-new')}?task=support-qa" in page


def test_viewer_gets_no_generate_links(viewer_client, task):
    dataset = task.datasets.get()
    task_page = viewer_client.get(
        reverse("datasets:task-detail", args=[task.slug])
    ).content.decode()
    dataset_page = viewer_client.get(dataset.get_absolute_url()).content.decode()
    assert reverse("runs:generation-new") not in task_page
    assert reverse("runs:generation-new") not in dataset_page
    assert reverse("leaderboards:task", args=[task.slug]) in task_page


def test_dataset_page_offers_generation_for_a_ready_dataset(reviewer_client, task):
    dataset = task.datasets.get()
    page = reviewer_client.get(dataset.get_absolute_url()).content.decode()
    assert f"{reverse('runs:generation-new')}?dataset={dataset.pk}" in page
