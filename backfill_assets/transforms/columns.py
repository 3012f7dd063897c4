"""What each column of each table means, in the words of docs/contract.md.

The Dagster UI shows these in the Columns panel of each asset's page (see
``asset_events/lineage.column_schema``). Kept apart from the StructTypes so that the
schemas Spark and Delta compare stay plain names and types.
"""

from __future__ import annotations

import pyspark.sql.types as T

from backfill_assets.catalog import (
    CUSTOMER_LTV_TABLE,
    CUSTOMER_SEGMENTS_TABLE,
    ENRICHED_TABLE,
    FACT_TABLE,
    MONTHLY_REVENUE_TABLE,
    QUARANTINE_TABLE,
    RAW_FX_RATES_TABLE,
    RAW_ORDERS_TABLE,
    STAGING_TABLE,
)
from backfill_assets.transforms import schemas

_LANDED = {
    "source_file": "The landing file the line came from, as a path relative to the landing root.",
    "payload": "The landed line, verbatim.",
}
_RECORD = {
    "arrival_date": "The date of the arrival_date= landing folder the record landed in (UTC): the "
    "partition.",
    **_LANDED,
    "line_number": "The record's line number in its file, counted from 1 (blank lines included).",
}
_ORDER = {
    "order_id": "The order: a non-empty string of at most 64 characters.",
    "customer_id": "Who placed the order: a non-empty string.",
    "event_time": "When the order was placed (event_time as an instant, kept to the microsecond).",
    "event_date": "The UTC calendar date of event_time: the order's event day.",
    "updated_at": "When this version of the order was produced (an instant); the latest version "
    "wins.",
    "status": "The order's status in this version: placed, paid or cancelled.",
    "amount": "The amount in currency: landed as up to 12 digits, optionally a point and 1 or 2 "
    "decimals.",
    "currency": "The ISO currency code of amount, three upper-case letters.",
    "country": "The ISO country code, two upper-case letters.",
}
_PRICED = {
    "usd_per_unit": "The rate of currency on the event day: from the latest rate date at most 7 "
    "days before it that lists the currency (USD is 1).",
    "amount_usd": "amount times usd_per_unit, rounded half-up to the cent.",
}

_STAGING = {
    **_ORDER,
    "order_id": "The order: one row per order_id and event day, the greatest version by "
    "(updated_at, arrival_date, source_file, line_number).",
    "event_date": "The UTC calendar date of event_time: the partition.",
    **_PRICED,
}

DESCRIPTIONS: dict[str, tuple[T.StructType, dict[str, str]]] = {
    RAW_ORDERS_TABLE.path: (
        schemas.RAW_ORDERS_STORED,
        {
            **_RECORD,
            "_reason": "Not in the contract: why the record was rejected (as in the quarantine "
            "table), NULL when it is valid.",
            "_line_hash": "Not in the contract: the checksum of (line_number, payload) as the "
            "line was read from the landing file, which the raw_matches_landing check "
            "compares with the payload stored.",
            **{
                f"_{name}": f"Not in the contract: {name} as parsed (NULL when the record is "
                "rejected or the field breaks its rule). " + text
                for name, text in _ORDER.items()
            },
        },
    ),
    QUARANTINE_TABLE.path: (
        schemas.QUARANTINE_ORDERS,
        {
            **_RECORD,
            "reason": "Why the record was rejected, the first that applies: malformed_json, "
            "missing_field, invalid_value, future_event, too_late.",
        },
    ),
    RAW_FX_RATES_TABLE.path: (
        schemas.RAW_FX_RATES,
        {
            "rate_date": "The date of the rate_date= landing folder the rates were published for: "
            "the partition.",
            **_LANDED,
            "line_number": "The line's number in its file, counted from 1 (the header is line 1).",
            "currency": "The text before the first comma, as landed; a rate only if it is three "
            "upper-case letters. NULL when the file's first line is not the header.",
            "usd_per_unit": "The text after the first comma, as landed; a rate only if it is up "
            "to 6 digits, optionally a point and 1 to 8 decimals, and above 0. NULL without "
            "a comma or a header.",
        },
    ),
    STAGING_TABLE.path: (schemas.STAGING_ORDERS, dict(_STAGING)),
    ENRICHED_TABLE.path: (
        schemas.ENRICHED_ORDERS,
        {
            **_STAGING,
            "customer_segment": "The customer's segment on the event day, per the segment "
            "service: the segment of their latest history entry valid from event_date or "
            "earlier, never today's. NULL when the customer had no entry yet on that day.",
            "_segment_as_of": "The valid_from date of that history entry (at most event_date); "
            "NULL with a NULL segment.",
        },
    ),
    CUSTOMER_SEGMENTS_TABLE.path: (
        schemas.CUSTOMER_SEGMENTS,
        {
            "customer_id": "The customer: every customer asked of the segment service has all of "
            "their history entries here.",
            "valid_from": "The first day the entry's segment holds: the partition. One row per "
            "(customer_id, valid_from).",
            "segment": "The customer's segment from valid_from until their next entry.",
            "_history_entries": "How many entries the customer's whole history has: a customer "
            "with fewer rows here (a commit that lost a race rewrote one partition without "
            "theirs) counts as not cached, and is asked again.",
        },
    ),
    FACT_TABLE.path: (
        schemas.DAILY_REVENUE,
        {
            "event_date": "The event day: the partition.",
            "country": "The ISO country code of the orders counted in this row.",
            "orders": "The staging orders of this day and country.",
            "placed_orders": "Those orders whose final status is placed.",
            "paid_orders": "Those orders whose final status is paid.",
            "cancelled_orders": "Those orders whose final status is cancelled.",
            "revenue_usd": "The sum of amount_usd over the paid orders, to the cent.",
        },
    ),
    CUSTOMER_LTV_TABLE.path: (
        schemas.CUSTOMER_LTV,
        {
            "as_of_date": "D: the partition. One row per customer with at least one staging order "
            "of event date D.",
            "customer_id": "The customer.",
            "orders": "The customer's staging orders with event date from the first partition "
            "(BACKFILL_START_DATE) to D.",
            "paid_orders": "Those orders whose final status is paid.",
            "lifetime_revenue_usd": "The sum of amount_usd over those paid orders, to the cent.",
            "first_order_date": "The event date of the customer's first staging order.",
            "last_order_date": "The event date of the customer's latest staging order up to D (D "
            "itself).",
        },
    ),
    MONTHLY_REVENUE_TABLE.path: (
        schemas.MONTHLY_REVENUE,
        {
            "month": "The month's first day: the partition.",
            "country": "The ISO country code of the orders counted in this row.",
            "orders": "The daily fact's orders of this country, summed over the month's days.",
            "paid_orders": "Its paid orders, summed over the month's days.",
            "revenue_usd": "Its paid revenue in USD, summed over the month's days, to the cent.",
        },
    ),
}


def column_descriptions(struct: T.StructType) -> dict[str, str]:
    """The descriptions of a table's columns, found by its schema; {} for a schema not listed."""
    for table_struct, texts in DESCRIPTIONS.values():
        if table_struct == struct:
            return texts
    return {}
