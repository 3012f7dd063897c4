"""Contract schemas' column names and types, and the pandera check of staging/orders."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

from backfill_assets.transforms.schemas import (
    DAILY_REVENUE,
    QUARANTINE_ORDERS,
    RAW_ORDERS,
    STAGING_ORDERS,
    validate_staging_schema,
)


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


def _row(order_id="o-1", status="paid", amount="12.50", currency="EUR", country="DE", rate="1.1"):
    at = datetime(2024, 1, 1, 10, 0)
    rate_value = None if rate is None else Decimal(rate)
    return (order_id, "c-1", at, date(2024, 1, 1), at, status, Decimal(amount), currency, country,
            rate_value, Decimal("13.75"))  # fmt: skip


def test_valid_staging_has_no_errors(spark):
    assert validate_staging_schema(spark.createDataFrame([_row()], STAGING_ORDERS)) == []


def test_staging_errors_name_the_broken_columns(spark):
    broken = spark.createDataFrame(
        [
            _row("o-1", currency="EURO"),
            _row("o-2", country="DE\n"),
            _row("o-3", status="shipped"),
            _row("o-4", rate=None),
            _row("o-5"),
            _row("o-5"),
        ],
        STAGING_ORDERS,
    )
    text = "\n".join(validate_staging_schema(broken))
    for column in ("currency", "country", "status", "usd_per_unit"):
        assert column in text
    assert "Duplicated rows [1]" in text and "'order_id'" in text
    assert "amount_usd" not in text and "customer_id" not in text
