"""bin/import_graph.py: the one-way flow datasets → runs → judges → review → leaderboards holds,
and the check would see it break (an upward import, a cycle, hidden wiring)."""

import importlib.util
import re
import subprocess
import sys

from tests.base import ROOT

spec = importlib.util.spec_from_file_location("import_graph", ROOT / "bin" / "import_graph.py")
assert spec and spec.loader
graph = importlib.util.module_from_spec(spec)
sys.modules["import_graph"] = graph  # dataclasses look their module up while defining
spec.loader.exec_module(graph)
Edge = graph.Edge


def test_the_code_follows_the_flow():
    done = subprocess.run(
        [sys.executable, str(ROOT / "bin" / "import_graph.py")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("import graph: ok")


def test_an_import_against_the_flow_is_a_problem():
    found = graph.problems([Edge("apps.runs.generation", "apps.judges.auto", 3, False)])
    assert found == [
        "apps.runs.generation line 3: runs imports apps.judges.auto, later in the flow"
    ]
    assert graph.problems([Edge("apps.judges.auto", "apps.runs.models", 3, False)]) == []


def test_hidden_wiring_is_a_problem():
    found = graph.problems(
        [
            Edge("apps.runs.engine", "apps.runs.jobs", 40, True),
            Edge("apps.leaderboards.boards", "apps.judges.metrics", 9, True, dynamic=True),
            Edge("apps.review.listing", "?", 12, True, dynamic=True),
        ]
    )
    assert found == [
        "apps.runs.engine line 40: function-local import of apps.runs.jobs",
        "apps.leaderboards.boards line 9: importlib lookup of apps.judges.metrics",
        "apps.review.listing line 12: importlib lookup by a computed name",
    ]


def test_a_cycle_within_an_app_is_a_problem():
    found = graph.problems(
        [
            Edge("apps.datasets.importing", "apps.datasets.jobs", 1, False),
            Edge("apps.datasets.jobs", "apps.datasets.importing", 1, False),
            Edge("apps.datasets.views", "apps.datasets.jobs", 1, False),
        ]
    )
    assert found == ["import cycle: apps.datasets.importing ↔ apps.datasets.jobs"]


def test_the_visitor_finds_local_dynamic_and_ready_imports(tmp_path):
    source = """
import importlib
from apps.runs import engine
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from apps.leaderboards import boards
class Config:
    def ready(self):
        from apps.judges import auto
def hook():
    from apps.judges.models import Score
    importlib.import_module("apps.judges.metrics")
"""
    modules = {
        name: tmp_path
        for name in (
            "apps.runs.engine",
            "apps.judges.auto",
            "apps.judges.models",
            "apps.judges.metrics",
            "apps.leaderboards.boards",
            "apps.review.apps",
        )
    }
    visitor = graph.Imports("apps.review.apps", False, modules)
    visitor.visit(graph.ast.parse(source))
    assert [(e.target, e.local, e.dynamic) for e in visitor.edges] == [
        ("apps.runs.engine", False, False),
        ("apps.judges.auto", False, False),  # AppConfig.ready(): where wiring belongs
        ("apps.judges.models", True, False),
        ("apps.judges.metrics", True, True),
    ]


def test_the_layout_table_in_docs_matches_the_tree():
    """Every path and file the table names exists, and every app and top-level folder of ours
    has a row."""
    readme = (ROOT / "docs/development.md").read_text()
    table = readme[readme.index("| Path | What |") :].split("\n\n")[0]
    rows = [line for line in table.splitlines()[2:] if line.startswith("| `")]
    named = {p.strip("/") for row in rows for p in re.findall(r"`([\w./]+/?)`", row.split("|")[1])}
    for path in named:
        assert (ROOT / path).exists(), f"docs/development.md names {path}, which is not in the tree"
    apps = {f"apps/{p.name}" for p in (ROOT / "apps").iterdir() if (p / "apps.py").exists()}
    assert apps <= named, f"apps without a row in docs/development.md: {sorted(apps - named)}"
    for folder in ("evalsite", "templates", "static", "tests", "bench", "bin"):
        assert folder in named, folder
    for row in rows:
        folder = row.split("|")[1].strip().split("`")[1].strip("/")
        what = row.split("|")[2]
        for module in re.findall(r"`(\w+\.py)`", what):
            assert list((ROOT / folder).rglob(module)), f"{module} is not under {folder}"
        for command in re.findall(r"`(\w+)`", what):
            if list((ROOT / "apps").glob(f"*/management/commands/{command}.py")):
                assert (ROOT / folder / "management" / "commands" / f"{command}.py").exists(), (
                    f"docs/development.md puts {command} in {folder}"
                )


def test_only_a_lookup_in_the_registry_of_run_kinds_may_compute_its_name():
    source = """
def plugin_of(kind):
    return import_string(settings.RUN_KINDS[kind])
def anything(name):
    return import_string(name)
"""
    visitor = graph.Imports("apps.runs.engine", False, {"apps.runs.engine": ROOT})
    visitor.visit(graph.ast.parse(source))
    assert [(e.target, e.line) for e in visitor.edges] == [("?", 5)]


def test_a_job_enqueued_by_dotted_path_is_an_import_of_its_module():
    source = """
def start(run_id):
    enqueue("apps.runs.engine.batch.submit_job", run_id, job_id="x")
    enqueue_now(name_of_a_job, run_id, job_id="y")
"""
    modules = {"apps.runs.engine.launch": ROOT, "apps.runs.engine.batch": ROOT}
    visitor = graph.Imports("apps.runs.engine.launch", False, modules)
    visitor.visit(graph.ast.parse(source))
    assert visitor.edges == [Edge("apps.runs.engine.launch", "apps.runs.engine.batch", 3, False)]
    cycle = [*visitor.edges, Edge("apps.runs.engine.batch", "apps.runs.engine.launch", 1, False)]
    assert graph.problems(cycle) == [
        "import cycle: apps.runs.engine.batch ↔ apps.runs.engine.launch"
    ]


def test_a_packages_lazy_alias_may_import_in_its_getattr():
    source = """
def __getattr__(name):
    from apps.runs.engine.chunk import chunk_job
    return chunk_job
"""
    modules = {"apps.runs.engine": ROOT, "apps.runs.engine.chunk": ROOT}
    visitor = graph.Imports("apps.runs.engine", True, modules)
    visitor.visit(graph.ast.parse(source))
    assert visitor.edges == [Edge("apps.runs.engine", "apps.runs.engine.chunk", 3, False)]
    elsewhere = graph.Imports("apps.runs.engine.launch", False, modules)
    elsewhere.visit(graph.ast.parse(source))
    assert [e.local for e in elsewhere.edges] == [True]


def test_a_model_named_by_string_is_an_edge_of_the_schema():
    source = """
class Task(models.Model):
    default_judge = models.ForeignKey("judges.Judge", on_delete=models.SET_NULL)
    owner = models.OneToOneField(to="accounts.User", on_delete=models.CASCADE)
    runs = models.ManyToManyField("runs.Run")
    parent = models.ForeignKey("self", on_delete=models.CASCADE)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
"""
    modules = {
        name: ROOT
        for name in (
            "apps.datasets.models",
            "apps.judges.models",
            "apps.accounts.models",
            "apps.runs.models",
        )
    }
    visitor = graph.Imports("apps.datasets.models", False, modules)
    visitor.visit(graph.ast.parse(source))
    assert [(e.target, e.line, e.schema) for e in visitor.edges] == [
        ("apps.judges.models", 3, True),
        ("apps.accounts.models", 4, True),
        ("apps.runs.models", 5, True),
    ]
    assert graph.problems(visitor.edges[:1]) == [
        "apps.datasets.models line 3: datasets names apps.judges.models, later in the flow"
    ]


def test_a_migrations_dependencies_and_run_before_are_edges_of_the_schema():
    source = """
class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0014_x"),
        ("datasets", "__first__"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]
    run_before = [("datasets", "0013_y")]
    operations = [
        migrations.AddField("taskjudging", "judge", models.ForeignKey(to="judges.judge")),
    ]
"""
    modules = {
        name: ROOT
        for name in (
            "apps.judges.migrations.0017_z",
            "apps.judges.models",
            "apps.runs.migrations.0014_x",
            "apps.datasets.migrations",
            "apps.datasets.migrations.0013_y",
        )
    }
    visitor = graph.Imports("apps.judges.migrations.0017_z", False, modules)
    visitor.visit(graph.ast.parse(source))
    assert [(e.target, e.schema) for e in visitor.edges] == [
        ("apps.runs.migrations.0014_x", True),
        ("apps.datasets.migrations", True),
        ("apps.datasets.migrations.0013_y", True),
        ("apps.judges.models", True),
    ]
    upward = Edge("apps.datasets.migrations.0013_y", "apps.judges.migrations.0017_z", 9, False)
    assert graph.problems([upward]) == [
        "apps.datasets.migrations.0013_y line 9: datasets imports "
        "apps.judges.migrations.0017_z, later in the flow"
    ]
