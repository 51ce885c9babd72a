"""Backups of a whole install, and their restore (#32.5): `manage.py backup` and `manage.py restore`.

A backup is one tar file:

- `manifest.json`: what made it (format, database engine, when, the migrations applied, the
  files and their sizes),
- `database.sqlite3` (SQLite's online backup API: a consistent copy while the site runs) or
  `database.dump` (`pg_dump --format=custom`: one snapshot transaction),
- `media/…`: uploaded files under MEDIA_ROOT (staged uploads waiting for their mapping),
- `secret_key`: the key of the data directory, when the install keeps it there (signed
  sessions and password-reset links; without it every user is signed out).

Restore puts the database back whole: SQLite through the same backup API into the configured
file, PostgreSQL through `pg_restore --clean --single-transaction` (all or nothing). Both refuse
a database that already holds tasks or users unless told to replace it, and a backup made by
a newer evalsite (migrations this code does not know). What Redis holds is not in a backup:
docs/operations.md says what that loses.
"""

import io
import json
import os
import shutil
import sqlite3
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.recorder import MigrationRecorder
from django.utils import timezone

FORMAT = 1
MANIFEST = "manifest.json"
SQLITE_FILE = "database.sqlite3"
PG_FILE = "database.dump"
MEDIA = "media"
SECRET = "secret_key"


class BackupError(Exception):
    """A backup or restore that cannot go on, in words for the person running it."""


@dataclass(frozen=True)
class Summary:
    path: Path
    engine: str
    files: int
    bytes: int


def engine_of(alias: str = DEFAULT_DB_ALIAS) -> str:
    vendor = connections[alias].vendor
    if vendor not in ("sqlite", "postgresql"):
        raise BackupError(f"Backups support SQLite and PostgreSQL, not {vendor}.")
    return vendor


def _pg_env(conf: dict[str, Any]) -> dict[str, str]:
    """libpq's variables for the configured database: the password never on a command line."""
    env = dict(os.environ)
    for key, name in (("HOST", "PGHOST"), ("PORT", "PGPORT"), ("USER", "PGUSER")):
        if conf.get(key):
            env[name] = str(conf[key])
    if conf.get("PASSWORD"):
        env["PGPASSWORD"] = str(conf["PASSWORD"])
    env["PGDATABASE"] = conf["NAME"]
    return env


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise BackupError(
            f"{name} is not on PATH: install PostgreSQL's client tools of the server's major "
            "version (Debian/Ubuntu: postgresql-client)."
        )
    return found


def _run(command: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        message = (done.stderr or done.stdout).strip()
        raise BackupError(f"{Path(command[0]).name} failed (exit {done.returncode}): {message}")


def applied_migrations(alias: str = DEFAULT_DB_ALIAS) -> list[list[str]]:
    recorder = MigrationRecorder(connections[alias])
    return sorted([app, name] for app, name in recorder.applied_migrations())


def _media_files() -> list[Path]:
    root = Path(settings.MEDIA_ROOT)
    if not root.is_dir():
        return []
    return sorted(p for p in root.rglob("*") if p.is_file())


def default_path() -> Path:
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    return Path(settings.DATA_DIR) / "backups" / f"evalsite-{stamp}.tar"


def backup(path: Path | None = None, alias: str = DEFAULT_DB_ALIAS) -> Summary:
    """Write a backup of the database and the uploaded files to `path` (a new tar file,
    written beside it and renamed when whole, so a crash never leaves half a backup)."""
    engine = engine_of(alias)
    path = Path(path) if path is not None else default_path()
    if path.exists():
        raise BackupError(f"{path} exists already: name a new file.")
    path.parent.mkdir(parents=True, exist_ok=True)
    conf = connections[alias].settings_dict
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".backup-") as work:
        if engine == "sqlite":
            database = Path(work) / SQLITE_FILE
            source = sqlite3.connect(conf["NAME"])
            target = sqlite3.connect(database)
            try:
                with target:
                    source.backup(target)
            finally:
                target.close()
                source.close()
        else:
            database = Path(work) / PG_FILE
            _run(
                [_tool("pg_dump"), "--format=custom", "--no-owner", f"--file={database}"],
                _pg_env(conf),
            )
        media = _media_files()
        secret = Path(settings.DATA_DIR) / SECRET
        manifest = {
            "format": FORMAT,
            "engine": engine,
            "created_at": timezone.now().isoformat(),
            "migrations": applied_migrations(alias),
            "media": [
                {"path": p.relative_to(settings.MEDIA_ROOT).as_posix(), "bytes": p.stat().st_size}
                for p in media
            ],
            "secret_key": secret.is_file(),
        }
        staged = Path(work) / "backup.tar"
        with tarfile.open(staged, "w") as tar:
            data = json.dumps(manifest, indent=1).encode()
            info = tarfile.TarInfo(MANIFEST)
            info.size = len(data)
            info.mtime = int(timezone.now().timestamp())
            tar.addfile(info, io.BytesIO(data))
            tar.add(database, arcname=database.name)
            for p in media:
                tar.add(p, arcname=f"{MEDIA}/{p.relative_to(settings.MEDIA_ROOT).as_posix()}")
            if secret.is_file():
                tar.add(secret, arcname=SECRET)
        os.chmod(staged, 0o600)  # it holds endpoints' API keys and the secret key
        staged.rename(path)
    return Summary(path, engine, len(media), path.stat().st_size)


def read_manifest(tar: tarfile.TarFile, path: Path) -> dict[str, Any]:
    try:
        member = tar.extractfile(MANIFEST)
    except KeyError:
        member = None
    if member is None:
        raise BackupError(f"{path} is not an evalsite backup: it has no {MANIFEST}.")
    manifest = json.loads(member.read())
    if manifest.get("format") != FORMAT:
        raise BackupError(f"{path}: backup format {manifest.get('format')!r} is not {FORMAT}.")
    return manifest


def holdings(alias: str = DEFAULT_DB_ALIAS) -> str:
    """What the database holds that a restore would replace ("3 tasks, 2 users"); blank
    when it holds none (a fresh database, migrated or not)."""
    from django.apps import apps  # tasks are a later app's: looked up, never imported

    found = []
    for model, noun in (
        (apps.get_model("datasets", "Task"), "task"),
        (apps.get_model(settings.AUTH_USER_MODEL), "user"),
    ):
        if model._meta.db_table not in connections[alias].introspection.table_names():
            continue
        count = model._base_manager.using(alias).count()
        if count:
            found.append(f"{count} {noun}{'s' if count != 1 else ''}")
    return ", ".join(found)


def _check_migrations(manifest: dict[str, Any]) -> None:
    from django.db.migrations.loader import MigrationLoader

    known = set(MigrationLoader(None, ignore_no_migrations=True).disk_migrations)
    unknown = [f"{app}.{name}" for app, name in manifest["migrations"] if (app, name) not in known]
    if unknown:
        raise BackupError(
            "This backup was made by a newer evalsite (migrations this code does not have: "
            f"{', '.join(unknown[:5])}{'…' if len(unknown) > 5 else ''}): update evalsite first."
        )


def _safe_member(name: str) -> PurePosixPath:
    """A media path inside MEDIA_ROOT: no absolute path, no `..` (a crafted archive)."""
    relative = PurePosixPath(name).relative_to(MEDIA)
    if relative.is_absolute() or ".." in relative.parts or not relative.parts:
        raise BackupError(f"The backup holds an unsafe path: {name!r}.")
    return relative


def restore(path: Path, replace: bool = False, alias: str = DEFAULT_DB_ALIAS) -> dict[str, Any]:
    """Put a backup back: the database whole, then the uploaded files and the secret key.
    Returns the manifest. The web server and workers must be restarted afterwards."""
    path = Path(path)
    if not path.is_file():
        raise BackupError(f"{path}: no such file.")
    engine = engine_of(alias)
    if not tarfile.is_tarfile(path):
        raise BackupError(f"{path} is not a backup (not a tar file).")
    with (
        tarfile.open(path, "r") as tar,
        tempfile.TemporaryDirectory(prefix="evalsite-restore-") as work,
    ):
        manifest = read_manifest(tar, path)
        if manifest["engine"] != engine:
            raise BackupError(
                f"{path} is a {manifest['engine']} backup; this install uses {engine}: restore "
                "it into the same kind of database."
            )
        _check_migrations(manifest)
        if (held := holdings(alias)) and not replace:
            raise BackupError(
                f"The database already holds {held}: a restore replaces everything in it. "
                "Add --replace to go ahead."
            )
        members = {m.name: m for m in tar.getmembers()}
        # Every file's place is checked before anything is touched: all or nothing.
        media = [
            (_safe_member(m.name), m)
            for m in members.values()
            if m.name.startswith(f"{MEDIA}/") and m.isfile()
        ]
        name = SQLITE_FILE if engine == "sqlite" else PG_FILE
        if name not in members:
            raise BackupError(f"{path} has no {name}: the backup is incomplete.")
        tar.extract(members[name], work, filter="data")
        database = Path(work) / name
        conf = connections[alias].settings_dict
        connections[alias].close()
        if engine == "sqlite":
            source = sqlite3.connect(database)
            target = sqlite3.connect(conf["NAME"])
            try:
                with target:
                    source.backup(target)
            finally:
                target.close()
                source.close()
        else:
            _run(
                [
                    _tool("pg_restore"),
                    "--clean",
                    "--if-exists",
                    "--no-owner",
                    "--no-privileges",
                    "--single-transaction",
                    f"--dbname={conf['NAME']}",
                    str(database),
                ],
                _pg_env(conf),
            )
        media_root = Path(settings.MEDIA_ROOT)
        for relative, member in media:
            target_path = media_root / relative
            target_path.parent.mkdir(parents=True, exist_ok=True)
            source_file = tar.extractfile(member)
            assert source_file is not None  # a regular file
            with source_file, open(target_path, "wb") as out:
                shutil.copyfileobj(source_file, out)
        if SECRET in members:
            secret = tar.extractfile(members[SECRET])
            assert secret is not None
            key = Path(settings.DATA_DIR) / SECRET
            staged = key.with_name(f".{SECRET}.restore")
            staged.write_bytes(secret.read())
            os.chmod(staged, 0o600)
            staged.replace(key)
    return manifest
