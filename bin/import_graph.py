#!/usr/bin/env python3
"""The import graph of evalsite's own code, checked against the one-way flow.

    .venv-test/bin/python bin/import_graph.py           # print the app graph and any violation; exit 1 on one
    .venv-test/bin/python bin/import_graph.py --modules # also print every module-to-module edge

The flow is accounts → datasets → runs → drafting → judges → review → leaderboards → interop →
configs → notifications → api: an app imports only from apps before it, and later apps react to lifecycle signals.
Fails on
- an import from an app to an app later in the flow,
- an import cycle between modules (within an app too); a job enqueued by dotted path counts as
  an import of its module,
- a function-local import of our own code, or an importlib lookup of it: wiring hidden in a
  function body is how the cycles were kept out of sight (a lookup in the registry of run
  kinds, settings.RUN_KINDS, is one exception: its entries are written out there; the other is
  apps.judges.plugins, which imports an admin's plug-in modules named in
  settings.EVALSITE_PLUGINS and refuses any module of ours).

The schema follows the flow too, so these count as imports:
- a model named by string in a ForeignKey, OneToOneField or ManyToManyField ("judges.Judge"
  names apps.judges.models), in models and in migrations alike;
- a migration's dependencies and run_before (("judges", "0003_x") names that migration's
  module). run_before is how a later app orders its migration before an earlier app's one
  (copy a column's values into the later app's table before the earlier app drops it)
  without the earlier app naming the later one.

Standard library only (ast); Python 3.12 or newer, as the code it reads uses 3.12 syntax.
"""

import argparse
import ast
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("apps", "evalsite")
FLOW = (
    "accounts",
    "datasets",
    "runs",
    "drafting",
    "judges",
    "review",
    "leaderboards",
    "interop",
    "configs",
    "notifications",
    "api",
)
# settings.RUN_KINDS, kind -> dotted path: the engine looks run kinds up there by name. Kinds
# live in later apps too, so the list is configuration (like MIDDLEWARE), not an import; the
# tests check that every entry resolves and that no engine module imports a kind's.
REGISTRY = "RUN_KINDS"
# Imports modules an admin lists (settings.EVALSITE_PLUGINS), never ours (it refuses them).
PLUGIN_LOADER = "apps.judges.plugins"
# Functions that enqueue a job (evalsite.enqueue); a dotted path given to one is read as an import.
JOB_QUEUERS = ("enqueue", "enqueue_now")
# Fields that name a model, and the keyword that may name it instead of the first argument.
RELATIONS = ("ForeignKey", "OneToOneField", "ManyToManyField")


@dataclass(frozen=True)
class Edge:
    source: str  # importing module, dotted
    target: str  # imported module, dotted (the longest known module prefix)
    line: int
    local: bool  # inside a function body
    dynamic: bool = False  # importlib.import_module("…") or __import__
    schema: bool = False  # a model named by string, or a migration's dependency


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def own_modules(migrations: bool = False) -> dict[str, Path]:
    """Our modules by dotted name; with `migrations`, Django's migration modules too (they
    name models and each other by app label: see `Imports.visit_Call`, `visit_Assign`)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts and not migrations:
                continue
            found[module_name(path)] = path
    return found


def app_module(label: str, rest: str, modules: dict[str, Path]) -> str | None:
    """The module an app label names: ("judges", "models") -> apps.judges.models."""
    name = f"apps.{label}.{rest}" if rest else f"apps.{label}"
    return name if name in modules else None


def resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The module an import names: `apps.runs.models.Run` -> `apps.runs.models`."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def absolute(module: str, is_package: bool, level: int, name: str | None) -> str:
    if level == 0:
        return name or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


class Imports(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool, modules: dict[str, Path]) -> None:
        self.module, self.is_package, self.modules = module, is_package, modules
        self.depth = 0
        self.edges: list[Edge] = []

    def _add(self, name: str, line: int, dynamic: bool = False, local: bool | None = None) -> None:
        target = resolve(name, self.modules)
        if target and target != self.module:
            local = self.depth > 0 if local is None else local
            self.edges.append(Edge(self.module, target, line, local, dynamic))

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        # AppConfig.ready() is where Django wants signal receivers imported and connected: the
        # one function body where an import is wiring done right.
        # A package's __getattr__ (PEP 562) is the lazy alias of a name that moved away.
        ready = (node.name == "ready" and self.module.endswith(".apps")) or (
            node.name == "__getattr__" and self.is_package
        )
        self.depth += 0 if ready else 1
        self.generic_visit(node)
        self.depth -= 0 if ready else 1

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_If(self, node: ast.If) -> None:
        # `if TYPE_CHECKING:` imports never run: they are not wiring.
        test = node.test
        if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        ):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = absolute(self.module, self.is_package, node.level, node.module)
        names = set()
        for alias in node.names:
            # `from apps.runs import engine` imports the module apps.runs.engine.
            full = f"{base}.{alias.name}"
            names.add(full if full in self.modules else base)
        for name in sorted(names):
            self._add(name, node.lineno)

    def _add_schema(self, target: str | None, line: int) -> None:
        if target and target != self.module:
            self.edges.append(Edge(self.module, target, line, False, schema=True))

    def visit_Assign(self, node: ast.Assign) -> None:
        # A migration's `dependencies = [("judges", "0003_x"), …]` and `run_before = […]`.
        names = {getattr(t, "id", "") for t in node.targets}
        if ".migrations." in self.module and names & {"dependencies", "run_before"}:
            for element in getattr(node.value, "elts", []):
                parts = [getattr(e, "value", None) for e in getattr(element, "elts", [])]
                if len(parts) == 2 and all(isinstance(p, str) for p in parts):
                    label, migration = parts
                    rest = "migrations" if migration.startswith("__") else f"migrations.{migration}"
                    self._add_schema(app_module(label, rest, self.modules), element.lineno)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        first_arg = node.args[0] if node.args else None
        if name in RELATIONS:
            # A model named by string: "judges.Judge" in models, "judges.judge" in migrations.
            to = next((k.value for k in node.keywords if k.arg == "to"), first_arg)
            value = to.value if isinstance(to, ast.Constant) else None
            if isinstance(value, str) and value.count(".") == 1:
                self._add_schema(
                    app_module(value.split(".")[0], "models", self.modules), node.lineno
                )
        if name in JOB_QUEUERS and isinstance(first_arg, ast.Constant):
            # A job enqueued by dotted path imports its module when it runs: an edge like any
            # import (engine.py once named batch mode's jobs so, which hid a cycle).
            self._add(str(first_arg.value), node.lineno, local=False)
        if name in ("import_module", "__import__", "import_string") and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                self._add(first.value, node.lineno, dynamic=True)
            elif REGISTRY in {getattr(n, "attr", getattr(n, "id", "")) for n in ast.walk(first)}:
                pass  # a lookup in the registry of run kinds: a written list, not a computed name
            elif self.module == PLUGIN_LOADER:
                pass  # an admin's plug-in module, not our code
            else:
                # A lookup by a computed name: cannot be followed, so it is reported.
                self.edges.append(Edge(self.module, "?", node.lineno, True, True))
        self.generic_visit(node)


def edges() -> list[Edge]:
    modules = own_modules(migrations=True)
    out = []
    for module, path in modules.items():
        visitor = Imports(module, path.name == "__init__.py", modules)
        visitor.visit(ast.parse(path.read_text(), str(path)))
        out += visitor.edges
    return out


def app_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "apps" and len(parts) > 1 else None


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def problems(all_edges: list[Edge]) -> list[str]:
    out = []
    for e in all_edges:
        where = f"{e.source} line {e.line}"
        if e.target == "?":
            out.append(f"{where}: importlib lookup by a computed name")
            continue
        if e.dynamic:
            out.append(f"{where}: importlib lookup of {e.target}")
        elif e.local:
            out.append(f"{where}: function-local import of {e.target}")
        a, b = app_of(e.source), app_of(e.target)
        if a and b and a != b and FLOW.index(b) > FLOW.index(a):
            names = "names" if e.schema else "imports"
            out.append(f"{where}: {a} {names} {e.target}, later in the flow")
    graph: dict[str, set[str]] = defaultdict(set)
    for e in all_edges:
        if e.target != "?":
            graph[e.source].add(e.target)
    for component in cycles(graph):
        out.append("import cycle: " + " ↔ ".join(component))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modules", action="store_true", help="print module-level edges too")
    args = parser.parse_args()
    all_edges = edges()
    between: dict[tuple[str, str], int] = defaultdict(int)
    for e in all_edges:
        a, b = app_of(e.source), app_of(e.target)
        if a and b and a != b:
            between[(a, b)] += 1
    print("App imports (count of import statements), in flow order:")
    for (a, b), count in sorted(
        between.items(), key=lambda kv: (FLOW.index(kv[0][0]), FLOW.index(kv[0][1]))
    ):
        arrow = "→" if FLOW.index(b) < FLOW.index(a) else "⇢ AGAINST THE FLOW"
        print(f"  {a} {arrow} {b}: {count}")
    if args.modules:
        for e in sorted(all_edges, key=lambda e: (e.source, e.target)):
            print(f"  {e.source} -> {e.target}{' (local)' if e.local else ''}")
    found = problems(all_edges)
    for line in found:
        print(line)
    print(f"import graph: {len(found)} problem(s)" if found else "import graph: ok")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
