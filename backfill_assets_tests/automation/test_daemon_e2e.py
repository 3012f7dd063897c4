"""End to end with the real dagster-daemon: files land late, the sensor fires, the fact is rebuilt."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import dagster as dg
import pytest
from deltalake import DeltaTable

from backfill_assets.defs.automation.state import load_cursor
from backfill_assets_tests.automation.landing_files import (
    arrival_folder,
    deliver_folder,
    oracle_event_days,
    order,
    write_orders,
)
from backfill_assets_tests.reference import Reference

PROJECT = Path(__file__).resolve().parents[2]
D = date.fromisoformat
WAIT_SECONDS = 360
REQUEST_TAG = "backfill_assets/request"
RANGE = ("dagster/asset_partition_range_start", "dagster/asset_partition_range_end")


def daemon_env(root: Path) -> dict[str, str]:
    return {**os.environ, "DAGSTER_HOME": str(root / "home"),
            "BACKFILL_LANDING_DIR": str(root / "landing"), "BACKFILL_LAKE_DIR": str(root / "lake"),
            "BACKFILL_START_DATE": "2024-01-01", "BACKFILL_MAX_LATENESS_DAYS": "7",
            "BACKFILL_AUTOMATION": "on", "BACKFILL_SENSOR_INTERVAL_SECONDS": "5",
            "BACKFILL_LANDING_SETTLE_SECONDS": "1", "BACKFILL_SPARK_MASTER": "local[1]",
            "BACKFILL_SPARK_DRIVER_MEMORY": "1g", "BACKFILL_SPARK_SHUFFLE_PARTITIONS": "2",
            "PYSPARK_PYTHON": sys.executable, "DAGSTER_DISABLE_TELEMETRY": "yes"}


def wait_for(what: str, condition, daemon: subprocess.Popen, log: Path, seconds: float = WAIT_SECONDS):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and daemon.poll() is None:
        value = condition()
        if value:
            return value
        time.sleep(2)
    tail = log.read_text(errors="replace")[-4000:] if log.exists() else ""
    pytest.fail(f"gave up waiting for {what} (daemon exit code {daemon.poll()}); log tail:\n{tail}")


def stop(process: subprocess.Popen) -> None:
    for sig, grace in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def land_late_files(landing: Path, outbox: Path) -> list[Path]:
    """Arrivals of Jan 3..5, all after their dates: two written in place, one folder moved in
    (prepared before the daemon started), plus a file still being written (never finished)."""
    jan3 = write_orders(landing, D("2024-01-03"), "a.jsonl", [
        order("o1", "2024-01-01T08:00:00Z", "paid", "12.50"), order("o2", "2024-01-02T09:00:00Z", "placed", "7.00"),
        order("o3", "2024-01-03T10:00:00+02:00", "paid", "30.00"), order("o4", "2024-01-03T23:00:00Z", "cancelled")])
    jan5 = write_orders(landing, D("2024-01-05"), "b.jsonl", [
        order("o1", "2024-01-01T08:00:00Z", "cancelled", "12.50").replace(
            '"updated_at": "2024-01-01T08:00:00Z"', '"updated_at": "2024-01-04T08:00:00Z"'),
        order("o5", "2023-12-28T10:00:00Z", "paid", "99.00"),  # 8 days late: too_late
        order("o6", "2024-01-05T11:00:00Z", "paid", "5.25")])
    (landing / "orders" / "arrival_date=2024-01-05" / "_c.jsonl").write_text(
        order("o7", "2024-01-04T11:00:00Z", "paid", "1000.00") + "\n")
    jan4 = deliver_folder(outbox / "orders" / "arrival_date=2024-01-04", landing)
    return [jan3, jan5, *sorted(jan4.glob("*.jsonl"))]


def finished_event_day_run(instance: dg.DagsterInstance):
    runs = instance.get_runs()
    if any(not r.is_finished for r in runs):
        return None
    return [r for r in runs if r.tags.get(REQUEST_TAG, "").startswith("event_days:")]


@pytest.mark.e2e
def test_daemon_sensor_folds_late_files_into_the_fact(tmp_path):
    (tmp_path / "home").mkdir()
    shutil.copy(PROJECT / "dagster.yaml", tmp_path / "home" / "dagster.yaml")
    landing = tmp_path / "landing"
    (landing / "orders").mkdir(parents=True)
    staged = arrival_folder(tmp_path / "outbox", D("2024-01-04"))
    (staged / "d.jsonl").write_text(order("o8", "2024-01-02T12:00:00Z", "paid", "3.10") + "\n"
                                    + order("o9", "2024-01-04T12:00:00Z", "paid", "8.00") + "\n")
    log = tmp_path / "daemon.log"
    # the instance's storage is created here, before the daemon opens it
    with dg.DagsterInstance.from_config(str(tmp_path / "home")) as instance, open(log, "wb") as out:
        daemon = subprocess.Popen([str(PROJECT / ".venv/bin/dagster-daemon"), "run", "-w", "workspace.yaml"],
                                  cwd=PROJECT, env=daemon_env(tmp_path), stdout=out, stderr=subprocess.STDOUT,
                                  start_new_session=True)
        try:
            began = time.monotonic()
            wait_for("the sensor's first tick", lambda: load_cursor(instance), daemon, log)
            print(f"first tick after {time.monotonic() - began:.0f}s at {time.strftime('%H:%M:%S')}")
            new_files = land_late_files(landing, tmp_path / "outbox")
            runs = wait_for("the event-day run", lambda: finished_event_day_run(instance), daemon, log)
            all_runs = instance.get_runs()
            for record in instance.get_run_records():
                print(f"{record.dagster_run.tags.get(REQUEST_TAG)}: created {record.create_timestamp:%H:%M:%S} "
                      f"start {record.start_time and time.strftime('%H:%M:%S', time.localtime(record.start_time))} "
                      f"end {record.end_time and time.strftime('%H:%M:%S', time.localtime(record.end_time))}")
        finally:
            stop(daemon)

    assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in all_runs), [r.status for r in all_runs]
    raw = [r for r in all_runs if r.tags.get(REQUEST_TAG, "").startswith("raw_orders:")]
    assert [(r.tags[RANGE[0]], r.tags[RANGE[1]]) for r in raw] == [("2024-01-03", "2024-01-05")]
    expected_days = oracle_event_days(new_files)
    assert expected_days == {D("2024-01-01"), D("2024-01-02"), D("2024-01-03"), D("2024-01-04"), D("2024-01-05")}
    assert [(r.tags[RANGE[0]], r.tags[RANGE[1]]) for r in runs] == [("2024-01-01", "2024-01-05")]

    reference = Reference(landing, 7)
    expected = {(f.event_date, f.country): (f.orders, f.placed_orders, f.paid_orders, f.cancelled_orders,
                                             f.revenue_usd) for f in reference.fact(sorted(expected_days))}
    fact = DeltaTable(str(tmp_path / "lake" / "fact" / "daily_revenue")).to_pyarrow_table().to_pylist()
    actual = {(r["event_date"], r["country"]): (r["orders"], r["placed_orders"], r["paid_orders"],
                                                r["cancelled_orders"], r["revenue_usd"]) for r in fact}
    assert actual == expected and len(expected) == 5
    source_files = {r["source_file"] for r in
                    DeltaTable(str(tmp_path / "lake" / "raw" / "orders")).to_pyarrow_table().to_pylist()}
    assert not any("/_c.jsonl" in f for f in source_files)  # the unfinished file stays out
