"""Dagster on PostgreSQL (BACKFILL_DAGSTER_PG_URL): a ranged backfill with a held day, re-execution
from failure through the CLI, a late-data sensor tick, and the partition status read back through
the real webserver's GraphQL, with the runs and events proven to be in PostgreSQL."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import time
from datetime import date, timedelta
from pathlib import Path

import dagster as dg
import psycopg2
import pytest
import requests

from backfill_assets.backfill_plan import RunPlan
from backfill_assets.catalog import FCT_DAILY_REVENUE, RAW_FX_RATES, RAW_ORDERS, STG_ORDERS
from backfill_assets.cli.instance import PG_URL_ENV, ensure_dagster_home
from backfill_assets.cli.runner import execute
from backfill_assets.demo.generate import generate_feed, remove_rates
from backfill_assets.settings import Settings
from backfill_assets_testkit.dagster_dev import (
    PROJECT_DIR,
    DagsterUI,
    GraphQLError,
    free_port,
    server_env,
)
from backfill_assets_testkit.file_clock import past_stamps
from backfill_assets_testkit.reference import Reference
from backfill_assets_tests.automation.landing_files import order, write_orders
from backfill_assets_tests.e2e.queries import check_results, partition_days

# a PostgreSQL server's start, mostly waited on: the side lane
pytestmark = [pytest.mark.slow, pytest.mark.beside]

FEED_START, FEED_END = date(2024, 1, 1), date(2024, 1, 11)
START, END = date(2024, 1, 7), date(2024, 1, 10)
HELD = date(2024, 1, 9)  # its EUR rates of Jan 2..9 are removed; Jan 1 is 8 days back
DAYS = [START + timedelta(days=i) for i in range((END - START).days + 1)]
GOOD = [d for d in DAYS if d != HELD]
PARTITION_START = "2023-12-20"


def fact_of(rows: list[dict], days) -> dict:
    return {
        (r["event_date"], r["country"]): (r["orders"], r["paid_orders"], r["revenue_usd"])
        for r in rows
        if r["event_date"] in days
    }


def expected_fact(landing: Path, days) -> dict:
    return {
        (f.event_date, f.country): (f.orders, f.paid_orders, f.revenue_usd)
        for f in Reference(landing, 7).fact(days)
    }


@pytest.fixture(scope="module")
def pg(tmp_path_factory, pg_url, spark):
    """The pipeline's environment on a fresh landing zone, Dagster's instance on PostgreSQL."""
    root = tmp_path_factory.mktemp("pg")
    env = {
        "BACKFILL_LANDING_DIR": str(root / "landing"),
        "BACKFILL_LAKE_DIR": str(root / "lake"),
        "BACKFILL_START_DATE": PARTITION_START,
        "BACKFILL_MAX_LATENESS_DAYS": "7",
        "DAGSTER_HOME": str(root / "home"),
        PG_URL_ENV: pg_url,
    }
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        settings = Settings.from_env()
        generate_feed(settings.landing_dir, FEED_START, FEED_END, orders_per_day=15, seed=13)
        remove_rates(settings.landing_dir, "EUR", HELD - timedelta(days=7), HELD)
        ensure_dagster_home(PROJECT_DIR)
        # Dagster creates its tables here, before the webserver opens the same database.
        with dg.DagsterInstance.get() as instance:
            yield settings, instance, root


@pytest.fixture(scope="module")
def webserver(pg, pg_url):
    """The real `dagster-webserver` on the PostgreSQL instance, 127.0.0.1, a free port."""
    settings, _, root = pg
    env = server_env(root / "home", settings.landing_dir, settings.lake_dir, PARTITION_START)
    env[PG_URL_ENV] = pg_url
    port, log = free_port(), root / "webserver.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("dagster-webserver")),
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-w",
                "workspace.yaml",
            ],
            cwd=PROJECT_DIR,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    ui = DagsterUI(process, f"http://127.0.0.1:{port}", log)
    try:
        yield ui
    finally:
        ui.stop()


def wait_until_serving(ui: DagsterUI, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ui.process.poll() is not None:
            raise RuntimeError(f"dagster-webserver exited:\n{ui.log_tail()}")
        with contextlib.suppress(requests.RequestException, GraphQLError, KeyError, TypeError):
            if ui.graphql("{ assetNodes { id } }")["assetNodes"]:
                return
        time.sleep(1)
    raise TimeoutError(f"dagster-webserver not serving after {timeout:.0f}s:\n{ui.log_tail()}")


@pytest.fixture(scope="module")
def first_backfill(pg, webserver):
    """`backfill` over the range while the webserver starts; (exit code, output)."""
    settings, _, _ = pg
    from backfill_assets.cli.main import run_backfill

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = run_backfill(settings, START, END)
    return code, out.getvalue()


def test_the_instance_stores_everything_in_postgresql(pg):
    _, instance, root = pg
    storages = (instance.run_storage, instance.event_log_storage, instance.schedule_storage)
    assert [type(s).__name__ for s in storages] == [
        "PostgresRunStorage",
        "PostgresEventLogStorage",
        "PostgresScheduleStorage",
    ]
    assert not list((root / "home").rglob("*.db")), "an SQLite file was created"


def test_backfill_exits_1_naming_only_the_held_day(first_backfill):
    code, output = first_backfill
    assert code == 1, output
    held_part = output.split("held or not published")[-1]
    assert f"stg_orders {HELD}: fx_rate_present" in held_part
    for day in GOOD:
        assert f"stg_orders {day}" not in held_part


def test_fact_of_the_good_days_matches_the_reference(pg, first_backfill):
    from deltalake import DeltaTable

    settings, _, _ = pg
    landing = settings.landing_dir
    assert Reference(landing, 7).staging(DAYS)[1] == {HELD}
    rows = DeltaTable(str(settings.lake_dir / "fact/daily_revenue")).to_pyarrow_table().to_pylist()
    assert HELD not in {r["event_date"] for r in rows}
    expected = expected_fact(landing, GOOD)
    assert fact_of(rows, GOOD) == expected and expected


def test_runs_and_their_events_are_rows_in_postgresql(pg, pg_url, first_backfill):
    _, instance, _ = pg
    with psycopg2.connect(pg_url) as conn, conn.cursor() as cur:
        cur.execute("SELECT run_id, status FROM runs")
        in_pg = dict(cur.fetchall())
        cur.execute("SELECT run_id, count(*) FROM event_logs WHERE run_id <> '' GROUP BY run_id")
        events = dict(cur.fetchall())
    conn.close()
    runs = instance.get_runs()
    assert in_pg == {r.run_id: r.status.value for r in runs}
    assert sorted(in_pg.values()) == ["FAILURE", "SUCCESS", "SUCCESS"]  # raw, rates, staging+fact
    for run in runs:
        assert events[run.run_id] == len(instance.all_logs(run.run_id)) > 0


def test_graphql_shows_the_held_day_failed_and_the_rest_materialized(webserver, first_backfill):
    wait_until_serving(webserver)
    for asset in ("stg_orders", "fct_daily_revenue"):
        days = partition_days(webserver, asset)
        assert days["MATERIALIZED"] & set(DAYS) == set(GOOD), asset
        assert days["FAILED"] & set(DAYS) == {HELD}, asset
    assert "FAILED" in check_results(webserver, "stg_orders", "fx_rate_present")[HELD]


def test_reexecution_from_failure_through_the_cli_publishes_the_held_day(
    pg, pg_url, webserver, first_backfill
):
    settings, instance, _ = pg
    folder = settings.landing_dir / "fx_rates" / f"rate_date={HELD.isoformat()}"
    (folder / "zz_eur_restated.csv").write_text("currency,usd_per_unit\nEUR,1.09500000\n")
    assert execute(RunPlan((RAW_FX_RATES,), HELD, HELD), instance).success
    failed = instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE]))
    assert len(failed) == 1

    # A separate process: the switch alone tells it where the instance's runs are.
    env = {
        **os.environ,
        "BACKFILL_SPARK_MASTER": "local[2]",
        "BACKFILL_SPARK_DRIVER_MEMORY": "1g",
        "BACKFILL_SPARK_SHUFFLE_PARTITIONS": "2",
        "PYSPARK_PYTHON": sys.executable,
    }
    proc = subprocess.run(
        [sys.executable, "-m", "backfill_assets.cli", "reexecute", failed[0].run_id],
        cwd=PROJECT_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"all {2 * len(DAYS)} requested partitions published" in proc.stdout

    from deltalake import DeltaTable

    rows = DeltaTable(str(settings.lake_dir / "fact/daily_revenue")).to_pyarrow_table().to_pylist()
    expected = expected_fact(settings.landing_dir, DAYS)
    assert fact_of(rows, DAYS) == expected and {k[0] for k in expected} == set(DAYS)
    child = [r for r in instance.get_runs() if r.parent_run_id == failed[0].run_id]
    assert [r.status for r in child] == [dg.DagsterRunStatus.SUCCESS]
    for asset in ("stg_orders", "fct_daily_revenue"):
        days = partition_days(webserver, asset)
        assert days["MATERIALIZED"] & set(DAYS) == set(DAYS) and not days["FAILED"] & set(DAYS)


def test_sensor_tick_on_postgres_requests_raw_then_the_late_orders_event_day(pg, first_backfill):
    from backfill_assets.defs.automation.sensors import build_late_data_sensor
    from backfill_assets.settings import AutomationSettings

    settings, instance, _ = pg
    sensor = build_late_data_sensor(settings, AutomationSettings(settle_seconds=0))

    def tick(cursor):
        past_stamps(settings.landing_dir)  # what landed so far stamped before the tick's mark
        result = sensor(dg.build_sensor_context(instance=instance, cursor=cursor))
        return [
            (
                tuple(sorted(k.to_user_string() for k in r.asset_selection)),
                r.tags["dagster/asset_partition_range_start"],
                r.tags["dagster/asset_partition_range_end"],
                r,
            )
            for r in result.run_requests or []
        ], result.cursor

    first, cursor = tick(None)  # requests the landed folders no backfill built
    built = {date.fromisoformat(p) for p in instance.get_materialized_partitions(RAW_ORDERS)}
    requested = {
        date.fromisoformat(r[1]) + timedelta(days=i)
        for r in first
        if r[0] == ("raw_orders",)
        for i in range((date.fromisoformat(r[2]) - date.fromisoformat(r[1])).days + 1)
    }
    assert requested and not requested & built

    late_day, arrival = START + timedelta(days=1), END
    assert arrival in built
    write_orders(
        settings.landing_dir,
        arrival,
        "zz_late.jsonl",
        [order("pg-late-1", f"{late_day}T12:00:00Z", amount="250.00")],
    )
    requests_, cursor = tick(cursor)
    assert [r[:3] for r in requests_] == [(("raw_orders",), str(arrival), str(arrival))]
    assert execute(
        RunPlan((RAW_ORDERS,), arrival, arrival), instance, tags=dict(requests_[0][3].tags)
    ).success
    released, cursor = tick(cursor)
    event_days = tuple(sorted(k.to_user_string() for k in (STG_ORDERS, FCT_DAILY_REVENUE)))
    # The late order's day, released once its raw run succeeded. Beside it the tick may name
    # stale days (late_data/stale.py): the rate rebuild of the held day by hand, above, came
    # after the attempts of published days whose window reads it; those are requested as such.
    late = [r for r in released if ":stale:" not in r[3].run_key]
    assert [r[:3] for r in late] == [(event_days, str(late_day), str(late_day))]
    for stale in (r for r in released if r not in late):
        assert stale[0] == event_days and START <= date.fromisoformat(stale[1]) <= END, stale[:3]
    assert execute(
        RunPlan((STG_ORDERS, FCT_DAILY_REVENUE), late_day, late_day),
        instance,
        tags=dict(late[0][3].tags),
    ).success

    from deltalake import DeltaTable

    rows = DeltaTable(str(settings.lake_dir / "fact/daily_revenue")).to_pyarrow_table().to_pylist()
    expected = expected_fact(settings.landing_dir, [late_day])
    assert fact_of(rows, [late_day]) == expected
    assert any(k[1] == "US" for k in expected)
