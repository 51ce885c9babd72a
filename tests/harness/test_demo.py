"""load_demo: three role users and a ready multiple-choice dataset with two models' answers."""

import io

import pytest
from django.core.management import call_command

from apps.accounts.models import User
from apps.datasets.models import Dataset, Item, Task
from apps.leaderboards.management.commands.load_demo import DEMO_USERS


def load_demo() -> str:
    out = io.StringIO()
    call_command("load_demo", stdout=out)
    return out.getvalue()


def snapshot() -> dict:
    return {
        "users": sorted(User.objects.values_list("username", "role", "is_staff", "password")),
        "tasks": list(Task.objects.values()),
        "datasets": list(Dataset.objects.values()),
        "items": list(Item.objects.values()),
    }


@pytest.mark.django_db
def test_load_demo_creates_role_users_that_can_log_in(client):
    output = load_demo()
    for username, password, role in DEMO_USERS:
        user = User.objects.get(username=username)
        assert user.role == role
        assert user.is_staff == (role == "admin")
        assert f"{username:<9} / {password}" in output
    # Through the login form: django-axes refuses client.login(), which gives it no request.
    response = client.post("/accounts/login/", {"username": "admin", "password": "demo-admin"})
    assert response.status_code == 302, response.content.decode()
    assert "demo-mcq" in client.get("/tasks/").content.decode()


@pytest.mark.django_db
def test_load_demo_creates_a_ready_mcq_dataset_with_two_response_columns():
    load_demo()
    task = Task.objects.get(slug="demo-mcq")
    assert task.name == "Demo: multiple choice"
    dataset = task.datasets.get()
    assert dataset.status == Dataset.Status.READY
    assert dataset.response_columns == ["model_a", "model_b"]
    assert dataset.reference_column == "answer"
    assert dataset.input_columns == ["question", "A", "B", "C", "D"]
    assert dataset.row_count == dataset.items.count() >= 10
    for column in ["id", "question", "A", "B", "C", "D", "answer", "model_a", "model_b"]:
        assert column in dataset.columns

    items = list(dataset.items.order_by("position"))
    assert [item.position for item in items] == list(range(len(items)))
    first = items[0]
    assert first.key == first.fields["id"]
    assert first.reference == first.fields["answer"]
    assert first.tags == [first.fields["subject"]]
    assert first.tags_text == f"|{first.fields['subject']}|"
    assert first.fields["question"].lower() in first.search_text
    assert sum(dataset.tag_counts.values()) == len(items)
    assert dataset.tag_counts == {
        tag: dataset.items.tagged(tag).count() for tag in dataset.tag_counts
    }
    # The two models disagree somewhere, so a judge has something to separate them.
    assert any(item.fields["model_a"] != item.fields["model_b"] for item in items)


@pytest.mark.django_db
def test_load_demo_twice_changes_nothing():
    load_demo()
    before = snapshot()
    output = load_demo()
    assert snapshot() == before
    assert "demo-admin" in output


@pytest.mark.django_db
def test_load_demo_keeps_existing_users_and_their_passwords():
    User.objects.create_user(username="admin", password="my-own-secret", role="reviewer")
    output = load_demo()
    admin = User.objects.get(username="admin")
    assert admin.role == "reviewer"
    assert admin.check_password("my-own-secret")
    assert "demo-admin" not in output
    assert "password changed since" in output
    assert User.objects.get(username="viewer").role == "viewer"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_demo_models_are_judged_by_the_worker_and_fill_the_leaderboard(admin_client):
    from apps.judges.models import Score, TaskJudging
    from apps.runs.models import Run
    from tests.base import run_burst_worker

    load_demo()
    task = Task.objects.get(slug="demo-mcq")
    assert (
        TaskJudging.of(task.pk).default_judge.kind == "mcq_rule"
    )  # rule-based: the demo needs no API key
    runs = Run.objects.filter(task=task, kind=Run.Kind.JUDGE)
    assert sorted(runs.values_list("source_column", flat=True)) == ["model_a", "model_b"]

    result = run_burst_worker()
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    for run in runs:
        assert run.status == Run.Status.COMPLETED, (run.label, run.status, run.error)
        assert run.scores.ok().count() == 12
    scores = {
        (s.run.source_column, s.item.key): s.final_value
        for s in Score.objects.select_related("run", "item")
    }
    assert scores[("model_a", "q12")] == 100.0  # "The answer is A, C." for "A, C"
    assert scores[("model_b", "q12")] == 0.0  # "C" alone
    assert scores[("model_b", "q09")] == 100.0  # "答案是D"

    board = admin_client.get(f"/leaderboards/{task.slug}/").content.decode()
    assert "model_a" in board and "model_b" in board

    load_demo()  # a second load starts nothing new
    assert Run.objects.filter(task=task, kind=Run.Kind.JUDGE).count() == 2
