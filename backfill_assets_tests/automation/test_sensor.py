"""The late-data sensor evaluated with build_sensor_context on a real landing zone and instance."""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.remote_origin import (
    RegisteredCodeLocationOrigin,
    RemoteJobOrigin,
    RemoteRepositoryOrigin,
)
from dagster._core.utils import make_new_run_id

from backfill_assets.catalog import FCT_DAILY_REVENUE, RAW_FX_RATES, RAW_ORDERS, STG_ORDERS
from backfill_assets.defs.automation.sensors import build_late_data_sensor
from backfill_assets.settings import AutomationSettings, Settings
from backfill_assets_testkit.file_clock import past_stamps
from backfill_assets_tests.automation.landing_files import (
    arrival_folder,
    deliver_folder,
    order,
    write_orders,
    write_rates,
)

# Runs the pipeline through Dagster on real Spark and Delta: `make test`, not `make test-fast`.
pytestmark = pytest.mark.slow

D = date.fromisoformat
RANGE = ("dagster/asset_partition_range_start", "dagster/asset_partition_range_end")
ORIGIN = RemoteJobOrigin(
    RemoteRepositoryOrigin(RegisteredCodeLocationOrigin("backfill_assets"), "__repository__"),
    "backfill_job",
)


class Harness:
    def __init__(self, root: Path, instance: dg.DagsterInstance):
        self.root, self.instance = root, instance
        settings = Settings(root, root / "lake", D("2024-01-01"), 7)
        self.sensor = build_late_data_sensor(settings, AutomationSettings(settle_seconds=0))

    def tick(self, cursor: str | None) -> tuple[list[dg.RunRequest], str]:
        past_stamps(self.root)  # what landed so far stamped before the tick's mark
        result = self.sensor(dg.build_sensor_context(instance=self.instance, cursor=cursor))
        assert isinstance(result, dg.SensorResult)
        assert result.cursor is not None, "every tick stores its cursor"
        return list(result.run_requests or []), result.cursor

    def finish(self, request: dg.RunRequest, status=dg.DagsterRunStatus.SUCCESS) -> str:
        """Records the run the daemon would have launched for ``request``, ended (or, with
        another ``status``, queued or in progress); returns its id."""
        run_id = make_new_run_id()
        assert request.asset_selection is not None, "the sensor names the assets it requests"
        self.instance.add_run(
            dg.DagsterRun(
                job_name="backfill_job",
                run_id=run_id,
                status=status,
                tags=dict(request.tags),
                asset_selection=frozenset(request.asset_selection),
                remote_job_origin=ORIGIN,  # a queued run needs one
            )
        )
        return run_id

    def event(self, run_id: str, event_type: str) -> None:
        """What the run worker reports: PIPELINE_START, PIPELINE_SUCCESS, PIPELINE_FAILURE."""
        self.instance.handle_run_event(
            run_id, dg.DagsterEvent(event_type_value=event_type, job_name="backfill_job")
        )


def ranged(request: dg.RunRequest) -> tuple[tuple[str, ...], str, str]:
    assert request.asset_selection is not None, "the sensor names the assets it requests"
    names = tuple(sorted(k.to_user_string() for k in request.asset_selection))
    return names, request.tags[RANGE[0]], request.tags[RANGE[1]]


EVENT_DAYS = tuple(sorted(k.to_user_string() for k in (STG_ORDERS, FCT_DAILY_REVENUE)))


@pytest.fixture(scope="module")
def instance(tmp_path_factory):
    """One instance for the module (its setup is the slow part); every test has its own landing."""
    home = tmp_path_factory.mktemp("home")
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        yield instance


def build(instance: dg.DagsterInstance, asset: dg.AssetKey, *days: str) -> None:
    """Records raw partitions as built now, as a backfill would have."""
    for day in days:
        instance.report_runless_asset_event(dg.AssetMaterialization(asset, partition=day))


@pytest.fixture
def harness(tmp_path, instance):
    """A landing zone whose folders were all built just after they landed."""
    write_orders(tmp_path, D("2024-01-10"), "a.jsonl", [order("1", "2024-01-10T09:00:00Z")])
    write_orders(tmp_path, D("2024-01-15"), "a.jsonl", [order("2", "2024-01-15T09:00:00Z")])
    write_rates(tmp_path, D("2024-01-08"), "a.csv", {"EUR": "1.08"})
    write_rates(tmp_path, D("2024-01-12"), "a.csv", {"EUR": "1.09"})
    past_stamps(tmp_path)  # built after every file landed
    build(instance, RAW_ORDERS, "2024-01-10", "2024-01-15")
    build(instance, RAW_FX_RATES, "2024-01-08", "2024-01-12")
    return Harness(tmp_path, instance)


def test_first_tick_after_a_backfill_requests_nothing(harness):
    requests, cursor = harness.tick(None)
    assert requests == [] and cursor
    assert harness.tick(cursor)[0] == []


def test_first_tick_takes_a_file_landed_after_its_folders_build_as_new(harness):
    write_orders(harness.root, D("2024-01-10"), "b.jsonl", [order("12", "2024-01-09T10:00:00Z")])
    requests, cursor = harness.tick(None)
    assert [ranged(r) for r in requests] == [(("raw_orders",), "2024-01-10", "2024-01-10")]
    harness.finish(requests[0])
    assert [ranged(r) for r in harness.tick(cursor)[0]] == [
        (EVENT_DAYS, "2024-01-09", "2024-01-09")
    ]


def test_new_file_requests_raw_then_exactly_its_event_days_once_raw_ended(harness):
    _, cursor = harness.tick(None)
    write_orders(
        harness.root,
        D("2024-01-15"),
        "late.jsonl",
        [
            order("3", "2024-01-11T10:00:00Z"),
            order("4", "2024-01-12T23:00:00-05:00"),  # Jan 13 UTC
            order("5", "2024-01-15T12:00:00Z"),
        ],
    )
    requests, cursor = harness.tick(cursor)
    assert [ranged(r) for r in requests] == [(("raw_orders",), "2024-01-15", "2024-01-15")]
    raw = requests[0]
    waiting, cursor = harness.tick(cursor)
    assert waiting == []
    harness.finish(raw)
    released, cursor = harness.tick(cursor)
    assert [ranged(r) for r in released] == [
        (EVENT_DAYS, "2024-01-11", "2024-01-11"),
        (EVENT_DAYS, "2024-01-13", "2024-01-13"),
        (EVENT_DAYS, "2024-01-15", "2024-01-15"),
    ]
    assert "orders/arrival_date=2024-01-15/late.jsonl" in released[0].tags["backfill_assets/why"]
    assert harness.tick(cursor)[0] == []


def test_folder_delivered_four_days_late(harness, tmp_path):
    staged = arrival_folder(tmp_path / "outbox", D("2024-01-11"))
    (staged / "x.jsonl").write_text(
        order("6", "2024-01-09T10:00:00Z") + "\n" + order("7", "2024-01-10T10:00:00Z") + "\n"
    )
    _, cursor = harness.tick(None)
    deliver_folder(staged, harness.root)
    requests, cursor = harness.tick(cursor)
    assert [ranged(r) for r in requests] == [(("raw_orders",), "2024-01-11", "2024-01-11")]
    harness.finish(requests[0])
    released, _ = harness.tick(cursor)
    assert [ranged(r) for r in released] == [(EVENT_DAYS, "2024-01-09", "2024-01-10")]


def test_in_flight_file_is_requested_only_once_renamed(harness):
    _, cursor = harness.tick(None)
    folder = harness.root / "orders" / "arrival_date=2024-01-10"
    (folder / "_b.jsonl").write_text(order("8", "2024-01-08T10:00:00Z") + "\n")
    requests, cursor = harness.tick(cursor)
    assert requests == []
    os.rename(folder / "_b.jsonl", folder / "b.jsonl")
    requests, cursor = harness.tick(cursor)
    assert [ranged(r) for r in requests] == [(("raw_orders",), "2024-01-10", "2024-01-10")]
    harness.finish(requests[0])
    assert [ranged(r) for r in harness.tick(cursor)[0]] == [
        (EVENT_DAYS, "2024-01-08", "2024-01-08")
    ]


def test_re_evaluated_tick_requests_the_same_run_keys(harness):
    _, cursor = harness.tick(None)
    write_orders(harness.root, D("2024-01-15"), "late.jsonl", [order("9", "2024-01-14T10:00:00Z")])
    first, after = harness.tick(cursor)
    again, after_again = harness.tick(cursor)
    assert [r.run_key for r in first] == [r.run_key for r in again] and len(first) == 1
    harness.finish(first[0])
    released, _ = harness.tick(after)
    released_again, _ = harness.tick(after_again)
    assert [r.run_key for r in released] == [r.run_key for r in released_again] and len(
        released
    ) == 1
    assert len({r.run_key for r in first + released}) == 2


def test_too_late_record_rebuilds_its_arrival_but_not_its_event_day(harness):
    _, cursor = harness.tick(None)
    write_orders(
        harness.root,
        D("2024-01-15"),
        "late.jsonl",
        [
            order("10", "2024-01-07T10:00:00Z"),  # 8 days late: quarantined as too_late
            order("11", "2024-01-08T00:00:00Z"),
        ],
    )  # 7 days: still counts
    requests, cursor = harness.tick(cursor)
    assert [ranged(r) for r in requests] == [(("raw_orders",), "2024-01-15", "2024-01-15")]
    assert "1 record(s) beyond the lateness window" in requests[0].tags["backfill_assets/why"]
    harness.finish(requests[0])
    assert [ranged(r) for r in harness.tick(cursor)[0]] == [
        (EVENT_DAYS, "2024-01-08", "2024-01-08")
    ]


def test_new_rate_file_rebuilds_the_days_whose_rate_it_sets(harness):
    _, cursor = harness.tick(None)
    write_rates(harness.root, D("2024-01-09"), "a.csv", {"EUR": "1.07", "USD": "1"})
    requests, cursor = harness.tick(cursor)
    assert [ranged(r) for r in requests] == [(("raw_fx_rates",), "2024-01-09", "2024-01-09")]
    harness.finish(requests[0])
    # EUR of Jan 9 is the rate of Jan 9 .. 11; Jan 12 lists its own EUR
    assert [ranged(r) for r in harness.tick(cursor)[0]] == [
        (EVENT_DAYS, "2024-01-09", "2024-01-11")
    ]


def test_group_waits_while_a_retry_of_its_crashed_raw_run_is_queued_or_running(harness):
    _, cursor = harness.tick(None)
    write_orders(harness.root, D("2024-01-15"), "late.jsonl", [order("13", "2024-01-12T10:00:00Z")])
    [raw], cursor = harness.tick(cursor)
    harness.finish(raw, status=dg.DagsterRunStatus.FAILURE)  # the run worker crashed
    retry = harness.finish(raw, status=dg.DagsterRunStatus.QUEUED)  # run retries: same tags
    waiting, cursor = harness.tick(cursor)
    assert waiting == []
    harness.event(retry, "PIPELINE_START")
    waiting, cursor = harness.tick(cursor)
    assert waiting == []
    harness.event(retry, "PIPELINE_SUCCESS")
    released, _ = harness.tick(cursor)
    assert [ranged(r) for r in released] == [(EVENT_DAYS, "2024-01-12", "2024-01-12")]


def late_file_with_failed_raw_run(harness) -> tuple[dg.RunRequest, str]:
    """A late file whose raw run failed: (its raw request, the cursor after that tick)."""
    _, cursor = harness.tick(None)
    write_orders(harness.root, D("2024-01-15"), "late.jsonl", [order("14", "2024-01-13T10:00:00Z")])
    [raw], cursor = harness.tick(cursor)
    harness.event(harness.finish(raw, status=dg.DagsterRunStatus.STARTED), "PIPELINE_FAILURE")
    for _ in range(3):  # however many ticks pass, nothing is released and nothing forgotten
        waiting, cursor = harness.tick(cursor)
        assert waiting == []
    return raw, cursor


def test_failed_raw_run_keeps_its_event_days_pending_until_its_re_execution_succeeds(harness):
    raw, cursor = late_file_with_failed_raw_run(harness)
    again = harness.finish(raw, status=dg.DagsterRunStatus.STARTED)  # re-executed: same tags
    assert harness.tick(cursor)[0] == []
    harness.event(again, "PIPELINE_FAILURE")
    waiting, cursor = harness.tick(cursor)
    assert waiting == []
    harness.finish(raw)
    released, cursor = harness.tick(cursor)
    assert [ranged(r) for r in released] == [(EVENT_DAYS, "2024-01-13", "2024-01-13")]
    assert harness.tick(cursor)[0] == []


def test_failed_raw_run_releases_its_event_days_once_another_run_rebuilt_its_partitions(harness):
    _, cursor = late_file_with_failed_raw_run(harness)
    past_stamps(harness.root)  # rebuilt after the late file landed
    build(harness.instance, RAW_ORDERS, "2024-01-15")  # a backfill, or the daily refresh
    released, _ = harness.tick(cursor)
    assert [ranged(r) for r in released] == [(EVENT_DAYS, "2024-01-13", "2024-01-13")]


def test_full_count_interval_is_a_setting_in_minutes_ten_by_default():
    assert AutomationSettings.from_env({}).recount_ns == 10 * 60 * 10**9
    every = AutomationSettings.from_env({"BACKFILL_LANDING_RECOUNT_MINUTES": "2.5"})
    assert every.recount_ns == 150 * 10**9
    assert AutomationSettings.from_env({"BACKFILL_LANDING_RECOUNT_MINUTES": "0"}).recount_ns == 0
    for bad in ("-1", "soon", "nan"):
        with pytest.raises(ValueError):
            AutomationSettings.from_env({"BACKFILL_LANDING_RECOUNT_MINUTES": bad})
