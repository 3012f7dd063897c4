"""Spark schemas of the contract's tables and a pandera schema for staging/orders.

Column names, types and order follow /work/shared/CONTRACT.md exactly. Every
field is declared nullable: null-ness is a data rule, checked by pandera and
the reconciliation checks, not something Delta should enforce with NOT NULL
constraints that differ between the contract and its reference implementation.
"""

from __future__ import annotations

import pandera.pyspark as pa
import pyspark.sql.types as T

MONEY = T.DecimalType(18, 2)
RATE = T.DecimalType(18, 8)


def _struct(*fields: tuple[str, T.DataType]) -> T.StructType:
    return T.StructType([T.StructField(name, dtype, nullable=True) for name, dtype in fields])


RAW_ORDERS = _struct(
    ("arrival_date", T.DateType()),
    ("source_file", T.StringType()),
    ("line_number", T.LongType()),
    ("payload", T.StringType()),
)

QUARANTINE_ORDERS = _struct(
    ("arrival_date", T.DateType()),
    ("source_file", T.StringType()),
    ("line_number", T.LongType()),
    ("reason", T.StringType()),
    ("payload", T.StringType()),
)

# Not specified by the contract beyond "one row per landed rate line".
RAW_FX_RATES = _struct(
    ("rate_date", T.DateType()),
    ("source_file", T.StringType()),
    ("line_number", T.LongType()),
    ("currency", T.StringType()),
    ("usd_per_unit", T.StringType()),
    ("payload", T.StringType()),
)

STAGING_ORDERS = _struct(
    ("order_id", T.StringType()),
    ("customer_id", T.StringType()),
    ("event_time", T.TimestampType()),
    ("event_date", T.DateType()),
    ("updated_at", T.TimestampType()),
    ("status", T.StringType()),
    ("amount", MONEY),
    ("currency", T.StringType()),
    ("country", T.StringType()),
    ("usd_per_unit", RATE),
    ("amount_usd", MONEY),
)

DAILY_REVENUE = _struct(
    ("event_date", T.DateType()),
    ("country", T.StringType()),
    ("orders", T.LongType()),
    ("placed_orders", T.LongType()),
    ("paid_orders", T.LongType()),
    ("cancelled_orders", T.LongType()),
    ("revenue_usd", MONEY),
)

STATUSES = ("placed", "paid", "cancelled")
# pandera compiles patterns with Python `re` and runs them with Java regex; `(?![\s\S])`
# means "end of input" in both (Java's `$` would also accept "USD\n").
_END = r"(?![\s\S])"


class StagingOrdersModel(pa.DataFrameModel):
    """staging/orders as published: every row typed, complete and priced."""

    order_id: T.StringType() = pa.Field(
        nullable=False, str_length={"min_value": 1, "max_value": 64}
    )
    customer_id: T.StringType() = pa.Field(nullable=False, str_length={"min_value": 1})
    event_time: T.TimestampType() = pa.Field(nullable=False)
    event_date: T.DateType() = pa.Field(nullable=False)
    updated_at: T.TimestampType() = pa.Field(nullable=False)
    status: T.StringType() = pa.Field(nullable=False, isin=list(STATUSES))
    amount: T.DecimalType(18, 2) = pa.Field(nullable=False, ge=0)
    currency: T.StringType() = pa.Field(nullable=False, str_matches=r"^[A-Z]{3}" + _END)
    country: T.StringType() = pa.Field(nullable=False, str_matches=r"^[A-Z]{2}" + _END)
    usd_per_unit: T.DecimalType(18, 8) = pa.Field(nullable=False, gt=0)
    amount_usd: T.DecimalType(18, 2) = pa.Field(nullable=False, ge=0)

    class Config:
        strict = True
        unique = ("event_date", "order_id")


STAGING_SCHEMA = StagingOrdersModel


def validate_staging_schema(df) -> list[str]:
    """Human-readable pandera errors for a staging/orders DataFrame; [] when it is valid."""
    checked = STAGING_SCHEMA.validate(check_obj=df)
    errors = checked.pandera.errors or {}
    messages: list[str] = []
    for depth, by_type in errors.items():
        for error_type, entries in by_type.items():
            for entry in entries:
                messages.append(
                    f"{depth}/{error_type}: {entry.get('column')}: {entry.get('check')}: "
                    f"{entry.get('error')}"
                )
    return messages
