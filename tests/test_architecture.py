"""The shape of the tree, held: roles by folder, no import cycle, Prefect only in `flows/`,
contracts that import no pipeline code, and functions that fit on a screen."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("pipeline", "schemas", "flows", "tools")
MAX_FUNCTION_LINES = 60
MAX_FLOW_FILE_LINES = 200
MAX_TOP_MODULES = 8


def _modules() -> dict[str, Path]:
    files = [p for pkg in PACKAGES for p in sorted((REPO / pkg).rglob("*.py"))]
    names = {}
    for path in files:
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """Every module a file imports, at any level (type-checking and local imports too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def test_no_function_over_sixty_lines() -> None:
    long = [
        f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1})"
        for path in MODULES.values()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not long, "functions over 60 lines:\n" + "\n".join(long)


def test_schemas_import_no_pipeline_code() -> None:
    bad = {
        name: sorted(i for i in _imports(path) if i.split(".")[0] in {"pipeline", "flows"})
        for name, path in MODULES.items()
        if name.startswith("schemas")
    }
    assert not {k: v for k, v in bad.items() if v}


def test_prefect_only_in_flows() -> None:
    bad = [
        name
        for name, path in MODULES.items()
        if not name.startswith("flows")
        and any(i.split(".")[0] in {"prefect", "prefect_dask"} for i in _imports(path))
    ]
    assert not bad


def test_no_import_cycle() -> None:
    graph = {
        name: {i for i in _imports(path) if i in MODULES and i != name}
        for name, path in MODULES.items()
    }
    done: set[str] = set()

    def visit(node: str, trail: list[str]) -> None:
        if node in trail:
            pytest.fail("import cycle: " + " -> ".join([*trail[trail.index(node) :], node]))
        if node in done:
            return
        for nxt in sorted(graph[node]):
            visit(nxt, [*trail, node])
        done.add(node)

    for name in sorted(graph):
        visit(name, [])


def test_flows_files_are_small() -> None:
    sizes = {p.name: len(p.read_text().splitlines()) for p in (REPO / "flows").glob("*.py")}
    assert max(sizes.values()) <= MAX_FLOW_FILE_LINES, sizes


def test_pipeline_top_holds_few_modules() -> None:
    top = [p.name for p in (REPO / "pipeline").glob("*.py") if p.name != "__init__.py"]
    assert len(top) <= MAX_TOP_MODULES, top
