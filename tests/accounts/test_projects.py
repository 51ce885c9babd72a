"""Projects (#32.2): who sees which project, with which role, and how an existing install
moves into one default project with today's roles."""

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse

from apps.accounts.models import Membership, Project, User
from apps.datasets.models import Task
from tests.base import make_user


@pytest.mark.django_db
def test_members_see_their_projects_with_their_role_and_an_admin_sees_all():
    a = Project.objects.create(slug="a", name="A")
    b = Project.objects.create(slug="b", name="B")
    ann = make_user("reviewer", "ann", project=a)
    b.add_member(ann, "viewer")
    bob = make_user("reviewer", "bob", project=b)
    root = make_user("admin", "root", project=a)

    assert list(Project.objects.for_user(ann)) == [a, b]
    assert list(Project.objects.for_user(ann, "reviewer")) == [a]
    assert list(Project.objects.for_user(bob)) == [b]
    assert (ann.role_in(a), ann.role_in(b), bob.role_in(a)) == ("reviewer", "viewer", None)
    assert ann.has_role_in(a, "reviewer") and not ann.has_role_in(b, "reviewer")
    # An instance admin is admin everywhere, member or not.
    assert list(Project.objects.for_user(root)) == list(Project.objects.all())
    assert root.role_in(b) == "admin"

    task_a = Task.objects.create(slug="qa-a", name="QA", project=a)
    task_b = Task.objects.create(slug="qa-b", name="QA", project=b)
    assert list(Task.objects.for_user(ann)) == [task_a, task_b]
    assert list(Task.objects.for_user(ann, "reviewer")) == [task_a]
    assert list(Task.objects.for_user(bob)) == [task_b]
    assert list(Task.objects.for_user(AnonymousUser())) == []


@pytest.mark.django_db
def test_a_membership_never_lifts_a_user_above_their_own_role():
    project = Project.objects.create(slug="a", name="A")
    viewer = make_user("viewer", "vic", project=project)
    project.add_member(viewer, "admin")
    viewer = User.objects.get(pk=viewer.pk)
    assert viewer.role_in(project) == "viewer"
    assert list(Project.objects.for_user(viewer, "reviewer")) == []


@pytest.mark.django_db
def test_an_inactive_member_sees_nothing():
    project = Project.objects.create(slug="a", name="A")
    user = make_user("reviewer", "gone", project=project)
    user.is_active = False
    assert user.role_in(project) is None
    assert list(Project.objects.for_user(user)) == []


@pytest.mark.django_db
def test_a_task_made_with_no_project_goes_to_the_default_one():
    task = Task.objects.create(slug="plain", name="Plain")
    assert task.project == Project.objects.get(slug=Project.DEFAULT_SLUG)


@pytest.mark.django_db
def test_create_user_makes_a_member_of_the_projects_named():
    call_command(
        "create_user", "ann", "--role", "reviewer", "--project", "team-a", "--project", "team-b"
    )
    call_command("create_user", "dan", "--role", "viewer")
    assert set(Membership.objects.values_list("user__username", "project__slug", "role")) == {
        ("ann", "team-a", "reviewer"),
        ("ann", "team-b", "reviewer"),
        ("dan", "default", "viewer"),
    }
    with pytest.raises(CommandError, match="--project 'Team A'"):
        call_command("create_user", "eve", "--project", "Team A")
    assert not User.objects.filter(username="eve").exists()


def _migrate(targets: list[tuple[str, str]]):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_an_existing_install_moves_into_one_default_project_with_todays_roles():
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    old = _migrate([("accounts", "0003_text_view"), ("datasets", "0015_doubt_rule_moved")])
    OldUser = old.get_model("accounts", "User")
    OldTask = old.get_model("datasets", "Task")
    for name, role in [("amy", "admin"), ("rex", "reviewer"), ("val", "viewer")]:
        OldUser.objects.create(username=name, role=role)
    OldTask.objects.create(slug="one", name="One")
    OldTask.objects.create(slug="two", name="Two")

    _migrate(latest)
    default = Project.objects.get()
    assert default.slug == "default"
    assert set(Task.objects.values_list("slug", "project__slug")) == {
        ("one", "default"),
        ("two", "default"),
    }
    assert set(Membership.objects.values_list("user__username", "role")) == {
        ("amy", "admin"),
        ("rex", "reviewer"),
        ("val", "viewer"),
    }
    rex, val = User.objects.get(username="rex"), User.objects.get(username="val")
    assert (rex.role_in(default), val.role_in(default)) == ("reviewer", "viewer")
    assert Task.objects.for_user(val).count() == 2


@pytest.mark.django_db
def test_a_task_file_applied_as_a_user_changes_only_their_projects_tasks(tmp_path):
    other = Project.objects.create(slug="other", name="Other")
    Task.objects.create(slug="theirs", name="Theirs", project=other)
    make_user("reviewer", "ann")  # a reviewer in the default project only
    path = tmp_path / "task.yaml"
    path.write_text("task:\n  slug: theirs\n  name: Renamed\n")
    with pytest.raises(CommandError, match="ann is not a reviewer in theirs's project"):
        call_command("apply", str(path), "--user", "ann")
    assert Task.objects.get(slug="theirs").name == "Theirs"
    path.write_text("task:\n  slug: mine\n  name: Mine\n")
    call_command("apply", str(path), "--user", "ann")
    assert Task.objects.get(slug="mine").project.slug == "default"


@pytest.mark.django_db
def test_a_new_task_goes_to_the_project_chosen_among_the_makers_own(client):
    a = Project.objects.create(slug="a", name="Team A")
    b = Project.objects.create(slug="b", name="Team B")
    c = Project.objects.create(slug="c", name="Team C")
    ann = make_user("reviewer", "ann", project=a)
    b.add_member(ann, "reviewer")
    c.add_member(ann, "viewer")
    client.force_login(ann)
    url = reverse("datasets:task-create")
    page = client.post(url, {"slug": "qa", "name": "QA"}).content.decode()
    assert "Choose the project the task belongs to." in page
    page = client.post(url, {"slug": "qa", "name": "QA", "project": c.pk}).content.decode()
    assert "Select a valid choice" in page  # a viewer there makes no task
    assert client.post(url, {"slug": "qa", "name": "QA", "project": b.pk}).status_code == 302
    assert Task.objects.get(slug="qa").project == b
    listing = client.get(reverse("datasets:task-list")).content.decode()
    assert "<th>Project</th>" not in listing  # one project's tasks: nothing to tell apart
    Task.objects.create(slug="other", name="Other", project=a)
    listing = client.get(reverse("datasets:task-list")).content.decode()
    assert "<th>Project</th>" in listing and "Team B" in listing
