"""Reads the import graph of a package from its source (no code is run) and checks the
layout rules the README's package map states.

`check(tree)` returns every violation as one readable line; the architecture tests
assert that the list is empty for `gateway/`, and that each rule reports a tree made
to break it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

#: The standard library a pure module may use: no sockets, files, processes, clocks or
#: randomness (time and randomness come in as arguments).
PURE_STDLIB = frozenset(
    {
        "__future__",
        "abc",
        "base64",
        "binascii",
        "bisect",
        "collections",
        "dataclasses",
        "datetime",
        "decimal",
        "enum",
        "functools",
        "hashlib",
        "hmac",
        "ipaddress",
        "itertools",
        "json",
        "math",
        "operator",
        "re",
        "string",
        "types",
        "typing",
    }
)
#: Pure modules of standard-library packages whose other modules are not (urllib.request).
#: ElementTree parses bytes it is given (Braintree's payload); it fetches no external
#: entity, and the caller refuses a document type before parsing.
PURE_STDLIB_MODULES = frozenset({"urllib.parse", "email.utils", "xml.etree.ElementTree"})
#: Pure third-party libraries the core may use (cryptography: X.509 and RSA on bytes given).
PURE_LIBRARIES = frozenset({"orjson", "cryptography"})
#: Parts of importlib that read package data and metadata and never import a module by
#: name: the installed migrations (importlib.resources) and `gateway --version`.
DATA_ONLY_IMPORTLIB = frozenset(
    {"importlib.resources", "importlib.resources.abc", "importlib.metadata"}
)
#: Drivers: only the adapters import these.
DRIVERS = frozenset({"asyncpg", "nats", "redis", "tigerbeetle"})
#: The HTTP client library: adapters, the composition root and the bundled client.
HTTP_CLIENT = "httpx"
#: The metrics library: only `gateway.metrics` imports it, so every other module counts
#: through the gateway's own facade and the library can change in one place.
METRICS_LIBRARY = "prometheus_client"
#: The tracing SDK: only `gateway.tracing` imports it (lazily, when tracing is on), so
#: the rest of the gateway sees a small facade and `gateway serve` never loads it when off.
TRACING_LIBRARY = "opentelemetry"
#: SQL statements as they are written in this code base (keywords in capitals).
SQL = re.compile(r"\b(SELECT\s.+\sFROM|INSERT INTO|UPDATE \w+ SET|DELETE FROM)\b", re.DOTALL)


@dataclass(frozen=True)
class Import:
    """One import statement: which module imports what, and where."""

    importer: str  # dotted module name, e.g. "gateway.ingest.app"
    target: str  # the imported module (a submodule where the name is one)
    line: int


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    tree: ast.Module


def modules(root: Path, package: str) -> dict[str, Module]:
    """Every module of `package` under `root`, by dotted name."""
    found: dict[str, Module] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        name = ".".join(parts)
        found[name] = Module(name, path, ast.parse(path.read_text(encoding="utf-8")))
    return found


def imports(mods: Mapping[str, Module]) -> list[Import]:
    """Every import anywhere in each module (function-level ones included), resolved to
    a submodule where `from package import name` names one."""
    found = []
    for mod in mods.values():
        is_package = mod.path.name == "__init__.py"
        for node in ast.walk(mod.tree):
            if isinstance(node, ast.Import):
                found += [Import(mod.name, alias.name, node.lineno) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(mod.name, is_package, node.module, node.level)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    found.append(Import(mod.name, sub if sub in mods else base, node.lineno))
    return found


def _absolute(importer: str, is_package: bool, module: str | None, level: int) -> str:
    if level == 0:
        return module or ""
    parts = importer.split(".")
    if not is_package:
        parts.pop()
    parts = parts[: len(parts) - (level - 1)]
    return ".".join([*parts, module] if module else parts)


def _top(name: str) -> str:
    return name.split(".")[0]


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def layering(found: Iterable[Import], package: str) -> Iterator[str]:
    """The import rules between the package's rooms and towards the drivers."""
    core, adapters = f"{package}.core", f"{package}.adapters"
    ingest, cli, wiring = f"{package}.ingest", f"{package}.cli", f"{package}.wiring"
    for imp in found:
        where = f"{imp.importer}:{imp.line} imports {imp.target}"
        top = _top(imp.target)
        if _within(imp.importer, core) and not (
            top in PURE_STDLIB
            or imp.target in PURE_STDLIB_MODULES
            or top in PURE_LIBRARIES
            or _within(imp.target, core)
            or imp.target == f"{package}.errors"
        ):
            yield f"core does no I/O: {where}"
        if top in DRIVERS and not _within(imp.importer, adapters):
            yield f"only adapters import drivers: {where}"
        if top == HTTP_CLIENT and not (
            _within(imp.importer, adapters)
            or _within(imp.importer, wiring)
            or imp.importer == f"{package}.client"
        ):
            yield f"only adapters, the wiring and the client import httpx: {where}"
        if top == METRICS_LIBRARY and not _within(imp.importer, f"{package}.metrics"):
            yield f"only metrics imports {METRICS_LIBRARY}: {where}"
        if top == TRACING_LIBRARY and not _within(imp.importer, f"{package}.tracing"):
            yield f"only tracing imports {TRACING_LIBRARY}: {where}"
        if _within(imp.importer, ingest) and (
            _within(imp.target, f"{package}.settlement") or _within(imp.target, f"{package}.dlq")
        ):
            yield f"ingest never imports settlement or dlq: {where}"
        if _within(imp.target, cli) and not (
            _within(imp.importer, cli)
            or imp.importer == f"{package}.__main__"
            or imp.importer == f"{package}.devtools.docs_reference.cli"  # the CLI reference
        ):
            yield f"nothing imports cli: {where}"
        if _within(imp.importer, cli) and _within(imp.target, adapters):
            # The CLI parses and prints; what a command opens, the wiring opens and closes.
            yield f"cli imports no adapters: {where}"
        if _within(imp.target, wiring) and not (
            _within(imp.importer, wiring)
            or _within(imp.importer, cli)
            or imp.importer == f"{package}.__main__"
        ):
            # The composition root is the top of the house: a part that imported it would
            # depend on every other part.
            yield f"only cli imports the wiring: {where}"
        if (top == "importlib" and imp.target not in DATA_ONLY_IMPORTLIB) or (
            imp.target == "builtins"
        ):
            yield f"no registration by import side effect: {where}"


#: What the console process must never load: the ingest and settlement sides, and the
#: replay code that drives them (the console writes replay jobs; `gateway dlq run-jobs`
#: runs them).
CONSOLE_FORBIDDEN = re.compile(
    r"^{pkg}\.(ingest|settlement)(\.|$)|^{pkg}\.dlq\.(replay|\w+_handler)$"
)


def _loaded_by(name: str, mods: Mapping[str, Module]) -> list[str]:
    """What importing `name` runs: the module and each package above it."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in mods]


def console_isolation(
    found: Iterable[Import], mods: Mapping[str, Module], package: str
) -> Iterator[str]:
    """`package.console` never imports ingest, settlement, `dlq.replay` or a dlq
    `*_handler`, directly or through anything it imports (function-level imports
    included): reported with the chain that gets there."""
    forbidden = re.compile(CONSOLE_FORBIDDEN.pattern.replace("{pkg}", re.escape(package)))
    graph: dict[str, set[str]] = {name: set() for name in mods}
    for imp in found:
        for target in _loaded_by(imp.target, mods):
            if target != imp.importer:
                graph[imp.importer].add(target)
    console = f"{package}.console"
    starts = sorted(n for n in mods if _within(n, console))
    came_from: dict[str, str | None] = {}
    queue: list[str] = []
    for start in starts:
        for loaded in _loaded_by(start, mods):
            if loaded not in came_from:
                came_from[loaded] = None if loaded == start else start
                queue.append(loaded)
    while queue:
        node = queue.pop(0)
        for nxt in sorted(graph[node]):
            if nxt not in came_from:
                came_from[nxt] = node
                queue.append(nxt)
    for name in sorted(came_from):
        if forbidden.search(name):
            chain = [name]
            while came_from[chain[-1]] is not None:
                chain.append(came_from[chain[-1]])  # type: ignore[arg-type]
            yield f"the console never loads {name}: {' -> '.join(reversed(chain))}"


def side_effect_imports(mods: Mapping[str, Module]) -> Iterator[str]:
    """`__import__(...)` calls: a module found by name instead of imported."""
    for mod in mods.values():
        for node in ast.walk(mod.tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "__import__"
            ):
                yield f"no registration by import side effect: {mod.name}:{node.lineno}"


def cycles(found: Iterable[Import], mods: Mapping[str, Module]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {name: set() for name in mods}
    for imp in found:
        if imp.target in mods and imp.target != imp.importer:
            graph[imp.importer].add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def room_cycles(found: Iterable[Import], mods: Mapping[str, Module]) -> list[list[str]]:
    """Cycles between the package's rooms (`gateway.core`, `gateway.dlq`, ...: a
    top-level subpackage or module), which module cycles do not show: `dlq.a` importing
    `events.b` and `events.c` importing `dlq.d` is no module cycle, but the two rooms
    lean on each other and can no longer be read, tested or moved one at a time."""

    def room(name: str) -> str:
        return ".".join(name.split(".")[:2])

    rooms = {room(name): mods[name] for name in mods if "." in name}
    between = [
        Import(room(imp.importer), room(imp.target), imp.line)
        for imp in found
        if imp.target in mods and "." in imp.importer and "." in imp.target
    ]
    return cycles(between, rooms)


#: Modules that may name a logger other than their own, and why.
NAMED_LOGGERS = {
    # Configures the libraries' loggers (uvicorn's) and the root logger for every process.
    "logs": "configures other loggers",
    # Quiets the OpenTelemetry SDK's own export logger, which repeats every failure.
    "tracing.otel": "quiets a library logger",
    # Operator commands: a short-lived NATS connection's connect and disconnect lines are
    # noise next to the per-row report, so the command quiets the NATS adapters' package.
    "cli.common": "quiets the NATS adapters' loggers",
}


def logger_names(mods: Mapping[str, Module], package: str) -> Iterator[str]:
    """`getLogger(...)` calls that do not name their own module: a logger is found by
    the module that logs (`logging.getLogger(__name__)`), so a filter on
    `gateway.dlq` catches every DLQ module and nothing else."""
    allowed = {f"{package}.{name}" for name in NAMED_LOGGERS}
    for mod in mods.values():
        if mod.name in allowed:
            continue
        for node in ast.walk(mod.tree):
            if not (isinstance(node, ast.Call) and _is_get_logger(node.func)):
                continue
            own = (
                len(node.args) == 1
                and not node.keywords
                and isinstance(node.args[0], ast.Name)
                and node.args[0].id == "__name__"
            )
            if not own:
                yield f"a logger is named __name__: {mod.name}:{node.lineno}"


def _is_get_logger(func: ast.expr) -> bool:
    if isinstance(func, ast.Attribute):
        return func.attr == "getLogger"
    return isinstance(func, ast.Name) and func.id == "getLogger"


def sql_outside_adapters(mods: Mapping[str, Module], package: str) -> Iterator[str]:
    """String constants that are SQL statements, outside the adapters (docstrings aside)."""
    for mod in mods.values():
        if _within(mod.name, f"{package}.adapters"):
            continue
        docstrings = {
            id(body[0].value)
            for node in ast.walk(mod.tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and (body := node.body)
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
        }
        for node in ast.walk(mod.tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and SQL.search(node.value)
            ):
                yield f"SQL lives in adapters: {mod.name}:{node.lineno}"


def namespace_packages(root: Path, package: str) -> Iterator[str]:
    """Folders of modules without `__init__.py`: setuptools would leave them out of the
    wheel, and they would have no docstring saying what they hold."""
    for folder in sorted({p.parent for p in (root / package).rglob("*.py")}):
        if not (folder / "__init__.py").exists():
            yield f"a package has an __init__.py: {folder.relative_to(root)}"


def check(root: Path, package: str) -> list[str]:
    """Every broken rule in `root/package`, one line each (empty: the layout holds)."""
    mods = modules(root, package)
    found = imports(mods)
    problems = list(namespace_packages(root, package))
    problems += layering(found, package)
    problems += side_effect_imports(mods)
    problems += console_isolation(found, mods, package)
    problems += sql_outside_adapters(mods, package)
    problems += logger_names(mods, package)
    problems += [f"import cycle: {' -> '.join(group)}" for group in cycles(found, mods)]
    problems += [f"cycle between packages: {' -> '.join(g)}" for g in room_cycles(found, mods)]
    return problems
