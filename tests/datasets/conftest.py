from pathlib import Path

import pytest

from apps.datasets.models import Task


@pytest.fixture(autouse=True)
def _media_root(settings, tmp_path: Path) -> Path:
    """Staged uploads go to a private folder that each test can inspect."""
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def staged_files(_media_root: Path):
    """The files currently staged under MEDIA_ROOT/uploads (should be none after an import)."""

    def files() -> list[Path]:
        folder = _media_root / "uploads"
        return sorted(folder.iterdir()) if folder.exists() else []

    return files


@pytest.fixture
def task(db) -> Task:
    return Task.objects.create(slug="support-qa", name="Support QA")
