"""The dependency rules: the layer order, no import cycle, and a pure ``forecaster``.

Every module of ``forecaster`` < ``training`` < ``serving`` < ``prewarm`` < ``benchmarks``
imports only its own layer and earlier ones, and no two modules (nor two sub-packages such as
``forecaster.policies`` and ``forecaster.backtest``) import each other, directly or round a
circle. Inside ``serving``, ``engine`` < ``wire`` < ``api``.

``forecaster`` is pure.

It imports no project package (``training``, ``serving``, ``prewarm``: they depend on it, not the
other way round), only the standard library and the numeric stack, and does no I/O: no module
that touches files, the network, processes or the environment, no ``open()``, no pandas reader
or writer. Checked on the source (AST), so a lazy import inside a function counts too.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "forecaster"
PROJECT_PACKAGES = {"training", "serving", "prewarm"}
# The numeric stack DESIGN section 3 allows (matplotlib only for figures, imported lazily;
# threadpoolctl, scikit-learn's own dependency, bounds the native thread pools of a fit).
THIRD_PARTY = {"numpy", "pandas", "scipy", "sklearn", "lightgbm", "matplotlib", "threadpoolctl"}
# Standard-library modules that do I/O or read the environment.
IO_MODULES = {
    "os",
    "io",
    "pathlib",
    "shutil",
    "glob",
    "tempfile",
    "socket",
    "ssl",
    "subprocess",
    "multiprocessing",
    "urllib",
    "http",
    "json",
    "pickle",
    "shelve",
    "sqlite3",
    "csv",
    "logging.handlers",
}
# pandas / numpy entry points that read or write files.
IO_CALLS = {"open", "read_csv", "read_parquet", "read_json", "to_csv", "to_parquet", "to_json"}
IO_CALLS |= {"savetxt", "loadtxt", "savez", "savefig", "to_pickle", "read_pickle"}

FILES = sorted(PACKAGE.rglob("*.py"))


def imported_modules(tree: ast.AST) -> list[str]:
    """Absolute names of every module imported anywhere in ``tree``."""
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def called_names(tree: ast.AST) -> list[str]:
    """Names of the functions and methods called in ``tree``."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name):
                names.append(node.func.id)
            elif isinstance(node.func, ast.Attribute):
                names.append(node.func.attr)
    return names


def forbidden(module: str) -> str | None:
    """Why ``module`` may not be imported by ``forecaster``, or ``None`` if it may."""
    top = module.split(".")[0]
    if top in PROJECT_PACKAGES:
        return "a project package that depends on forecaster"
    if module in IO_MODULES or top in IO_MODULES:
        return "an I/O module"
    if top == "forecaster" or top in THIRD_PARTY:
        return None
    if top in sys.stdlib_module_names:
        return None
    return "a third-party package outside the numeric stack"


def test_the_package_is_found() -> None:
    assert len(FILES) > 20


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(PACKAGE)) for p in FILES])
def test_forecaster_imports_no_project_package_and_no_io(path: Path) -> None:
    tree = ast.parse(path.read_text(), filename=str(path))
    problems = [f"{m}: {why}" for m in imported_modules(tree) if (why := forbidden(m))]
    problems += [f"{name}(): file I/O" for name in called_names(tree) if name in IO_CALLS]
    assert not problems, f"{path.relative_to(PACKAGE.parent)} breaks the dependency rule"


@pytest.mark.parametrize(
    ("module", "allowed"),
    [
        ("training.sources.file", False),
        ("prewarm", False),
        ("serving.api.app", False),
        ("pathlib", False),
        ("urllib.request", False),
        ("requests", False),
        ("mlflow", False),
        ("numpy", True),
        ("forecaster.capacity", True),
        ("math", True),
    ],
)
def test_the_rule_itself(module: str, allowed: bool) -> None:
    assert (forbidden(module) is None) is allowed


# -- the layer order and the module graph ------------------------------------------------------
# Each package may import only the packages before it: ``forecaster`` (pure) < ``training`` <
# ``serving`` < ``prewarm`` (the CLI) < ``benchmarks``. ``tests`` may import anything.
ROOT = PACKAGE.parent
LAYERS = ("forecaster", "training", "serving", "prewarm", "benchmarks")
SOURCES = {
    path: ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
    for layer in LAYERS
    for path in sorted((ROOT / layer).rglob("*.py"))
}
MODULES = set(SOURCES.values())


def _under_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def project_imports(tree: ast.AST, module: str, *, is_package: bool) -> set[str]:
    """The project modules ``module`` imports, at any depth (function-level imports too).

    ``from a.b import c`` is an import of the module ``a.b.c`` when there is one, else of
    ``a.b``; relative imports are resolved against ``module``. Imports under
    ``if TYPE_CHECKING:`` are left out: they never run, so they cannot close a cycle at import
    time, and annotations (postponed by ``from __future__ import annotations``) may name a
    type of a module that imports this one.
    """
    skipped = {
        id(child)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and _under_type_checking(node)
        for statement in node.body
        for child in ast.walk(statement)
    }
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in MODULES else base)
    return {name for name in found if name in MODULES}


GRAPH = {
    module: project_imports(
        ast.parse(path.read_text(), filename=str(path)), module, is_package=path.stem == "__init__"
    )
    - {module}
    for path, module in SOURCES.items()
}


def layer_of(module: str) -> int:
    return LAYERS.index(module.split(".")[0])


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``"a -> b"`` for every import of a later layer than the importer's."""
    return sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        for target in targets
        if layer_of(target) > layer_of(module)
    )


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
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

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def subpackage_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph collapsed to second-level units (``forecaster.policies``,
    ``training.sources``, ``forecaster.capacity``...), so that two sub-packages that import
    each other through different modules show as a cycle too."""

    def unit(module: str) -> str:
        return ".".join(module.split(".")[:2])

    collapsed: dict[str, set[str]] = {}
    for module, targets in graph.items():
        collapsed.setdefault(unit(module), set()).update(
            unit(t) for t in targets if unit(t) != unit(module)
        )
    return collapsed


def test_the_layers_are_found() -> None:
    assert {module.split(".")[0] for module in MODULES} == set(LAYERS)
    assert sum(len(targets) for targets in GRAPH.values()) > 100


def test_no_module_imports_a_later_layer() -> None:
    found = upward_imports(GRAPH)
    assert not found, "imports against the layer order: " + ", ".join(found)


def test_no_import_cycle_between_modules() -> None:
    found = cycles(GRAPH)
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_no_import_cycle_between_subpackages() -> None:
    found = cycles(subpackage_graph(GRAPH))
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


# ``serving``'s own layers: the engine plans, the wire formats encode what it planned, the API
# answers with them. The shared modules (settings, exceptions) sit below all three.
SERVING_LAYERS = ("serving.engine", "serving.wire", "serving.api")


def serving_layer(module: str) -> int:
    unit = ".".join(module.split(".")[:2])
    return SERVING_LAYERS.index(unit) + 1 if unit in SERVING_LAYERS else 0


def test_serving_engine_wire_api_point_one_way() -> None:
    found = sorted(
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        if module.startswith("serving.")
        for target in targets
        if target.startswith("serving.") and serving_layer(target) > serving_layer(module)
    )
    assert not found, "imports against serving's layers: " + ", ".join(found)


@pytest.mark.parametrize(
    ("graph", "upward", "cycle"),
    [
        pytest.param({"forecaster.a": {"training.b"}, "training.b": set()}, 1, 0, id="upward"),
        pytest.param({"training.a": {"forecaster.b"}, "forecaster.b": set()}, 0, 0, id="down"),
        pytest.param(
            {"forecaster.a": {"forecaster.b"}, "forecaster.b": {"forecaster.a"}}, 0, 1, id="pair"
        ),
        pytest.param(
            {"serving.a": {"serving.b"}, "serving.b": {"serving.c"}, "serving.c": {"serving.a"}},
            0,
            1,
            id="triangle",
        ),
    ],
)
def test_the_graph_checks_themselves(graph: dict[str, set[str]], upward: int, cycle: int) -> None:
    assert len(upward_imports(graph)) == upward
    assert len(cycles(graph)) == cycle


def test_a_lazy_import_counts() -> None:
    tree = ast.parse("def f():\n    from forecaster.capacity import desired_replicas\n")
    assert project_imports(tree, "forecaster.policies.base", is_package=False) == {
        "forecaster.capacity"
    }


def test_a_type_checking_import_does_not_count() -> None:
    tree = ast.parse("import typing\nif typing.TYPE_CHECKING:\n    import serving.api.app\n")
    assert project_imports(tree, "serving.engine.models", is_package=False) == set()
