"""Spark schemas of the contract's tables (staging/orders' pandera rules: ``staging_rules.py``).

Column names, types and order follow docs/contract.md exactly. Every
field is declared nullable: null-ness is a data rule, checked by pandera and
the reconciliation checks, not something Delta should enforce with NOT NULL
constraints that differ between the contract and its reference implementation.
"""

from __future__ import annotations

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
# Beside raw rows as the landing reader gives them, not in raw/orders: False where the line's
# bytes are not UTF-8 (its payload shows them as U+FFFD). Such a line is malformed JSON.
UTF8_COLUMN = "_utf8"

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

# The columns of staging/orders that FX conversion adds; the others are the order's own fields.
PRICED_COLUMNS = ("usd_per_unit", "amount_usd")
ORDER_FIELDS = [f for f in STAGING_ORDERS.fields if f.name not in PRICED_COLUMNS]

# What raw/orders stores beside the contract's columns (named with a leading "_", as the
# contract asks of extra columns): each record's verdict (NULL: valid), the checksum of its
# landed line as read, and its typed fields. The raw step reads the landing text once; the
# quarantine is split from raw's staged files, the checksum proves those files against what
# was read, and staging reads the valid records' typed fields from here.
RAW_ORDERS_PARSED = [
    *_struct(("_reason", T.StringType()), ("_line_hash", T.DecimalType(20, 0))).fields,
    *[T.StructField("_" + f.name, f.dataType, True) for f in ORDER_FIELDS],
]
RAW_ORDERS_STORED = T.StructType(RAW_ORDERS.fields + RAW_ORDERS_PARSED)

DAILY_REVENUE = _struct(
    ("event_date", T.DateType()),
    ("country", T.StringType()),
    ("orders", T.LongType()),
    ("placed_orders", T.LongType()),
    ("paid_orders", T.LongType()),
    ("cancelled_orders", T.LongType()),
    ("revenue_usd", MONEY),
)

# Extensions of the contract, downstream of the daily fact (transforms/ltv.py).
CUSTOMER_LTV = _struct(
    ("as_of_date", T.DateType()),
    ("customer_id", T.StringType()),
    ("orders", T.LongType()),
    ("paid_orders", T.LongType()),
    ("lifetime_revenue_usd", MONEY),
    ("first_order_date", T.DateType()),
    ("last_order_date", T.DateType()),
)

# Staging enriched with the customer's segment as of the event day (transforms/enrichment.py),
# and the cache of the segment service's answers that it is built from.
ENRICHED_ORDERS = T.StructType(
    STAGING_ORDERS.fields
    + _struct(
        ("customer_segment", T.StringType()),
        ("_segment_as_of", T.DateType()),
    ).fields
)

CUSTOMER_SEGMENTS = _struct(
    ("customer_id", T.StringType()),
    ("valid_from", T.DateType()),
    ("segment", T.StringType()),
    ("_history_entries", T.IntegerType()),
)

MONTHLY_REVENUE = _struct(
    ("month", T.DateType()),
    ("country", T.StringType()),
    ("orders", T.LongType()),
    ("paid_orders", T.LongType()),
    ("revenue_usd", MONEY),
)

STATUSES = ("placed", "paid", "cancelled")
