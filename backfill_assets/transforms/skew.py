"""Partition-key skew: which keys are hot, and the salt that spreads a hot key's rows.

A key (an event date, a country, a customer) is **hot** when it holds more than a configured
share of the rows (``BACKFILL_HOT_KEY_SHARE``, 0.2) and more than three times an even share
(1 / keys): a 30% country among seven is the usual shape of the data, not skew, and a range
of two days has no hot day.

Where a hot key hurts staging: no shuffle of staging is keyed by customer (the FX join is a
broadcast), and the LTV pre-aggregates per (customer, day) before its per-customer window; the
shuffles keyed by a partition key are the dedupe and the write, which send each block of event
dates to one task (``day_blocks``). The mitigation is a salted write: rows are sent by
(event_date, a hash of the row modulo ``BACKFILL_SALT_BUCKETS``), so a heavy day is written by
several tasks, as several files, and the dedupe goes by (event_date, order_id), which spreads
the heavy day too. Same rows, more files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from backfill_assets.transforms.audit import ids_per_day

EVEN_SHARE_FACTOR = 3


@dataclass(frozen=True)
class KeyShare:
    key: str
    value: object  # None: the NULL bucket
    rows: int
    share: float
    hot: bool


def is_hot(rows: int, total: int, keys: int | None, threshold: float) -> bool:
    """Above ``threshold`` of ``total`` and above three times an even share of ``keys``
    (``keys`` None: too many to matter)."""
    if not total:
        return False
    share = rows / total
    return share > threshold and (keys is None or share > EVEN_SHARE_FACTOR / keys)


def shares(
    key: str, counts: Mapping[object, int], threshold: float, top: int = 5, keys: int | None = -1
) -> tuple[list[KeyShare], KeyShare]:
    """The ``top`` values of ``key`` by rows and its NULL bucket (always shown), each flagged
    hot or not; ``keys`` -1: the distinct values of ``counts``."""
    total = sum(counts.values())
    n = len([v for v in counts if v is not None]) if keys == -1 else keys

    def share(value: object) -> KeyShare:
        rows = counts.get(value, 0)
        hot = value is not None and is_hot(rows, total, n, threshold)
        return KeyShare(key, value, rows, rows / total if total else 0.0, hot)

    ranked = sorted((v for v in counts if v is not None), key=lambda v: (-counts[v], str(v)))
    return [share(v) for v in ranked[:top]], share(None)


@dataclass(frozen=True)
class StagingKeys:
    """What the skew plan's aggregations of staging's input say: distinct order ids and records
    per event day, and the records of the customers with at least one record per day of the
    range."""

    valid_ids: dict[date, int]
    rows_per_day: dict[date, int]
    heavy_customers: dict[str, int]

    def hot(self, threshold: float) -> list[str]:
        """The hot keys, as ``key=value`` (empty: nothing to mitigate)."""
        total = sum(self.rows_per_day.values())
        days = len(self.rows_per_day)
        return [
            f"event_date={d}"
            for d, n in sorted(self.rows_per_day.items())
            if is_hot(n, total, days, threshold)
        ] + [
            f"customer_id={c}"
            for c, n in sorted(self.heavy_customers.items())
            if is_hot(n, total, None, threshold)
        ]


def staging_keys(valid: DataFrame, days: list[date]) -> StagingKeys:
    """Distinct order ids and records per event day, and the customers with at least as many
    records as ``days`` has days: hash aggregations of ``valid`` (``ids_per_day``, and rows
    per customer). Not one over grouping sets with a distinct count, which expands every row
    once per set and again for the distinct count."""
    per_day = ids_per_day(valid, days)
    heavy = valid.groupBy("customer_id").count().where(F.col("count") >= F.lit(len(days))).collect()
    return StagingKeys(
        {day: ids for day, (ids, _) in per_day.items()},
        {day: rows for day, (_, rows) in per_day.items()},
        {r["customer_id"]: r["count"] for r in heavy},
    )
