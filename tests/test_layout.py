"""The shape of the code, kept true (docs/development/layout.md): imports point one way,
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
    assert "files.services.file_status" in SOURCES


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


# The house, from the ground up (docs/development/layout.md): each room may import the
# rooms listed for it, never one above. platform_site's top-level modules are
# the composition root: the only place that imports every room.
FOUNDATION = "platform_site.foundation"
OBSERVABILITY = "platform_site.observability"
API = "platform_site.api"
SERVER = "platform_site.server"
BACKOFFICE = "platform_site.backoffice"
DEMO = "platform_site.demo"
ROOT_MODULES = {
    "platform_site",
    "platform_site.settings",
    "platform_site.urls",
    "platform_site.asgi",
    "platform_site.wsgi",
    "platform_site.celery",
    "platform_site.serve",
    "platform_site.procfile_runner",
}
GROUND = {FOUNDATION, OBSERVABILITY}
ALLOWED = {
    FOUNDATION: set(),
    OBSERVABILITY: {FOUNDATION},
    "bots": GROUND,
    API: GROUND | {"bots"},
    SERVER: GROUND | {API},
    "events": GROUND | {API, "bots"},
    "files": GROUND | {API, "bots"},
    "chat": GROUND | {API, "bots", "events", "files"},
    "adminapi": GROUND | {API, "bots", "events"},
    BACKOFFICE: GROUND | {API, "bots", "events", "files", "chat"},
    DEMO: GROUND | {API, "bots", "events", "files", "chat"},
}


def _room(module: str) -> str:
    """The room a module belongs to: an app, or a platform_site subpackage."""
    if module.startswith("platform_site."):
        parts = module.split(".")
        return ".".join(parts[:2]) if f"{parts[0]}.{parts[1]}" in ALLOWED else module
    return module.split(".")[0]


def test_platform_site_top_level_is_only_the_composition_root():
    top = {
        name for name in SOURCES if name.startswith("platform_site") and _room(name) not in ALLOWED
    }
    assert top == ROOT_MODULES


def test_imports_point_one_way():
    """Every room imports only the rooms below it (ALLOWED); nothing but the
    composition root imports the back office or the demo."""
    for name, path in SOURCES.items():
        owner = _room(name)
        if owner not in ALLOWED:
            assert name in ROOT_MODULES, name
            continue
        reached = {_room(i) for i in _imports(path, top_level_only=False)}
        reached.discard(owner)
        assert reached <= ALLOWED[owner], f"{name} imports {sorted(reached - ALLOWED[owner])}"


def test_a_job_is_started_one_way():
    """Outside the tasks modules (which may start their own), a job is started
    by platform_site.foundation.jobs.job_send, by the task's name."""
    forms = (".delay(", ".apply_async(", ".send_task(", "current_app.tasks[")
    for name, path in SOURCES.items():
        if name.endswith(".tasks") or name == "platform_site.foundation.jobs":
            continue
        text = path.read_text()
        assert not [form for form in forms if form in text], name


def test_every_scheduled_and_sent_job_is_a_registered_task(settings):
    from celery import current_app

    from events.engine.wakeups import WAKE_DELIVERIES_TASK
    from files.services.embeddings import EMBED_FILE_TASK
    from files.services.file_status import INDEX_FILE_TASK

    current_app.loader.import_default_modules()
    names = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    names |= {WAKE_DELIVERIES_TASK, EMBED_FILE_TASK, INDEX_FILE_TASK}
    assert names <= set(current_app.tasks)
