"""The package's shape: no import cycle, definitions apart from the CLI, names spelled once."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "backfill_assets"
CATALOG = "backfill_assets.catalog"
# The packages the command line drives; none of them may import it.
DEFINITIONS_AND_MACHINERY = ("defs", "lake", "transforms", "late_data", "landing", "testing")
TABLE_PATHS = (
    "raw/orders",
    "raw/fx_rates",
    "quarantine/orders",
    "staging/orders",
    "fact/daily_revenue",
    "fact/customer_ltv",
    "fact/monthly_revenue",
    "staging/orders_enriched",
    "staging/customer_segments",
)
ASSET_NAMES = (
    "raw_orders",
    "raw_fx_rates",
    "stg_orders",
    "fct_daily_revenue",
    "fct_customer_ltv",
    "rpt_monthly_revenue",
    "stg_orders_enriched",
)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _imports(path: Path) -> set[str]:
    """Every project module ``path`` imports, at module level or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from a.b import c` imports a.b, and a.b.c when c is a module
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found |= {n for n in names if n in MODULES}
    return found


GRAPH = {name: _imports(path) - {name} for name, path in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_package_has_no_import_cycle():
    assert _cycles(GRAPH) == []


def test_catalog_is_a_leaf():
    assert GRAPH[CATALOG] == set()


@pytest.mark.parametrize("package", DEFINITIONS_AND_MACHINERY)
def test_definitions_and_machinery_never_import_the_cli(package):
    prefix = f"backfill_assets.{package}"
    offenders = {
        name: sorted(i for i in imports if i.startswith("backfill_assets.cli"))
        for name, imports in GRAPH.items()
        if name.startswith(prefix)
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def _string_constants(path: Path) -> list[tuple[int, str]]:
    """String literals that are not docstrings (descriptions in f-strings count as literals)."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def test_table_paths_and_asset_keys_are_spelled_only_in_the_catalog():
    spelled = []
    for name, path in MODULES.items():
        if name == CATALOG:
            continue
        for line, text in _string_constants(path):
            if any(t in text for t in TABLE_PATHS) or text in ASSET_NAMES:
                spelled.append(f"{name}:{line}: {text[:60]!r}")
    assert spelled == []
