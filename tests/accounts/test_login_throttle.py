"""Login throttling (django-axes): five failures lock the username from every address and the
address for every username, for fifteen minutes, in every process, with a message that says
when to try again and nothing about who exists."""

import re
import subprocess
import sys
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.urls import reverse

from tests.base import PASSWORD, ROOT, make_user, subprocess_env

LOGIN = "/accounts/login/"
REFUSED = "Too many failed logins for this username or from this address. Try again in 15 minutes."
MISMATCH = "Your username and password did not match."

pytestmark = pytest.mark.django_db


@pytest.fixture
def attempt():
    """POST the login form as from `address` (a fresh client each time: no session carries over)."""
    from django.test import Client

    def _attempt(username: str, password: str = "wrong", address: str = "10.0.0.1", **meta):
        return Client().post(
            LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address, **meta
        )

    return _attempt


def logged_in(response) -> bool:
    return response.status_code == 302 and response["Location"] == reverse("datasets:task-list")


def refused(response) -> bool:
    return response.status_code == 429 and REFUSED in response.content.decode()


def test_five_failures_lock_the_username_from_every_address(attempt):
    make_user("reviewer", "alice")
    for _ in range(4):
        response = attempt("alice")
        assert response.status_code == 200 and MISMATCH in response.content.decode()
    assert refused(attempt("alice"))  # the fifth failure already says so
    # The right password, from another address, is refused too, and nobody is logged in.
    response = attempt("alice", PASSWORD, address="10.0.0.2")
    assert refused(response)
    assert "_auth_user_id" not in response.wsgi_request.session
    # Another user from another address is not affected.
    make_user("reviewer", "bob")
    assert logged_in(attempt("bob", PASSWORD, address="10.0.0.3"))
    # The form's password never reaches the stored attempts.
    assert not any(
        PASSWORD in a.post_data or "wrong" in a.post_data for a in AccessAttempt.objects.all()
    )


def test_five_failures_from_one_address_lock_every_username_there(attempt):
    make_user("reviewer", "bob")
    for n in range(5):
        attempt(f"guess-{n}", address="10.0.0.1")
    assert refused(attempt("bob", PASSWORD, address="10.0.0.1"))
    assert logged_in(attempt("bob", PASSWORD, address="10.0.0.9"))


def test_the_refusal_says_the_same_whether_the_user_exists(attempt):
    make_user("reviewer", "alice")
    pages = []
    for username, address in (("alice", "10.0.0.1"), ("nobody", "10.0.0.2")):
        for _ in range(5):
            response = attempt(username, address=address)
        assert refused(response)
        # The same page but for the CSRF tokens (64 random characters each time).
        pages.append(re.sub(r"[A-Za-z0-9]{64}", "TOKEN", response.content.decode()))
    assert pages[0] == pages[1]


def test_the_lock_ends_when_the_message_says(attempt):
    make_user("reviewer", "alice")
    for _ in range(5):
        attempt("alice")

    def age(minutes: int) -> None:
        for row in AccessAttempt.objects.all():
            row.attempt_time -= timedelta(minutes=minutes)
            row.save(update_fields=["attempt_time"])

    age(14)
    assert refused(attempt("alice", PASSWORD, address="10.0.0.2"))
    age(16)  # (the refused attempt counted as a failure too, and restarted the fifteen minutes)
    assert logged_in(attempt("alice", PASSWORD, address="10.0.0.2"))


def test_a_success_does_not_wipe_the_failures(attempt):
    """Axes' reset-on-success would delete every record of the address as well: one user with
    a valid password could then reset the count between guesses at another's password."""
    make_user("reviewer", "alice")
    make_user("reviewer", "mallory")
    for _ in range(4):
        attempt("alice", address="10.0.0.1")
    assert logged_in(attempt("mallory", PASSWORD, address="10.0.0.1"))
    attempt("alice", address="10.0.0.1")
    assert refused(attempt("alice", PASSWORD, address="10.0.0.2"))
    # Nor does a success of the same user: four failures, a success, one more failure: locked.
    make_user("reviewer", "carol")
    for _ in range(4):
        attempt("carol", address="10.0.0.5")
    assert logged_in(attempt("carol", PASSWORD, address="10.0.0.5"))
    assert refused(attempt("carol", address="10.0.0.5"))


def test_a_forwarded_for_header_is_ignored_unless_configured(attempt):
    make_user("reviewer", "bob")
    for n in range(5):
        attempt(f"guess-{n}", address="10.0.0.1", HTTP_X_FORWARDED_FOR=f"192.0.2.{n}")
    # Each claimed a different address; all came from 10.0.0.1, and that is what counted.
    assert refused(attempt("bob", PASSWORD, address="10.0.0.1", HTTP_X_FORWARDED_FOR="192.0.2.99"))


def test_behind_a_proxy_the_configured_header_gives_the_address(attempt, settings):
    settings.CLIENT_IP_HEADER = "HTTP_X_FORWARDED_FOR"
    make_user("reviewer", "bob")
    proxy = "10.0.0.254"  # every request arrives from the proxy
    for n in range(5):
        # The client may prepend anything; the proxy appends the address it saw, right-most.
        attempt(f"guess-{n}", address=proxy, HTTP_X_FORWARDED_FOR=f"198.51.100.{n}, 203.0.113.7")
    assert refused(attempt("bob", PASSWORD, address=proxy, HTTP_X_FORWARDED_FOR="203.0.113.7"))
    assert logged_in(attempt("bob", PASSWORD, address=proxy, HTTP_X_FORWARDED_FOR="203.0.113.8"))
    # A header that holds no address counts under the proxy's own address.
    assert AccessAttempt.objects.filter(ip_address="203.0.113.7").exists()
    attempt("carol", address=proxy, HTTP_X_FORWARDED_FOR="not-an-address")
    assert AccessAttempt.objects.filter(ip_address=proxy, username="carol").exists()


@pytest.mark.django_db(transaction=True)
def test_failures_in_another_process_count_here(attempt):
    """gunicorn runs several worker processes: the counts must live where all of them look."""
    make_user("reviewer", "alice")
    code = (
        "import django; django.setup()\n"
        "from django.test import Client\n"
        "for _ in range(5):\n"
        f"    Client().post({LOGIN!r}, {{'username': 'alice', 'password': 'wrong'}},"
        " REMOTE_ADDR='10.0.0.1', HTTP_HOST='localhost')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert refused(attempt("alice", PASSWORD, address="10.0.0.2"))
