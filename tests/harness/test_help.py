"""The help pages: docs/*.md for people signed in, linked from every page's top bar."""

import re

import pytest
from django.test import Client
from django.urls import Resolver404, resolve, reverse

from apps.datasets.models import Task
from evalsite.help import pages
from tests.base import ROOT


def hrefs(html: str) -> list[str]:
    return re.findall(r'href="([^"]+)"', html)


def test_every_docs_page_is_a_help_page_whose_links_lead_somewhere(viewer_client):
    names = [name for name, _ in pages()]
    assert {path.stem for path in (ROOT / "docs").glob("*.md")} - set(names) == {"index"}
    assert {"datasets", "runs", "judges", "review", "leaderboards", "api"} <= set(names)
    for name in [None, *names]:
        url = reverse("help") if name is None else reverse("help-page", args=[name])
        response = viewer_client.get(url)
        assert response.status_code == 200, url
        body = response.content.decode().split('id="help-body"', 1)[1]
        for href in hrefs(body):
            if href.startswith(("http://", "https://", "mailto:", "#")):
                continue
            try:
                resolve(href.split("#")[0])
            except Resolver404:
                pytest.fail(f"{url} links to {href}")
            if "#" in href and href.startswith("/help/"):  # the heading is on that page
                target = viewer_client.get(href.split("#")[0]).content.decode()
                assert f'id="{href.split("#")[1]}"' in target, href


def test_a_help_page_shows_the_docs_text_with_its_headings_and_tables(viewer_client):
    html = viewer_client.get(reverse("help-page", args=["configuration"])).content.decode()
    assert "<title>Help: Configuration · evalsite</title>" in html
    assert '<h2 id="every-variable">Every variable</h2>' in html
    assert "<td><code>LOGIN_FAILURE_LIMIT</code></td>" in html
    # A link to a file of the tree is text here (the site does not serve the tree).
    assert "<code>.env.example</code></a>" not in html
    runs = viewer_client.get(reverse("help-page", args=["runs"])).content.decode()
    assert 'href="/help/judges/"' in runs


def test_help_needs_a_login_and_knows_only_docs_pages(viewer_client):
    response = Client().get(reverse("help-page", args=["runs"]))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    assert viewer_client.get("/help/settings/").status_code == 404
    assert viewer_client.get("/help/..%2Fsettings/").status_code == 404
    assert (ROOT / "docs" / "index.md").exists()


def test_the_top_bar_help_link_opens_the_page_about_the_page(viewer_client, db):
    task = Task.objects.create(slug="qa", name="QA")
    for url, page in [
        (reverse("datasets:task-detail", args=[task.slug]), "datasets"),
        (reverse("runs:list"), "runs"),
        (reverse("judges:list"), "judges"),
        (reverse("review:index"), "review"),
        (reverse("leaderboards:task", args=[task.slug]), "leaderboards"),
        (reverse("accounts:api-tokens"), "api"),
    ]:
        html = viewer_client.get(url).content.decode()
        link = re.search(r'<a class="help-link" id="help-link" href="([^"]+)">Help</a>', html)
        assert link and link[1] == reverse("help-page", args=[page]), url
