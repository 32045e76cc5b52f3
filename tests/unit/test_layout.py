"""The house rules, executable: who may import what, and every error has a status.

- Each distribution (a top-level folder with a ``pyproject.toml`` that names a
  project) imports only itself, the ``vehicle_middleware`` distributions its
  ``pyproject.toml`` declares, their third-party
  dependencies (extras included) and the standard library: an install that
  works in a test cannot break for a user who installs one distribution alone.
- The layers run one way: the contract at the bottom (it depends on no other
  distribution of the project), the pure cores on each other and the contract's
  wire constants, the SDK on the contract only, the server on the contract and
  the cores, the fleet side, the tools, the providers and the samples above; the
  server never imports the SDK.
- No two packages of the server import each other, directly or round a circle;
  neither do two modules anywhere.
- The pure cores (``vehicle_middleware.vstore``, ``.ess``, ``.vss``, ``.replica``)
  import nothing of the process, the SDK or the analysis, and no third-party
  library beyond their own.
- Every error class the cores and the middleware raise maps to a deliberate
  gRPC status: a new one cannot silently become INTERNAL.
"""

from __future__ import annotations

import ast
import importlib.metadata
import inspect
import re
import sys
import tomllib
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Final

import grpc
import pytest
import vehicle_middleware.ess.errors
import vehicle_middleware.server.errors
import vehicle_middleware.vstore.errors
from vehicle_middleware.contract import wire
from vehicle_middleware.ess import MAX_SEQ
from vehicle_middleware.server.rpc.status import STATUS_OF, status_for

INTERNAL = grpc.StatusCode.INTERNAL
ROOT = Path(__file__).resolve().parents[2]
STDLIB = frozenset(sys.stdlib_module_names)
GENERATED = "vehicle_middleware.proto"


# -- the distributions and their declared dependencies ------------------------------


@cache
def _dists() -> dict[str, Path]:
    """Distribution name -> its top-level folder."""
    found = {}
    for folder in sorted(ROOT.iterdir()):
        config = folder / "pyproject.toml"
        if config.exists() and "project" in tomllib.loads(config.read_text()):
            found[_project(folder)["name"]] = folder
    return found


@cache
def _project(folder: Path) -> dict[str, object]:
    project: dict[str, object] = tomllib.loads((folder / "pyproject.toml").read_text())["project"]
    return project


def _requirement_name(spec: str) -> str:
    name = re.match(r"[A-Za-z0-9_.\-]+", spec)
    assert name is not None, spec
    return _normal(name.group(0))


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requires(dist: str, *, extras: bool = True) -> set[str]:
    """What ``dist`` declares (normalised names), extras included."""
    project = _project(_dists()[dist])
    specs = list(project.get("dependencies", []))  # type: ignore[call-overload]
    if extras:
        for more in dict(project.get("optional-dependencies", {})).values():  # type: ignore[call-overload]
            specs += more
    return {_requirement_name(s) for s in specs}


def _own(dist: str) -> set[str]:
    """The ``vehicle_middleware`` distributions ``dist`` declares (not itself)."""
    return {d for d in _requires(dist) if d in _dists()} - {dist}


def _third_party(dist: str) -> set[str]:
    """Third-party distributions ``dist`` may import: its own and its ``vehicle_middleware``
    dependencies'."""
    seen, todo, found = set(), [dist], set()
    while todo:
        d = todo.pop()
        if d in seen:
            continue
        seen.add(d)
        for r in _requires(d):
            (todo if r in _dists() else found).append(r) if r in _dists() else found.add(r)
    return found


# -- modules and their imports --------------------------------------------------------


@cache
def _modules() -> dict[str, tuple[str, Path]]:
    """Every module of every distribution (the generated code aside): name -> (dist, path)."""
    found = {}
    for dist, folder in _dists().items():
        for path in sorted((folder / "vehicle_middleware").rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join(parts)
            if not _under(name, GENERATED):
                found[name] = (dist, path)
    return found


def _package_of(module: str) -> str:
    """The ``vehicle_middleware.X`` package a module belongs to."""
    return ".".join(module.split(".")[:2])


@cache
def _dist_of_package() -> dict[str, str]:
    found = {_package_of(m): d for m, (d, _) in _modules().items()}
    found[GENERATED] = "vehicle-middleware-contract"
    return found


@cache
def _imports(path: Path) -> tuple[tuple[int, str], ...]:
    """Every absolute import in the file, with ``from m import n`` also as ``m.n``."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return tuple(found)


def _runtime_imports(path: Path) -> set[str]:
    """The ``vehicle_middleware`` modules a module imports when it runs (not under
    TYPE_CHECKING)."""
    tree = ast.parse(path.read_text(), str(path))
    skip = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for n in ast.walk(node)
    }
    modules = _modules()
    found = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        found |= {n for n in names if n in modules}
    return found


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


@cache
def _distributions_of_import() -> dict[str, list[str]]:
    return {
        top: [_normal(d) for d in dists]
        for top, dists in importlib.metadata.packages_distributions().items()
    }


# -- the rules --------------------------------------------------------------------------


def test_each_distribution_imports_only_what_it_declares() -> None:
    broken: list[str] = []
    by_import = _distributions_of_import()
    for module, (dist, path) in _modules().items():
        own = _own(dist) | {dist}
        third = _third_party(dist)
        for line, name in _imports(path):
            top = name.split(".")[0]
            where = f"{path.relative_to(ROOT)}:{line}: {module} ({dist}) imports {name}"
            if top in STDLIB or top == "__future__":
                continue
            if top == "vehicle_middleware":
                package = _package_of(name)
                owner = _dist_of_package().get(package)
                if owner is None:
                    if name.count(".") == 1:
                        continue  # ``from vehicle_middleware import x``: checked as its module
                    broken.append(f"{where}: no distribution holds {package}")
                elif owner not in own:
                    broken.append(f"{where}: {owner} is not among its dependencies")
                continue
            providers = by_import.get(top)
            if providers is None:
                continue  # ``from m import name`` as m.name: m itself was checked
            if not set(providers) & third:
                broken.append(f"{where}: {'/'.join(providers)} is not among its dependencies")
    assert not broken, "undeclared imports:\n" + "\n".join(sorted(set(broken)))


def test_the_layers_run_one_way() -> None:
    dists = set(_dists())
    name = "vehicle-middleware-{}".format
    contract, sdk, server = name("contract"), name("sdk"), name("server")
    vstore, ess, replica = name("vstore"), name("ess"), name("replica")
    fleet, tools = name("telemetry-export"), name("tools")
    providers, samples = name("providers"), name("samples")
    assert dists == {contract, sdk, server, vstore, ess, replica, fleet, tools, providers, samples}
    assert _own(contract) == set()
    assert _own(vstore) == set(), "the V-Store is the bottom core"
    assert _own(ess) == {vstore, contract}, "the ESS uses the V-Store and the wire constants"
    assert _own(replica) == {vstore}
    assert _own(sdk) == {contract}
    assert _own(server) == {contract, vstore, ess, replica}, "the server does not import the SDK"
    for upper in (fleet, tools, providers):
        assert not _own(upper) & {server, vstore, ess, replica}, f"{upper} is a client"
    assert _own(samples) - {sdk, contract} <= {server, fleet, providers}
    requires = {d: _requires(d, extras=False) for d in dists}
    assert not requires[samples] & {server, fleet}, (
        "the samples pull the server and Spark only with their demo extra"
    )
    assert not requires[fleet] & {"pyspark", "matplotlib", "pyarrow"}, (
        "the collector installs without Spark: the Spark jobs are the 'spark' extra"
    )
    for core in (vstore, ess, replica):
        installed, todo = set(), [core]
        while todo:
            for r in requires.get(todo.pop(), set()) - installed:
                installed.add(r)
                todo.append(r)
        assert "grpcio" not in installed, f"{core} installs without gRPC"


def test_the_sdk_depends_on_the_contract_and_grpcio_only() -> None:
    assert _requires("vehicle-middleware-sdk", extras=False) == {
        "vehicle-middleware-contract",
        "grpcio",
    }
    assert _requires("vehicle-middleware-contract", extras=False) <= {"protobuf", "orjson"}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _graph(unit: int | None) -> dict[str, set[str]]:
    """Who imports whom at run time: modules, or packages ``unit`` names deep."""

    def cut(name: str) -> str:
        return name if unit is None else ".".join(name.split(".")[:unit])

    graph: dict[str, set[str]] = {}
    for module, (_, path) in _modules().items():
        for target in _runtime_imports(path):
            a, b = cut(module), cut(target)
            if a != b and not _under(module, target) and not _under(target, module):
                graph.setdefault(a, set()).add(b)
    return graph


def test_no_two_server_packages_import_each_other() -> None:
    """``vehicle_middleware.server.runtime``, ``.session``, ``.cluster``, ``.rpc``... form a tree,
    no circle."""
    cycles = _cycles(_graph(3))
    assert not cycles, f"import circles between packages: {cycles}"


def test_no_two_modules_import_each_other() -> None:
    """A package's ``__init__`` re-exporting its modules does not count (it is the package)."""
    cycles = _cycles(_graph(None))
    assert not cycles, f"import circles between modules: {cycles}"


# package -> the top-level or dotted prefixes its modules may import besides the
# standard library and themselves.
CORES: dict[str, tuple[str, ...]] = {
    "vehicle_middleware.vstore": ("sortedcontainers",),
    "vehicle_middleware.ess": (
        "vehicle_middleware.vstore",
        "bitarray",
        "vehicle_middleware.contract.wire",
    ),
    "vehicle_middleware.vss": (),
    "vehicle_middleware.replica": ("vehicle_middleware.vstore",),
    "vehicle_middleware.contract": (
        "google.protobuf",
        "orjson",
        "grpc",
        "vehicle_middleware.proto",
        "vehicle_middleware.vss",
    ),
    # cryptography: only vehicle_middleware.sdk.cli's certificate names, with the SDK's ``certs``
    # extra.
    "vehicle_middleware.sdk": (
        "grpc",
        "google.protobuf",
        "vehicle_middleware.proto",
        "vehicle_middleware.contract",
        "vehicle_middleware.vss",
        "cryptography",
    ),
}
_SERVER = (
    "vehicle_middleware.server",
    "vehicle_middleware.ess",
    "vehicle_middleware.vstore",
    "vehicle_middleware.replica",
)
"""What clients (sample apps, providers, tools) must not import: they are apps like any other."""
_SERVICERS = tuple(
    f"vehicle_middleware.server.rpc.{m}"
    for m in (
        "event_service",
        "vstore_service",
        "actuation_service",
        "journal_service",
        "admin_service",
    )
)
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "vehicle_middleware.telemetry_export": _SERVER,
    "vehicle_middleware.server": (
        "vehicle_middleware.telemetry_export",
        "vehicle_middleware.sdk",
        "pyspark",
        "matplotlib",
    ),
    "vehicle_middleware.apps": _SERVER,
    "vehicle_middleware.providers": _SERVER,
    "vehicle_middleware.tools": _SERVER,
    "vehicle_middleware.server.auth": (
        "grpc",
        "vehicle_middleware.server.rpc",
        "vehicle_middleware.server.runtime",
        "vehicle_middleware.server.server",
    ),
    "vehicle_middleware.server.journal": (
        "vehicle_middleware.server.rpc",
        "vehicle_middleware.server.runtime",
        "vehicle_middleware.server.server",
    ),
    "vehicle_middleware.server.metrics": _SERVICERS,
    "vehicle_middleware.server.kuksa": _SERVICERS,
}


def _package_modules(package: str) -> Iterator[tuple[str, Path]]:
    for module, (_, path) in _modules().items():
        if _under(module, package):
            yield module, path


def test_each_package_imports_only_what_its_layer_allows() -> None:
    broken: list[str] = []
    for package, allowed in CORES.items():
        for module, path in _package_modules(package):
            for line, name in _imports(path):
                top = name.split(".")[0]
                if (
                    top in STDLIB
                    or top == "__future__"
                    or _under(name, package)
                    or name == "vehicle_middleware"
                ):
                    continue
                if not any(_under(name, a) or _under(a, name) for a in allowed):
                    broken.append(f"{path.relative_to(ROOT)}:{line}: {module} imports {name}")
    for package, forbidden in FORBIDDEN.items():
        for module, path in _package_modules(package):
            for line, name in _imports(path):
                if any(_under(name, f) for f in forbidden):
                    broken.append(f"{path.relative_to(ROOT)}:{line}: {module} imports {name}")
    assert not broken, "import rules broken:\n" + "\n".join(sorted(set(broken)))


def _error_classes() -> list[type[BaseException]]:
    found = []
    for module in (
        vehicle_middleware.vstore.errors,
        vehicle_middleware.ess.errors,
        vehicle_middleware.server.errors,
    ):
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, Exception) and cls.__module__ == module.__name__:
                found.append(cls)
    return found


def _status_of(cls: type[BaseException]) -> grpc.StatusCode:
    """The status :func:`status_for` gives an instance of ``cls`` (first match wins)."""
    return next((code for kind, code in STATUS_OF if issubclass(cls, kind)), INTERNAL)


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda c: c.__name__)
def test_every_error_class_maps_to_a_deliberate_status(cls: type[BaseException]) -> None:
    if cls in (
        vehicle_middleware.vstore.errors.VStoreError,
        vehicle_middleware.ess.errors.EssError,
        vehicle_middleware.server.errors.MiddlewareError,
    ):
        # A bare base class is never raised; mapping it would hide a subclass's omission.
        assert all(kind is not cls for kind, _ in STATUS_OF)
        return
    assert _status_of(cls) is not INTERNAL, (
        f"{cls.__module__}.{cls.__name__} has no status: "
        "add it to vehicle_middleware.server.rpc.status.STATUS_OF"
    )


def test_the_status_of_an_instance_is_the_status_of_its_class() -> None:
    error = vehicle_middleware.server.errors.LimitExceededError("apps", 3, "4 open")
    assert status_for(error)[0] is _status_of(type(error)) is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert status_for(RuntimeError("x"))[0] is _status_of(RuntimeError) is INTERNAL


def test_the_wire_constants_are_defined_once() -> None:
    """No module but ``vehicle_middleware.contract.wire`` spells a wire string itself; the
    ESS core's seq cycle is the wire's (imported, not retyped)."""
    assert MAX_SEQ is wire.SEQ_CYCLE
    values = {
        wire.APP_ID_HEADER,
        wire.AUTH_HEADER,
        wire.KEYS_VERSION_HEADER,
        wire.REASON_HEADER,
    }
    spelled: list[str] = []
    for module, (_, path) in _modules().items():
        if module == "vehicle_middleware.contract.wire":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and node.value in values:
                spelled.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert not spelled, "import these from vehicle_middleware.contract.wire:\n" + "\n".join(spelled)


def _layout_rows() -> dict[str, str]:
    """The contributors' layout table: path -> what."""
    text = (ROOT / "docs" / "contributing.md").read_text()
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[1]
    return rows


def _package_dirs() -> list[Path]:
    return sorted(p for p in ROOT.glob("*/vehicle_middleware/*") if (p / "__init__.py").exists())


PARALLEL: Final = frozenset({"convert"})
"""Module names that are the same concept in parallel packages (each API's
conversions between its messages and the domain: docs/contributing.md)."""


def test_no_two_modules_of_a_distribution_share_a_name() -> None:
    """A name says what a module holds: two modules of one distribution with one
    name would be two things called the same."""
    seen: dict[tuple[str, str], list[str]] = {}
    for module, (dist, path) in _modules().items():
        leaf = module.rsplit(".", 1)[-1]
        if path.name != "__init__.py" and leaf not in {"__main__", *PARALLEL}:
            seen.setdefault((dist, leaf), []).append(module)
    shared = {key: names for key, names in seen.items() if len(names) > 1}
    assert not shared, f"modules sharing a name in one distribution: {shared}"


def test_the_layout_table_matches_the_tree() -> None:
    """Every package has a row in docs/contributing.md; every row names something that exists."""
    rows = _layout_rows()
    for folder in _package_dirs():
        path = f"{folder.relative_to(ROOT)}/"
        assert path in rows, f"no layout row for {path}"
    for path in rows:
        assert (ROOT / path).exists(), f"the layout names {path}, which does not exist"


@pytest.mark.parametrize(
    "folder",
    [p for p in _package_dirs() if p.name != "proto"],
    ids=lambda p: p.name,
)
def test_each_package_says_what_it_owns_and_what_it_must_not_import(folder: Path) -> None:
    doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
    assert "Owns" in doc, f"{folder.name}: the opening docstring says what it owns ('Owns ...')"
    assert "import" in doc, f"{folder.name}: the opening docstring says what it must not import"
