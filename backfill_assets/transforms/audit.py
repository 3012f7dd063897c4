"""The per-partition figures the checks compare, as Spark aggregations: one pass per side,
collected small, returned as plain Python values (no Dagster).

Each check compares an expected side with an actual side and shows both in Dagster; these
functions compute the sides. Raw: per-file record counts and order-independent checksums of
(line number, payload), and counts by reason. Staging: rows, distinct ids, orders without a
rate and rule violations per event day. The fact's totals per event day are ``totals.py``'s.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Collection, Mapping
from datetime import date
from decimal import Decimal

from pyspark.sql import Column, DataFrame, Row, Window
from pyspark.sql import functions as F

from backfill_assets.day_blocks import BLOCK, by_day_blocks
from backfill_assets.transforms.ltv import daily_contributions
from backfill_assets.transforms.totals import MONTHLY_FIELDS, ZERO, normalised

FileKey = tuple[date, str]


def _hash64() -> Column:
    return F.xxhash64(F.col("line_number"), F.col("payload"))


def line_hash() -> Column:
    """A record's hash: its line number and payload (summed per file, order-independent)."""
    return _hash64().cast("decimal(20,0)")


def checksum_sums(hashes: Column, name: str) -> list[Column]:
    """The exact sum of the 64-bit ``hashes`` as two BIGINT sums: ``<name>_high``, of each
    hash's upper 32 bits (signed), and ``<name>_low``, of its lower 32 bits. Spark adds longs
    in its generated code, where a DECIMAL(20,0) sum adds a BigDecimal per row; ``checksum_of``
    joins the two. Exact for fewer than 2^31 rows per group."""
    bits = hashes.cast("bigint")
    return [
        F.sum(F.shiftright(bits, 32)).alias(f"{name}_high"),
        F.sum(bits.bitwiseAND(F.lit(0xFFFFFFFF))).alias(f"{name}_low"),
    ]


def checksum_of(sums: Row | Mapping[str, int | None], name: str) -> int:
    """The sum ``checksum_sums`` took as ``name``, from a row or an observation (0: no rows)."""
    return (sums[f"{name}_high"] or 0) * 2**32 + (sums[f"{name}_low"] or 0)


def line_fingerprints(df: DataFrame, partition_column: str) -> dict[FileKey, tuple[int, int]]:
    """(partition, source_file) -> (records, order-free checksum of line numbers and payloads)."""
    rows = (
        df.groupBy(F.col(partition_column).alias("partition"), F.col("source_file"))
        .agg(F.count(F.lit(1)).alias("records"), *checksum_sums(_hash64(), "checksum"))
        .collect()
    )
    return {
        (r["partition"], r["source_file"]): (r["records"], checksum_of(r, "checksum")) for r in rows
    }


def stored_fingerprints(
    df: DataFrame, partition_column: str, column: str
) -> tuple[dict[FileKey, tuple[int, int]], dict[date, dict], dict[FileKey, tuple[int, int]]]:
    """From rows read back that carry the ``line_hash`` their line had when it was read, in one
    pass: the fingerprints of the lines as read (the stored hashes), ``counts_by(column)``, and
    the fingerprints of the lines as stored (``line_hash()`` of the payloads read back)."""
    rows = (
        df.groupBy(F.col(partition_column).alias("partition"), "source_file", column)
        .agg(
            F.count(F.lit(1)).alias("records"),
            *checksum_sums(F.col("line_hash"), "read"),
            *checksum_sums(_hash64(), "stored"),
        )
        .collect()
    )
    read: dict[FileKey, tuple[int, int]] = {}
    stored: dict[FileKey, tuple[int, int]] = {}
    counts: dict[date, dict] = defaultdict(lambda: defaultdict(int))
    for r in rows:
        key = (r["partition"], r["source_file"])
        for side, name in ((read, "read"), (stored, "stored")):
            records, total = side.get(key, (0, 0))
            side[key] = (records + r["records"], total + checksum_of(r, name))
        counts[r["partition"]][r[column]] += r["records"]
    return read, {day: dict(by_value) for day, by_value in counts.items()}, stored


def counts_by(df: DataFrame, partition_column: str, column: str) -> dict[date, dict[str, int]]:
    """partition -> {value of ``column``: rows}."""
    out: dict[date, dict[str, int]] = defaultdict(dict)
    for r in df.groupBy(partition_column, column).count().collect():
        out[r[partition_column]][r[column]] = r["count"]
    return out


def rows_per_partition(
    fingerprints: dict[FileKey, tuple[int, int]],
) -> dict[date, int]:
    totals: dict[date, int] = defaultdict(int)
    for (partition, _), (records, _) in fingerprints.items():
        totals[partition] += records
    return totals


def staging_stats(
    staging: DataFrame, days: Collection[date], history: DataFrame | None = None
) -> dict[date, dict]:
    """Per event day: rows, distinct order ids, the orders lacking a rate and those whose
    amount_usd does not fit DECIMAL(18,2) (first few of each shown), how many priced rows break
    each data rule of the contract's schema (an order that cannot be priced is fx_rate_present's
    or amount_usd_fits' to report, not the schema's), and what the warning checks watch:
    orders by status and by currency, paid orders and their USD revenue (counted by row: the
    same as by order id on a day whose ids are unique, and a day whose are not is held).

    Two aggregations Spark runs hash-based, each a pass over the narrow columns it reads: the
    distinct ids per day (``ids_per_day``), and the rest per (day, status, currency, the rules
    the row breaks), folded per day here. The rules a row breaks are one number, a bit per rule
    (``broken_rules``), so the aggregation keeps a row count and one sum, not a count per rule.
    Not a distinct count beside the other figures, which makes Spark expand and shuffle every
    row twice, nor one aggregation per order id carrying its status, whose string maximum
    makes Spark sort every row instead of hashing, nor the unpriced orders' ids collected in
    the pass, which makes Spark keep every group's list as an object: a day with an order that
    cannot be priced, which is held, has them read by a query of its own (``_unpriced_orders``).
    ``history``, published staging rows of other days (the warning checks' trailing days),
    joins the same passes."""
    if history is not None:
        staging = staging.unionByName(history.select(*staging.columns))
    from backfill_assets.transforms.staging_rules import staging_row_rules  # pandera: 0.6 s

    rules = staging_row_rules()
    paid = F.col("status") == F.lit("paid")
    rows = (
        staging.groupBy("event_date", "status", "currency", broken_rules(rules).alias("broken"))
        .agg(
            F.count(F.lit(1)).alias("rows"),
            F.sum(F.when(paid, F.col("amount_usd"))).alias("paid_usd"),
        )
        .collect()
    )
    stats: dict[date, dict] = {}
    for day, (ids, _) in ids_per_day(staging, days).items():
        stats.setdefault(day, _empty_stats())["distinct_ids"] = ids
    unpriced: set[date] = set()
    for r in rows:
        s = stats.setdefault(r["event_date"], _empty_stats())
        s["rows"] += r["rows"]
        if r["broken"] in UNPRICED:
            s[UNPRICED[r["broken"]]] += r["rows"]
            unpriced.add(r["event_date"])
        else:
            for i, name in enumerate(rules):
                if r["broken"] >> i & 1:
                    s["rule_violations"][name] = s["rule_violations"].get(name, 0) + r["rows"]
        s["statuses"][r["status"]] = s["statuses"].get(r["status"], 0) + r["rows"]
        s["currencies"][r["currency"]] = s["currencies"].get(r["currency"], 0) + r["rows"]
        if r["status"] == "paid":
            s["paid_orders"] += r["rows"]
            s["paid_usd"] += r["paid_usd"] or 0
    for day, first in _unpriced_orders(staging, unpriced).items():
        stats[day].update(first)
    return stats


# ``broken_rules`` of a row that cannot be priced, and the count of the day's stats it adds to:
# the data rules judge priced rows only.
WITHOUT_RATE, TOO_LARGE = -1, -2
UNPRICED = {WITHOUT_RATE: "without_rate", TOO_LARGE: "too_large"}


def _without_rate() -> Column:
    return F.col("usd_per_unit").isNull()


def _unpriced() -> Column:
    """No rate, or a rate and no amount_usd: the product does not fit DECIMAL(18,2)."""
    return _without_rate() | F.col("amount_usd").isNull()


def broken_rules(rules: dict[str, Column]) -> Column:
    """The rules of ``rules`` a row breaks, as a number whose bit i is rule i (0: none);
    ``WITHOUT_RATE`` or ``TOO_LARGE`` for a row that cannot be priced, whose rules are not
    counted (fx_rate_present's or amount_usd_fits' to report, not the schema's)."""
    if len(rules) > 62:
        raise ValueError(f"{len(rules)} rules do not fit the bits of one BIGINT")
    bits = [
        F.when(rule, F.lit(1 << i)).otherwise(F.lit(0)) for i, rule in enumerate(rules.values())
    ]
    broken = functools.reduce(Column.bitwiseOR, bits, F.lit(0)).cast("bigint")
    return (
        F.when(_without_rate(), F.lit(WITHOUT_RATE).cast("bigint"))
        .when(_unpriced(), F.lit(TOO_LARGE).cast("bigint"))
        .otherwise(broken)
    )


def _unpriced_orders(
    staging: DataFrame, days: set[date], first: int = 5
) -> dict[date, dict[str, list[str]]]:
    """Per day of ``days``: the ``first`` "order_id:currency" of its rows without a rate, and
    of those whose amount_usd does not fit, sorted (``first_without_rate``, ``first_too_large``)."""
    if not days:
        return {}
    label = F.concat_ws(":", "order_id", "currency")

    def first_of(rows: Column) -> Column:
        return F.slice(F.sort_array(F.collect_list(F.when(rows, label))), 1, first)

    found = (
        staging.filter(F.col("event_date").isin(sorted(days)) & _unpriced())
        .groupBy("event_date")
        .agg(
            first_of(_without_rate()).alias("first_without_rate"),
            first_of(~_without_rate()).alias("first_too_large"),
        )
        .collect()
    )
    return {
        r["event_date"]: {k: list(r[k]) for k in ("first_without_rate", "first_too_large")}
        for r in found
    }


def _empty_stats() -> dict:
    return {
        **EMPTY_DAY,
        "rule_violations": {},
        "statuses": {},
        "currencies": {},
        "paid_orders": 0,
        "paid_usd": Decimal("0.00"),
    }


EMPTY_DAY = {
    "rows": 0,
    "distinct_ids": 0,
    "without_rate": 0,
    "first_without_rate": [],
    "too_large": 0,
    "first_too_large": [],
}


def ids_per_day(df: DataFrame, days: Collection[date]) -> dict[date, tuple[int, int]]:
    """Per event day: (distinct order ids, rows), by two hash aggregations (rows per (day,
    order id), then per day); a NULL order id counts as one id. The rows go by blocks of
    ``days`` (``day_blocks``), so each task's hash table holds a block's ids, not a share of
    the range's."""
    blocks = by_day_blocks(df.select("event_date", "order_id"), "event_date", days)
    rows = (
        blocks.groupBy(BLOCK, "event_date", "order_id")
        .count()
        .groupBy("event_date")
        .agg(F.count(F.lit(1)).alias("ids"), F.sum("count").alias("rows"))
        .collect()
    )
    return {r["event_date"]: (r["ids"], r["rows"]) for r in rows}


def valid_order_ids(valid: DataFrame, days: Collection[date]) -> dict[date, int]:
    return {day: ids for day, (ids, _) in ids_per_day(valid, days).items()}


EMPTY_LTV_DAY = {
    "customers": 0,
    "contributors": 0,
    "wrong_rows": 0,
    "decreasing_rows": 0,
    "first_wrong": [],
    **{k: ZERO[k] for k in MONTHLY_FIELDS},
}


def ltv_audit(staged: DataFrame, seed: DataFrame, staging: DataFrame) -> dict[date, dict]:
    """Per as_of_date of ``staged`` (LTV rows of a range as staged), in one aggregation: the rows
    and the customers with a staging order that day; the rows that are not the customer's
    previous row (their latest earlier one, in ``seed`` or the range) plus that day's
    contribution, or that have no contribution, or customers without a row; the rows whose
    counts or revenue are below the previous row's; and the day's contribution summed over
    customers (the differences to the previous rows), which must equal the day's fact."""
    previous = Window.partitionBy("customer_id").orderBy("as_of_date")
    rows = staged.withColumn("_staged", F.lit(True)).unionByName(
        seed.withColumn("_staged", F.lit(False))
    )
    cumulative = ("orders", "paid_orders", "lifetime_revenue_usd", "first_order_date")
    with_previous = rows.select(
        "*", *[F.lag(c).over(previous).alias(f"prev_{c}") for c in cumulative]
    ).where("_staged")
    contributions = daily_contributions(staging).select(
        "customer_id", "as_of_date", *[F.col(c).alias(f"day_{c}") for c in cumulative[:3]]
    )
    joined = with_previous.join(contributions, ["customer_id", "as_of_date"], "full_outer")

    def after(c: str, zero: object) -> Column:
        return F.coalesce(F.col(f"prev_{c}"), F.lit(zero)) + F.col(f"day_{c}")

    right = (
        F.col("orders").eqNullSafe(after("orders", 0))
        & F.col("paid_orders").eqNullSafe(after("paid_orders", 0))
        & F.col("lifetime_revenue_usd").eqNullSafe(
            after("lifetime_revenue_usd", ZERO["revenue_usd"])
        )
        & F.col("first_order_date").eqNullSafe(F.coalesce("prev_first_order_date", "as_of_date"))
        & F.col("last_order_date").eqNullSafe(F.col("as_of_date"))
    )
    decreasing = F.coalesce(
        (F.col("orders") < F.col("prev_orders"))
        | (F.col("paid_orders") < F.col("prev_paid_orders"))
        | (F.col("lifetime_revenue_usd") < F.col("prev_lifetime_revenue_usd")),
        F.lit(False),
    )

    def gained(c: str, zero: object) -> Column:
        return F.sum(F.col(c) - F.coalesce(F.col(f"prev_{c}"), F.lit(zero)))

    out = (
        joined.groupBy("as_of_date")
        .agg(
            F.count("_staged").alias("customers"),
            F.count("day_orders").alias("contributors"),
            F.count_if(~right).alias("wrong_rows"),
            F.count_if(decreasing).alias("decreasing_rows"),
            F.slice(F.sort_array(F.collect_list(F.when(~right, F.col("customer_id")))), 1, 5).alias(
                "first_wrong"
            ),
            gained("orders", 0).alias("orders"),
            gained("paid_orders", 0).alias("paid_orders"),
            gained("lifetime_revenue_usd", ZERO["revenue_usd"]).alias("revenue_usd"),
        )
        .collect()
    )
    return {
        r["as_of_date"]: {
            **{k: r[k] for k in EMPTY_LTV_DAY if k not in MONTHLY_FIELDS},
            **normalised(r.asDict(), MONTHLY_FIELDS),
        }
        for r in out
    }
