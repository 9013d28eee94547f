"""The dependency rule: ``forecaster`` is pure.

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
THIRD_PARTY = {"numpy", "pandas", "sklearn", "lightgbm", "matplotlib", "threadpoolctl"}
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
        ("serving.app", False),
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
