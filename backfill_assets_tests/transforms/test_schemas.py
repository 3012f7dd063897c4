"""Contract schemas' column names and types, and the pandera schema of staging/orders: its
schema-level check, and its data rules counted per event day by the staging stats."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

from pyspark.sql import functions as F

from backfill_assets.transforms.audit import staging_stats
from backfill_assets.transforms.schemas import (
    DAILY_REVENUE,
    QUARANTINE_ORDERS,
    RAW_ORDERS,
    STAGING_ORDERS,
)
from backfill_assets.transforms.staging_rules import staging_schema_errors
from backfill_assets_testkit.spark_jobs import jobs_started

DAYS = [date(2024, 1, day) for day in (1, 2, 3)]


def _columns(schema) -> list[str]:
    return [f"{f.name} {f.dataType.simpleString()}" for f in schema.fields]


def test_schemas_spell_the_contract():
    assert _columns(RAW_ORDERS) == [
        "arrival_date date", "source_file string", "line_number bigint", "payload string",
    ]  # fmt: skip
    assert _columns(QUARANTINE_ORDERS) == [
        "arrival_date date", "source_file string", "line_number bigint", "reason string",
        "payload string",
    ]  # fmt: skip
    assert _columns(STAGING_ORDERS) == [
        "order_id string", "customer_id string", "event_time timestamp", "event_date date",
        "updated_at timestamp", "status string", "amount decimal(18,2)", "currency string",
        "country string", "usd_per_unit decimal(18,8)", "amount_usd decimal(18,2)",
    ]  # fmt: skip
    assert _columns(DAILY_REVENUE) == [
        "event_date date", "country string", "orders bigint", "placed_orders bigint",
        "paid_orders bigint", "cancelled_orders bigint", "revenue_usd decimal(18,2)",
    ]  # fmt: skip


def _row(
    order_id="o-1",
    status="paid",
    amount="12.50",
    currency="EUR",
    country="DE",
    rate="1.1",
    day=1,
    customer="c-1",
):
    at = datetime(2024, 1, day, 10, 0)
    rate_value = None if rate is None else Decimal(rate)
    return (order_id, customer, at, date(2024, 1, day), at, status, Decimal(amount), currency,
            country, rate_value, Decimal("13.75"))  # fmt: skip


def broken_columns(stats: dict, day: int) -> set[str]:
    return {rule.split(":")[0] for rule in stats[date(2024, 1, day)]["rule_violations"]}


def test_valid_staging_has_no_errors(spark):
    df = spark.createDataFrame([_row(), _row("o-2", day=2), _row("o-3", rate=None)], STAGING_ORDERS)
    assert staging_schema_errors(df) == []  # a missing rate is fx_rate_present's to report
    stats = staging_stats(df, DAYS)
    assert broken_columns(stats, 1) == broken_columns(stats, 2) == set()


def test_rule_breaks_are_counted_on_their_own_day_and_name_their_columns(spark):
    df = spark.createDataFrame(
        [
            _row("o-1", currency="EURO"),
            _row("o-2", country="DE\n"),
            _row("o-3", status="shipped"),
            _row("o-4", rate="0"),
            _row("o-5", customer=""),
            _row("o-6", rate=None),  # no rate: fx_rate_present's, not the schema's
            _row("o-7", day=2),
            _row("x" * 65, day=3),
        ],
        STAGING_ORDERS,
    )
    stats = staging_stats(df, DAYS)
    assert broken_columns(stats, 1) == {
        "currency",
        "country",
        "status",
        "usd_per_unit",
        "customer_id",
    }
    assert sum(stats[date(2024, 1, 1)]["rule_violations"].values()) == 5
    assert broken_columns(stats, 2) == set()  # a good day beside a bad one stays good
    assert broken_columns(stats, 3) == {"order_id"}
    assert stats[date(2024, 1, 1)]["without_rate"] == 1


def test_schema_level_errors_name_missing_and_mistyped_columns(spark):
    df = spark.createDataFrame([_row()], STAGING_ORDERS)
    wrong = df.drop("country").withColumn("status", F.col("status").cast("binary"))
    errors = staging_schema_errors(wrong)
    assert {e.split(": ")[1] for e in errors} == {"country", "status"}
    assert all(e.startswith("SCHEMA/") for e in errors)


def test_the_schema_level_check_runs_no_spark_job(spark):
    """The schema-level check reads the frame's schema only: no Spark job (pandera's own
    not-null check would run one per column, even on no rows)."""
    df = spark.createDataFrame([_row(), _row("o-2", day=2)], STAGING_ORDERS)
    with jobs_started(spark) as jobs:
        assert staging_schema_errors(df) == []
        assert staging_schema_errors(df.drop("country")) != []
    assert jobs == []
