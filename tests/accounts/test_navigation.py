"""Each role logs in through the real login form in Chromium and sees the navigation it may use."""

import pytest

from tests.base import make_user

EXPECTED_NAV = {
    "admin": [
        "Tasks",
        "Datasets",
        "Runs",
        "Judges",
        "Review",
        "Leaderboards",
        "Endpoints",
        "Notifications",
        "Admin",
    ],
    "reviewer": ["Tasks", "Datasets", "Runs", "Judges", "Review", "Leaderboards"],
    "viewer": ["Tasks", "Datasets", "Runs", "Judges", "Review", "Leaderboards"],
}


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("role", ["admin", "reviewer", "viewer"])
def test_each_role_sees_its_navigation(role, login, live_server):
    user = make_user(role)
    page = login(user)
    nav = page.locator("#main-nav a")
    assert nav.all_inner_texts() == EXPECTED_NAV[role]
    assert f"{user.username} · {role}" in page.locator(".who").inner_text()

    # Every link it shows opens for this role.
    for href in nav.evaluate_all("links => links.map(a => a.getAttribute('href'))"):
        response = page.goto(f"{live_server.url}{href}")
        assert response is not None and response.status == 200, (role, href)


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_anonymous_browser_lands_on_login_and_a_viewer_cannot_open_endpoints(
    page, live_server, login
):
    page.goto(f"{live_server.url}/runs/")
    assert "/accounts/login/" in page.url
    page = login(make_user("viewer"))
    response = page.goto(f"{live_server.url}/runs/endpoints/")
    assert response is not None and response.status == 403


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_wrong_password_is_refused(page, live_server):
    make_user("viewer")
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "viewer")
    page.fill("input[name=password]", "not-the-password")
    page.click("button[type=submit]")
    assert "did not match" in page.content()
    assert "/accounts/login/" in page.url


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_account_menu_opens_by_click_and_by_keyboard(login, live_server):
    """One account menu (tokens, password, log out), not a bare name link (#28.6)."""
    user = make_user("viewer")
    page = login(user)
    items = page.locator("#account-menu .account-items")
    assert not items.is_visible()
    page.click("#account-menu summary")
    assert items.is_visible()
    assert items.locator("li").all_inner_texts() == ["API tokens", "Change password", "Log out"]
    page.click("#menu-password")
    page.wait_for_url("**/accounts/password/")
    page.focus("#account-menu summary")
    page.keyboard.press("Enter")
    assert page.locator("#menu-log-out").is_visible()
    page.click("#menu-log-out")
    page.wait_for_url("**/login/**")
