"""Everyone changes their own password from the account menu (#28.6)."""

import pytest
from django.test import Client
from django.urls import reverse

from tests.base import make_user


@pytest.mark.django_db
@pytest.mark.parametrize("role", ["admin", "reviewer", "viewer"])
def test_a_user_changes_their_password_and_stays_signed_in(role: str) -> None:
    user = make_user(role)
    user.set_password("old-pass-123!")
    user.save()
    client = Client()
    client.force_login(user)
    menu = client.get(reverse("datasets:task-list")).content.decode()
    assert 'id="account-menu"' in menu and reverse("accounts:password-change") in menu
    url = reverse("accounts:password-change")
    wrong = client.post(
        url,
        {
            "old_password": "nope",
            "new_password1": "A-new-one-456",
            "new_password2": "A-new-one-456",
        },
    )
    assert wrong.status_code == 200 and "old password was entered incorrectly" in wrong.text
    done = client.post(
        url,
        {
            "old_password": "old-pass-123!",
            "new_password1": "A-new-one-456",
            "new_password2": "A-new-one-456",
        },
        follow=True,
    )
    assert "Your password is changed." in done.text
    assert client.get(reverse("datasets:task-list")).status_code == 200  # still signed in
    user.refresh_from_db()
    assert user.check_password("A-new-one-456") and not user.check_password("old-pass-123!")


@pytest.mark.django_db
def test_the_password_never_comes_back_in_the_page() -> None:
    user = make_user("viewer")
    user.set_password("old-pass-123!")
    user.save()
    client = Client()
    client.force_login(user)
    page = client.post(
        reverse("accounts:password-change"),
        {"old_password": "old-pass-123!", "new_password1": "Secret-xyz-789", "new_password2": "x"},
    )
    assert page.status_code == 200 and "Secret-xyz-789" not in page.text
    assert "old-pass-123!" not in page.text
