"""Tables another Delta writer changed, then every command of the pipeline on them.

    .venv/bin/python bench/foreign_writers.py [--engines delta-rs delta-spark] [--changes ...]

A platform team maintains the lake with Delta's own SQL (through delta-spark) or with delta-rs:
deletion vectors and a ``DELETE``, V2 checkpoints with sidecars, a short checkpoint interval
with log cleanup, column mapping, ``OPTIMIZE ... ZORDER BY``, a ``VACUUM`` of its own, a
protocol upgrade. For each engine the pipeline writes with and each change (``CHANGES``), on a
fresh copy of a small production lake (backfilled, then ``catch-up``):

1. the change, made to raw/orders, staging/orders and fact/daily_revenue;
2. ``backfill`` of the whole range;
3. a late file lands, then ``catch-up``;
4. a provider restates EUR: ``correct``, ``diff``, ``cutover``, then ``rollback``.

After each command the tables, read through Delta's own reader (Spark's), must equal the test
suite's reference implementation over the landing zone (after the cutover: the restated one;
after the rollback: the one before it). Or the command refuses: it exits non-zero and says why
in its last line; the cell stops there. A command that exits 0 with a table that differs is
``wrong``: the one outcome not allowed. A refusal that launched a Dagster run first (a refusal
no retry can change should come before any run) is counted in ``late_refusals``. What each
command printed is kept under ``bench/out/foreign_writers/<engine>/<change>/``. Prints a line
per command, then:

    FOREIGN cells=C commands=N exact=E refused=R wrong=0 late_refusals=L errors=0
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

FEED_START, FEED_END = date(2024, 1, 1), date(2024, 1, 8)
START, END = date(2024, 1, 2), date(2024, 1, 7)  # production's event days
LATE = date(2024, 1, 5)  # the arrival folder one of whose files lands late
RESTATED = (date(2024, 1, 3), date(2024, 1, 4))  # rate dates the provider restates
CORRECTION = "foreign-fix"
LOGS = Path(__file__).resolve().parent / "out" / "foreign_writers"  # what each command printed
# The tables changed: rows to delete (inside production's days, which a backfill rebuilds: the
# days before them feed customer LTV, so a deletion there is held by LTV's checks), a column to
# cluster by
_RANGE = f"BETWEEN '{START}' AND '{END}'"
TABLES = {
    "raw/orders": (f"line_number % 2 = 0 AND arrival_date {_RANGE}", "line_number"),
    "staging/orders": (f"status = 'cancelled' AND event_date {_RANGE}", "customer_id"),
    "fact/daily_revenue": (f"orders % 2 = 0 AND event_date {_RANGE}", "country"),
}


# The changes -------------------------------------------------------------------------------


def _sql(spark, table_dir: Path, statement: str) -> None:
    spark.sql(statement.format(t=f"delta.`{table_dir}`"))


def _properties(spark, table_dir: Path, **props: str) -> None:
    listed = ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
    _sql(spark, table_dir, f"ALTER TABLE {{t}} SET TBLPROPERTIES ({listed})")


def _backdate_log(table_dir: Path, days: int = 3) -> None:
    """Every file of the log as if written ``days`` ago: log cleanup judges a file by its age."""
    stamp = time.time() - days * 86400
    for path in (table_dir / "_delta_log").rglob("*"):
        if path.is_file():
            os.utime(path, (stamp, stamp))


def deletion_vectors(spark, table_dir: Path, predicate: str, _column: str) -> None:
    _properties(spark, table_dir, **{"delta.enableDeletionVectors": "true"})
    _sql(spark, table_dir, f"DELETE FROM {{t}} WHERE {predicate}")


def v2_checkpoint(spark, table_dir: Path, _predicate: str, _column: str) -> None:
    """A V2 checkpoint whose file actions live in sidecars (one action a part)."""
    spark.conf.set("spark.databricks.delta.checkpoint.partSize", "1")
    try:
        _properties(
            spark,
            table_dir,
            **{"delta.checkpointPolicy": "v2", "delta.checkpointInterval": "1"},
        )
        _properties(spark, table_dir, **{"foreign.touched": "1"})
    finally:
        spark.conf.unset("spark.databricks.delta.checkpoint.partSize")
    if not any((table_dir / "_delta_log" / "_sidecars").glob("*.parquet")):
        raise AssertionError(f"{table_dir}: no sidecar written")


def log_cleanup(spark, table_dir: Path, _predicate: str, _column: str) -> None:
    """``checkpointInterval = 2`` and retentions of an hour (Delta wants the log's at least the
    removed files'), the log made old: the next checkpoints delete every commit file before
    them."""
    _properties(
        spark,
        table_dir,
        **{
            "delta.checkpointInterval": "2",
            "delta.logRetentionDuration": "interval 1 hours",
            "delta.deletedFileRetentionDuration": "interval 1 hours",
        },
    )
    _backdate_log(table_dir)
    for i in range(2):
        _properties(spark, table_dir, **{"foreign.touched": str(i)})
    if (table_dir / "_delta_log" / f"{0:020d}.json").exists():
        raise AssertionError(f"{table_dir}: log cleanup left version 0")


def column_mapping(spark, table_dir: Path, _predicate: str, _column: str) -> None:
    _properties(
        spark,
        table_dir,
        **{
            "delta.columnMapping.mode": "name",
            "delta.minReaderVersion": "2",
            "delta.minWriterVersion": "5",
        },
    )


def zorder(spark, table_dir: Path, _predicate: str, column: str) -> None:
    _sql(spark, table_dir, f"OPTIMIZE {{t}} ZORDER BY ({column})")


def foreign_vacuum(spark, table_dir: Path, _predicate: str, _column: str) -> None:
    """Files replaced by a rewrite of the table, then a VACUUM with no retention."""
    _sql(spark, table_dir, "OPTIMIZE {t}")
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        _sql(spark, table_dir, "VACUUM {t} RETAIN 0 HOURS")
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")


def protocol_upgrade(spark, table_dir: Path, _predicate: str, _column: str) -> None:
    _properties(spark, table_dir, **{"delta.minReaderVersion": "3", "delta.minWriterVersion": "7"})


def rs_delete(_spark, table_dir: Path, predicate: str, _column: str) -> None:
    from deltalake import DeltaTable

    DeltaTable(str(table_dir)).delete(predicate)


def rs_zorder(_spark, table_dir: Path, _predicate: str, column: str) -> None:
    from deltalake import DeltaTable

    DeltaTable(str(table_dir)).optimize.z_order([column])


def rs_vacuum(_spark, table_dir: Path, _predicate: str, _column: str) -> None:
    from deltalake import DeltaTable

    table = DeltaTable(str(table_dir))
    table.optimize.compact()
    table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False, full=True)


def rs_log_cleanup(_spark, table_dir: Path, _predicate: str, _column: str) -> None:
    from deltalake import DeltaTable

    table = DeltaTable(str(table_dir))
    table.alter.set_table_properties(
        {"delta.logRetentionDuration": "interval 1 hours"}, raise_if_not_exists=False
    )
    table = DeltaTable(str(table_dir))
    table.create_checkpoint()
    _backdate_log(table_dir)
    table.cleanup_metadata()
    if (table_dir / "_delta_log" / f"{0:020d}.json").exists():
        raise AssertionError(f"{table_dir}: log cleanup left version 0")


Change = Callable[[object, Path, str, str], None]
CHANGES: dict[str, Change] = {
    "deletion-vectors": deletion_vectors,
    "v2-checkpoint": v2_checkpoint,
    "log-cleanup": log_cleanup,
    "column-mapping": column_mapping,
    "zorder": zorder,
    "vacuum": foreign_vacuum,
    "protocol-upgrade": protocol_upgrade,
    "rs-delete": rs_delete,
    "rs-zorder": rs_zorder,
    "rs-vacuum": rs_vacuum,
    "rs-log-cleanup": rs_log_cleanup,
}


# The checks --------------------------------------------------------------------------------


def _days(first: date, last: date) -> list[date]:
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


def differences(spark, lake_dir: Path, landing: Path, lateness: int) -> list[str]:
    """The tables that differ from the reference over ``landing`` (read with Spark's Delta)."""
    from backfill_assets_testkit.reference import Reference

    reference = Reference(landing, lateness)
    days = _days(START, END)
    expected = reference.expected(days)
    staging, _ = reference.staging(days)

    def rows(table: str, column: str, fields: tuple[str, ...]) -> Counter:
        found = spark.read.format("delta").load(str(lake_dir / table))
        return Counter(
            tuple(r[f] for f in fields) for r in found.collect() if r[column] in set(days)
        )

    want = {
        "raw/orders": Counter(
            (r.arrival_date, r.source_file, r.line_number, r.payload) for r in expected.raw_orders
        ),
        "staging/orders": Counter((s.event_date, s.order_id, s.amount_usd) for s in staging),
        "fact/daily_revenue": Counter(
            (f.event_date, f.country, f.orders, f.revenue_usd) for f in reference.fact(days)
        ),
    }
    got = {
        "raw/orders": rows(
            "raw/orders", "arrival_date", ("arrival_date", "source_file", "line_number", "payload")
        ),
        "staging/orders": rows(
            "staging/orders", "event_date", ("event_date", "order_id", "amount_usd")
        ),
        "fact/daily_revenue": rows(
            "fact/daily_revenue", "event_date", ("event_date", "country", "orders", "revenue_usd")
        ),
    }
    return [table for table in want if got[table] != want[table]]


# One cell ----------------------------------------------------------------------------------


@dataclass
class Tally:
    cells: int = 0
    commands: int = 0
    exact: int = 0
    refused: int = 0
    wrong: int = 0
    late_refusals: int = 0
    errors: int = 0  # a change the bench could not make

    def line(self) -> str:
        return (
            f"FOREIGN cells={self.cells} commands={self.commands} exact={self.exact} "
            f"refused={self.refused} wrong={self.wrong} late_refusals={self.late_refusals} "
            f"errors={self.errors}"
        )


def run_command(env, args: list[str] | Callable[[], int], log: Path) -> tuple[int, str, int, float]:
    """A command of ``backfill-assets`` in this process: exit code, last line, runs launched,
    seconds; all it printed is kept in ``log``."""
    from backfill_assets.cli.main import main

    runs = env.instance.get_runs_count()
    out = io.StringIO()
    started = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            code = args() if callable(args) else main(args)
        except Exception:
            traceback.print_exc()
            code = 99
    seconds = time.monotonic() - started
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(out.getvalue())
    lines = [line for line in out.getvalue().splitlines() if line.strip()]
    return code, (lines[-1] if lines else ""), env.instance.get_runs_count() - runs, seconds


def cell(spark, template, root: Path, engine: str, change: str, tally: Tally) -> None:
    from backfill_assets.cli.catch_up import run_catch_up
    from backfill_assets.demo.generate import restate_rates
    from backfill_assets.settings import AutomationSettings, Settings
    from backfill_assets_testkit.pipeline_env import copied_env

    tally.cells += 1
    with copied_env(template, root) as env:
        lake, landing = env.settings.lake_dir, env.settings.landing_dir
        lateness = env.settings.max_lateness_days
        try:
            for table, (predicate, column) in TABLES.items():
                CHANGES[change](spark, lake / table, predicate, column)
        except Exception as exc:  # the bench's own failure, not the pipeline's
            tally.errors += 1
            print(f"{engine:<12} {change:<17} ERROR making the change: {exc!r}", flush=True)
            return
        late = root / "late"
        original = root / "original_landing"

        def land_late() -> int:
            for path in late.iterdir():
                target = landing / "orders" / f"arrival_date={LATE}" / path.name
                shutil.move(path, target)
                os.utime(target, None)
            return run_catch_up(Settings.from_env(), AutomationSettings(settle_seconds=0))

        def restate() -> None:
            shutil.copytree(landing, original)
            restate_rates(landing, "EUR", RESTATED[0], RESTATED[-1], Decimal("1.03"))

        span = ["--start", str(START), "--end", str(END)]
        # each command, and the landing zone whose reference the tables must equal after it
        steps: list[tuple[str, list[str] | Callable[[], int], Path]] = [
            ("backfill", ["backfill", *span], landing),
            ("catch-up", land_late, landing),
            ("correct", ["correct", *span, "--reason", "restated", "--id", CORRECTION], original),
            ("diff", ["diff", CORRECTION], original),
            ("cutover", ["cutover", CORRECTION, "--force"], landing),
            ("rollback", ["rollback", CORRECTION], original),
        ]
        for name, command, against in steps:
            if name == "correct":
                restate()
            code, said, runs, seconds = run_command(env, command, LOGS / engine / change / name)
            tally.commands += 1
            where = f"{engine:<12} {change:<17} {name:<9}"
            if code != 0:
                tally.refused += 1
                late_note = ""
                if runs:
                    tally.late_refusals += 1
                    late_note = f" (after {runs} runs)"
                print(f"{where} refused in {seconds:.0f} s{late_note}: {said}", flush=True)
                return
            differ = differences(spark, lake, against, lateness)
            if differ:
                tally.wrong += 1
                print(f"{where} WRONG in {seconds:.0f} s: {', '.join(differ)} differ", flush=True)
                return
            tally.exact += 1
            print(f"{where} exact in {seconds:.0f} s", flush=True)


def production(root: Path):
    """The template: the feed landed but one late file, backfilled, then ``catch-up``."""
    from backfill_assets.cli.catch_up import run_catch_up
    from backfill_assets.cli.main import main
    from backfill_assets.demo.generate import generate_feed
    from backfill_assets.settings import AutomationSettings, Settings
    from backfill_assets_testkit.pipeline_env import pipeline_env

    stack = contextlib.ExitStack()
    env = stack.enter_context(pipeline_env(root, start_date=FEED_START.isoformat()))
    generate_feed(env.settings.landing_dir, FEED_START, FEED_END, orders_per_day=12, seed=11)
    folder = env.settings.landing_dir / "orders" / f"arrival_date={LATE}"
    late = root / "late"
    late.mkdir()
    held = sorted(folder.iterdir())[0]
    shutil.move(held, late / held.name)
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["backfill", "--start", str(START), "--end", str(END)]) == 0
        run_catch_up(Settings.from_env(), AutomationSettings(settle_seconds=0))
    return stack, env


def main() -> int:
    from backfill_assets.spark.session import build_session, spark_config

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engines", nargs="+", default=["delta-rs", "delta-spark"])
    parser.add_argument("--changes", nargs="+", default=list(CHANGES), choices=list(CHANGES))
    args = parser.parse_args()
    # One session with Delta's jars: the foreign writer's SQL, the checks' reader, and the
    # pipeline's own runs in this process (which take the active session).
    spark = build_session(
        spark_config(
            master="local[2]", shuffle_partitions=2, driver_memory="2g", lake_engine="delta-spark"
        )
    )
    spark.sparkContext.setLogLevel("ERROR")
    tally = Tally()
    for engine in args.engines:
        os.environ["BACKFILL_LAKE_ENGINE"] = engine
        with tempfile.TemporaryDirectory(prefix="foreign-") as tmp:
            stack, template = production(Path(tmp) / "production")
            with stack:
                for change in args.changes:
                    cell(spark, template, Path(tmp) / change, engine, change, tally)
    print(tally.line(), flush=True)
    return 1 if tally.wrong or tally.errors else 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # deltalake readers can abort the interpreter at exit (delta-rs#2184)
