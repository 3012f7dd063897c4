"""Dagster end to end on real Spark and Delta: a ranged backfill, a held day, idempotency,
re-execution."""

from __future__ import annotations

import json
from collections import Counter
from datetime import date, datetime, timedelta
from decimal import Decimal

import dagster as dg
import pytest
from dagster._core.storage.tags import PARENT_RUN_ID_TAG, RESUME_RETRY_TAG, ROOT_RUN_ID_TAG

from backfill_assets.backfill_plan import RunPlan
from backfill_assets.catalog import (
    CLI_TAG,
    FCT_DAILY_REVENUE,
    RANGE_END,
    RANGE_START,
    RAW_FX_RATES,
    RAW_ORDERS,
    STG_ORDERS,
    WORKER_TAG,
)
from backfill_assets.cli.main import run_backfill
from backfill_assets.cli.runner import execute, reexecute_from_failure
from backfill_assets.demo.generate import generate_feed, remove_rates
from backfill_assets_testkit.contract_feed import edge_orders, land_decoy
from backfill_assets_testkit.pipeline_env import pipeline_env
from backfill_assets_testkit.reference import Reference

# Runs the pipeline through Dagster on real Spark and Delta: `make test`, not `make test-fast`.
pytestmark = pytest.mark.slow

FEED_START, FEED_END = date(2024, 1, 1), date(2024, 1, 12)
START, END = date(2024, 1, 2), date(2024, 1, 11)
HELD = date(2024, 1, 10)  # its EUR rates of Jan 3..10 are removed; Jan 2 is 8 days back
GOOD = [
    START + timedelta(days=i)
    for i in range((END - START).days + 1)
    if START + timedelta(days=i) != HELD
]


@pytest.fixture(scope="module")
def env(tmp_path_factory, spark):
    root = tmp_path_factory.mktemp("pipeline")
    with pipeline_env(root) as penv:
        generate_feed(penv.settings.landing_dir, FEED_START, FEED_END, orders_per_day=40, seed=11)
        remove_rates(penv.settings.landing_dir, "EUR", HELD - timedelta(days=7), HELD)
        # Files with zero records, which the contract allows: they add no row anywhere and must
        # hold no day (the arrival's window is Jan 1..5).
        empty = penv.settings.landing_dir / "orders" / "arrival_date=2024-01-05"
        (empty / "zz-empty.jsonl").write_text("")
        (empty / "zz-blank-lines.jsonl").write_text("\n  \r\n\t\n")
        # Orders at the contract's edges, beside them, in a file named with a ":" (which Hadoop's
        # paths cannot hold).
        (empty / "zz-edges-10:00.jsonl").write_text("\n".join(edge_orders(date(2024, 1, 5))) + "\n")
        land_decoy(empty / "zz-edges-10:00.jsonl")  # deeper down, named like it: not landed
        yield penv


@pytest.fixture(scope="module")
def reference(env):
    return Reference(env.settings.landing_dir, env.settings.max_lateness_days)


@pytest.fixture(scope="module")
def first_backfill(env):
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = run_backfill(env.settings, START, END)
    return code, out.getvalue()


def test_reference_agrees_the_day_lacks_a_rate(reference):
    _, held = reference.staging([HELD - timedelta(days=1), HELD, HELD + timedelta(days=1)])
    assert held == {HELD}


def test_backfill_exits_1_naming_the_held_day(first_backfill):
    code, output = first_backfill
    assert code == 1
    assert f"stg_orders {HELD}: fx_rate_present" in output
    assert f"fct_daily_revenue {HELD}" in output
    for day in GOOD:
        assert f"stg_orders {day}" not in output.split("held or not published")[-1]


def test_progress_counts_partitions_and_rows_through_the_range(reference, first_backfill):
    import re

    _, output = first_backfill
    progress = re.findall(
        r"^\[(\d+)/(\d+)\] (\S+): run \w+ \w+; ([\d,]+) rows published; "
        r"elapsed \d+s, ~\d+s remaining$",
        output,
        flags=re.MULTILINE,
    )
    assert [p[2] for p in progress] == [
        "raw_orders",
        "raw_fx_rates",
        "stg_orders+fct_daily_revenue",
    ]
    done = [int(p[0]) for p in progress]
    assert done == sorted(done) and done[-1] == int(progress[-1][1])
    staging, _ = reference.staging(GOOD)
    expected = len(staging) + len(reference.fact(GOOD))  # the rows of the days published
    assert int(progress[-1][3].replace(",", "")) == expected


def test_failed_reconciliation_is_not_retried(env, first_backfill):
    from dagster._core.events import DagsterEventType

    failed = env.instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE]))
    assert failed, "the held day should fail its run"
    for run in failed:
        retries = env.instance.all_logs(run.run_id, of_type=DagsterEventType.STEP_UP_FOR_RETRY)
        assert retries == []
        assert "dagster/retry_number" not in run.tags


def test_raw_and_quarantine_equal_the_contract(env, reference, first_backfill):
    arrivals = [d for d in reference.arrival_dates if START <= d <= END + timedelta(days=7)]
    expected = reference.expected(arrivals)
    raw = [r for r in env.rows("raw/orders") if r["arrival_date"] in arrivals]
    assert Counter(
        (r["arrival_date"], r["source_file"], r["line_number"], r["payload"]) for r in raw
    ) == Counter(
        (r.arrival_date, r.source_file, r.line_number, r.payload) for r in expected.raw_orders
    )
    # raw's own "_" columns: each record's verdict, as the contract's rules give it.
    assert Counter(
        (r["arrival_date"], r["source_file"], r["line_number"], r["_reason"]) for r in raw
    ) == Counter(
        (rec.raw.arrival_date, rec.raw.source_file, rec.raw.line_number, rec.reason)
        for a in arrivals
        for rec in reference.records(a)
    )
    quarantine = env.rows("quarantine/orders")
    assert Counter(
        (r["arrival_date"], r["line_number"], r["source_file"], r["reason"]) for r in quarantine
    ) == Counter(
        (q.arrival_date, q.line_number, q.source_file, q.reason) for q in expected.quarantine
    )
    assert {q.reason for q in expected.quarantine} >= {
        "malformed_json",
        "invalid_value",
        "too_late",
    }


def test_records_at_the_contracts_edges_are_judged_as_the_contract_says(env, first_backfill):
    # From the contract's words, not the reference: a timestamp is valid up to the last
    # microsecond of year 9999, and a JSON number amount is judged by its own text as written.
    reasons = {
        json.JSONDecoder().raw_decode(r["payload"])[0]["order_id"]: r["reason"]
        for r in env.rows("quarantine/orders")
        if r["source_file"].endswith("zz-edges-10:00.jsonl")
    }
    assert reasons == {
        "edge-latest-event": "future_event",
        "edge-nested-1": "invalid_value",
        "edge-closing-a-wrapper": "malformed_json",
    }
    staged = {
        r["order_id"]: (r["event_date"], r["updated_at"].replace(tzinfo=None), r["amount_usd"])
        for r in env.rows("staging/orders")
        if r["customer_id"] == "C-edge"
    }
    jan5 = date(2024, 1, 5)
    assert staged == {
        "edge-latest-update": (jan5, datetime(9999, 12, 31, 23, 59, 59, 999999), Decimal("10.00")),
        "edge-nested-2": (jan5, datetime(2024, 1, 5, 10), Decimal("10.00")),
    }


def test_raw_keeps_each_records_verdict_and_typed_fields_as_the_contract_gives_them(
    env, reference, first_backfill
):
    """raw/orders' ``_`` columns, which staging reads: each record's verdict, and for a valid
    record its typed fields, equal to the reference implementation's."""
    arrivals = [d for d in reference.arrival_dates if START <= d <= END + timedelta(days=7)]
    names = (
        "order_id",
        "customer_id",
        "event_time",
        "event_date",
        "updated_at",
        "status",
        "amount",
        "currency",
        "country",
    )
    kept = Counter(
        (
            r["arrival_date"],
            r["source_file"],
            r["line_number"],
            r["_reason"],
            *(r["_" + n] if r["_reason"] is None else None for n in names),
        )
        for r in env.rows("raw/orders")
        if r["arrival_date"] in arrivals
    )
    expected = Counter(
        (
            rec.raw.arrival_date,
            rec.raw.source_file,
            rec.raw.line_number,
            rec.reason,
            *(rec.fields[n] if rec.reason is None else None for n in names),
        )
        for a in arrivals
        for rec in reference.records(a)
    )
    assert kept == expected
    assert {key[3] is None for key in expected} == {True, False}  # valid and rejected records both


# docs/contract.md "The tables (output)", spelled in Delta's type names: the tables as written
# on disk.
CONTRACT_TABLES = {
    "raw/orders": (
        "arrival_date",
        [
            ("arrival_date", "date"),
            ("source_file", "string"),
            ("line_number", "long"),
            ("payload", "string"),
        ],
    ),
    "quarantine/orders": (
        "arrival_date",
        [
            ("arrival_date", "date"),
            ("source_file", "string"),
            ("line_number", "long"),
            ("reason", "string"),
            ("payload", "string"),
        ],
    ),
    "staging/orders": (
        "event_date",
        [
            ("order_id", "string"),
            ("customer_id", "string"),
            ("event_time", "timestamp"),
            ("event_date", "date"),
            ("updated_at", "timestamp"),
            ("status", "string"),
            ("amount", "decimal(18,2)"),
            ("currency", "string"),
            ("country", "string"),
            ("usd_per_unit", "decimal(18,8)"),
            ("amount_usd", "decimal(18,2)"),
        ],
    ),
    "fact/daily_revenue": (
        "event_date",
        [
            ("event_date", "date"),
            ("country", "string"),
            ("orders", "long"),
            ("placed_orders", "long"),
            ("paid_orders", "long"),
            ("cancelled_orders", "long"),
            ("revenue_usd", "decimal(18,2)"),
        ],
    ),
}


def test_written_tables_have_the_contracts_columns_types_and_partitioning(env, first_backfill):
    from deltalake import DeltaTable

    for table, (partitioned_by, columns) in CONTRACT_TABLES.items():
        written = DeltaTable(str(env.settings.lake_dir / table))
        fields = [(f.name, f.type.type) for f in written.schema().fields]
        # The contract's columns, in order; any extra column's name starts with "_".
        assert fields[: len(columns)] == columns, table
        assert all(name.startswith("_") for name, _ in fields[len(columns) :]), table
        assert written.metadata().partition_columns == [partitioned_by], table


def test_staging_writes_each_published_day_as_one_file(env, first_backfill):
    """Staging's write takes the rows where its dedupe left them (by blocks of days, each
    task's sorted by day): a day in two pieces of a task, or in two tasks, would be two files."""
    from deltalake import DeltaTable

    files = DeltaTable(str(env.settings.lake_dir / "staging/orders")).file_uris()
    per_day = Counter(f.split("event_date=")[1][:10] for f in files)
    assert per_day == Counter({str(d): 1 for d in GOOD})


def test_raw_keeps_its_rejected_records_in_row_groups_of_their_own(env, first_backfill):
    """The quarantine's split filters raw on ``_reason``: each row group of raw's files holds
    either rejected records alone or valid ones alone, so the filter skips the others."""
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    kinds = Counter()
    for uri in DeltaTable(str(env.settings.lake_dir / "raw/orders")).file_uris():
        meta = pq.ParquetFile(uri.removeprefix("file://")).metadata
        index = meta.schema.names.index("_reason")
        for g in range(meta.num_row_groups):
            rows, nulls = meta.row_group(g).num_rows, meta.row_group(g).column(index).statistics
            kinds[
                "valid"
                if nulls.null_count == rows
                else "rejected"
                if not nulls.null_count
                else "mixed"
            ] += 1
    assert kinds["mixed"] == 0 and kinds["valid"] and kinds["rejected"], kinds


def test_staging_equals_the_contract_and_skips_the_held_day(env, reference, first_backfill):
    expected, held = reference.staging(GOOD)
    assert held == set()
    actual = [r for r in env.rows("staging/orders")]
    assert HELD not in {r["event_date"] for r in actual}

    def key(r):
        return (r["event_date"], r["order_id"])

    by_key = {key(r): r for r in actual}
    assert len(by_key) == len(actual) == len(expected)
    for row in expected:
        got = by_key[(row.event_date, row.order_id)]
        assert (got["status"], got["amount"], got["currency"], got["country"]) == (
            row.status,
            row.amount,
            row.currency,
            row.country,
        )
        assert got["usd_per_unit"] == row.usd_per_unit and got["amount_usd"] == row.amount_usd
        assert got["updated_at"].replace(tzinfo=None) == row.updated_at.replace(tzinfo=None)


def test_fact_equals_totals_computed_from_the_landed_records(env, reference, first_backfill):
    expected = {(f.event_date, f.country): f for f in reference.fact(GOOD)}
    actual = {(r["event_date"], r["country"]): r for r in env.rows("fact/daily_revenue")}
    assert set(actual) == set(expected)
    for k, f in expected.items():
        got = actual[k]
        assert (
            got["orders"],
            got["placed_orders"],
            got["paid_orders"],
            got["cancelled_orders"],
        ) == (f.orders, f.placed_orders, f.paid_orders, f.cancelled_orders)
        assert got["revenue_usd"] == f.revenue_usd
    assert sum(f.revenue_usd for f in expected.values()) > Decimal(0)


def test_dagster_materializations_agree_with_the_lake(env, first_backfill):
    def published(key):
        return {date.fromisoformat(p) for p in env.instance.get_materialized_partitions(key)}

    assert (
        published(STG_ORDERS) == set(GOOD) == {r["event_date"] for r in env.rows("staging/orders")}
    )
    assert (
        published(FCT_DAILY_REVENUE)
        == set(GOOD)
        == {r["event_date"] for r in env.rows("fact/daily_revenue")}
    )
    assert {START - timedelta(days=7), END} <= published(RAW_FX_RATES)


def test_checks_recorded_per_partition(env, first_backfill):
    storage = env.instance.event_log_storage
    keys = [
        dg.AssetCheckKey(STG_ORDERS, "fx_rate_present"),
        dg.AssetCheckKey(FCT_DAILY_REVENUE, "totals_match_staging"),
    ]
    status = {
        (i.check_key.name, i.partition_key): i.latest_execution_status.value
        for i in storage.get_asset_check_partition_info(keys)
    }
    assert status[("fx_rate_present", HELD.isoformat())] == "FAILED"
    for day in GOOD:
        assert status[("fx_rate_present", day.isoformat())] == "SUCCEEDED"
        assert status[("totals_match_staging", day.isoformat())] == "SUCCEEDED"
    assert status.get(("totals_match_staging", HELD.isoformat())) in (None, "PLANNED", "SKIPPED"), (
        status.get(("totals_match_staging", HELD.isoformat()))
    )


def test_one_partition_rebuilt_twice_leaves_the_same_rows(env, first_backfill):
    before = env.multiset("raw/orders")
    day = START + timedelta(days=1)
    for _ in range(2):
        outcome = execute(RunPlan((RAW_ORDERS,), day, day), env.instance)
        assert outcome.success and set(outcome.published[RAW_ORDERS]) == {day}
    assert env.multiset("raw/orders") == before


def test_backfilling_the_range_again_leaves_identical_tables(env, first_backfill):
    tables = [
        "raw/orders",
        "quarantine/orders",
        "raw/fx_rates",
        "staging/orders",
        "fact/daily_revenue",
    ]
    before = {t: env.multiset(t) for t in tables}
    assert run_backfill(env.settings, START, END) == 1
    assert {t: env.multiset(t) for t in tables} == before


def test_status_shows_published_rows_and_the_held_day(env, reference, first_backfill, capsys):
    from backfill_assets.cli.status import print_status

    assert print_status(env.settings, START, END) == 0
    out = capsys.readouterr().out.splitlines()
    days_table = out[1 : out.index("")]  # the months follow, after a blank line
    lines = {line.split()[0]: line for line in days_table}
    assert "HELD fx_rate_present" in lines[HELD.isoformat()]
    day = GOOD[0]
    staging_rows = len(reference.staging([day])[0])
    assert f"published {staging_rows}" in lines[day.isoformat()]


def assert_grouped_as_the_ui_groups(
    instance: dg.DagsterInstance, run_id: str, parent: dg.DagsterRun, root: dg.DagsterRun
) -> dg.DagsterRun:
    """The run re-executes ``parent`` from failure in ``root``'s run group, as the UI's "Re-execute
    from failure" would have made it: linked, tagged, and with the parent's own tags."""
    run = instance.get_run_by_id(run_id)
    assert run is not None
    assert (run.parent_run_id, run.root_run_id) == (parent.run_id, root.run_id)
    assert {k: run.tags.get(k) for k in (PARENT_RUN_ID_TAG, ROOT_RUN_ID_TAG, RESUME_RETRY_TAG)} == {
        PARENT_RUN_ID_TAG: parent.run_id,
        ROOT_RUN_ID_TAG: root.run_id,
        RESUME_RETRY_TAG: "true",
    }
    for key in (RANGE_START, RANGE_END, CLI_TAG):
        assert run.tags[key] == root.tags[key], key
    assert WORKER_TAG in run.tags
    return run


def test_reexecution_from_failure_redoes_only_the_held_day(env, reference, first_backfill):
    failed = next(
        r
        for r in env.instance.get_runs(
            filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE])
        )
        if "stg_orders" in str(r.asset_selection)
    )
    # Too early: the rate is still missing, so the day is held again.
    early = reexecute_from_failure(env.instance, failed.run_id)
    assert not early.success and set(early.held) == {HELD}
    retry = assert_grouped_as_the_ui_groups(env.instance, early.run_id, failed, failed)

    folder = env.settings.landing_dir / "fx_rates" / f"rate_date={HELD.isoformat()}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "zz_eur_restated.csv").write_text("currency,usd_per_unit\nEUR,1.09500000\n")
    assert execute(RunPlan((RAW_FX_RATES,), HELD, HELD), env.instance).success

    outcome = reexecute_from_failure(env.instance, early.run_id)
    assert outcome.success, outcome.error
    assert_grouped_as_the_ui_groups(env.instance, outcome.run_id, retry, failed)
    root, group = env.instance.get_run_group(outcome.run_id)
    assert root == failed.run_id
    assert sorted(r.run_id for r in group) == sorted([failed.run_id, early.run_id, outcome.run_id])
    assert outcome.published == {
        STG_ORDERS: {HELD: outcome.published[STG_ORDERS][HELD]},
        FCT_DAILY_REVENUE: {HELD: outcome.published[FCT_DAILY_REVENUE][HELD]},
    }
    fresh = Reference(env.settings.landing_dir, env.settings.max_lateness_days)
    expected = {(f.event_date, f.country): f.revenue_usd for f in fresh.fact([HELD])}
    actual = {
        (r["event_date"], r["country"]): r["revenue_usd"]
        for r in env.rows("fact/daily_revenue")
        if r["event_date"] == HELD
    }
    assert actual == expected and expected


def test_a_late_order_rebuilds_the_fact_and_reports_its_delta(env, first_backfill):
    day, arrival = date(2024, 1, 4), date(2024, 1, 6)
    before = {f.country: f for f in Reference(env.settings.landing_dir, 7).fact([day])}
    late = env.settings.landing_dir / "orders" / f"arrival_date={arrival}" / "zz_late.jsonl"
    late.write_text(
        '{"order_id":"late-1","customer_id":"c-late","event_time":"2024-01-04T12:00:00Z",'
        '"updated_at":"2024-01-06T08:00:00Z","status":"paid","amount":"100.00",'
        '"currency":"USD","country":"US"}\n'
    )
    after = {f.country: f for f in Reference(env.settings.landing_dir, 7).fact([day])}
    assert sum(f.orders for f in after.values()) == sum(f.orders for f in before.values()) + 1

    assert execute(RunPlan((RAW_ORDERS,), arrival, arrival), env.instance).success
    assert execute(RunPlan((STG_ORDERS, FCT_DAILY_REVENUE), day, day), env.instance).success
    records = env.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=FCT_DAILY_REVENUE, asset_partitions=[day.isoformat()]),
        limit=1,
    ).records
    metadata = records[0].asset_materialization.metadata

    def revenue(facts):
        return sum((f.revenue_usd for f in facts.values()), Decimal(0))

    assert metadata["orders_delta"].value == 1
    assert (
        Decimal(metadata["revenue_usd_delta"].value)
        == revenue(after) - revenue(before)
        == Decimal("100.00")
    )
    assert metadata["replaced_delta_version"].value >= 0


def test_a_landed_file_missing_from_raw_holds_the_event_day(env, first_backfill):
    day, arrival = date(2024, 1, 5), date(2024, 1, 7)
    staging_before = [r for r in env.rows("staging/orders") if r["event_date"] == day]
    unbuilt = (
        env.settings.landing_dir / "orders" / f"arrival_date={arrival}" / "zz_not_in_raw.jsonl"
    )
    unbuilt.write_text(
        '{"order_id":"late-2","customer_id":"c","event_time":"2024-01-05T01:00:00Z",'
        '"updated_at":"2024-01-07T01:00:00Z","status":"placed","amount":"5",'
        '"currency":"USD","country":"US"}\n'
    )
    outcome = execute(RunPlan((STG_ORDERS, FCT_DAILY_REVENUE), day, day), env.instance)
    assert not outcome.success
    assert outcome.failed_checks[STG_ORDERS] == {day: ["window_complete"]}
    assert outcome.published == {}
    assert [r for r in env.rows("staging/orders") if r["event_date"] == day] == staging_before


def test_an_arrival_whose_quarantine_does_not_match_raw_holds_its_event_days(
    env, spark, first_backfill
):
    """A raw rebuild that committed the quarantine and stopped before raw: staging must not
    build from an arrival whose raw and quarantine do not add up."""
    from backfill_assets.catalog import QUARANTINE_TABLE
    from backfill_assets.lake import CommitInfo, Lake
    from backfill_assets.transforms.schemas import QUARANTINE_ORDERS

    day, arrival = date(2024, 1, 11), date(2024, 1, 12)
    staging_before = [r for r in env.rows("staging/orders") if r["event_date"] == day]
    assert staging_before
    assert any(r["arrival_date"] == arrival for r in env.rows("quarantine/orders"))
    lake = Lake(env.settings.lake_dir, spark)
    lake.replace_partitions(
        QUARANTINE_TABLE.path,
        spark.createDataFrame([], QUARANTINE_ORDERS),
        "arrival_date",
        [arrival],
        CommitInfo(run_id="test", code_version="test"),
    )
    outcome = execute(RunPlan((STG_ORDERS, FCT_DAILY_REVENUE), day, day), env.instance)
    assert not outcome.success
    assert outcome.failed_checks[STG_ORDERS] == {day: ["window_complete"]}
    assert [r for r in env.rows("staging/orders") if r["event_date"] == day] == staging_before

    assert execute(RunPlan((RAW_ORDERS,), arrival, arrival), env.instance).success  # the repair
    assert execute(RunPlan((STG_ORDERS, FCT_DAILY_REVENUE), day, day), env.instance).success
    assert Counter(
        r["order_id"] for r in env.rows("staging/orders") if r["event_date"] == day
    ) == Counter(r["order_id"] for r in staging_before)
