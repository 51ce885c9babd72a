"""In Chromium: a viewer reaches the token page from the top bar, makes a token, sees it once,
uses it from a script, and revokes it; the API's docs page runs under the CSP."""

import urllib.error
import urllib.request

import pytest
from playwright.sync_api import expect

from apps.accounts.models import ApiToken
from tests.accounts.test_csp_browser import COLLECT_VIOLATIONS
from tests.base import make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def call(live_server, raw: str) -> int:
    request = urllib.request.Request(
        f"{live_server.url}/api/v1/tasks/", headers={"Authorization": f"Bearer {raw}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_make_use_and_revoke_a_token(login, live_server, page):
    login(make_user("viewer"))
    page.click("summary[title='Your account']")  # the account menu in the top bar
    page.click("#menu-api-tokens")
    expect(page.locator("h1")).to_have_text("API tokens")
    expect(page.locator("#token-table")).to_contain_text("No tokens yet.")
    page.fill("input[name=name]", "nightly eval")
    page.click("#token-form button[type=submit]")
    raw = page.locator("#new-token-value").inner_text().strip()
    assert raw.startswith("evs_")
    row = page.locator("#token-table tbody tr").first
    expect(row).to_contain_text("nightly eval")
    expect(row).to_contain_text(raw[:10] + "…")
    expect(row).to_contain_text("never")

    assert call(live_server, raw) == 200
    page.goto(f"{live_server.url}/accounts/tokens/")
    expect(page.locator("#new-token")).to_have_count(0)  # shown once only
    assert raw not in page.content()
    expect(page.locator("#token-table tbody tr").first).not_to_contain_text("never")

    questions: list[str] = []
    page.once("dialog", lambda dialog: (questions.append(dialog.message), dialog.accept()))
    page.click("#token-table button.danger")
    expect(page.locator("#messages")).to_contain_text("Revoked nightly eval")
    expect(page.locator("#token-table")).to_contain_text("No tokens yet.")
    expect(page.locator("#revoked-table")).to_contain_text("nightly eval")
    assert questions == ["Revoke nightly eval? Scripts that use it stop working."]
    assert call(live_server, raw) == 401
    assert ApiToken.objects.get().revoked_at is not None


def test_the_docs_page_runs_under_the_csp(login, live_server, page):
    page.add_init_script(COLLECT_VIOLATIONS)
    login(make_user("reviewer"))
    page.goto(f"{live_server.url}/api/v1/docs")
    expect(page.locator(".swagger-ui .title")).to_contain_text("evalsite API")
    expect(page.locator(".opblock-summary-path").first).to_be_visible()
    assert page.evaluate("window.__csp") == []
