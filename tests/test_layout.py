"""The shape of the code, kept true (README: Layout): imports point one way,
services and selectors speak in domain errors, tasks sit on top of services,
and no app's modules import each other in a circle."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APPS = ["bots", "events", "files", "chat", "adminapi", "platform_site"]


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources() -> dict[str, Path]:
    found = {}
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" not in path.parts:
                found[_module_name(path)] = path
    return found


SOURCES = _sources()


def _imports(path: Path, *, top_level_only: bool) -> set[str]:
    """The project modules `path` imports: each `from a.b import c` names
    a.b.c when that is a module, else a.b."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                qualified = f"{node.module}.{alias.name}"
                names.add(qualified if qualified in SOURCES else node.module)
    return {name for name in names if name in SOURCES}


def test_the_sources_were_found():
    assert "bots.services.members" in SOURCES
    assert "files.services.status" in SOURCES


def test_no_module_cycle_at_import_time():
    graph = {name: _imports(path, top_level_only=True) for name, path in SOURCES.items()}
    # A package's __init__ runs before its submodules: an edge to a
    # submodule is an edge to its package too.
    for name in list(graph):
        for target in list(graph[name]):
            parent = target.rpartition(".")[0]
            if parent in graph and parent != name and not name.startswith(parent + "."):
                graph[name].add(parent)
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                cycle = path[path.index(target) :] + [target]
                pytest.fail("import cycle: " + " → ".join(cycle))
            if target not in state:
                visit(target)
        path.pop()
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)


@pytest.mark.parametrize("app", ["bots", "events", "files", "chat"])
def test_services_and_selectors_raise_domain_errors_not_http_ones(app):
    for name, path in SOURCES.items():
        if not name.startswith((f"{app}.services", f"{app}.selectors")):
            continue
        imported = _imports(path, top_level_only=False)
        assert "platform_site.api.errors" not in imported, name
        assert not any(".views" in i or i.endswith(".urls") for i in imported), name


@pytest.mark.parametrize("app", ["bots", "events", "files", "chat"])
def test_services_never_import_tasks(app):
    for name, path in SOURCES.items():
        if name.startswith(f"{app}.services") or name.startswith(f"{app}.selectors"):
            imported = _imports(path, top_level_only=False)
            assert not any(i.endswith(".tasks") for i in imported), name


def test_imports_point_one_way():
    """STYLE.md's arrows: platform_site.api imports no app; bots no other
    app; events and files import bots; chat imports bots, events and files
    (a file the official webchat sends is a file of the bot); no app imports
    adminapi (only platform_site's URLconf does)."""
    apps = {"bots", "events", "files", "chat", "adminapi"}
    allowed = {
        "platform_site.api": set(),
        "bots": set(),
        "events": {"bots"},
        "files": {"bots"},
        "chat": {"bots", "events", "files"},
        "adminapi": {"bots", "events"},
    }
    for name, path in SOURCES.items():
        owner = "platform_site.api" if name.startswith("platform_site.api") else name.split(".")[0]
        if owner not in allowed:
            continue
        reached = {i.split(".")[0] for i in _imports(path, top_level_only=False)} & apps
        reached.discard(owner)
        assert reached <= allowed[owner], f"{name} imports {sorted(reached - allowed[owner])}"
