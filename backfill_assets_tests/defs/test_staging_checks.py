"""The contract's staging invariant, per day: unique order ids, one per distinct order id among
the valid records of that day. A day that breaks it is held alone; its neighbours pass. And the
arrivals staging must not build from (raw and quarantine out of step), and a raw table
without its parsed columns refused with a clear error."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

import dagster as dg
import pytest

from backfill_assets.event_days.outcomes import ONE_ROW_PER_VALID_ORDER, UNIQUE_ORDER_IDS
from backfill_assets.event_days.staging_orders import (
    StagingBuild,
    raw_arrivals,
    require_parsed_columns,
    unsplit_arrivals,
)
from backfill_assets.publishing.publication import held_days
from backfill_assets.transforms.schemas import RAW_ORDERS, RAW_ORDERS_STORED, STAGING_ORDERS

GOOD, DUPLICATED, SHORT = date(2024, 3, 1), date(2024, 3, 2), date(2024, 3, 3)

# (event day, order id) of the valid records (two versions of b-1) and of the staged rows
VALID = [
    (GOOD, "a-1"),
    (GOOD, "a-2"),
    (DUPLICATED, "b-1"),
    (DUPLICATED, "b-1"),
    (DUPLICATED, "b-2"),
    (SHORT, "c-1"),
    (SHORT, "c-2"),
]
STAGED = [
    (GOOD, "a-1"),
    (GOOD, "a-2"),
    (DUPLICATED, "b-1"),
    (DUPLICATED, "b-1"),
    (DUPLICATED, "b-2"),  # b-1 staged twice
    (SHORT, "c-1"),
]  # c-2 lost


def _row(day: date, order_id: str) -> tuple:
    ts = datetime(day.year, day.month, day.day, 9)
    return (
        order_id,
        "c-9",
        ts,
        day,
        ts,
        "paid",
        Decimal("10.00"),
        "EUR",
        "DE",
        Decimal("1.10000000"),
        Decimal("11.00"),
    )


def test_a_duplicated_or_a_lost_order_holds_its_day_alone(spark):
    days = [GOOD, DUPLICATED, SHORT]
    valid_ids = {d: len({o for day, o in VALID if day == d}) for d in days}
    build = StagingBuild(
        spark.createDataFrame([], STAGING_ORDERS), {}, valid_ids, {d: [] for d in days}, []
    )
    outcomes = build.audit(days, spark.createDataFrame([_row(*r) for r in STAGED], STAGING_ORDERS))

    expected = {}
    for d in days:
        staged_ids = [o for day, o in STAGED if day == d]
        if len(staged_ids) != len(set(staged_ids)):
            expected.setdefault(d, set()).add(f"stg_orders.{UNIQUE_ORDER_IDS}")
        if len(staged_ids) != valid_ids[d]:
            expected.setdefault(d, set()).add(f"stg_orders.{ONE_ROW_PER_VALID_ORDER}")
    assert {d: set(checks) for d, checks in held_days(outcomes).items()} == expected
    assert set(expected) == {DUPLICATED, SHORT}  # the fixture does break the rule on both days


A1, A2, A3, A4 = (date(2024, 3, d) for d in (4, 5, 6, 7))


def _stored(arrival: date, line: int, reason: str | None) -> tuple:
    """A raw/orders row as stored: the record, its verdict and checksum; typed fields NULL."""
    extra = len(RAW_ORDERS_STORED.fields) - len(RAW_ORDERS.fields) - 2
    return (
        arrival,
        f"orders/arrival_date={arrival}/a.jsonl",
        line,
        "{}",
        reason,
        Decimal(line),
        *[None] * extra,
    )


def test_arrivals_whose_raw_and_quarantine_disagree_are_named(spark):
    rows = [
        _stored(A1, 1, None),
        _stored(A1, 2, "malformed_json"),  # 1 rejected, 1 quarantined
        _stored(A2, 1, "too_late"),
        _stored(A2, 2, "invalid_value"),  # 2 rejected, 1 quarantined
        _stored(A3, 1, None),
        _stored(A3, 2, None),
    ]  # none rejected, 2 quarantined (a newer split)
    quarantine = {A1: 1, A2: 1, A3: 2, A4: 3}  # A4: quarantine rows, raw none
    read = raw_arrivals(spark.createDataFrame(rows, RAW_ORDERS_STORED))

    assert read.files == {(a, f"orders/arrival_date={a}/a.jsonl") for a in (A1, A2, A3)}
    assert set(unsplit_arrivals([A1, A2, A3, A4], read, quarantine)) == {A2, A3, A4}


def test_a_raw_table_written_before_its_parsed_columns_is_refused_saying_how_to_rebuild_it(spark):
    old = spark.createDataFrame([(A1, "orders/x.jsonl", 1, "{}")], RAW_ORDERS)
    with pytest.raises(dg.Failure, match="raw/orders predates its parsed columns") as refused:
        require_parsed_columns(old)
    assert "backfill raw_orders" in refused.value.description and not refused.value.allow_retries
    stored = spark.createDataFrame([_stored(A1, 1, None)], RAW_ORDERS_STORED)
    assert require_parsed_columns(stored) is stored
