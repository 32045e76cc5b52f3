"""The house rules, executable: who may import what, and every error has a status.

- The pure cores (``vstore``, ``ess``, ``vss``, ``replica``) import nothing of the process,
  the SDK or the analysis, and no third-party library beyond their own.
- The SDK (``vmw.sdk``) imports only gRPC, protobuf, the generated
  contract (``vehicle``), the pure ``vss`` rules and itself: an in-car app that
  installs it does not pull the server or the analysis stack.
- The analysis (``vmw.fleet``) reads the journal's format and speaks
  the journal service as a client; it imports nothing of the server.
- The server does not import the analysis (the demo runs it as a process).
- Every error class the cores and the middleware raise maps to a deliberate
  gRPC status: a new one cannot silently become INTERNAL.
"""

from __future__ import annotations

import ast
import importlib.metadata
import inspect
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import vmw.ess.errors
import vmw.server.errors
import vmw.vstore.errors
from vmw.ess import MAX_SEQ
from vmw.sdk import wire
from vmw.server.rpc.status import STATUS_OF, status_for

INTERNAL = grpc.StatusCode.INTERNAL
ROOT = Path(__file__).resolve().parents[2]
STDLIB = frozenset(sys.stdlib_module_names)

# package (dotted) -> the top-level or dotted prefixes its modules may import
# besides the standard library and themselves.
ALLOWED: dict[str, tuple[str, ...]] = {
    "vstore": ("sortedcontainers",),
    "ess": ("vstore", "bitarray"),
    "vss": (),
    "replica": ("vstore",),
    "vmw.sdk": ("grpc", "google.protobuf", "vehicle", "vss"),
}
_SERVER = (
    "vmw.server.server",
    "vmw.server.runtime",
    "vmw.server.delivery",
    "vmw.server.rpc",
    "vmw.server.kuksa",
    "vmw.server.cluster",
    "vmw.server.journal",
    "ess",
    "vstore",
)
"""What clients (sample apps, providers) must not import: they are apps like any other."""
_SERVICERS = tuple(
    f"vmw.server.rpc.{m}"
    for m in (
        "event_service",
        "vstore_service",
        "actuation_service",
        "journal_service",
        "admin_service",
    )
)
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "vmw.fleet": (
        "vmw.server.server",
        "vmw.server.runtime",
        "vmw.server.rpc",
        "vmw.server.delivery",
        "ess",
        "vstore",
    ),
    "middleware": ("vmw.fleet", "pyspark", "matplotlib"),
    "vmw.apps": _SERVER,
    "providers": _SERVER,
    "vmw.server.auth": ("grpc", "vmw.server.rpc", "vmw.server.runtime", "vmw.server.server"),
    "vmw.server.journal": ("vmw.server.rpc", "vmw.server.runtime", "vmw.server.server"),
    "vmw.server.metrics": _SERVICERS,
    "vmw.server.kuksa": _SERVICERS,
}
EXEMPT = ("vmw.demo",)
"""The demo drives the whole product, the analysis included (as a process)."""


def _modules(package: str) -> Iterator[tuple[str, Path]]:
    base = ROOT / package.replace(".", "/")
    for path in sorted(base.rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts), path


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_each_package_imports_only_what_its_layer_allows() -> None:
    broken: list[str] = []
    for package, allowed in ALLOWED.items():
        for module, path in _modules(package):
            for line, name in _imports(path):
                top = name.split(".")[0]
                if top in STDLIB or top == "__future__" or _under(name, package):
                    continue
                if not any(_under(name, a) for a in allowed):
                    broken.append(f"{path.relative_to(ROOT)}:{line}: {module} imports {name}")
    for package, forbidden in FORBIDDEN.items():
        for module, path in _modules(package):
            if any(_under(module, e) for e in EXEMPT):
                continue
            for line, name in _imports(path):
                if any(_under(name, f) for f in forbidden):
                    broken.append(f"{path.relative_to(ROOT)}:{line}: {module} imports {name}")
    assert not broken, "import rules broken:\n" + "\n".join(broken)


def _error_classes() -> list[type[BaseException]]:
    found = []
    for module in (vmw.vstore.errors, vmw.ess.errors, vmw.server.errors):
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
        vmw.vstore.errors.VStoreError,
        vmw.ess.errors.EssError,
        vmw.server.errors.MiddlewareError,
    ):
        # A bare base class is never raised; mapping it would hide a subclass's omission.
        assert all(kind is not cls for kind, _ in STATUS_OF)
        return
    assert _status_of(cls) is not INTERNAL, (
        f"{cls.__module__}.{cls.__name__} has no status: add it to vmw.server.rpc.status.STATUS_OF"
    )


def test_the_status_of_an_instance_is_the_status_of_its_class() -> None:
    error = vmw.server.errors.LimitExceededError("apps", 3, "4 open")
    assert status_for(error)[0] is _status_of(type(error)) is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert status_for(RuntimeError("x"))[0] is _status_of(RuntimeError) is INTERNAL


def test_installing_the_package_does_not_pull_the_analysis_stack() -> None:
    """pyspark and matplotlib come only with the ``analysis`` extra."""
    requires = importlib.metadata.requires("vehicle-middleware") or []
    base = [r for r in requires if "extra ==" not in r]
    assert not [r for r in base if r.startswith(("pyspark", "matplotlib", "pandas"))], base
    analysis = [r for r in requires if 'extra == "analysis"' in r]
    assert any(r.startswith("pyspark") for r in analysis), requires


def test_the_wire_constants_are_defined_once() -> None:
    """No module but ``vmw.contract.wire`` spells a wire string itself; the
    ESS core's seq cycle is the wire's."""
    assert wire.SEQ_CYCLE == MAX_SEQ
    values = {
        wire.APP_ID_HEADER,
        wire.AUTH_HEADER,
        wire.KEYS_VERSION_HEADER,
        wire.REASON_HEADER,
    }
    spelled: list[str] = []
    for package in ("middleware", "providers", "vmw.fleet"):
        for module, path in _modules(package):
            if module == "vmw.contract.wire":
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Constant) and node.value in values:
                    spelled.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert not spelled, "import these from vmw.contract.wire:\n" + "\n".join(spelled)


def _layout_rows() -> dict[str, str]:
    """The README's layout table: path -> what."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[1]
    return rows


def _packages() -> list[str]:
    """Top-level packages and the middleware's subpackages (dotted)."""
    top = sorted(p.parent.name for p in ROOT.glob("*/__init__.py") if p.parent.name != "tests")
    sub = sorted(f"middleware.{p.parent.name}" for p in (ROOT / "middleware").glob("*/__init__.py"))
    return [t for t in top if t != "vehicle"] + sub


def test_the_readme_layout_table_matches_the_tree() -> None:
    """Every package has a row (the middleware's subpackages and modules are named in
    its row), and every row names something that exists."""
    rows = _layout_rows()
    for package in _packages():
        if package.startswith("middleware."):
            name = package.split(".", 1)[1]
            assert f"`{name}/`" in rows["middleware/"], f"the middleware row does not name {name}/"
        else:
            assert f"{package}/" in rows, f"no layout row for {package}/"
    for module in sorted((ROOT / "middleware").glob("*.py")):
        if module.name != "__init__.py":
            assert f"`{module.name}`" in rows["middleware/"], f"middleware/{module.name} unnamed"
    for path in rows:
        assert (ROOT / path).exists(), f"the layout names {path}, which does not exist"


@pytest.mark.parametrize("package", _packages())
def test_each_package_says_what_it_owns_and_what_it_must_not_import(package: str) -> None:
    init = ROOT / package.replace(".", "/") / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    assert "Owns" in doc, f"{package}: the opening docstring says what it owns ('Owns ...')"
    assert "import" in doc, f"{package}: the opening docstring says what it must not import"
