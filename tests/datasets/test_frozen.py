"""Frozen means frozen (#18.8): once a run used a dataset, a prompt template version or a judge
version, nothing changes what that run points to: not the app, not the ORM, not the Django
admin (read-only pages, no delete, a bulk delete refused with a message)."""

import pytest
from django.test import Client

from apps.datasets.models import Frozen, Item
from apps.runs.models import PromptTemplate
from tests import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def used():
    """A judge run over a dataset, and a generation run with a prompt template."""
    task = f.make_task()
    dataset = f.make_items(task, 3)
    judge = f.make_judge(task)
    template = PromptTemplate.objects.create(task=task, name="qa", user_message="{{ question }}")
    generation = f.make_generation_run(dataset, {"k0": "a"})
    generation.template = template
    generation.save(update_fields=["template"])
    f.make_judge_run(dataset, judge, source_run=generation)
    return dataset, judge, template


def test_used_versions_change_only_by_a_new_version(used) -> None:
    _dataset, judge, template = used
    judge.user_prompt = "Rate it differently"
    with pytest.raises(Frozen, match="new version"):
        judge.save()
    with pytest.raises(Frozen):
        template.delete()
    template.user_message = "{{ question }}?"
    newer = template.save_as_new_version(None)
    assert newer.version == 2 and not newer.is_used
    newer.user_message = "changed in place: nobody used v2 yet"
    newer.save()
    assert PromptTemplate.objects.get(pk=newer.pk).user_message.startswith("changed")


def test_items_of_a_used_dataset_are_kept(used) -> None:
    dataset, _, _ = used
    with pytest.raises(Frozen, match="used by a run"):
        dataset.items.first().delete()
    with pytest.raises(Frozen):
        Item.objects.filter(dataset=dataset).delete()
    assert dataset.items.count() == 3
    unused = f.make_items(dataset.task, 2, name="unused")
    assert Item.objects.filter(dataset=unused).delete()[0] == 2


def test_the_admin_shows_used_versions_read_only(used, admin_client: Client) -> None:
    dataset, judge, template = used
    for url in (
        f"/admin/judges/judge/{judge.pk}/change/",
        f"/admin/runs/prompttemplate/{template.pk}/change/",
        f"/admin/datasets/dataset/{dataset.pk}/change/",
    ):
        page = admin_client.get(url).content.decode()
        assert 'name="_save"' not in page, url  # a view page: no save button
        assert admin_client.post(url, {"name": "renamed"}).status_code == 403, url
        assert admin_client.get(url.replace("/change/", "/delete/")).status_code == 403, url
    item = dataset.items.first()
    assert admin_client.get(f"/admin/datasets/item/{item.pk}/delete/").status_code == 403
    # The bulk delete of the changelist: refused, saying why; nothing deleted.
    response = admin_client.post(
        "/admin/datasets/item/",
        {
            "action": "delete_selected",
            "_selected_action": [str(i.pk) for i in dataset.items.all()],
            "post": "yes",
        },
        follow=True,
    )
    assert response.status_code == 403
    assert "used by a run, so they are kept" in response.content.decode()
    assert dataset.items.count() == 3


def test_unused_versions_stay_editable_in_the_admin(admin_client: Client) -> None:
    task = f.make_task()
    judge = f.make_judge(task)
    page = admin_client.get(f"/admin/judges/judge/{judge.pk}/change/").content.decode()
    assert 'name="_save"' in page
