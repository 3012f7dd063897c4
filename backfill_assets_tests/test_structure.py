"""The package's shape: no import cycle, definitions apart from the CLI and from the machinery,
names spelled once."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "backfill_assets"
CATALOG = "backfill_assets.catalog"
DEFS = "backfill_assets.defs"
# The packages the command line drives; none of them may import it.
DEFINITIONS_AND_MACHINERY = (
    "defs",
    "publishing",
    "event_days",
    "automation",
    "lake",
    "transforms",
    "late_data",
    "landing",
    "enrichment",
    "corrections",
    "asset_events",
    "testing",
)
# The modules above the definitions, which may import them: the one Definitions, and the
# command line (which nothing imports).
ABOVE_DEFS = ("backfill_assets.definitions", "backfill_assets.cli")
# What declares a Dagster definition: ``dg.<maker>`` called or used as a decorator, or a
# function that returns ``dg.<definition>`` (the factories that take the settings).
DEFINITION_MAKERS = frozenset(
    {
        "asset",
        "multi_asset",
        "asset_check",
        "AssetSpec",
        "AssetCheckSpec",
        "sensor",
        "asset_sensor",
        "run_status_sensor",
        "schedule",
        "ScheduleDefinition",
        "define_asset_job",
        "job",
        "op",
        "graph",
        "DailyPartitionsDefinition",
        "MonthlyPartitionsDefinition",
        "TimeWindowPartitionMapping",
    }
)
DEFINITIONS = frozenset(
    {
        "AssetsDefinition",
        "AssetChecksDefinition",
        "AssetCheckSpec",
        "SensorDefinition",
        "ScheduleDefinition",
        "JobDefinition",
        "UnresolvedAssetJobDefinition",
        "PartitionsDefinition",
        "DailyPartitionsDefinition",
        "MonthlyPartitionsDefinition",
        "TimeWindowPartitionMapping",
    }
)
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
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

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


# The package's layers, bottom first: a module imports from its own layer and those below, never
# from one above. Every top-level module and package is in one of them.
LAYERS = (
    (
        "backfill_assets",
        "catalog",
        "settings",
        "days",
        "day_blocks",
        "signals",
        "seam",
        "testing",
        "dagster_private",
    ),
    ("spark", "event_log", "storage"),
    ("lake",),
    ("transforms",),
    ("landing", "enrichment", "demo"),
    ("late_data", "resources"),
    ("asset_events", "backfill_plan"),
    ("corrections",),
    ("publishing",),
    ("raw", "event_days", "downstream", "automation"),
    ("defs",),
    ("definitions", "cli"),
)


def _unit(module: str) -> str:
    """The top-level module or package of ``module`` (the package root is its own)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _upward(graph: dict[str, set[str]], layers: tuple[tuple[str, ...], ...]) -> list[str]:
    """Each import from a module to one in a higher layer, as ``importer -> imported``."""
    level = {unit: i for i, layer in enumerate(layers) for unit in layer}
    return sorted(
        f"{importer} -> {imported}"
        for importer, imports in graph.items()
        for imported in imports
        if level[_unit(imported)] > level[_unit(importer)]
    )


def test_the_layer_rule_finds_an_import_from_below():
    graph = {"backfill_assets.lake.x": {"backfill_assets.cli.y"}, "backfill_assets.cli.y": set()}
    assert _upward(graph, (("lake",), ("cli",))) == [
        "backfill_assets.lake.x -> backfill_assets.cli.y"
    ]
    assert _upward(graph, (("cli",), ("lake",))) == []


def test_every_top_level_module_is_in_one_layer():
    units = sorted({_unit(m) for m in MODULES})
    placed = [unit for layer in LAYERS for unit in layer]
    assert sorted(placed) == units, "place each top-level module in LAYERS, once"


def test_no_import_runs_from_a_lower_layer_to_a_higher_one():
    assert _upward(GRAPH, LAYERS) == []


# The project's trees, bottom to top: each imports only from the trees below it. The testkit
# holds what the tests and the benchmarks share (references, feeds, servers, harnesses).
PROJECT = PACKAGE.parent
TREES = (("backfill_assets",), ("backfill_assets_testkit",), ("backfill_assets_tests", "bench"))


def _tree_imports(path: Path) -> set[str]:
    """The project's trees that ``path`` imports from, at module level or inside a function."""
    roots = {tree for layer in TREES for tree in layer}
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        else:
            continue
        found |= {n.split(".")[0] for n in names} & roots
    return found


def _tree_crossings(files: dict[str, set[str]], trees: tuple[tuple[str, ...], ...]) -> list[str]:
    """Each import of a tree from one in the same layer or a higher one, as ``file -> tree``: a
    tree imports only from the layers below it (and from itself)."""
    level = {tree: i for i, layer in enumerate(trees) for tree in layer}
    return sorted(
        f"{file} -> {imported}"
        for file, imported_trees in files.items()
        for imported in imported_trees
        if imported != file.split("/")[0] and level[imported] >= level[file.split("/")[0]]
    )


def test_the_tree_rule_finds_a_test_importing_a_benchmark():
    files = {"backfill_assets_tests/t.py": {"bench"}, "bench/b.py": {"backfill_assets_testkit"}}
    assert _tree_crossings(files, TREES) == ["backfill_assets_tests/t.py -> bench"]


def test_each_tree_imports_only_from_the_trees_below_it():
    files = {
        str(path.relative_to(PROJECT)): _tree_imports(path)
        for tree in (t for layer in TREES for t in layer)
        for path in (PROJECT / tree).rglob("*.py")
    }
    assert _tree_crossings(files, TREES) == []


# Test folders that mirror no folder of the package: the whole pipeline under faults, kills and
# clusters; the UI in a real browser; Dagster on PostgreSQL; the testkit's own tests.
WHOLE_SYSTEM_FOLDERS = frozenset({"system", "e2e", "postgres", "testkit"})
# Root test modules about the project as a whole rather than one module of the package root.
PROJECT_TESTS = frozenset({"test_docs", "test_structure"})


def _misplaced_tests(
    tests: list[str], package_folders: set[str], root_modules: set[str]
) -> list[str]:
    """Test modules (paths under the tests' root) that are not in their package's mirror: a test
    module sits in the folder of the package's folder it tests, in a whole-system folder, or at
    the root named after a module of the package's root."""
    misplaced = []
    for test in tests:
        folder, _, name = test.rpartition("/")
        if folder:
            if folder not in package_folders and folder.split("/")[0] not in WHOLE_SYSTEM_FOLDERS:
                misplaced.append(test)
        elif name.removesuffix(".py") not in PROJECT_TESTS and not any(
            name == f"test_{m}.py" or name.startswith(f"test_{m}_") for m in root_modules
        ):
            misplaced.append(test)
    return misplaced


def test_the_mirror_rule_finds_a_test_outside_its_package_folder():
    tests = ["lake/test_a.py", "nowhere/test_b.py", "test_settings.py", "test_odd.py", "e2e/t.py"]
    assert _misplaced_tests(tests, {"lake"}, {"settings"}) == ["nowhere/test_b.py", "test_odd.py"]


def test_the_tests_mirror_the_packages_folders():
    tests_root = PROJECT / "backfill_assets_tests"
    tests = [str(p.relative_to(tests_root)) for p in tests_root.rglob("test_*.py")]
    package_folders = {
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*")
        if p.is_dir() and (p / "__init__.py").exists()
    }
    root_modules = {p.stem for p in PACKAGE.glob("*.py")}
    assert _misplaced_tests(tests, package_folders, root_modules) == []


# Names every folder of defs/ uses for its own definitions, by convention.
PER_FOLDER_NAMES = frozenset({"__init__", "assets", "checks"})


def _repeated_names(modules: list[str]) -> dict[str, list[str]]:
    """Module names (the last part) that more than one module has, but the per-folder ones."""
    by_name: dict[str, list[str]] = {}
    for module in modules:
        by_name.setdefault(module.rsplit(".", 1)[-1], []).append(module)
    return {
        name: sorted(found)
        for name, found in by_name.items()
        if len(found) > 1 and name not in PER_FOLDER_NAMES
    }


def test_the_name_rule_finds_a_name_used_twice():
    modules = ["p.a.stale", "p.b.stale", "p.a.checks", "p.b.checks", "p.c.one"]
    assert _repeated_names(modules) == {"stale": ["p.a.stale", "p.b.stale"]}


def test_no_module_name_is_used_twice():
    files = [p for p in PACKAGE.rglob("*.py") if p.stem != "__init__"]
    assert _repeated_names([_module_name(p) for p in files]) == {}


def _private_dagster_imports(path: Path) -> list[str]:
    """The modules of Dagster's private API (``dagster._*``) that ``path`` imports."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("dagster._")]
        elif (
            isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dagster._")
        ):
            found.append(node.module)
    return found


def test_only_one_module_reaches_into_dagsters_private_api():
    reaching = {
        _module_name(p): _private_dagster_imports(p)
        for p in PACKAGE.rglob("*.py")
        if _private_dagster_imports(p)
    }
    assert set(reaching) == {"backfill_assets.dagster_private"}, reaching


def test_loading_the_definitions_or_the_cli_leaves_pandera_to_the_staging_step():
    """pandera's PySpark backend takes 0.6 s to import: every run worker, the code server and
    each command load the definitions, and only staging's build and audit use it."""
    program = (
        "import sys, backfill_assets.definitions, backfill_assets.cli.main; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pandera'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


# The modules whose classes Spark runs in its Python workers: each task is pickled by reference,
# so a worker imports the module that defines it, and all that module imports, and keeps it for
# every later task. None of them may bring in the orchestrator (on a cluster, every executor
# would import it; and each worker's garbage collections after its tasks walk what it holds).
PYTHON_WORKER_MODULES = (
    "backfill_assets.lake.parquet_writer",
    "backfill_assets.lake.s3_files",
    "backfill_assets.landing.s3_texts",
)


def _map_in_arrow_tasks(path: Path) -> set[str]:
    """The modules the functions ``path`` hands to ``mapInArrow`` come from: its own for a
    class defined there, the module it is imported from otherwise."""
    tree = ast.parse(path.read_text())
    imported = {
        alias.asname or alias.name: node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }
    tasks = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "mapInArrow"
        ):
            task = node.args[0]
            if isinstance(task, ast.Call):  # a task object built there: its class
                task = task.func
            name = task.id if isinstance(task, ast.Name) else ""
            tasks.add(imported.get(name, _module_name(path)))
    return tasks


def test_every_task_run_in_pythons_workers_comes_from_a_listed_module():
    found = {
        module
        for path in PACKAGE.rglob("*.py")
        if "testing" not in path.parts
        for module in _map_in_arrow_tasks(path)
    }
    assert found == set(PYTHON_WORKER_MODULES)


@pytest.mark.parametrize("module", PYTHON_WORKER_MODULES)
def test_a_python_worker_imports_no_orchestrator(module):
    program = (
        f"import sys, {module}; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'dagster')[:3])"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


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


def _importers_of_defs(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    """Modules below the definitions (neither in defs/ nor above it) that import defs/."""
    offenders = {}
    for name, imports in graph.items():
        if _within(name, DEFS) or any(_within(name, top) for top in ABOVE_DEFS):
            continue
        wrong = sorted(i for i in imports if _within(i, DEFS))
        if wrong:
            offenders[name] = wrong
    return offenders


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_the_defs_rule_finds_a_machinery_module_importing_defs():
    graph = {
        "backfill_assets.defs.raw.assets": {"backfill_assets.publishing.publication"},
        "backfill_assets.publishing.publication": {"backfill_assets.defs.partitions"},
        "backfill_assets.definitions": {"backfill_assets.defs.raw.assets"},
        "backfill_assets.cli.status": {"backfill_assets.defs.raw.checks"},
        "backfill_assets.defsx": {"backfill_assets.lake"},
    }
    assert _importers_of_defs(graph) == {
        "backfill_assets.publishing.publication": ["backfill_assets.defs.partitions"]
    }


def test_nothing_below_the_definitions_imports_them():
    """defs/ declares; the machinery it calls never imports it back (only definitions.py and
    the command line, above it, do)."""
    assert _importers_of_defs(GRAPH) == {}


def _dagster_names(node: ast.AST) -> set[str]:
    """The ``X`` of every ``dg.X`` under ``node``."""
    return {
        n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "dg"
    }


def _declares_definitions(source: str) -> bool:
    """Whether the module calls, or decorates with, one of Dagster's definition makers, or
    has a function that returns a Dagster definition."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and _dagster_names(node.func) & DEFINITION_MAKERS:
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(_dagster_names(d) & DEFINITION_MAKERS for d in node.decorator_list):
                return True
            if node.returns is not None and _dagster_names(node.returns) & DEFINITIONS:
                return True
    return False


def test_the_definitions_rule_tells_a_definition_from_machinery():
    assert _declares_definitions("@dg.sensor(job_name='j')\ndef s(context): ...")
    assert _declares_definitions("@dg.sensor\ndef s(context): ...")
    assert _declares_definitions("CHECKS = [dg.AssetCheckSpec('c', asset=KEY)]")
    assert _declares_definitions("def build(s) -> list[dg.AssetsDefinition]:\n    return []")
    # Dagster imported and used, but nothing declared: machinery.
    assert not _declares_definitions(
        "import dagster as dg\ndef latest(i: dg.DagsterInstance) -> dg.AssetKey:\n"
        "    return dg.AssetKey('x')\n"
    )


def test_defs_holds_definitions_only():
    """Every module of defs/ but a package's ``__init__`` declares a Dagster definition: an
    asset, a check, a job, a sensor, a schedule or a partitioning. Machinery goes to a package
    named for what it is (publishing/, event_days/, automation/, ...)."""
    offenders = sorted(
        name
        for name, path in MODULES.items()
        if _within(name, DEFS)
        and path.name != "__init__.py"
        and not _declares_definitions(path.read_text())
    )
    assert offenders == []


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
