"""`catch-up` on real Spark and Delta: late files folded into exactly their days, then nothing."""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
from collections import Counter
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.definitions.run_request import InstigatorType
from dagster._core.scheduler.instigation import SensorInstigatorData
from dagster._core.test_utils import in_process_test_workspace
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

from backfill_assets.backfill_plan import RunPlan
from backfill_assets.catalog import FCT_DAILY_REVENUE, RAW_FX_RATES, RAW_ORDERS, STG_ORDERS
from backfill_assets.cli.catch_up import run_catch_up
from backfill_assets.cli.runner import RunOutcome, execute
from backfill_assets.defs.automation.sensors import build_late_data_sensor
from backfill_assets.demo.generate import generate_feed
from backfill_assets.settings import AutomationSettings, Settings
from backfill_assets_testkit.file_clock import past_stamps
from backfill_assets_testkit.pipeline_env import PipelineEnv, pipeline_env
from backfill_assets_testkit.reference import Reference
from backfill_assets_tests.automation.landing_files import oracle_event_days, order, write_orders

# Runs the pipeline through Dagster on real Spark and Delta: `make test`, not `make test-fast`.
pytestmark = pytest.mark.slow

FEED_START, FEED_END = date(2024, 1, 1), date(2024, 1, 3)
LATE_FOLDER = "arrival_date=2024-01-06"
HAND_WRITTEN = date(2024, 1, 7)
LAST_DAY = date(2024, 1, 13)  # the feed's last arrival: FEED_END + lateness + 3
ALL_LAYERS = (RAW_ORDERS, RAW_FX_RATES, STG_ORDERS, FCT_DAILY_REVENUE)
PROJECT = Path(__file__).resolve().parents[2]
RUN_LINE = re.compile(r"\] stg_orders\+fct_daily_revenue (\S+)\.\.(\S+) \.\.\.")


@dataclass
class Scenario:
    env: PipelineEnv
    prebuilt: list[RunOutcome]
    first: tuple[int, str]
    second: tuple[int, str]
    new_files: list[Path]
    first_runs: int
    second_runs: int


def catch_up() -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = run_catch_up(Settings.from_env(), AutomationSettings(settle_seconds=0))
    return code, out.getvalue()


def rebuilt_days(output: str) -> set[date]:
    days = set()
    for start, end in RUN_LINE.findall(output):
        first, last = date.fromisoformat(start), date.fromisoformat(end)
        days |= {first + timedelta(days=i) for i in range((last - first).days + 1)}
    return days


@pytest.fixture(scope="module")
def scenario(tmp_path_factory, spark):
    root = tmp_path_factory.mktemp("catch_up")
    with pipeline_env(root, start_date="2024-01-01") as env:
        landing = env.settings.landing_dir
        generate_feed(landing, FEED_START, FEED_END, orders_per_day=15, seed=5)
        os.rename(landing / "orders" / LATE_FOLDER, root / LATE_FOLDER)  # held back
        prebuilt = [
            execute(RunPlan(layers, FEED_START, LAST_DAY), env.instance)
            for layers in (ALL_LAYERS[:2], ALL_LAYERS[2:])
        ]  # a backfill: raw, then the rest
        os.rename(root / LATE_FOLDER, landing / "orders" / LATE_FOLDER)  # delivered late
        late_file = write_orders(
            landing,
            HAND_WRITTEN,
            "resent.jsonl",
            [
                order("late-1", "2023-12-30T12:00:00Z"),  # 8 days late: too_late
                order("late-2", "2024-01-02T23:30:00-01:00", amount="40.00"),
            ],
        )  # Jan 3 in UTC
        new_files = [*sorted((landing / "orders" / LATE_FOLDER).glob("*.jsonl")), late_file]
        runs = [len(env.instance.get_runs())]
        first = catch_up()  # the sensor never ran: a cold start, against the pre-built lake
        runs.append(len(env.instance.get_runs()))
        second = catch_up()
        runs.append(len(env.instance.get_runs()))
        yield Scenario(
            env, prebuilt, first, second, new_files, runs[1] - runs[0], runs[2] - runs[1]
        )


def test_the_backfill_before_the_late_files_published_every_day(scenario):
    published = {key: sorted(days) for o in scenario.prebuilt for key, days in o.published.items()}
    days = RunPlan(ALL_LAYERS, FEED_START, LAST_DAY).days
    assert all(o.success for o in scenario.prebuilt), [o.error for o in scenario.prebuilt]
    assert published == {key: days for key in ALL_LAYERS}


def test_late_files_rebuild_exactly_the_event_days_their_records_carry(scenario):
    code, output = scenario.first
    assert code == 0, output
    for path in scenario.new_files:
        assert path.relative_to(scenario.env.settings.landing_dir).as_posix() in output
    assert "1 record(s) beyond the lateness window" in output
    expected = oracle_event_days(scenario.new_files)
    assert expected and rebuilt_days(output) == expected
    assert "raw_orders 2024-01-06..2024-01-07 ..." in output
    assert scenario.first_runs == 1 + len(RUN_LINE.findall(output))


def test_fact_equals_totals_computed_from_every_landed_record(scenario):
    reference = Reference(scenario.env.settings.landing_dir, 7)
    days = RunPlan(ALL_LAYERS, FEED_START, LAST_DAY).days
    expected = {
        (f.event_date, f.country): (f.orders, f.paid_orders, f.revenue_usd)
        for f in reference.fact(days)
    }
    actual = {
        (r["event_date"], r["country"]): (r["orders"], r["paid_orders"], r["revenue_usd"])
        for r in scenario.env.rows("fact/daily_revenue")
    }
    assert actual == expected
    assert any(row.order_id == "late-2" for row in reference.staging([date(2024, 1, 3)])[0])


def test_too_late_record_is_counted_in_the_raw_metadata(scenario):
    reasons = Counter(
        q.reason for q in Reference(scenario.env.settings.landing_dir, 7).quarantine([HAND_WRITTEN])
    )
    record = scenario.env.instance.fetch_materializations(
        dg.AssetRecordsFilter(RAW_ORDERS, asset_partitions=[HAND_WRITTEN.isoformat()]), limit=1
    ).records[0]
    metadata = record.asset_materialization.metadata
    assert metadata["quarantined_by_reason"].value.get("too_late") == reasons["too_late"] >= 1


def test_catch_up_with_nothing_new_runs_nothing(scenario):
    code, output = scenario.second
    assert code == 0 and "nothing to rebuild" in output
    assert scenario.second_runs == 0


def start_late_data_sensor(instance: dg.DagsterInstance, cursor: str) -> None:
    """Switches the sensor on as the UI does (its code location loaded in this process) and
    stores ``cursor`` as the daemon does after a tick."""
    origin = LoadableTargetOrigin(
        executable_path=sys.executable,
        module_name="backfill_assets.definitions",
        working_directory=str(PROJECT),
    )
    with in_process_test_workspace(instance, origin) as workspace:
        [entry] = workspace.get_code_location_entries().values()
        assert entry.code_location is not None, entry.load_error
        [repository] = entry.code_location.get_repositories().values()
        state = instance.start_sensor(repository.get_sensor("late_data_sensor"))
    data = state.instigator_data
    assert isinstance(data, SensorInstigatorData)
    instance.update_instigator_state(state.with_data(data._replace(cursor=cursor)))


def stored_sensor_cursors(instance: dg.DagsterInstance) -> list[str | None]:
    cursors: list[str | None] = []
    for state in instance.all_instigator_state(instigator_type=InstigatorType.SENSOR):
        if state.name == "late_data_sensor":
            assert isinstance(state.instigator_data, SensorInstigatorData)
            cursors.append(state.instigator_data.cursor)
    return cursors


def test_catch_up_refuses_while_the_sensor_runs_and_leaves_its_cursor_alone(tmp_path, spark):
    with pipeline_env(tmp_path, start_date="2024-01-01") as env:
        landing = env.settings.landing_dir
        write_orders(landing, date(2024, 1, 3), "a.jsonl", [order("s-1", "2024-01-02T10:00:00Z")])
        # the sensor's tick: a raw run requested, event days pending in its cursor
        sensor = build_late_data_sensor(env.settings, AutomationSettings(settle_seconds=0))
        past_stamps(landing)  # the file stamped before the tick's mark
        tick = sensor(dg.build_sensor_context(instance=env.instance))
        assert len(tick.run_requests) == 1 and '"pending":[{' in tick.cursor
        start_late_data_sensor(env.instance, tick.cursor)

        code, output = catch_up()

        assert stored_sensor_cursors(env.instance) == [tick.cursor]  # its pending days kept
        assert env.instance.get_runs() == []
        assert code != 0
        assert "late_data_sensor is running" in output
        assert "dagster sensor stop late_data_sensor" in output


def test_catch_up_says_what_landed_within_the_settle_time_and_leaves_it(tmp_path):
    with pipeline_env(tmp_path, start_date="2024-01-01") as env:
        landing = env.settings.landing_dir
        write_orders(landing, date(2024, 1, 3), "a.jsonl", [order("s-1", "2024-01-02T10:00:00Z")])
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = run_catch_up(Settings.from_env(), AutomationSettings(settle_seconds=3600))
        output = out.getvalue()
        assert code == 0, output
        assert "1 file(s) or folder(s) landed less than 3600 s ago" in output, output
        assert "nothing to rebuild" in output
        assert env.instance.get_runs() == []


def test_catch_up_keeps_the_event_days_of_a_failed_raw_run_and_runs_it_again(tmp_path, spark):
    with pipeline_env(tmp_path, start_date="2024-01-01", lateness=2) as env:
        landing = env.settings.landing_dir
        generate_feed(
            landing,
            date(2024, 1, 1),
            date(2024, 1, 2),
            orders_per_day=10,
            seed=9,
            max_lateness_days=2,
        )
        blocked = env.settings.lake_dir / "raw" / "orders"  # the raw orders table cannot be made
        blocked.parent.mkdir(parents=True)
        blocked.write_text("not a Delta table\n")
        failed_code, failed = catch_up()
        blocked.unlink()
        code, output = catch_up()

        assert failed_code == 1, failed
        assert code == 0, output
        days = [date(2024, 1, 1) + timedelta(days=i) for i in range(10)]
        expected = {
            (f.event_date, f.country, f.orders, f.revenue_usd)
            for f in Reference(landing, 2).fact(days)
        }
        actual = {
            (r["event_date"], r["country"], r["orders"], r["revenue_usd"])
            for r in env.rows("fact/daily_revenue")
        }
        assert expected and actual == expected
