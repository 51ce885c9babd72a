"""The registry of run kinds (settings.RUN_KINDS): the one list of kinds, and an engine that names
none of them (it looks a run's kind up in the registry by name)."""

import importlib
import pkgutil
from collections import deque

from django.conf import settings
from rq.utils import import_attribute

import apps
from apps.runs.engine.batch import poll_job, submit_job
from apps.runs.engine.chunk import chunk_job
from apps.runs.engine.contract import RunExecutor, RunStarter, is_registered, plugin_of
from apps.runs.models import Run
from tests.harness.test_import_graph import Edge, graph

# The engine package: everything that executes runs, of any kind.
ENGINE = {name for name in graph.own_modules() if name.split(".")[:3] == ["apps", "runs", "engine"]}


def kind_modules() -> set[str]:
    return {path.rpartition(".")[0] for path in settings.RUN_KINDS.values()}


def is_plugin(value: object) -> bool:
    # The contract's Protocols are not runtime-checkable: kinds subclass them explicitly.
    return not isinstance(value, type) and RunExecutor in type(value).__mro__


def kinds_reached(edges: list[Edge], start: set[str]) -> dict[str, list[str]]:
    """Kind modules that modules in `start` import, directly or through other modules: the
    import path to each."""
    out: dict[str, set[str]] = {}
    for e in edges:
        out.setdefault(e.source, set()).add(e.target)
    paths = {module: [module] for module in start}
    todo = deque(sorted(start))
    while todo:
        module = todo.popleft()
        for target in sorted(out.get(module, ())):
            if target not in paths:
                paths[target] = [*paths[module], target]
                todo.append(target)
    return {module: paths[module] for module in kind_modules() if module in paths}


def test_every_kind_that_runs_is_in_the_registry_and_resolves():
    # A response column is read from a file: nothing runs it, so it has no plug-in.
    assert set(settings.RUN_KINDS) == set(Run.Kind.values) - {Run.Kind.COLUMN}
    for kind in settings.RUN_KINDS:
        plugin = plugin_of(kind)
        assert plugin.kind == kind
        assert is_plugin(plugin) and RunStarter in type(plugin).__mro__
    assert is_registered(Run.Kind.JUDGE) and not is_registered(Run.Kind.COLUMN)


def test_the_registry_is_the_only_list_of_kinds():
    """Every plug-in our code makes is one the registry names: no kind is wired another way."""
    made = set()
    for info in pkgutil.walk_packages(apps.__path__, "apps."):
        if ".migrations" in info.name:
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if is_plugin(value):
                made.add(f"{info.name}.{name}")
    assert made == set(settings.RUN_KINDS.values())


def test_no_engine_module_imports_a_kind():
    edges = [e for e in graph.edges() if e.target != "?"]
    assert {"apps.runs.engine.launch", "apps.runs.engine.chunk", "apps.runs.engine.batch"} <= ENGINE
    assert kinds_reached(edges, ENGINE) == {}


def test_the_check_would_see_an_engine_module_reach_a_kind():
    edges = [
        Edge("apps.runs.engine.launch", "apps.runs.engine.limits", 1, False),
        Edge("apps.runs.engine.limits", "apps.judges.judging", 2, False),
    ]
    assert kinds_reached(edges, {"apps.runs.engine.launch"}) == {
        "apps.judges.judging": [
            "apps.runs.engine.launch",
            "apps.runs.engine.limits",
            "apps.judges.judging",
        ]
    }


def test_jobs_queued_before_the_engine_became_a_package_still_run():
    """RQ stores a job by the dotted path of its function, and bin/run keeps Redis's dump across
    restarts: jobs an older version queued must find their function after an upgrade."""
    assert import_attribute("apps.runs.engine.chunk_job") is chunk_job
    assert import_attribute("apps.runs.batch.submit_job") is submit_job
    assert import_attribute("apps.runs.batch.poll_job") is poll_job
