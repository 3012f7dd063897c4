"""Daily revenue: per (event_date, country) order counts by final status and exact paid revenue."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

from backfill_assets.transforms.revenue import daily_revenue
from backfill_assets.transforms.schemas import DAILY_REVENUE, STAGING_ORDERS

D1, D2 = date(2024, 1, 1), date(2024, 1, 2)


def _staging(order_id: str, day: date, country: str, status: str, amount_usd: str):
    at = datetime(day.year, day.month, day.day, 12, 0)
    usd = Decimal(amount_usd)
    return (order_id, "c-1", at, day, at, status, usd, "USD", country, Decimal(1), usd)


def test_daily_revenue_counts_statuses_and_sums_paid_orders(spark):
    staging = spark.createDataFrame(
        [
            _staging("a", D1, "DE", "paid", "10.01"),
            _staging("b", D1, "DE", "paid", "0.01"),
            _staging("c", D1, "DE", "placed", "5.00"),
            _staging("d", D1, "DE", "cancelled", "3.00"),
            _staging("e", D1, "FR", "placed", "7.50"),
            _staging("f", D1, "FR", "cancelled", "1.00"),
            _staging("g", D2, "DE", "paid", "99999999999999.99"),
            _staging("h", D2, "DE", "paid", "0.01"),
        ],
        STAGING_ORDERS,
    )

    fact = daily_revenue(staging)

    assert [(f.name, f.dataType) for f in fact.schema] == [
        (f.name, f.dataType) for f in DAILY_REVENUE
    ]
    assert sorted(tuple(r) for r in fact.collect()) == [
        (D1, "DE", 4, 1, 2, 1, Decimal("10.02")),
        (D1, "FR", 2, 1, 0, 1, Decimal("0.00")),
        (D2, "DE", 2, 0, 2, 0, Decimal("100000000000000.00")),
    ]
