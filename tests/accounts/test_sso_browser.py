"""Single sign-on in real Chromium through the loopback OIDC provider (#32.1's Done-when): the
login page's button, the provider's own sign-in form, back on the page that was asked for with
the role and project of the groups; with the group removed, the next sign-in is refused."""

import pytest
from playwright.sync_api import expect

from apps.accounts.models import Project, User
from tests.accounts import oidc


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_sign_in_with_sso_in_chromium(live_server, page, settings):
    with oidc.running([f"{live_server.url}/accounts/sso/callback/"]) as provider:
        for name, value in provider.settings().items():
            setattr(settings, name, value)
        settings.OIDC_PROJECT_GROUP_PREFIX = "evalsite:"
        team_a = Project.objects.create(slug="team-a", name="Team A")
        Project.objects.create(slug="team-b", name="Team B")
        groups = ["eval-reviewers", "evalsite:team-a"]
        provider.accounts(lena={"preferred_username": "lena", "groups": groups})

        def sign_in() -> None:
            page.goto(f"{live_server.url}/runs/")  # sent to the login page, which offers SSO
            page.click("#sso-start")
            page.wait_for_url(f"{provider.issuer}/**")
            page.fill("input[name=login]", "lena")
            page.fill("input[name=password]", "any")
            page.click("button[type=submit]")

        sign_in()
        page.wait_for_url(f"{live_server.url}/runs/")
        expect(page.locator("summary.role")).to_have_text("lena · reviewer")
        lena = User.objects.get(username="lena")
        assert lena.sso_identity.groups == groups
        assert [p.slug for p in Project.objects.for_user(lena)] == ["team-a"]
        assert lena.role_in(team_a) == "reviewer"
        assert page.goto(f"{live_server.url}/admin/").status == 403  # not the admin role's

        # Out of the group at the provider: the next sign-in (a new browser session) is refused.
        provider.accounts(lena={"preferred_username": "lena", "groups": []})
        page.context.clear_cookies()
        sign_in()
        page.wait_for_url(f"{live_server.url}/accounts/login/")
        expect(page.locator("#messages")).to_contain_text("none of the groups")
        assert page.goto(f"{live_server.url}/runs/").url.startswith(
            f"{live_server.url}/accounts/login/"
        )
