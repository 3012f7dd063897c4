"""End to end with the real dagster-daemon: files land late, the sensor fires, the fact rebuilds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import date, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import IO

import dagster as dg
import pytest
from deltalake import DeltaTable

from backfill_assets.automation.state import load_cursor
from backfill_assets.cli.instance import prepare_instance_yaml
from backfill_assets_testkit.reference import Reference
from backfill_assets_tests.automation.landing_files import (
    arrival_folder,
    deliver_folder,
    oracle_event_days,
    order,
    write_orders,
)

PROJECT = Path(__file__).resolve().parents[2]
D = date.fromisoformat
WAIT_SECONDS = 360
REQUEST_TAG = "backfill_assets/request"
RANGE = ("dagster/asset_partition_range_start", "dagster/asset_partition_range_end")


def daemon_env(root: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DAGSTER_HOME": str(root / "home"),
        "BACKFILL_LANDING_DIR": str(root / "landing"),
        "BACKFILL_LAKE_DIR": str(root / "lake"),
        "BACKFILL_START_DATE": "2024-01-01",
        "BACKFILL_MAX_LATENESS_DAYS": "7",
        "BACKFILL_AUTOMATION": "on",
        "BACKFILL_SENSOR_INTERVAL_SECONDS": "5",
        "BACKFILL_LANDING_SETTLE_SECONDS": "1",
        "BACKFILL_SPARK_MASTER": "local[1]",
        "BACKFILL_SPARK_DRIVER_MEMORY": "1g",
        "BACKFILL_SPARK_SHUFFLE_PARTITIONS": "2",
        "PYSPARK_PYTHON": sys.executable,
        "DAGSTER_DISABLE_TELEMETRY": "yes",
    }


def runs_report(instance: dg.DagsterInstance) -> str:
    """Every run of ``instance``: its request, its status and the messages of its failures."""
    lines = []
    for run in instance.get_runs(ascending=True):
        lines.append(f"{run.tags.get(REQUEST_TAG)}: {run.status.value}")
        for entry in instance.all_logs(run.run_id):
            event = entry.dagster_event
            if event is not None and event.is_failure:
                error = getattr(event.event_specific_data, "error", None)
                while error is not None and error.cause is not None:
                    error = error.cause  # the innermost: what went wrong, not where
                cause = f" {error.message.strip()}" if error is not None else ""
                lines.append(f"  {event.event_type_value}: {entry.message}{cause}")
    return "\n".join(lines) or "no run"


def wait_for(
    what: str,
    condition,
    daemon: subprocess.Popen,
    log: Path,
    seconds: float = WAIT_SECONDS,
    instance: dg.DagsterInstance | None = None,
):
    """``condition()`` once it is truthy; after ``seconds`` a failure that shows the daemon's
    log tail, and the runs of ``instance`` when given."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and daemon.poll() is None:
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    tail = log.read_text(errors="replace")[-4000:] if log.exists() else ""
    runs = f"runs:\n{runs_report(instance)}\n" if instance is not None else ""
    pytest.fail(
        f"gave up waiting for {what} (daemon exit code {daemon.poll()}); {runs}log tail:\n{tail}"
    )


def start_daemon(env: dict[str, str], out: IO[bytes], background: bool = False) -> subprocess.Popen:
    """The real ``dagster-daemon`` on the project's workspace, in its own process group (which
    ``stop`` ends), its output into ``out``. ``background``: started as a background job of a
    non-interactive shell is, with SIGINT ignored (which every process it starts would inherit
    but for ``backfill_assets.signals``)."""

    def ignore_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    return subprocess.Popen(
        [str(PROJECT / ".venv/bin/dagster-daemon"), "run", "-w", "workspace.yaml"],
        cwd=PROJECT,
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=ignore_sigint if background else None,
    )


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
    jan3 = write_orders(
        landing,
        D("2024-01-03"),
        "a.jsonl",
        [
            order("o1", "2024-01-01T08:00:00Z", "paid", "12.50"),
            order("o2", "2024-01-02T09:00:00Z", "placed", "7.00"),
            order("o3", "2024-01-03T10:00:00+02:00", "paid", "30.00"),
            order("o4", "2024-01-03T23:00:00Z", "cancelled"),
        ],
    )
    jan5 = write_orders(
        landing,
        D("2024-01-05"),
        "b.jsonl",
        [
            order("o1", "2024-01-01T08:00:00Z", "cancelled", "12.50").replace(
                '"updated_at": "2024-01-01T08:00:00Z"', '"updated_at": "2024-01-04T08:00:00Z"'
            ),
            order("o5", "2023-12-28T10:00:00Z", "paid", "99.00"),  # 8 days late: too_late
            order("o6", "2024-01-05T11:00:00Z", "paid", "5.25"),
        ],
    )
    (landing / "orders" / "arrival_date=2024-01-05" / "_c.jsonl").write_text(
        order("o7", "2024-01-04T11:00:00Z", "paid", "1000.00") + "\n"
    )
    jan4 = deliver_folder(outbox / "orders" / "arrival_date=2024-01-04", landing)
    return [jan3, jan5, *sorted(jan4.glob("*.jsonl"))]


def finished_event_day_run(instance: dg.DagsterInstance):
    """The event-day runs once every run has ended; a failed run fails the test at once (no
    later tick mends it), with what each run said."""
    runs = instance.get_runs()
    if any(r.status == dg.DagsterRunStatus.FAILURE for r in runs):
        pytest.fail(f"a run failed:\n{runs_report(instance)}")
    if any(not r.is_finished for r in runs):
        return None
    return [r for r in runs if r.tags.get(REQUEST_TAG, "").startswith("event_days:")]


def stage_late_folder(outbox: Path) -> None:
    """A folder of arrival Jan 4, written before the daemon starts, moved in later."""
    staged = arrival_folder(outbox, D("2024-01-04"))
    lines = [
        order("o8", "2024-01-02T12:00:00Z", "paid", "3.10"),
        order("o9", "2024-01-04T12:00:00Z", "paid", "8.00"),
    ]
    (staged / "d.jsonl").write_text("\n".join(lines) + "\n")


def print_timeline(instance: dg.DagsterInstance, began: float) -> None:
    """When each run was created, started and ended (shown with ``pytest -s``)."""
    print(f"test began {time.strftime('%H:%M:%S', time.localtime(began))}")
    for record in instance.get_run_records(ascending=True):
        start, end = record.start_time or 0, record.end_time or 0
        print(
            f"{record.dagster_run.tags.get(REQUEST_TAG)}: "
            f"created {record.create_timestamp.timestamp() - began:.0f}s, "
            f"ran {start - began:.0f}s..{end - began:.0f}s"
        )


def run_daemon_scenario(root: Path) -> tuple[list[Path], list[dg.DagsterRun], list[dg.DagsterRun]]:
    """Starts the daemon, waits for the sensor's first tick, lands the late files, and waits
    until the event-day run has ended: (new files, event-day runs, all runs)."""
    log, began = root / "daemon.log", time.time()
    # the instance's storage is created here, before the daemon opens it
    with dg.DagsterInstance.from_config(str(root / "home")) as instance, open(log, "wb") as out:
        daemon = start_daemon(daemon_env(root), out)
        try:
            wait_for("the sensor's first tick", lambda: load_cursor(instance), daemon, log)
            new_files = land_late_files(root / "landing", root / "outbox")
            runs = wait_for(
                "the event-day run",
                lambda: finished_event_day_run(instance),
                daemon,
                log,
                instance=instance,
            )
            print_timeline(instance, began)
            return new_files, runs, list(instance.get_runs())
        finally:
            stop(daemon)


def table(root: Path, name: str) -> list[dict]:
    return DeltaTable(str(root / "lake" / name)).to_pyarrow_table().to_pylist()


@pytest.mark.e2e
def test_daemon_sensor_folds_late_files_into_the_fact(tmp_path):
    (tmp_path / "home").mkdir()
    prepare_instance_yaml(tmp_path / "home", PROJECT / "dagster.yaml")  # as `make setup` does
    (tmp_path / "landing" / "orders").mkdir(parents=True)
    stage_late_folder(tmp_path / "outbox")

    new_files, event_runs, all_runs = run_daemon_scenario(tmp_path)

    assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in all_runs), all_runs
    raw = [r for r in all_runs if r.tags.get(REQUEST_TAG, "").startswith("raw_orders:")]
    assert [(r.tags[RANGE[0]], r.tags[RANGE[1]]) for r in raw] == [("2024-01-03", "2024-01-05")]
    expected_days = oracle_event_days(new_files)
    assert expected_days == {D("2024-01-01") + timedelta(days=i) for i in range(5)}
    ranges = [(r.tags[RANGE[0]], r.tags[RANGE[1]]) for r in event_runs]
    assert ranges == [("2024-01-01", "2024-01-05")]

    def totals(r):
        return r.orders, r.placed_orders, r.paid_orders, r.cancelled_orders, r.revenue_usd

    expected = {
        (f.event_date, f.country): totals(f)
        for f in Reference(tmp_path / "landing", 7).fact(sorted(expected_days))
    }
    actual = {
        (r["event_date"], r["country"]): totals(SimpleNamespace(**r))
        for r in table(tmp_path, "fact/daily_revenue")
    }
    assert actual == expected and len(expected) == 5
    source_files = {r["source_file"] for r in table(tmp_path, "raw/orders")}
    assert not any("/_c.jsonl" in f for f in source_files)  # the unfinished file stays out
