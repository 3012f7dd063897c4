"""`backfill-assets maintain`: the weekly lake maintenance, now, from the command line.

Corrections first: an operation left interrupted is recovered (completed or undone, see
``corrections/recovery.py``), a broken record reported (exit 1: ``backfill-assets forget`` repairs
it), and corrections older than the retention are decommissioned (no rollback after that). Every
table of the catalog: expire abandoned staged versions, vacuum with
``BACKFILL_RETENTION_DAYS`` honoured (default 14, refused below the floor of 7: in-flight
writers' files), compact small files, write a checkpoint. See ``lake/maintenance.py``.
"""

from __future__ import annotations

import datetime as dt

from backfill_assets import signals
from backfill_assets.catalog import LAKE_TABLES
from backfill_assets.cli.instance import open_instance
from backfill_assets.corrections import actions, registry
from backfill_assets.corrections.lifecycle import recover_all
from backfill_assets.lake import CommitInfo, Lake
from backfill_assets.lake.maintenance import maintain_tables
from backfill_assets.resources import code_version
from backfill_assets.settings import Settings, SparkSettings, retention_days


def run_maintain(settings: Settings) -> int:
    days = retention_days()  # ValueError below the floor: main() prints it, exit 2
    spark = SparkSettings.from_env()
    engine = spark.lake_engine
    if engine == "delta-spark":
        from backfill_assets.spark.session import build_session, spark_config

        lake = Lake(settings.lake_dir, build_session(spark_config(settings=spark)), engine=engine)
    else:
        lake = Lake(settings.lake_dir, None, engine="delta-rs")  # no Spark needed
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    commit = CommitInfo(
        run_id=f"maintain-{stamp}", code_version=code_version(), extra={"maintenance": "cli"}
    )
    print(f"maintain: {settings.lake_dir}, retention {days:g} days, {lake.engine.name}", flush=True)
    recovered = recover_all(lake)
    if recovered:
        from backfill_assets.cli.corrections import report_recovery

        for found in recovered:
            report_recovery(lake.location, found, "maintain: ")
    broken = registry.scan(lake.location)[1]
    for b in broken:
        print(f"maintain: {b}", flush=True)
    with open_instance() as instance:
        closed_ids = actions.decommission(lake, instance, days)
    for closed in closed_ids:
        print(
            f"maintain: correction {closed} decommissioned (older than {days:g} days: no "
            "rollback from now on)",
            flush=True,
        )
    tables = [(t.path, t.partition_column) for t in LAKE_TABLES]
    done = maintain_tables(lake, tables, days, commit, between=signals.check)
    for table in done:
        print(table.summary(), flush=True)
    refused = [t.table for t in done if t.vacuum_refused]
    if refused:
        print(
            f"maintain: vacuum skipped for {', '.join(refused)} (open staged versions with "
            f"files older than the retention); everything else done"
        )
    failed = [r.correction_id for r in recovered if r.result in ("failed", "in progress")]
    return 1 if refused or broken or failed else 0
