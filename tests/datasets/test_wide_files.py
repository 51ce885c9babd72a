"""A file of any width the importer reads maps through the page: the mapping form never sends
more fields than Django's DATA_UPLOAD_MAX_NUMBER_FIELDS (above it Django answers a bare 400)."""

import re
from html import unescape
from html.parser import HTMLParser
from urllib.parse import urlencode

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from playwright.sync_api import expect

from apps.datasets.forms import checkbox_columns
from apps.datasets.models import Dataset, Task
from tests.base import make_user
from tests.datasets import samples


class FormFields(HTMLParser):
    """What a browser sends for the form #mapping-form: hidden and text inputs, ticked boxes
    (or every box, `tick_all`), each select's selected option (else its first) and textareas."""

    def __init__(self, html: str, tick_all: bool = False) -> None:
        super().__init__()
        self.tick_all = tick_all
        self.pairs: list[tuple[str, str]] = []
        self.in_form = False
        self.select: dict | None = None
        self.textarea: list | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        attr = {key: value or "" for key, value in attrs}
        if tag == "form":
            self.in_form = attr.get("id") == "mapping-form"
        if not self.in_form or not (attr.get("name") or tag == "option"):
            return
        if tag == "input" and attr.get("type") in ("hidden", "text", None):
            self.pairs.append((attr["name"], attr.get("value", "")))
        elif tag == "input" and attr.get("type") == "checkbox":
            if self.tick_all or "checked" in attr:
                self.pairs.append((attr["name"], attr["value"]))
        elif tag == "select":
            self.select = {"name": attr["name"], "first": None, "chosen": None}
        elif tag == "option" and self.select is not None:
            if self.select["first"] is None:
                self.select["first"] = attr.get("value", "")
            if "selected" in attr:
                self.select["chosen"] = attr.get("value", "")
        elif tag == "textarea":
            self.textarea = [attr["name"]]

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.in_form = False
        elif tag == "select" and self.select is not None:
            chosen = self.select["chosen"]
            value = self.select["first"] if chosen is None else chosen
            self.pairs.append((self.select["name"], value))
            self.select = None
        elif tag == "textarea" and self.textarea is not None:
            name, *text = self.textarea
            self.pairs.append((name, "".join(text).removeprefix("\n")))
            self.textarea = None

    def handle_data(self, data: str) -> None:
        if self.textarea is not None:
            self.textarea.append(data)


def wide_csv(width: int) -> tuple[list[str], bytes]:
    columns = ["id", "answer", *(f"c{n}" for n in range(width - 2))]
    rows = [[f"r{row}", f"a{row}", *(f"{row}.{n}" for n in range(width - 2))] for row in (1, 2)]
    return columns, samples.csv_bytes(columns, rows)


def upload(client, task: Task, data: bytes) -> str:
    response = client.post(
        reverse("datasets:dataset-upload", args=[task.slug]),
        {"file": SimpleUploadedFile("wide.csv", data)},
    )
    assert response.status_code == 302, response.content.decode()[-2000:]
    return response["Location"]


def send(client, url: str, pairs: list[tuple[str, str]]):
    """Post the pairs urlencoded, as a browser posts this form."""
    return client.post(url, urlencode(pairs), content_type="application/x-www-form-urlencoded")


@pytest.mark.django_db
def test_files_at_and_above_the_checkbox_width_map_through_the_page(reviewer_client):
    limit = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
    widest = checkbox_columns()
    assert (limit, widest) == (1000, 495)
    for width in (limit + 1, limit, widest + 1, widest):
        # A task of its own: a task suggests its last mapping, and that is not under test.
        task = Task.objects.create(slug=f"wide-{width}", name=f"{width} columns")
        columns, data = wide_csv(width)
        url = upload(reviewer_client, task, data)
        html = reviewer_client.get(url).content.decode()
        # What the page suggests imports: the id, the reference, every other column an input.
        response = send(reviewer_client, url, FormFields(html).pairs)
        assert response.status_code == 302, (width, response.content.decode()[-2000:])
        dataset = Dataset.objects.get(task=task)
        assert dataset.row_count == 2 and dataset.columns == columns
        assert (dataset.id_column, dataset.reference_column) == ("id", "answer")
        assert dataset.input_columns == columns[2:]
        # Checkboxes while the worst a person can do, every box of both lists ticked, stays
        # under the limit (and is then refused by the mapping's own check, not by Django).
        assert html.count('type="checkbox"') == (2 * width if width <= widest else 0), width
        worst = FormFields(html, tick_all=True).pairs
        assert len(worst) <= limit, (width, len(worst))
        if width <= widest:
            url = upload(reviewer_client, task, data)
            response = send(reviewer_client, url, worst)
            assert response.status_code == 200, width
            assert "cannot be both the id column and a response" in response.content.decode()


@pytest.mark.django_db
def test_a_10000_column_file_is_mapped_by_typing_column_names(reviewer_client, task):
    columns, data = wide_csv(10_000)
    url = upload(reviewer_client, task, data)
    response = send(
        reviewer_client, url, FormFields(reviewer_client.get(url).content.decode()).pairs
    )
    assert response.status_code == 302, response.content.decode()[-2000:]
    assert Dataset.objects.get().input_columns == columns[2:]  # as suggested: all the others

    url = upload(reviewer_client, task, data)
    html = reviewer_client.get(url).content.decode()
    assert 'type="checkbox"' not in html and '<datalist id="column-names">' in html
    assert "This file has 10,000 columns, too many to tick" in html
    assert "The preview shows the first 100 of the 10,000 columns." in html
    fields = dict(FormFields(html).pairs)
    assert fields["id_column"] == "id" and fields["input_columns"] == ""  # empty: all unmapped

    fields.update(input_columns="c1\r\n  c2  \r\nc99999", response_columns="c9997")
    response = send(reviewer_client, url, list(fields.items()))
    assert response.status_code == 200
    message = "The input column 'c99999' is not in the file. Its columns are: id, answer, c0, c1, "
    page = unescape(response.content.decode())
    assert message in page and "c27, … (10,000 columns in all)." in page

    fields.update(input_columns="c1\r\n  c2  \r\n")
    response = send(reviewer_client, url, list(fields.items()))
    assert response.status_code == 302, response.content.decode()[-2000:]
    dataset = Dataset.objects.get(version=2)
    assert dataset.row_count == 2 and dataset.columns == columns
    assert dataset.mapping == {
        "id_column": "id",
        "input_columns": ["c1", "c2"],
        "reference_column": "answer",
        "tags_column": None,
        "response_columns": ["c9997"],
    }
    assert dataset.items.get(key="r2").fields["c9997"] == "2.9997"


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_1000_column_file_maps_in_chromium(login, live_server):
    task = Task.objects.create(slug="wide", name="Wide")
    _, data = wide_csv(1000)
    page = login(make_user("reviewer"), f"/tasks/{task.slug}/upload/")
    for response_columns in ("", "c997"):
        page.goto(f"{live_server.url}/tasks/{task.slug}/upload/")
        page.set_input_files(
            "input[name=file]",
            files=[{"name": "wide.csv", "mimeType": "text/csv", "buffer": data}],
        )
        page.click("text=Upload and preview")
        if response_columns:
            page.fill("textarea[name=response_columns]", response_columns)
        page.click("#import-button")
        page.wait_for_url(re.compile(r"/datasets/\d+/$"))
        expect(page.locator("#row-count")).to_have_text("2")
    first, second = Dataset.objects.order_by("version")
    assert first.response_columns == [] and len(first.input_columns) == 998
    assert second.response_columns == ["c997"] and second.reference_column == "answer"
    assert len(second.input_columns) == 997  # every column not mapped elsewhere
