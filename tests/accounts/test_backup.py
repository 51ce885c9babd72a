"""Backups that restore (#32.5): `manage.py backup` → a fresh database and data directory →
`manage.py restore` → every row of every model identical (scores, reviews, history, tokens,
batches…), the uploaded files and the secret key too, on SQLite and on PostgreSQL."""

import base64
import contextlib
import datetime
import decimal
import io
import json
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.core.management import CommandError, call_command
from django.db import connection

from apps.accounts.backups import MANIFEST
from apps.accounts.models import ApiToken
from apps.judges.models import Score, ScoreEvent
from apps.leaderboards import boards
from apps.review.models import Review
from apps.runs.models import AttemptLog, CachedReply, Endpoint, Response, Run, RunBatch, Turn
from tests import factories as f
from tests.base import make_user


def _plain(value: Any) -> Any:
    """A field's value as JSON keeps it exactly (floats by repr, bytes in base64)."""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, bytes | memoryview):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    return value


def snapshot() -> dict[str, list[list[Any]]]:
    """Every row of every model (many-to-many tables too), every column, in key order."""
    rows = {}
    for model in apps.get_models(include_auto_created=True):
        if not model._meta.managed or model._meta.proxy:
            continue
        names = [field.attname for field in model._meta.concrete_fields]
        rows[model._meta.label] = [
            [_plain(v) for v in row]
            for row in model._base_manager.order_by("pk").values_list(*names)
        ]
    return rows


def populate(media: Path) -> None:
    """Rows of each kind a team cares about, with values that are easy to get subtly wrong
    (floats that do not round-trip through text, unicode, JSON, null)."""
    reviewer = make_user("reviewer", "rev")
    ApiToken.issue(reviewer, "ci")
    endpoint = Endpoint.objects.create(name="e", model="m", api_key_secret="sk-kept-secret")
    task = f.make_task("backed-up")
    dataset = f.make_qa_dataset(task, 3)
    gen = f.make_generation_run(dataset, {0: "答案是B\nsecond line", 1: "4", 2: None})
    Run.objects.filter(pk=gen.pk).update(
        endpoint=endpoint, batch=True, prompt_tokens=1234, completion_tokens=56, cost=0.1 + 0.2
    )
    Response.objects.filter(run=gen).update(prompt_tokens=7, latency_ms=321, cost=1e-7)
    RunBatch.objects.create(
        run=gen, launch=1, part=0, requests=3, keys=[[1, 0]], status="completed"
    )
    CachedReply.objects.create(key="k" * 64, model="m", content="4", cost=0.000123)
    judge_run = f.make_judge_run(dataset, source_run=gen)
    items = list(dataset.items.order_by("position"))
    f.judge_item(judge_run, items[0], [{"accuracy": 4.5, "clarity": 3}] * 2)
    f.judge_item(judge_run, items[1], [{"accuracy": 2, "clarity": 5}, None])
    f.fail_item(judge_run, items[2])
    score = Score.objects.get(run=judge_run, item=items[0], subject="accuracy")
    score.override(1.0, reviewer, "wrong: 2 + 2 is 4")
    Review.objects.create(score=score, user=reviewer, value=2.0, reason="close", seconds=12.5)
    dialogues = f.make_conversation_dataset(task, [["hi", "and then?"]])
    f.make_multi_turn_run(dialogues, {0: ["hello", "then this"]}, label="talker")
    boards.build(task, boards.Params())  # the board's stored summaries
    (media / "uploads").mkdir(parents=True)
    (media / "uploads" / "staged.upload").write_bytes(b"id,question\n1,\xe2\x9c\x93\n")


@contextlib.contextmanager
def connected_to(name: str) -> Iterator[None]:
    """The default connection on another database of the same server (a SQLite file, a
    PostgreSQL database) while the block runs: what a fresh install would read."""
    conf = connection.settings_dict
    kept = conf["NAME"]
    connection.close()
    conf["NAME"] = name
    try:
        yield
    finally:
        connection.close()
        conf["NAME"] = kept


@pytest.fixture
def fresh_database(tmp_path):
    """The name of a new, empty database of the suite's kind; dropped afterwards."""
    if connection.vendor == "sqlite":
        yield str(tmp_path / "fresh.sqlite3")
        return
    name = f"restored_{uuid.uuid4().hex[:12]}"
    with connection.cursor() as cursor:
        cursor.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.django_db(transaction=True)
def test_backup_then_restore_into_a_fresh_database_gives_every_row_back(
    tmp_path, settings, fresh_database
):
    settings.MEDIA_ROOT = tmp_path / "media"
    populate(settings.MEDIA_ROOT)
    before = snapshot()
    # The rows the issue names are there to be compared, not vacuously equal.
    for label in (
        "judges.Score",
        "judges.ScoreEvent",
        "judges.JudgeRound",
        "review.Review",
        "accounts.ApiToken",
        "runs.RunBatch",
        "runs.Response",
        "runs.Turn",
        "runs.AttemptLog",
        "runs.CachedReply",
        "leaderboards.RunSummary",
    ):
        assert before[label], label
    assert ScoreEvent.objects.exists() and Turn.objects.exists() and AttemptLog.objects.exists()

    archive = tmp_path / "site.tar"
    call_command("backup", str(archive))
    with tarfile.open(archive) as tar:
        manifest = json.load(tar.extractfile(MANIFEST))
    assert manifest["engine"] == connection.vendor
    assert manifest["media"] == [{"path": "uploads/staged.upload", "bytes": 18}]
    assert archive.stat().st_mode & 0o077 == 0  # API keys inside: for its owner only

    key = Path(settings.DATA_DIR) / "secret_key"
    # A fresh install: a new data directory and an empty database, restored into.
    settings.DATA_DIR = tmp_path / "restored"
    settings.MEDIA_ROOT = settings.DATA_DIR / "media"
    settings.DATA_DIR.mkdir()
    with connected_to(fresh_database):
        call_command("restore", str(archive))
        after = snapshot()
        added = apps.get_model("datasets", "Task").objects.create(slug="after", name="After")
    assert after.keys() == before.keys()
    for label, rows in before.items():
        assert after[label] == rows, label
    # The sequences came back too: a new row takes a new key.
    assert added.pk > max(row[0] for row in before["datasets.Task"])
    restored_file = settings.MEDIA_ROOT / "uploads" / "staged.upload"
    assert restored_file.read_bytes() == b"id,question\n1,\xe2\x9c\x93\n"
    if manifest["secret_key"]:
        assert (settings.DATA_DIR / "secret_key").read_bytes() == key.read_bytes()


def test_restore_refuses_a_database_in_use_a_newer_backup_and_a_stranger(db, tmp_path, settings):
    settings.MEDIA_ROOT = tmp_path / "media"
    f.make_task("in-use")
    archive = tmp_path / "a.tar"
    manifest = {
        "format": 1,
        "engine": connection.vendor,
        "created_at": "2026-11-29T00:00:00+00:00",
        "migrations": [["runs", "9999_from_the_future"]],
        "media": [],
        "secret_key": False,
    }
    with tarfile.open(archive, "w") as tar:
        data = json.dumps(manifest).encode()
        info = tarfile.TarInfo(MANIFEST)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(CommandError, match=r"newer evalsite .*runs\.9999_from_the_future"):
        call_command("restore", str(archive), replace=True)
    manifest["migrations"] = []
    with tarfile.open(archive, "w") as tar:
        data = json.dumps(manifest).encode()
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(CommandError, match=r"already holds 1 task.*--replace"):
        call_command("restore", str(archive))
    stranger = tmp_path / "notes.txt"
    stranger.write_text("not a backup")
    with pytest.raises(CommandError, match="not a backup"):
        call_command("restore", str(stranger))
    assert list(Path(settings.DATA_DIR).glob("**/.backup-*")) == []
    # Nothing was touched: the task is still there.
    assert apps.get_model("datasets", "Task").objects.get().slug == "in-use"


def test_a_crafted_path_is_refused_before_the_database_is_touched(db, tmp_path, settings):
    settings.DATA_DIR = tmp_path
    settings.MEDIA_ROOT = tmp_path / "media"
    call_command("backup")  # by default into backups/ in the data directory
    (archive,) = (tmp_path / "backups").glob("evalsite-*.tar")
    with tarfile.open(archive, "a") as tar:
        info = tarfile.TarInfo("media/../../outside.txt")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"bad"))
    f.make_task("kept")
    with pytest.raises(CommandError, match="unsafe path"):
        call_command("restore", str(archive), replace=True)
    assert not (tmp_path / "outside.txt").exists()
    assert apps.get_model("datasets", "Task").objects.get().slug == "kept"


def test_backup_never_overwrites(db, tmp_path, settings):
    settings.MEDIA_ROOT = tmp_path / "media"
    (tmp_path / "taken.tar").write_text("older")
    with pytest.raises(CommandError, match="exists already"):
        call_command("backup", str(tmp_path / "taken.tar"))
    assert (tmp_path / "taken.tar").read_text() == "older"
