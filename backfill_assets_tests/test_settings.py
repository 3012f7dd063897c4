"""The environment is read only in settings.py, never at import, and docs/configuration.md's
table lists it all."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from backfill_assets.resources import code_version
from backfill_assets.settings import (
    FIRST_PARTITION_FILE,
    AutomationSettings,
    RunSettings,
    SegmentSettings,
    Settings,
    SparkSettings,
    dagster_home,
    fault_settings,
    jvm_locale,
    pg_url,
    retention_days,
)
from backfill_assets.spark import plain_line_jar
from backfill_assets.spark.session import spark_config

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "backfill_assets"
SETTINGS = PACKAGE / "settings.py"
VARIABLE = re.compile(r"BACKFILL_[A-Z0-9_]+")
# Calls on os.environ that change it without reading it, when their value is not used.
WRITES = {"pop", "setdefault", "update", "clear"}
# The whole environment handed to a child process is not a setting read.
COPIES = {"copy"}


def _is_environ(node: ast.AST, aliases: set[str]) -> bool:
    """``os.environ`` (or ``os.environb``), or a name imported as it."""
    if isinstance(node, ast.Attribute) and node.attr in ("environ", "environb"):
        return isinstance(node.value, ast.Name) and node.value.id == "os"
    return isinstance(node, ast.Name) and node.id in aliases


def _backfill_literal(node: ast.AST | None) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.startswith("BACKFILL_")
    )


def environ_reads(source: str) -> list[str]:
    """Where ``source`` reads the environment: ``os.environ`` used for anything but writing it
    (``os.environ[k] = v``, ``del``, or ``pop``/``setdefault``/``update`` as a statement) or
    copying it whole for a child process; ``os.getenv``; and any ``.get``, ``getenv`` or
    subscript with a ``BACKFILL_`` literal, whatever the mapping (an ``env`` parameter too)."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    aliases: set[str] = set()
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            for alias in node.names:
                if alias.name in ("environ", "environb", "getenv", "getenvb"):
                    found.append(f"{node.lineno}: from os import {alias.name}")
                    aliases.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if (
                isinstance(func, ast.Attribute)
                and name in ("getenv", "getenvb")
                and isinstance(func.value, ast.Name)
                and func.value.id == "os"
            ):
                found.append(f"{line}: os.{name}")
            elif name in ("get", "getenv") and node.args and _backfill_literal(node.args[0]):
                found.append(f"{line}: {name}({node.args[0].value!r})")  # type: ignore[attr-defined]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            if _backfill_literal(node.slice) and not _is_environ(node.value, aliases):
                found.append(f"{line}: [{node.slice.value!r}]")  # type: ignore[attr-defined]
        if not _is_environ(node, aliases):
            continue
        parent = parents.get(node)
        if isinstance(parent, ast.Subscript) and not isinstance(parent.ctx, ast.Load):
            continue  # os.environ[k] = v, del os.environ[k]
        if isinstance(parent, ast.Attribute) and isinstance(parents.get(parent), ast.Call):
            call = parents[parent]
            if parent.attr in WRITES and isinstance(parents.get(call), ast.Expr):
                continue
            if parent.attr in COPIES:
                continue
        if isinstance(parent, ast.Dict) and node in parent.values and None in parent.keys:
            continue  # {**os.environ, ...}
        if (
            isinstance(parent, ast.Call)
            and isinstance(parent.func, ast.Name)
            and parent.func.id == "dict"
            and parent.args == [node]
        ):
            continue  # dict(os.environ)
        found.append(f"{line}: reads os.environ")
    return sorted(found)


def _modules() -> dict[str, Path]:
    return {str(p.relative_to(ROOT)): p for p in sorted(PACKAGE.rglob("*.py"))}


@pytest.mark.parametrize(
    "snippet",
    [
        'import os\nos.environ["BACKFILL_LAKE_DIR"]',
        'import os\nx = os.environ.get("BACKFILL_LAKE_DIR", "data/lake")',
        'import os\nx = os.getenv("HOME")',
        'import os\nx = os.environ.get("DAGSTER_HOME")',
        "import os\nenv = os.environ if env is None else env",
        "import os\nsettings = load(os.environ)",
        'import os\nhome = os.environ.setdefault("DAGSTER_HOME", ".dagster_home")',
        'import os\nif "BACKFILL_USER" in os.environ: pass',
        "from os import environ\nx = environ['PATH']",
        'from os import getenv as ge\nx = ge("BACKFILL_USER")',
        'def f(env):\n    return env.get("BACKFILL_RETENTION_DAYS", "14")',
        'def f(env):\n    return env["BACKFILL_RETENTION_DAYS"]',
    ],
)
def test_the_scanner_finds_a_read(snippet):
    assert environ_reads(snippet) != []


@pytest.mark.parametrize(
    "snippet",
    [
        'import os\nos.environ["BACKFILL_START_DATE"] = "2024-01-01"',
        'import os\nos.environ.pop("BACKFILL_SEGMENTS_URL", None)',
        'import os\nos.environ.setdefault("PYSPARK_PYTHON", "python3")',
        'import os\ndel os.environ["BACKFILL_USER"]',
        'import os\nchild = {**os.environ, "BACKFILL_LAKE_DIR": "/tmp/lake"}',
        "import os\nchild = dict(os.environ)",
        "import os\nchild = os.environ.copy()",
        'x = {"name": "BACKFILL_LAKE_DIR"}',
    ],
)
def test_the_scanner_lets_writes_and_copies_for_a_child_pass(snippet):
    assert environ_reads(snippet) == []


def test_only_settings_reads_the_environment():
    reads = {
        name: environ_reads(path.read_text())
        for name, path in _modules().items()
        if path != SETTINGS
    }
    assert {name: found for name, found in reads.items() if found} == {}


def test_settings_read_the_environment():
    assert environ_reads(SETTINGS.read_text()) != []  # the scan sees the one reader


def _read_in_settings() -> set[str]:
    """Every ``BACKFILL_`` variable settings.py names as a whole string: the ones it reads."""
    return {
        node.value
        for node in ast.walk(ast.parse(SETTINGS.read_text()))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and VARIABLE.fullmatch(node.value)
    }


def _configuration_table() -> dict[str, str]:
    """docs/configuration.md's "## The pipeline's variables" table: variable -> its default cell."""
    text = (ROOT / "docs" / "configuration.md").read_text()
    section = text.split("\n## The pipeline's variables\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([A-Z0-9_]+)` \| ([^|]+) \|", section, re.MULTILINE)
    return {name: default.strip() for name, default in rows}


def test_every_variable_settings_reads_is_in_the_configuration_table():
    read = _read_in_settings()
    assert len(read) > 30  # the scan finds the variables, not a handful of them
    table = _configuration_table()
    assert sorted(read - set(table)) == []
    documented = {name for name in table if name.startswith("BACKFILL_")}
    assert sorted(documented - read) == []  # no row for a variable nothing reads
    assert "DAGSTER_HOME" in table


def test_nothing_reads_a_backfill_variable_at_import():
    """Import every module of the package with a spy on the environment: no BACKFILL_ variable
    looked up by the package's code (libraries copying the whole environment do not count)."""
    program = """
import importlib, os, pkgutil, sys
import backfill_assets
seen = []
PACKAGE = os.path.dirname(backfill_assets.__file__)
MAPPING_CODE = ("_collections_abc>", "_collections_abc.py", "/os.py", " os>")  # Mapping.get
class Spy(type(os.environ)):
    def __getitem__(self, key):
        frame = sys._getframe(1)
        while frame.f_code.co_filename.endswith(MAPPING_CODE):
            frame = frame.f_back
        if str(key).startswith("BACKFILL_") and frame.f_code.co_filename.startswith(PACKAGE):
            seen.append(key)
        return super().__getitem__(key)
os.environ.__class__ = Spy
for info in pkgutil.walk_packages(backfill_assets.__path__, "backfill_assets."):
    if not info.name.endswith("__main__"):
        importlib.import_module(info.name)
from backfill_assets import settings
settings.RunSettings.from_env()  # a read the spy must see: settings.py is in the package
print(",".join(seen))
"""
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == (
        "BACKFILL_RETRY_DELAY_SECONDS,BACKFILL_CODE_VERSION,BACKFILL_USER,BACKFILL_LOG_LEVEL"
    )


# The settings that moved into settings.py: the same defaults, values and errors as before.


def test_automation_settings_defaults_and_errors():
    assert AutomationSettings.from_env({}) == AutomationSettings()
    assert AutomationSettings().recount_ns == 10 * 60 * 10**9
    on = AutomationSettings.from_env({"BACKFILL_AUTOMATION": " ON ", "BACKFILL_RERUN_DAYS": "5"})
    assert on.running and on.rerun_days == 5
    with pytest.raises(ValueError, match=r"^bad late-data automation setting: invalid literal"):
        AutomationSettings.from_env({"BACKFILL_SENSOR_INTERVAL_SECONDS": "often"})
    need = (
        "need BACKFILL_SENSOR_INTERVAL_SECONDS >= 1, BACKFILL_LANDING_SETTLE_SECONDS >= 0, "
        "BACKFILL_RERUN_DAYS >= 1, BACKFILL_LANDING_RECOUNT_MINUTES >= 0"
    )
    with pytest.raises(ValueError) as bad:
        AutomationSettings.from_env({"BACKFILL_RERUN_DAYS": "0"})
    assert str(bad.value) == need
    with pytest.raises(ValueError) as bad:
        AutomationSettings.from_env({"BACKFILL_DAILY_CRON": "daily"})
    assert str(bad.value) == "BACKFILL_DAILY_CRON is not a cron expression: 'daily'"


def test_retention_errors_name_the_variable_and_the_floor():
    assert retention_days({}) == 14.0
    with pytest.raises(ValueError) as bad:
        retention_days({"BACKFILL_RETENTION_DAYS": "two weeks"})
    assert str(bad.value) == "BACKFILL_RETENTION_DAYS must be a number of days, got 'two weeks'"
    with pytest.raises(ValueError, match=r"^refusing a retention of 6.5 days: .* at least 7 days"):
        retention_days({"BACKFILL_RETENTION_DAYS": "6.5"})
    with pytest.raises(ValueError, match="refusing a retention of nan days"):
        retention_days({"BACKFILL_RETENTION_DAYS": "nan"})


def test_pg_url_is_checked():
    assert pg_url({}) is None and pg_url({"BACKFILL_DAGSTER_PG_URL": "  "}) is None
    assert pg_url({"BACKFILL_DAGSTER_PG_URL": " postgres://u@h:5432/d "}) == "postgres://u@h:5432/d"
    with pytest.raises(ValueError) as bad:
        pg_url({"BACKFILL_DAGSTER_PG_URL": "mysql://u@h/d"})
    assert str(bad.value) == "BACKFILL_DAGSTER_PG_URL must be a postgresql://user@host:port/db URL"


def test_spark_conf_from_the_environment(monkeypatch, tmp_path):
    for name in ("MASTER", "REMOTE", "DRIVER_MEMORY", "DRIVER_GC", "SHUFFLE_PARTITIONS"):
        monkeypatch.delenv(f"BACKFILL_SPARK_{name}", raising=False)
    monkeypatch.delenv("BACKFILL_LAKE_ENGINE", raising=False)
    monkeypatch.setenv("BACKFILL_SPARK_CLASS_ARCHIVE", "off")  # test_spark_class_archive.py's
    plain = spark_config()
    assert plain["spark.master"] == "local[*]" and plain["spark.driver.memory"] == "2g"
    # no Delta: the only jar is raw's plain-line reader, once set-up has built it
    assert plain["spark.sql.shuffle.partitions"] == "8"
    assert plain.get("spark.jars", "").split(",") == (plain_line_jar.session_jars() or [""])
    assert plain["spark.driver.extraJavaOptions"] == (
        "-Duser.timezone=UTC -XX:+UseSerialGC -XX:MinHeapFreeRatio=20"
    )
    monkeypatch.setenv("BACKFILL_SPARK_MASTER", "spark://h:7077")
    monkeypatch.setenv("BACKFILL_SPARK_SHUFFLE_PARTITIONS", "3")
    monkeypatch.setenv("BACKFILL_LAKE_ENGINE", "delta-spark")
    monkeypatch.setenv("BACKFILL_DELTA_JARS", str(tmp_path))
    conf = spark_config(driver_memory="1g")  # an argument still wins over the environment
    assert conf["spark.master"] == "spark://h:7077" and conf["spark.driver.memory"] == "1g"
    assert conf["spark.databricks.delta.snapshotPartitions"] == "3"
    delta = [jar for jar in conf["spark.jars"].split(",") if jar.startswith(str(tmp_path))]
    assert delta and conf["spark.jars"].split(",") == delta + plain_line_jar.session_jars()
    monkeypatch.setenv("BACKFILL_SPARK_REMOTE", "sc://h:15002")
    remote = spark_config()
    assert remote["spark.remote"] == "sc://h:15002" and "spark.master" not in remote
    assert "spark.jars" not in remote  # a Connect server's Delta is its own
    assert SparkSettings.from_env({"BACKFILL_SPARK_REMOTE": ""}).remote is None


def test_run_settings(monkeypatch):
    assert RunSettings.from_env({}) == RunSettings(None, None, "WARNING", 5.0)
    assert RunSettings.from_env({"BACKFILL_RETRY_DELAY_SECONDS": "0"}).retry_delay_seconds == 0
    for bad in ("-1", "soon", "nan"):
        with pytest.raises(ValueError, match="BACKFILL_RETRY_DELAY_SECONDS must be a number"):
            RunSettings.from_env({"BACKFILL_RETRY_DELAY_SECONDS": bad})
    monkeypatch.setenv("BACKFILL_CODE_VERSION", "build-7")
    assert code_version() == "build-7"
    monkeypatch.setenv("BACKFILL_CODE_VERSION", "")
    assert code_version() != ""  # empty: the checkout's sha, or "unversioned"


def test_fault_settings_are_inert_without_a_folder():
    assert fault_settings({"BACKFILL_LAKE_PAUSE_AT": "mid_files"}) is None
    faults = fault_settings({"BACKFILL_LAKE_PAUSE_DIR": "/tmp/p", "BACKFILL_LAKE_FAIL_AT": "a,b"})
    assert faults is not None and faults.fail_at == ("a", "b") and faults.fail_times == 1
    assert "a" not in faults.pause_at


def test_dagster_home_and_the_segment_bucket_under_it(tmp_path):
    assert dagster_home({}) == Path(".dagster_home")
    env = {"DAGSTER_HOME": str(tmp_path), "BACKFILL_SEGMENTS_URL": "http://127.0.0.1:1"}
    segments = SegmentSettings.from_env(env)
    assert segments is not None and segments.bucket_path == tmp_path / "segments_bucket.json"
    with pytest.raises(ValueError, match=r"^need BACKFILL_SEGMENTS_RPS >= 2"):
        SegmentSettings.from_env({**env, "BACKFILL_SEGMENTS_RPS": "1"})
    assert SegmentSettings.service_rps({}) == 20


def test_the_first_partition_is_the_configured_date_else_the_demos_else_the_default(tmp_path):
    """One rule for every process (the CLI, `make ui`, the runs): BACKFILL_START_DATE if set,
    else the date `make demo` recorded in the lake it built, else the contract's 2024-01-01."""
    lake, home = tmp_path / "lake", tmp_path / "home"
    env = {"DAGSTER_HOME": str(home), "BACKFILL_LAKE_DIR": str(lake)}
    assert Settings.from_env(env).start_date == date(2024, 1, 1)  # no demo yet
    lake.mkdir()
    (lake / FIRST_PARTITION_FILE).write_text("2026-09-26\n")
    recorded = Settings.from_env(env)
    assert recorded.start_date == date(2026, 9, 26)
    assert not recorded.start_date_configured  # a later demo picks its own days again
    configured = Settings.from_env({**env, "BACKFILL_START_DATE": "2025-05-05"})
    assert configured.start_date == date(2025, 5, 5) and configured.start_date_configured
    (lake / FIRST_PARTITION_FILE).write_text("yesterday\n")
    with pytest.raises(ValueError, match=rf"{FIRST_PARTITION_FILE}.*BACKFILL_START_DATE"):
        Settings.from_env(env)


def test_the_demos_first_partition_is_its_lakes_alone(tmp_path):
    """The demo's day describes the demo's lake: on the same Dagster instance, another lake (or
    the demo's folder emptied) starts at the contract's default, as any deployment does."""
    lake, home = tmp_path / "lake", tmp_path / "home"
    lake.mkdir()
    home.mkdir()
    (lake / FIRST_PARTITION_FILE).write_text("2026-09-26\n")
    (home / "backfill_start_date").write_text("2026-09-26\n")  # where it was once recorded
    env = {"DAGSTER_HOME": str(home)}
    assert Settings.from_env({**env, "BACKFILL_LAKE_DIR": str(lake)}).start_date == date(
        2026, 9, 26
    )
    other = Settings.from_env({**env, "BACKFILL_LAKE_DIR": str(tmp_path / "other")})
    assert other.start_date == date(2024, 1, 1)
    s3 = Settings.from_env({**env, "BACKFILL_LAKE_DIR": "s3://bucket/lake"})
    assert s3.start_date == date(2024, 1, 1)
    (lake / FIRST_PARTITION_FILE).unlink()
    emptied = Settings.from_env({**env, "BACKFILL_LAKE_DIR": str(lake)})
    assert emptied.start_date == date(2024, 1, 1)


def test_a_configured_start_date_is_known_as_such(tmp_path):
    assert not Settings.from_env({"DAGSTER_HOME": str(tmp_path)}).start_date_configured
    configured = Settings.from_env({"BACKFILL_START_DATE": "2024-03-01"})
    assert configured.start_date_configured and str(configured.start_date) == "2024-03-01"
    with pytest.raises(ValueError, match=r"^bad BACKFILL_START_DATE or BACKFILL_MAX_LATENESS_DAYS"):
        Settings.from_env({"BACKFILL_START_DATE": "March"})


@pytest.mark.parametrize("folder", ["a%20b", "x%2fy", "100%25"])
def test_a_lake_under_a_percent_escape_is_refused_naming_it(tmp_path, folder):
    """delta-rs decodes an escape like ``%20`` in a table's path (in a file:// URL's own escape
    too), so a table under ``a%20b`` is looked for under ``a b`` and never found: every run
    would fail after its first write. Refused when the settings are read, naming the folder."""
    with pytest.raises(ValueError, match=rf"^BACKFILL_LAKE_DIR .*'{folder}'"):
        Settings.from_env({"BACKFILL_LAKE_DIR": str(tmp_path / folder / "lake")})
    with pytest.raises(ValueError, match=rf"^BACKFILL_LAKE_DIR .*'{folder}'"):
        Settings.from_env({"BACKFILL_LAKE_DIR": f"s3://bucket/{folder}/lake"})


@pytest.mark.parametrize("folder", ["100%", "a%zz", "a%2"])
def test_a_percent_sign_that_is_no_escape_is_a_lake_folder_like_any(tmp_path, folder):
    lake = tmp_path / folder / "lake"
    assert Settings.from_env({"BACKFILL_LAKE_DIR": str(lake)}).lake_dir == lake


def test_delta_rs_still_decodes_an_escape_in_a_table_path(tmp_path):
    """Why the refusal above exists; when this fails, delta-rs reads such a path as it is and
    the refusal can go."""
    import pyarrow as pa
    from deltalake import write_deltalake
    from deltalake.exceptions import DeltaError

    for table in (tmp_path / "a b" / "t", tmp_path / "100%" / "t"):
        write_deltalake(str(table), pa.table({"x": [1]}))  # a space or a bare % is fine
    with pytest.raises(DeltaError, match="c d/t/_delta_log"):
        write_deltalake(str(tmp_path / "c%20d" / "t"), pa.table({"x": [1]}))


@pytest.mark.parametrize(
    "env, given",
    [
        ({"LANG": "en_US.UTF-8"}, {}),
        ({"LC_ALL": "C.utf8", "LANG": "C"}, {}),
        ({"LC_CTYPE": "tr_TR.UTF-8", "LANG": "C"}, {}),
        ({"LC_ALL": "C", "LANG": "en_US.UTF-8"}, {"LC_ALL": "C.UTF-8"}),
        ({"LC_ALL": "POSIX"}, {"LC_ALL": "C.UTF-8"}),
        ({"LANG": "C"}, {"LC_CTYPE": "C.UTF-8"}),
        ({"LC_CTYPE": "de_DE.ISO-8859-1", "LANG": "de_DE.UTF-8"}, {"LC_CTYPE": "C.UTF-8"}),
        ({}, {"LC_CTYPE": "C.UTF-8"}),
    ],
)
def test_the_jvm_gets_a_utf8_character_type_when_the_locale_has_none(env, given):
    assert jvm_locale(env) == given
