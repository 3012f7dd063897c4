"""The contract's staging invariant, per day: unique order ids, one per distinct order id among
the valid records of that day. A day that breaks it is held alone; its neighbours pass."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

from backfill_assets.defs.event_days.checks import ONE_ROW_PER_VALID_ORDER, UNIQUE_ORDER_IDS
from backfill_assets.defs.event_days.staging import StagingBuild
from backfill_assets.defs.publishing import held_days
from backfill_assets.transforms.schemas import STAGING_ORDERS

GOOD, DUPLICATED, SHORT = date(2024, 3, 1), date(2024, 3, 2), date(2024, 3, 3)

# (event day, order id) of the valid records (two versions of b-1) and of the staged rows
VALID = [(GOOD, "a-1"), (GOOD, "a-2"), (DUPLICATED, "b-1"), (DUPLICATED, "b-1"), (DUPLICATED, "b-2"),
         (SHORT, "c-1"), (SHORT, "c-2")]
STAGED = [(GOOD, "a-1"), (GOOD, "a-2"),
          (DUPLICATED, "b-1"), (DUPLICATED, "b-1"), (DUPLICATED, "b-2"),  # b-1 staged twice
          (SHORT, "c-1")]  # c-2 lost


def _row(day: date, order_id: str) -> tuple:
    ts = datetime(day.year, day.month, day.day, 9)
    return (order_id, "c-9", ts, day, ts, "paid", Decimal("10.00"), "EUR", "DE",
            Decimal("1.10000000"), Decimal("11.00"))


def test_a_duplicated_or_a_lost_order_holds_its_day_alone(spark):
    days = [GOOD, DUPLICATED, SHORT]
    valid_ids = {d: len({o for day, o in VALID if day == d}) for d in days}
    build = StagingBuild(spark.createDataFrame([], STAGING_ORDERS), {}, valid_ids,
                         {d: [] for d in days}, [])
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
