"""The weekly lake maintenance schedule: registered with the definitions, its run request targets
the maintenance job and its one op, and that run maintains a real lake on a Dagster instance."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter

import dagster as dg
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from backfill_assets.catalog import (
    LAKE_TABLES,
    MAINTENANCE_JOB,
    MAINTENANCE_OP,
    MAINTENANCE_SCHEDULE,
)
from backfill_assets.definitions import build_definitions
from backfill_assets.settings import Settings

SUNDAY = dt.datetime(2026, 11, 22, 4, 0, tzinfo=dt.UTC)


def test_the_schedule_is_weekly_and_requests_the_maintenance_job(tmp_path):
    defs = build_definitions(Settings(tmp_path, tmp_path, dt.date(2024, 1, 1), 7))
    schedule = defs.resolve_schedule_def(MAINTENANCE_SCHEDULE)
    assert schedule.cron_schedule == "0 4 * * 0" and schedule.execution_timezone == "UTC"
    assert schedule.job_name == MAINTENANCE_JOB
    assert [node.name for node in defs.resolve_job_def(MAINTENANCE_JOB).nodes] == [MAINTENANCE_OP]
    [request] = schedule.evaluate_tick(
        dg.build_schedule_context(scheduled_execution_time=SUNDAY)
    ).run_requests
    assert request.run_key == "maintenance:2026-11-22"
    assert request.job_name in (None, MAINTENANCE_JOB)  # None: the schedule's own job
    assert request.asset_selection is None


def test_the_scheduled_run_maintains_every_table_on_a_dagster_instance(
    tmp_path, spark, monkeypatch
):
    monkeypatch.delenv("BACKFILL_RETENTION_DAYS", raising=False)
    monkeypatch.delenv("BACKFILL_LAKE_ENGINE", raising=False)
    lake_dir = tmp_path / "lake"
    table = LAKE_TABLES[0]
    path = lake_dir / table.path
    days = [dt.date(2024, 1, 1), dt.date(2024, 1, 2)]
    rows = []
    for n in range(3):  # one overwrite, two appends: three small files per day
        batch = [(day, n) for day in days]
        rows += batch
        write_deltalake(
            str(path),
            pa.table({table.partition_column: [d for d, _ in batch], "n": [i for _, i in batch]}),
            mode="overwrite" if n == 0 else "append",
            partition_by=[table.partition_column],
        )
    defs = build_definitions(Settings(tmp_path / "landing", lake_dir, dt.date(2024, 1, 1), 7))
    [request] = (
        defs.resolve_schedule_def(MAINTENANCE_SCHEDULE)
        .evaluate_tick(dg.build_schedule_context(scheduled_execution_time=SUNDAY))
        .run_requests
    )
    with dg.DagsterInstance.ephemeral() as instance:
        result = defs.resolve_job_def(MAINTENANCE_JOB).execute_in_process(
            instance=instance, tags=request.tags
        )
        assert result.success
        run = instance.get_run_by_id(result.run_id)
        assert run.job_name == MAINTENANCE_JOB
    delta = DeltaTable(str(path))
    assert len(delta.file_uris()) == len(days)
    got = Counter(r[table.partition_column] for r in delta.to_pyarrow_table().to_pylist())
    assert got == Counter(day for day, _ in rows)
    assert (
        json.loads((path / "_delta_log" / "_last_checkpoint").read_text())["version"]
        == delta.version()
    )
    [compaction] = [
        json.loads(h["userMetadata"])
        for h in delta.history()
        if "compact" in (h.get("userMetadata") or "")
    ]
    assert compaction["run_id"] == result.run_id
