"""#32.6: a request body over its limit is refused by its Content-Length before any of it is
read, and an anonymous multipart body is refused unread (CSRF checking would parse, and spool,
it before the login check). The bodies here are streams that fail the test if anything reads
them; tests/accounts/test_request_limits_server.py sends the same requests to gunicorn."""

import json
import os
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile, TemporaryUploadedFile
from django.test import Client

from apps.accounts.models import ApiToken
from apps.datasets.readers import DatasetError, check_size
from evalsite import gunicorn_conf
from evalsite.sizes import human_size, sizes_apart
from tests.base import make_user
from tests.factories import make_task

GIB = 2**30
MB = 2**20
MULTIPART = "multipart/form-data; boundary=----evalsite"


class Unreadable:
    """A request body that no one may read."""

    def read(self, *args: object) -> bytes:
        raise AssertionError("the request body was read")

    readline = read


def send(client: Client, path: str, length: int, content_type: str = MULTIPART, **headers: str):
    return client.generic(
        "POST",
        path,
        data=b"-",
        content_type=content_type,
        headers=headers,
        CONTENT_LENGTH=str(length),
        **{"wsgi.input": Unreadable()},
    )


@pytest.fixture
def task(db):
    return make_task("limits")


def test_a_gigabyte_upload_by_a_token_is_refused_unread_in_json(task):
    user = make_user("reviewer")
    _, raw = ApiToken.issue(user, "script")
    response = send(Client(), "/api/v1/tasks/limits/datasets/", GIB, Authorization=f"Bearer {raw}")
    assert response.status_code == 413
    assert response["Content-Type"] == "application/json; charset=utf-8"
    detail = response.json()["detail"]
    assert detail.startswith("The request body is 1.0 GB; the limit is 210.1 MB.")
    assert "DATASET_MAX_UPLOAD_BYTES" in detail


def test_a_gigabyte_upload_on_the_page_gets_the_413_page(task, client):
    client.force_login(make_user("reviewer"))
    response = send(client, "/tasks/limits/upload/", GIB)
    assert response.status_code == 413
    page = response.content.decode()
    assert "Too large" in page and "The request body is 1.0 GB; the limit is 210.1 MB." in page


def test_a_json_body_over_the_field_limit_is_refused_unread(task):
    _, raw = ApiToken.issue(make_user("reviewer"), "script")
    response = send(
        Client(),
        "/api/v1/tasks/limits/datasets/",
        10 * MB + 1,
        content_type="application/json",
        Authorization=f"Bearer {raw}",
    )
    assert response.status_code == 413
    # Sizes a byte apart are named apart.
    assert response.json()["detail"].startswith(
        "The request body is 10,485,761 bytes; the limit is 10,485,760 bytes."
    )


@pytest.mark.parametrize("path", ["/tasks/limits/upload/", "/api/v1/tasks/limits/datasets/"])
def test_an_anonymous_multipart_body_is_refused_unread(task, settings, path):
    settings.DATASET_MAX_UPLOAD_BYTES = GIB  # under the size limit: refused for being anonymous
    response = send(Client(enforce_csrf_checks=True), path, 300 * MB)
    if path.startswith("/api/"):
        assert response.status_code == 401
        assert response.json()["detail"].startswith("Sign in first")
        assert response["WWW-Authenticate"] == 'Bearer realm="evalsite"'
    else:
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/?next=/tasks/limits/upload/")


def test_the_login_page_takes_a_small_multipart_form_and_no_file(db):
    form = {"username": "nobody", "password": "wrong"}
    assert Client().post("/accounts/login/", form).status_code == 200  # the form, re-shown
    response = send(Client(), "/accounts/login/", 65 * 1024)
    assert response.status_code == 413
    page = response.content.decode()
    assert (
        "The request body is 65.0 KB; the limit is 64.0 KB. Sign in first to send a file." in page
    )


def test_a_wrong_token_does_not_make_a_multipart_body_welcome(task, settings):
    settings.DATASET_MAX_UPLOAD_BYTES = GIB
    response = send(
        Client(), "/api/v1/tasks/limits/datasets/", 300 * MB, Authorization="Bearer es_wrong"
    )
    assert response.status_code == 401


def test_a_signed_in_upload_within_the_limit_goes_through(task, client):
    client.force_login(make_user("reviewer"))
    body = b"question,answer\nTwo and two?,4\n"
    response = client.post(
        "/tasks/limits/upload/", {"file": SimpleUploadedFile("limits.csv", body, "text/csv")}
    )
    assert response.status_code == 302, response.content[:500]


def test_sizes_that_differ_are_named_apart():
    limit = 200 * MB
    assert sizes_apart(limit + 1024, limit) == ("200.001 MB", "200.000 MB")
    assert sizes_apart(limit + 10 * 1024, limit) == ("200.01 MB", "200.00 MB")
    assert sizes_apart(limit + 60 * 1024, limit) == ("200.1 MB", "200.0 MB")
    assert sizes_apart(limit + 1, limit) == ("209,715,201 bytes", "209,715,200 bytes")
    assert sizes_apart(GIB, limit) == ("1.0 GB", "200.0 MB")
    assert sizes_apart(limit, limit) == ("200.0 MB", "200.0 MB")
    assert human_size(512) == "512 bytes"
    with pytest.raises(DatasetError, match=r"The file is 200\.001 MB; the limit is 200\.000 MB\."):
        check_size(limit + 1024)


def test_uploads_spill_into_the_data_directory_and_stale_ones_are_swept(settings, tmp_path):
    assert Path(settings.FILE_UPLOAD_TEMP_DIR).parent == Path(settings.DATA_DIR)
    spilled = TemporaryUploadedFile("big.csv", "text/csv", 10, None)
    assert Path(spilled.temporary_file_path()).parent == Path(settings.FILE_UPLOAD_TEMP_DIR)
    spilled.close()

    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path)
    stale, fresh = tmp_path / "tmpa.upload", tmp_path / "tmpb.upload"
    stale.write_bytes(b"left by a killed server")
    fresh.write_bytes(b"an upload in progress")
    now = fresh.stat().st_mtime
    os.utime(stale, (now - 3600, now - 3600))
    assert gunicorn_conf.sweep_upload_temp(now=now) == 1
    assert not stale.exists() and fresh.exists()
    assert json.dumps(sorted(p.name for p in tmp_path.iterdir())) == '["tmpb.upload"]'
