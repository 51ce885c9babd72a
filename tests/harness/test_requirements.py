"""requirements.txt is the users' install: it must pin every distribution the app imports.

The test venv holds more (pytest, playwright…), so a package the app imports but only the
test requirements pin would pass every other test and fail in a user's install.
"""

import ast
import importlib.metadata
import re
import sys
from pathlib import Path

import pytest

from tests.base import ROOT

# Code that runs in the users' install: the app, its settings, the worker and the commands.
RUNTIME_CODE = [ROOT / "apps", ROOT / "evalsite", ROOT / "manage.py"]
LOCAL_PACKAGES = {"apps", "evalsite"}

# What an import cannot show: the SDK's aiohttp transport is reached as an attribute
# (openai.DefaultAioHttpClient), and it raises at run time unless the extra is installed.
REQUIRED_EXTRAS = {"openai": {"aiohttp"}}


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned(path: Path) -> dict[str, set[str]]:
    """Distribution → extras for each `name[extras]==version` line of a requirements file.
    Every line must be pinned with ==; `-r` includes are followed."""
    found: dict[str, set[str]] = {}
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("-r "):
            found |= pinned(path.parent / line[3:].strip())
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[([^\]]*)\])?==\S+", line)
        assert match, f"{path.name}: {raw!r} is not pinned as name==version"
        extras = {extra.strip() for extra in (match.group(2) or "").split(",") if extra.strip()}
        found[normalise(match.group(1))] = extras
    return found


def python_files() -> list[Path]:
    files: list[Path] = []
    for root in RUNTIME_CODE:
        files.extend([root] if root.is_file() else sorted(root.rglob("*.py")))
    return files


def imported_top_level_modules(path: Path) -> set[str]:
    """Top-level names of every absolute import in the file, at any depth (function-local
    imports run too, only later)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def third_party_imports() -> dict[str, set[str]]:
    """Module name → the runtime files that import it, stdlib and our own packages left out."""
    users: dict[str, set[str]] = {}
    for path in python_files():
        for name in imported_top_level_modules(path):
            if name in sys.stdlib_module_names or name in LOCAL_PACKAGES or name == "__future__":
                continue
            users.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return users


def missing_distributions(requirements: dict[str, set[str]]) -> list[str]:
    """One line per imported module whose distribution `requirements` does not pin."""
    distributions = importlib.metadata.packages_distributions()
    problems = []
    for module, files in sorted(third_party_imports().items()):
        owners = {normalise(name) for name in distributions.get(module, [])}
        where = ", ".join(sorted(files)[:3])
        if not owners:
            problems.append(f"{module} (imported by {where}) is not installed at all")
        elif not owners & requirements.keys():
            problems.append(
                f"{module} (imported by {where}) comes from {'/'.join(sorted(owners))}, "
                "which requirements.txt does not pin"
            )
    for distribution, extras in REQUIRED_EXTRAS.items():
        if distribution in requirements and not extras <= requirements[distribution]:
            problems.append(
                f"{distribution} is pinned without the extra(s) {sorted(extras)} the app needs"
            )
    return problems


def test_requirements_txt_pins_every_distribution_the_app_imports() -> None:
    problems = missing_distributions(pinned(ROOT / "requirements.txt"))
    assert not problems, "requirements.txt is incomplete:\n" + "\n".join(problems)


def test_the_check_sees_imports_the_app_really_makes() -> None:
    # A scan that found nothing would pass vacuously: these are known imports of the app.
    modules = third_party_imports()
    for module in ("django", "django_rq", "openai", "httpx2", "redis", "rq"):
        assert module in modules, module
    assert "apps/runs/engine/llm.py" in modules["openai"]


@pytest.mark.parametrize(
    ("drop", "expected"),
    [
        (
            "httpx2",
            "httpx2 (imported by apps/notifications/delivery.py, apps/runs/engine/errors.py, "
            "apps/runs/engine/llm.py",
        ),
        ("django-rq", "django_rq (imported by"),
    ],
)
def test_a_dropped_pin_is_reported(drop: str, expected: str) -> None:
    requirements = pinned(ROOT / "requirements.txt")
    del requirements[drop]
    assert any(line.startswith(expected) for line in missing_distributions(requirements))


def test_the_sdk_pinned_without_its_aiohttp_extra_is_reported() -> None:
    requirements = pinned(ROOT / "requirements.txt")
    requirements["openai"] = set()
    assert missing_distributions(requirements) == [
        "openai is pinned without the extra(s) ['aiohttp'] the app needs"
    ]


def test_test_only_packages_stay_out_of_the_runtime_requirements() -> None:
    runtime = pinned(ROOT / "requirements.txt")
    for name in ("pytest", "pytest-django", "playwright", "ruff"):
        assert name not in runtime, name


def test_unpinned_lines_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "requirements.txt"
    path.write_text("Django>=6\n")
    with pytest.raises(AssertionError, match="not pinned"):
        pinned(path)
