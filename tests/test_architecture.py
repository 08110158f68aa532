"""The layout's rules, read from the source with ``ast`` (nothing is imported).

The four packages depend one way: ``tasks <- transports <- qb_server <- qb_client``
(a package may import only those to its left). Within that:

(a) no import cycle between modules (the failure names the cycle's modules and one
    path around it, with the line of each import);
(b) no private name (``_x``) imported from another project module, and no private
    module (``_x.py``) imported from outside its own package;
(c) the one-way flow between the four packages;
(d) no module over 400 lines unless its docstring gives the reason, in words
    containing "over 400 lines";
(e) the rooms of ``qb_client`` (its subpackages and top-level modules, and inside a
    group folder such as ``adapters/`` each of its subpackages) import one way too, in
    the order of ``QB_CLIENT_ROOMS``; a new room must be placed there, a placed room
    must exist, a group's own ``__init__`` imports nothing, and docs/architecture.md
    draws the layout as it is.

What counts as an import: every ``import``/``from ... import`` statement anywhere
in a module, inside functions and ``if TYPE_CHECKING:`` blocks too (a circle
broken only by moving the import into a function is still a circle). Relative
imports are resolved against the importing module's package.

Edges: ``import a.b.c`` is an edge to the module ``a.b.c`` (or, for a name that is
not a project module, to its longest prefix that is one). ``from pkg import name``
is an edge to ``pkg.name`` when that is a module, else to ``pkg`` (its
``__init__``). The rule for package ``__init__`` modules: importing ``a.b.c``
runs ``a/__init__`` and ``a/b/__init__`` first, but that implicit step is not an
edge; only a name actually taken from a package (``from a.b import X`` where X
is not a submodule) is an edge to its ``__init__``. So an ``__init__`` that
re-exports its own submodules (``qb_server``, ``qb_client.report``,
``qb_client.adapters.providers``) closes a cycle only when one of those submodules takes a
name back from the package itself, which is a real circle at import time.

Findings inside ``transports/`` and ``tasks/`` that are known and not yet fixed
are listed, by a key that does not change while the violation stays the same, in
``TRANSPORTS_LEFT`` and ``TASKS_LEFT``, so this test is green
and fails on any NEW violation. Both sets must shrink to empty: a stale entry (its
violation fixed) fails too.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tasks", "transports", "quotebench", "qb_server", "qb_client")  # each may import only those before it
MAX_LINES = 400
LONG_REASON = "over 400 lines"

# Known findings inside transports/.
# MUST shrink to empty: remove an entry when its violation is gone (a stale entry fails the test).
TRANSPORTS_LEFT: frozenset[str] = frozenset()

# Known findings inside tasks/. MUST shrink to empty, like TRANSPORTS_LEFT.
TASKS_LEFT: frozenset[str] = frozenset()

LEFT = TRANSPORTS_LEFT | TASKS_LEFT

# The rooms of qb_client, each importing only rooms before it (see qb_client/__init__.py). A room inside a
# group folder (ROOM_GROUPS) is named group.room: the group only gathers rooms, each placed on its own.
QB_CLIENT_ROOMS = (
    "console", "replies", "adapters.agents", "adapters.providers", "campaign", "records", "report",
    "adapters.inspect_ext", "adapters.harbor", "ops", "cli", "__main__",
)
ROOM_GROUPS = ("adapters",)


@dataclass
class Module:
    name: str
    path: Path
    is_package: bool
    tree: ast.Module
    lines: int
    imports: list[tuple[str, str | None, int]] = field(default_factory=list)  # (module, name taken or None, line)


def _module_name(path: Path, root: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def load_modules(root: Path = ROOT) -> dict[str, Module]:
    modules: dict[str, Module] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            name, is_package = _module_name(path, root)
            text = path.read_text(encoding="utf-8")
            modules[name] = Module(name, path, is_package, ast.parse(text, str(path)), len(text.splitlines()))
    for module in modules.values():
        module.imports = list(_imports(module, modules))
    return modules


def _resolve_relative(module: Module, level: int, target: str | None) -> str:
    base = module.name.split(".")
    if not module.is_package:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _project_module(name: str, modules: dict[str, Module]) -> str | None:
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def _imports(module: Module, modules: dict[str, Module]):
    """(imported module, name taken from it or None for a module import, line) for each project import."""
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _project_module(alias.name, modules)
                if target is not None:
                    yield target, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            source = _resolve_relative(module, node.level, node.module) if node.level else (node.module or "")
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                if submodule in modules:
                    yield submodule, None, node.lineno
                else:
                    target = _project_module(source, modules)
                    if target is not None:
                        yield target, alias.name, node.lineno


def _package(name: str) -> str:
    return name.split(".")[0]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _owner(name: str) -> str:
    """The package a module belongs to (for a package ``__init__``: its parent)."""
    return name.rsplit(".", 1)[0] if "." in name else name


def edges(modules: dict[str, Module]) -> dict[str, dict[str, int]]:
    """module -> {imported module: line of its first import}."""
    graph: dict[str, dict[str, int]] = {name: {} for name in modules}
    for module in modules.values():
        for target, _taken, line in module.imports:
            if target != module.name:
                graph[module.name].setdefault(target, line)
    return graph


def cycles(graph: dict[str, dict[str, int]] | dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def push(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)

    for root in sorted(graph):
        if root in index:
            continue
        push(root)
        work = [(root, iter(sorted(graph[root])))]
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    push(succ)
                    work.append((succ, iter(sorted(graph.get(succ, ())))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
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
    return sorted(found)


def _cycle_path(component: list[str], graph: dict[str, dict[str, int]]) -> str:
    """One way around a cycle, from its first module back to it, with the line of each import."""
    inside = set(component)
    start = component[0]
    paths = {start: [start]}
    queue = [start]
    while queue:  # breadth first: the shortest way back to start
        node = queue.pop(0)
        for succ in sorted(graph[node]):
            if succ == start:
                path = paths[node] + [start]
                return " -> ".join(f"{a} (line {graph[a][b]})" for a, b in zip(path, path[1:])) + f" -> {start}"
            if succ in inside and succ not in paths:
                paths[succ] = paths[node] + [succ]
                queue.append(succ)
    return ""  # pragma: no cover - a strongly connected component always has a way back


def cycle_findings(modules: dict[str, Module]) -> dict[str, str]:
    graph = edges(modules)
    return {"cycle: " + " <-> ".join(c): "import cycle between " + ", ".join(c) + "; one way around it: "
            + _cycle_path(c, graph) for c in cycles(graph)}


def private_findings(modules: dict[str, Module]) -> dict[str, str]:
    found = {}
    for module in modules.values():
        for target, taken, line in module.imports:
            if target == module.name:
                continue
            if taken is not None and _private(taken):
                key = f"private: {module.name} imports {taken} from {target}"
                found[key] = f"{key} (line {line}): give it a public name in {target}, or move it"
            elif taken is None:
                # a private module is private to its package: only that package's modules may import it
                package = _owner(target)
                inside = module.name == package or module.name.startswith(package + ".")
                if _private(target.rsplit(".", 1)[-1]) and not inside:
                    key = f"private: {module.name} imports the module {target}"
                    found[key] = f"{key} (line {line}), private to {package}"
    return found


def flow_findings(modules: dict[str, Module]) -> dict[str, str]:
    found = {}
    for module in modules.values():
        rank = PACKAGES.index(_package(module.name))
        for target, _taken, line in module.imports:
            if PACKAGES.index(_package(target)) > rank:
                key = f"flow: {module.name} imports {target}"
                found[key] = f"{key} (line {line}): {_package(module.name)} may import only {PACKAGES[:rank]}"
    return found


def length_findings(modules: dict[str, Module]) -> dict[str, str]:
    found = {}
    for module in modules.values():
        if module.lines > MAX_LINES and LONG_REASON not in (ast.get_docstring(module.tree) or ""):
            found[f"long: {module.name}"] = (f"{module.name} has {module.lines} lines: split it, or say why in its "
                                             f"docstring, in words containing {LONG_REASON!r}")
    return found


def _room(name: str) -> str | None:
    """The room of a qb_client module (``qb_client.campaign.work`` -> ``campaign``,
    ``qb_client.adapters.providers.base`` -> ``adapters.providers``); None for the package and a group's own
    ``__init__``."""
    parts = name.split(".")
    if len(parts) < 2 or parts[0] != "qb_client":
        return None
    if parts[1] in ROOM_GROUPS:
        return ".".join(parts[1:3]) if len(parts) > 2 else None
    return parts[1]


def room_findings(modules: dict[str, Module]) -> dict[str, str]:
    found = {}
    for module in modules.values():
        room = _room(module.name)
        if room is None:
            continue
        if room not in QB_CLIENT_ROOMS:
            found[f"room: {room}"] = f"qb_client.{room} is a room QB_CLIENT_ROOMS does not place: add it where it belongs"
            continue
        for target, _taken, line in module.imports:
            other = _room(target)
            if other is None or other == room or other not in QB_CLIENT_ROOMS:
                continue
            if QB_CLIENT_ROOMS.index(other) > QB_CLIENT_ROOMS.index(room):
                key = f"room: {module.name} imports {target}"
                found[key] = f"{key} (line {line}): the room {room} may import only rooms before it in QB_CLIENT_ROOMS"
    return found


MODULES = load_modules()


def _check(findings: dict[str, str]) -> None:
    new = sorted(set(findings) - LEFT)
    assert not new, "\n".join(findings[k] for k in new)


def test_no_import_cycle() -> None:
    _check(cycle_findings(MODULES))


def test_no_private_name_imported_across_modules() -> None:
    _check(private_findings(MODULES))


def test_packages_import_one_way() -> None:
    _check(flow_findings(MODULES))


def test_long_modules_say_why() -> None:
    _check(length_findings(MODULES))


def test_qb_client_rooms_import_one_way() -> None:
    _check(room_findings(MODULES))


def test_the_lists_of_what_is_left_only_shrink() -> None:
    every = {**cycle_findings(MODULES), **private_findings(MODULES), **flow_findings(MODULES),
             **length_findings(MODULES), **room_findings(MODULES)}
    stale = sorted(LEFT - set(every))
    assert not stale, "fixed, so remove from TRANSPORTS_LEFT / TASKS_LEFT:\n" + "\n".join(stale)
    for package, left in (("transports", TRANSPORTS_LEFT), ("tasks", TASKS_LEFT)):
        # every module a finding names is inside its own package: nothing else may hide in these lists
        names = {word.strip(",") for key in left for word in key.split(":", 1)[1].split() if "." in word}
        assert all(_package(n) == package for n in names), f"{package}'s list names another package: {sorted(names)}"


def test_every_package_says_what_it_owns() -> None:
    missing = [m.name for m in MODULES.values() if m.is_package and not ast.get_docstring(m.tree)]
    assert not missing, "package __init__ without a docstring: " + ", ".join(sorted(missing))


def test_the_rules_see_what_they_claim_to_see(tmp_path: Path) -> None:
    """The checker itself, on a made-up tree: lazy and TYPE_CHECKING imports, relative imports, private
    names and modules, the __init__ rule, long modules."""
    files = {
        "qb_server/__init__.py": '"""Doc."""\nfrom .a import A\n',
        "qb_server/a.py": "def f():\n    from .b import g\nA = 1\n",
        "qb_server/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from qb_server.a import A\ng = 1\n",
        "qb_server/c.py": "from . import a\nfrom .a import _hidden\nfrom qb_server import A\n",
        "qb_server/_p.py": "",
        "qb_server/d.py": "from qb_server import _p\n",
        "qb_server/long.py": "x = 1\n" * 401,
        "tasks/__init__.py": '"""Doc."""\nimport qb_server.c\nfrom tasks import _q\n',
        "tasks/_q.py": "",
        "transports/e.py": "import tasks._q\n",
        "transports/__init__.py": '"""Doc."""\n',
        "qb_client/__init__.py": '"""Doc."""\n',
        "qb_client/adapters/__init__.py": '"""Doc."""\n',
        "qb_client/adapters/providers/__init__.py": '"""Doc."""\nfrom ...campaign import run\n',
        "qb_client/campaign/__init__.py": '"""Doc."""\nrun = 1\n',
        "qb_client/adapters/harbor/x.py": "from ...campaign import run\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    modules = load_modules(tmp_path)
    assert list(cycle_findings(modules)) == ["cycle: qb_server.a <-> qb_server.b"]
    assert "qb_server.a (line 2) -> qb_server.b (line 3) -> qb_server.a" in cycle_findings(modules)[
        "cycle: qb_server.a <-> qb_server.b"]
    assert set(private_findings(modules)) == {"private: qb_server.c imports _hidden from qb_server.a",
                                              "private: transports.e imports the module tasks._q"}
    assert set(flow_findings(modules)) == {"flow: tasks imports qb_server.c"}
    assert set(length_findings(modules)) == {"long: qb_server.long"}
    assert set(room_findings(modules)) == {
        "room: qb_client.adapters.providers imports qb_client.campaign"}  # harbor, after campaign, may
    assert _room("qb_client.adapters") is None and _room("qb_client.adapters.harbor.x") == "adapters.harbor"


def test_every_placed_room_exists() -> None:
    """QB_CLIENT_ROOMS names only rooms there are: a room removed or renamed leaves no stale place behind."""
    rooms = {_room(name) for name in MODULES} - {None}
    assert not set(QB_CLIENT_ROOMS) - rooms, f"placed but missing: {sorted(set(QB_CLIENT_ROOMS) - rooms)}"


def test_a_room_group_imports_nothing() -> None:
    """A group folder's ``__init__`` is no room, so an import there would escape the order: it has none."""
    for group in ROOM_GROUPS:
        module = MODULES[f"qb_client.{group}"]
        assert not module.imports, f"qb_client/{group}/__init__.py imports {[t for t, _, _ in module.imports]}"


def _drawn_layout() -> dict[str, set[str]]:
    """docs/architecture.md's drawing of qb_client/: its top-level entries, and those of each group."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("```\nqb_client/\n", 1)[1].split("```", 1)[0]
    drawn: dict[str, set[str]] = {"": set()}
    group = ""
    for line in block.splitlines():
        indent, entry = len(line) - len(line.lstrip(" ")), line.split()[0] if line.strip() else ""
        if not entry.endswith(("/", ".py")):
            continue
        if indent == 2:
            drawn[""].add(entry)
            group = entry.rstrip("/")
        elif indent == 4:
            drawn.setdefault(group, set()).add(entry)
    return drawn


def _entries(folder: Path) -> set[str]:
    return ({p.name + "/" for p in folder.iterdir() if (p / "__init__.py").is_file()}
            | {p.name for p in folder.glob("*.py") if p.name != "__init__.py"})


def test_the_architecture_doc_draws_qb_clients_layout() -> None:
    drawn = _drawn_layout()
    assert drawn[""] == _entries(ROOT / "qb_client"), "docs/architecture.md's qb_client/ drawing is not the top level"
    for group in ROOM_GROUPS:
        assert drawn.get(group) == _entries(ROOT / "qb_client" / group), f"the drawing of qb_client/{group}/ differs"
