"""Accessibility (#28.7): axe-core, vendored for the tests only (tests/vendor, MPL-2.0), run in
Chromium over every page a signed-in person reaches by links from the home page of the demo
install (the newcomer's walk: tasks, upload, datasets, endpoints, prompts, runs, judges, review,
leaderboards, agreement, compare, account), as an admin at 1280 and 800 px and as a viewer. No
serious or critical violation may remain; the skip link reaches the content by keyboard."""

import re
from pathlib import Path
from urllib.parse import urljoin, urlparse

import pytest
from django.core.management import call_command
from playwright.sync_api import Page, expect

from apps.runs.models import Run
from tests.base import work

AXE = (Path(__file__).parent.parent / "vendor" / "axe-core-4.14.1.min.js").read_text()
PAGES = 75  # distinct pages (ids folded) at most per walk; the demo install has about 40, help 12
# Not followed: leaving the session, files rather than pages, Django's own admin site (its pages
# are Django's) and the API's docs (Swagger UI's markup, built by its script after load).
SKIP = ("logout", "/admin/", "/api/", "export", "download", ".csv", ".json", "format=")

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def violations(page: Page) -> list[str]:
    """axe's serious and critical violations on the page as it is now, one line each."""
    page.evaluate(AXE)  # through the DevTools protocol: the pages' CSP forbids inline script
    found = page.evaluate(
        """async () => (await axe.run(document, {resultTypes: ["violations"]})).violations
            .filter(v => v.impact === "serious" || v.impact === "critical")
            .map(v => v.id + " (" + v.impact + "): " + v.nodes.slice(0, 3)
              .map(n => n.target.join(" ")).join(" | "))"""
    )
    return [str(line) for line in found]


def walk(page: Page, base: str, username: str) -> dict[str, list[str]]:
    page.goto(f"{base}/accounts/login/")
    assert violations(page) == [], "the login page"
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", f"demo-{username}")
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    seen: set[str] = set()
    todo, found = ["/"], {}
    while todo and len(seen) < PAGES:
        path = todo.pop(0)
        shape = re.sub(r"\d+", "N", path.split("?")[0])
        if shape in seen:
            continue
        seen.add(shape)
        response = page.goto(base + path)
        if response is None or response.status != 200:
            continue
        if "text/html" not in (response.headers.get("content-type") or ""):
            continue
        if problems := violations(page):
            found[path] = problems
        for href in page.eval_on_selector_all("a[href]", "els => els.map(a => a.href)"):
            url = urlparse(urljoin(base + path, href))
            target = url.path + (f"?{url.query}" if url.query else "")
            if url.netloc == urlparse(base).netloc and not any(s in target for s in SKIP):
                todo.append(target)
    # The walk reached the pages a newcomer goes through, not just the home page.
    for shape in ("/tasks/", "/tasks/N/upload/", "/runs/N/", "/review/run/N/item/N/"):
        if username == "viewer" and shape == "/tasks/N/upload/":
            continue
        assert any(re.fullmatch(shape.replace("N", "[^/]+"), s) for s in seen), (shape, seen)
    return found


@pytest.fixture
def demo(db) -> None:
    """The demo install, its judge runs worked to the end by a real worker: the pages then show
    finished runs, results and scores to review, as a newcomer's would."""
    call_command("load_demo", stdout=open("/dev/null", "w"))  # noqa: SIM115
    work()
    assert not Run.objects.exclude(status=Run.Status.COMPLETED).exists()


@pytest.mark.parametrize(("username", "width"), [("admin", 1280), ("admin", 800), ("viewer", 1280)])
def test_no_serious_or_critical_violation_on_any_page(live_server, page, demo, username, width):
    page.set_viewport_size({"width": width, "height": 900})
    page.set_default_timeout(60_000)
    found = walk(page, live_server.url, username)
    assert found == {}, "\n".join(f"{path}: {'; '.join(lines)}" for path, lines in found.items())


def test_the_skip_link_is_the_first_stop_and_reaches_the_content(live_server, page, demo):
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "viewer")
    page.fill("input[name=password]", "demo-viewer")
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    skip = page.locator("#skip-link")
    assert skip.bounding_box()["y"] < 0  # out of sight until a keyboard reaches it
    page.keyboard.press("Tab")
    expect(skip).to_be_focused()
    assert skip.bounding_box()["y"] >= 0
    # Focus is visible: the ring the stylesheet draws, not the browser's default alone.
    assert page.evaluate("getComputedStyle(document.activeElement).outlineStyle") == "solid"
    page.keyboard.press("Enter")
    expect(page.locator("main#main")).to_be_focused()


def test_the_upload_and_mapping_pages_have_no_serious_violation(live_server, page, demo):
    """The one step of the walk no link reaches: the column mapping after an upload."""
    page.set_default_timeout(60_000)
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", "demo-admin")
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    page.goto(f"{live_server.url}/tasks/demo-mcq/upload/")
    body = "id,question,answer,model_x\nq1,What is 2+2?,4,4\nq2,Capital of France?,Paris,Lyon\n"
    page.set_input_files(
        "input[type=file]",
        files=[{"name": "new.csv", "mimeType": "text/csv", "buffer": body.encode()}],
    )
    page.click("main button[type=submit]")
    expect(page.locator("main form select").first).to_be_visible()
    assert violations(page) == [], page.url
