"""Every page has an icon: no 404 for /favicon.ico in the browser's console on any page."""

import pytest
from django.urls import reverse

from tests.base import PASSWORD


def test_favicon_ico_redirects_to_the_icon_without_login(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301
    icon = client.get(response["Location"])
    assert icon.status_code == 200
    assert b"<svg" in b"".join(icon.streaming_content)


@pytest.mark.browser
def test_pages_load_with_no_failed_request(live_server, page, admin_user):
    failed: list[str] = []
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.goto(f"{live_server.url}{reverse('accounts:login')}")
    page.fill("input[name=username]", admin_user.username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    page.goto(f"{live_server.url}{reverse('runs:list')}")
    page.wait_for_load_state("networkidle")
    icon = page.evaluate("document.querySelector('link[rel=icon]').href")
    assert page.request.get(icon).status == 200
    assert failed == []
