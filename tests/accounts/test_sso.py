"""Single sign-on (OIDC, #32.1) against a real provider on loopback (tests/accounts/oidc.py:
node's oidc-provider), the Django side in this process: the code flow with PKCE, the state, an
expired token, the groups claim giving the role at each sign-in, local logins turned off."""

from urllib.parse import urlsplit

import pytest
from django.test import Client
from django.urls import reverse

from apps.accounts.models import ApiToken, Project, SsoIdentity, User
from tests.accounts import oidc
from tests.base import PASSWORD, make_user

LOGIN = "/accounts/login/"
START = "/accounts/sso/"

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def provider():
    with oidc.running([oidc.TEST_CLIENT_CALLBACK]) as running:
        yield running


@pytest.fixture
def sso(provider, settings):
    for name, value in provider.settings().items():
        setattr(settings, name, value)
    provider.clock(0)
    return provider


def start(client: Client, next_url: str = "") -> str:
    """Begin a sign-in at evalsite; returns the provider's authorization URL it redirects to."""
    response = client.get(START + (f"?next={next_url}" if next_url else ""))
    assert response.status_code == 302, response.content[:500]
    return response["Location"]


def back(client: Client, callback_url: str):
    """The browser arriving back at evalsite from the provider."""
    parts = urlsplit(callback_url)
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == oidc.TEST_CLIENT_CALLBACK
    return client.get(f"{parts.path}?{parts.query}")


def sign_in(client: Client, provider: oidc.Provider, login: str, next_url: str = ""):
    return back(client, provider.authorize(start(client, next_url), login))


def signed_in_as(client: Client) -> str | None:
    response = client.get(reverse("datasets:task-list"))
    if response.status_code != 200:
        return None
    return response.wsgi_request.user.username


def refusal(response) -> str:
    """The message the login page shows after a refused sign-in."""
    assert (response.status_code, response["Location"]) == (302, LOGIN)
    messages = [str(m) for m in response.wsgi_request._messages]
    assert len(messages) == 1 and messages[0].startswith("Single sign-on failed."), messages
    return messages[0]


def test_first_sign_in_makes_the_user_with_the_role_of_their_groups(sso):
    sso.accounts(
        alice={
            "email": "alice@example.com",
            "preferred_username": "alice",
            "given_name": "Alice",
            "groups": ["eval-reviewers", "unrelated"],
        }
    )
    client = Client()
    authorization = start(client, next_url="/runs/")
    # The authorization request is the code flow with a PKCE challenge, a state and a nonce.
    query = oidc.callback_query(authorization)
    assert authorization.startswith(f"{sso.issuer}/auth?")
    assert query["response_type"] == "code" and query["client_id"] == oidc.CLIENT_ID
    assert query["code_challenge_method"] == "S256" and len(query["code_challenge"]) == 43
    assert query["state"] and query["nonce"]
    assert set(query["scope"].split()) == {"openid", "email", "profile", "groups"}

    response = back(client, sso.authorize(authorization, "alice"))
    assert (response.status_code, response["Location"]) == (302, "/runs/")
    assert signed_in_as(client) == "alice"
    user = User.objects.get(username="alice")
    assert (user.role, user.email, user.first_name) == ("reviewer", "alice@example.com", "Alice")
    assert not user.has_usable_password()  # a password login cannot reach this account
    page = client.get(reverse("datasets:task-list")).content.decode()
    assert 'id="menu-api-tokens"' in page and 'id="menu-password"' not in page
    identity = user.sso_identity
    assert (identity.issuer, identity.subject) == (sso.issuer, "alice")
    assert identity.groups == ["eval-reviewers", "unrelated"]
    # With no project groups set up, as `create_user` does: the default project, with the role.
    assert user.role_in(Project.default()) == "reviewer"

    # Next time the same account (by its `sub`) gets what its groups give now: admin wins.
    sso.accounts(alice={"email": "alice@new.example.com", "groups": ["eval-admins", "staff"]})
    other = Client()
    assert sign_in(other, sso, "alice")["Location"] == reverse("datasets:task-list")
    assert signed_in_as(other) == "alice"
    user.refresh_from_db()
    assert (user.role, user.email) == ("admin", "alice@new.example.com")
    assert User.objects.filter(sso_identity__isnull=False).count() == 1


def test_a_local_user_of_the_same_name_keeps_their_account(sso):
    local = make_user("admin", "bob")
    sso.accounts(bob={"preferred_username": "bob", "groups": ["eval-viewers"]})
    client = Client()
    sign_in(client, sso, "bob")
    assert signed_in_as(client) == "bob-2"
    assert User.objects.get(username="bob-2").role == "viewer"
    local.refresh_from_db()
    assert local.role == "admin" and not hasattr(local, "sso_identity")


def test_pkce_the_provider_refuses_a_code_without_its_verifier(sso):
    sso.accounts(carol={"groups": ["eval-admins"]})
    client = Client()
    authorization = start(client)
    callback = sso.authorize(authorization, "carol")
    # Someone who got hold of the code but not the verifier (kept in this session only).
    session = client.session
    state = oidc.callback_query(authorization)["state"]
    session["oidc_states"][state]["code_verifier"] = "x" * 64
    session.save()
    assert "could not be verified" in refusal(back(client, callback))
    assert signed_in_as(client) is None
    assert not User.objects.filter(username="carol").exists()


def test_a_wrong_or_reused_state_is_refused(sso):
    sso.accounts(dave={"groups": ["eval-admins"]})
    client = Client()
    callback = sso.authorize(start(client), "dave")
    state = oidc.callback_query(callback)["state"]
    assert "not started here" in refusal(back(client, callback.replace(state, "forged-state")))
    assert signed_in_as(client) is None
    # Another browser (login CSRF: a victim sent to the attacker's callback) is refused too.
    victim = Client()
    assert "not started here" in refusal(back(victim, callback))
    assert signed_in_as(victim) is None
    # The genuine answer in the browser that asked signs in once; its replay is refused.
    assert back(client, callback)["Location"] == reverse("datasets:task-list")
    client.logout()
    assert "not started here" in refusal(back(client, callback))
    assert signed_in_as(client) is None


def test_an_expired_id_token_is_refused(sso):
    sso.accounts(erin={"groups": ["eval-admins"]})
    client = Client()
    callback = sso.authorize(start(client), "erin")
    # The provider's clock is two hours slow: its ID token (an hour's life) is born expired.
    sso.clock(-7200)
    assert "token had expired" in refusal(back(client, callback))
    assert signed_in_as(client) is None
    assert not User.objects.filter(username="erin").exists()


def test_the_provider_saying_no_is_shown(sso):
    client = Client()
    state = oidc.callback_query(start(client))["state"]
    response = client.get(
        f"/accounts/sso/callback/?error=access_denied&error_description=End-User+aborted&state={state}"
    )
    assert refusal(response).endswith("The identity provider said: End-User aborted.")


def test_a_removed_group_loses_access_at_the_next_sign_in(sso):
    sso.accounts(frank={"groups": ["eval-reviewers"]})
    client = Client()
    sign_in(client, sso, "frank")
    user = User.objects.get(username="frank")
    _, token = ApiToken.issue(user, "ci")
    api = Client(headers={"Authorization": f"Bearer {token}"})
    assert api.get("/api/v1/tasks/").status_code == 200

    sso.accounts(frank={"groups": ["unrelated"]})
    again = Client()
    assert "none of the groups" in refusal(sign_in(again, sso, "frank"))
    assert signed_in_as(again) is None
    user.refresh_from_db()
    assert not user.is_active and user.sso_identity.groups == ["unrelated"]
    # Deactivated: the old session and the API token stop working too.
    assert signed_in_as(client) is None
    assert api.get("/api/v1/tasks/").status_code == 401

    # The group given back at the provider gives access back.
    sso.accounts(frank={"groups": ["eval-viewers"]})
    sign_in(again, sso, "frank")
    assert signed_in_as(again) == "frank"
    user.refresh_from_db()
    assert user.is_active and user.role == "viewer"

    # A user an admin deactivated stays out, whatever their groups say.
    User.objects.filter(pk=user.pk).update(is_active=False)
    assert "deactivated" in refusal(sign_in(Client(), sso, "frank"))
    assert SsoIdentity.objects.get(user=user).deactivated_by_groups is False


def test_no_group_no_account_unless_a_default_role_is_set(sso, settings):
    sso.accounts(gina={"groups": []}, hank={})
    assert "none of the groups" in refusal(sign_in(Client(), sso, "gina"))
    assert not User.objects.filter(username="gina").exists()
    settings.OIDC_DEFAULT_ROLE = "viewer"
    client = Client()
    sign_in(client, sso, "hank")
    assert signed_in_as(client) == "hank"
    assert User.objects.get(username="hank").role == "viewer"


def test_local_logins_turned_off(sso, settings):
    make_user("admin", "ivan")
    settings.LOCAL_LOGIN = False
    page = Client().get(LOGIN).content.decode()
    assert 'id="sso-start"' in page and 'name="password"' not in page
    response = Client().post(LOGIN, {"username": "ivan", "password": PASSWORD})
    assert response.status_code == 403
    assert "_auth_user_id" not in response.wsgi_request.session
    # Single sign-on still works.
    sso.accounts(ivan={"preferred_username": "ivan", "groups": ["eval-admins"]})
    client = Client()
    sign_in(client, sso, "ivan")
    assert signed_in_as(client) == "ivan-2"


def test_local_logins_keep_their_throttle_beside_sso(sso):
    make_user("reviewer", "judy")
    page = Client().get(LOGIN).content.decode()
    assert 'id="sso-start"' in page and 'name="password"' in page
    for _ in range(5):
        response = Client().post(LOGIN, {"username": "judy", "password": "wrong"})
    assert response.status_code == 429  # django-axes: locked out
    response = Client().post(LOGIN, {"username": "judy", "password": PASSWORD})
    assert response.status_code == 429
    # A sign-in the provider vouched for is not a password guess: not refused, not counted.
    sso.accounts(kim={"groups": ["eval-viewers"]})
    client = Client()
    sign_in(client, sso, "kim")
    assert signed_in_as(client) == "kim"


def test_without_an_issuer_there_is_no_sso(settings):
    settings.OIDC_ISSUER = ""
    page = Client().get(LOGIN).content.decode()
    assert "sso-start" not in page and 'name="password"' in page
    assert Client().get(START).status_code == 404
    assert Client().get("/accounts/sso/callback/?code=x&state=y").status_code == 404


def test_project_groups_are_the_memberships(sso, settings):
    settings.OIDC_PROJECT_GROUP_PREFIX = "evalsite:"
    team_a = Project.objects.create(slug="team-a", name="Team A")
    team_b = Project.objects.create(slug="team-b", name="Team B")
    Project.default()
    # No role group: the project groups alone let one in, with the highest role they name.
    groups = ["evalsite:team-a:reviewer", "evalsite:team-b", "evalsite:no-such-project"]
    sso.accounts(mia={"groups": groups})
    client = Client()
    sign_in(client, sso, "mia")
    assert signed_in_as(client) == "mia"
    user = User.objects.get(username="mia")
    assert user.role == "reviewer"
    assert {p.slug for p in Project.objects.for_user(user)} == {"team-a", "team-b"}
    assert (user.role_in(team_a), user.role_in(team_b)) == ("reviewer", "reviewer")

    # Out of team-b and down to viewer in team-a at the provider: so here at the next sign-in.
    sso.accounts(mia={"groups": ["evalsite:team-a:viewer", "eval-viewers"]})
    sign_in(Client(), sso, "mia")
    user = User.objects.get(username="mia")
    assert user.role == "viewer"
    assert {p.slug for p in Project.objects.for_user(user)} == {"team-a"}
    assert user.role_in(team_a) == "viewer" and user.role_in(team_b) is None
    # An admin group makes an instance admin, who sees every project.
    sso.accounts(mia={"groups": ["eval-admins"]})
    sign_in(Client(), sso, "mia")
    user = User.objects.get(username="mia")
    assert {p.slug for p in Project.objects.for_user(user)} == {"default", "team-a", "team-b"}
