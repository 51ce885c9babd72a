"""Uploaded files waiting between the upload, the preview/mapping step and the import.

A staged upload is `<MEDIA_ROOT>/uploads/<token>.upload` plus a `<token>.json` note of whose
it is and what was read from it. The import removes both; a sweep removes ones left behind.
"""

import json
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile

from apps.datasets.importing import sync_max_rows
from apps.datasets.models import Dataset, Task
from apps.datasets.readers import DatasetError, Table, check_size, read_head, workbook_sheets

TOKEN = re.compile(r"^[0-9a-f]{32}$")
KEEP_SECONDS = 24 * 3600
# Files above this are previewed from their start only; the worker reads them whole.
PREVIEW_BYTES = 4 * 1024 * 1024


def upload_dir() -> Path:
    path = Path(settings.MEDIA_ROOT) / "uploads"
    path.mkdir(parents=True, exist_ok=True)
    return path


def sweep(max_age: float = KEEP_SECONDS) -> int:
    """Remove staged files nobody mapped within a day; returns how many went."""
    cutoff = time.time() - max_age
    removed = 0
    for path in upload_dir().glob("*.upload"):
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink(missing_ok=True)
                path.with_suffix(".json").unlink(missing_ok=True)
                removed += 1
        except FileNotFoundError:
            continue
    return removed


@dataclass
class StagedUpload:
    token: str
    meta: dict[str, Any]

    @property
    def path(self) -> Path:
        return upload_dir() / f"{self.token}.upload"

    @property
    def file_name(self) -> str:
        return str(self.meta.get("file_name", ""))

    @classmethod
    def create(
        cls, upload: UploadedFile, task_slug: str, user_id: int, name: str
    ) -> "StagedUpload":
        check_size(upload.size or 0)
        sweep()
        staged = cls(
            uuid.uuid4().hex,
            {
                "task": task_slug,
                "user": user_id,
                "file_name": Path(upload.name or "upload").name,
                "name": name,
                "size": upload.size,
            },
        )
        with staged.path.open("wb") as out:
            for chunk in upload.chunks():
                out.write(chunk)
        staged.save()
        return staged

    @classmethod
    def load(cls, token: str, task_slug: str, user_id: int) -> "StagedUpload | None":
        """The staged upload `token` of this user in this task, if it still exists."""
        if not TOKEN.match(token):
            return None
        note = upload_dir() / f"{token}.json"
        try:
            meta = json.loads(note.read_text())
        except (FileNotFoundError, ValueError):
            return None
        staged = cls(token, meta)
        if meta.get("task") != task_slug or meta.get("user") != user_id or not staged.path.exists():
            return None
        return staged

    def save(self) -> None:
        (upload_dir() / f"{self.token}.json").write_text(json.dumps(self.meta))

    def read(self, fmt: str | None = None, sheet: str | None = None) -> Table:
        """Read the file (a big one only in part; a workbook's `sheet`, by default the one read
        last, else its first) and note what was found.

        Small files are read whole, so every error shows before the mapping step.
        """
        sheet = sheet or self.meta.get("sheet") or None
        try:
            table = read_head(self.path, fmt or None, self.file_name, PREVIEW_BYTES, sheet)
        except DatasetError:
            # A bad sheet of a good workbook: the page still offers the other sheets.
            self.meta.update(sheets=self._sheets_if_workbook(fmt), sheet=sheet or "")
            self.save()
            raise
        rows = len(table.rows) if table.complete else None  # None: only the worker counts
        self.meta.update(
            format=table.format,
            columns=table.columns,
            rows=rows,
            sheet=table.sheet,
            sheets=table.sheets,
        )
        self.save()
        return table

    def _sheets_if_workbook(self, fmt: str | None) -> list[str]:
        if (fmt or self.meta.get("format")) not in (None, "", "xlsx"):
            return []
        try:
            return workbook_sheets(self.path)
        except DatasetError:
            return []

    @property
    def sheet(self) -> str:
        return str(self.meta.get("sheet") or "")

    @property
    def sheets(self) -> list[str]:
        """The workbook's worksheets when there is a choice to make (else empty)."""
        sheets = [str(name) for name in self.meta.get("sheets") or []]
        return sheets if len(sheets) > 1 else []

    @property
    def imports_in_background(self) -> bool:
        rows = self.meta.get("rows")
        return rows is None or rows > sync_max_rows()

    def hand_over(self) -> Path:
        """Give the file to a background import: the mapping step cannot be sent twice."""
        self.path.with_suffix(".json").unlink(missing_ok=True)
        return self.path

    def discard(self) -> None:
        self.path.unlink(missing_ok=True)
        self.path.with_suffix(".json").unlink(missing_ok=True)


def read_upload(task: Task, staged: StagedUpload, fmt: str, sheet: str = "") -> Table:
    """Read a new upload (the upload page, the API) on the `sheet` asked for; else a corrected
    workbook of an existing dataset opens on that dataset's sheet (when the workbook still has
    it). A sheet asked for is read first, so an unreadable first sheet does not stop it."""
    if sheet:
        return staged.read(fmt, sheet)
    table = staged.read(fmt)
    previous = Dataset.objects.latest_version(task, staged.meta.get("name", ""))
    sheet = previous.sheet if previous else ""
    if sheet and sheet != staged.sheet and sheet in staged.meta.get("sheets", []):
        return staged.read(fmt, sheet)
    return table
