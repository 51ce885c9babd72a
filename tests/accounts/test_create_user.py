import pytest
from django.core.management import CommandError, call_command

from apps.accounts.models import User


@pytest.mark.django_db
@pytest.mark.parametrize("role", ["admin", "reviewer", "viewer"])
def test_create_user_with_role(role):
    call_command("create_user", f"u-{role}", "--role", role, "--password", "pw-123456789")
    user = User.objects.get(username=f"u-{role}")
    assert user.role == role
    assert user.check_password("pw-123456789")
    assert user.is_staff is (role == "admin")


@pytest.mark.django_db
def test_create_user_updates_the_role_of_an_existing_user():
    call_command("create_user", "ann", "--role", "viewer", "--password", "pw-123456789")
    call_command("create_user", "ann", "--role", "reviewer")
    user = User.objects.get(username="ann")
    assert user.role == "reviewer"
    assert user.check_password("pw-123456789")  # unchanged when no new password is given


@pytest.mark.django_db
def test_create_user_refuses_an_unknown_role():
    with pytest.raises(CommandError, match="invalid choice"):
        call_command("create_user", "bob", "--role", "owner")
