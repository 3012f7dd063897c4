"""Staging checks, evaluated on each event day before it is published."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, timedelta

import dagster as dg
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from backfill_assets.defs.publishing import CheckOutcome
from backfill_assets.transforms.schemas import staging_row_rules

STG_ORDERS = dg.AssetKey("stg_orders")

UNIQUE_ORDER_IDS = "unique_order_ids"
ONE_ROW_PER_VALID_ORDER = "one_row_per_valid_order"
FX_RATE_PRESENT = "fx_rate_present"
WINDOW_COMPLETE = "window_complete"
MATCHES_SCHEMA = "matches_contract_schema"

STAGING_CHECKS = [
    dg.AssetCheckSpec(UNIQUE_ORDER_IDS, asset=STG_ORDERS, blocking=True,
                      description="staging[D] has unique order_ids."),
    dg.AssetCheckSpec(ONE_ROW_PER_VALID_ORDER, asset=STG_ORDERS, blocking=True,
                      description="staging[D] has one row per distinct order_id among the valid "
                      "records with event date D in its arrival window."),
    dg.AssetCheckSpec(FX_RATE_PRESENT, asset=STG_ORDERS, blocking=True,
                      description="Every order of D has a USD rate of its currency on D "
                      "(no rate: the day is held, never published with a guess)."),
    dg.AssetCheckSpec(WINDOW_COMPLETE, asset=STG_ORDERS, blocking=True,
                      description="staging[D] was built from every landed file of the arrival "
                      "dates D .. D + max lateness (the raw layer is up to date)."),
    dg.AssetCheckSpec(MATCHES_SCHEMA, asset=STG_ORDERS, blocking=True,
                      description="staging[D] satisfies the contract's pandera schema: its "
                      "columns and types, and every priced row each of the model's data rules."),
]


def staging_stats(staging: DataFrame) -> dict[date, dict]:
    """Per event day: rows, distinct order ids, the orders lacking a rate (first few shown),
    and how many priced rows break each data rule of the contract's schema (an order without a
    rate is fx_rate_present's to report, not the schema's).

    Two plain aggregations, per (day, order id) then per day, rather than a distinct count
    beside the others (which makes Spark expand and shuffle every row twice); staging arrives
    partitioned by (day, order id) from its dedupe, so the first needs no shuffle."""
    no_rate = F.col("usd_per_unit").isNull() | F.col("amount_usd").isNull()
    rules = staging_row_rules()
    per_id = staging.groupBy("event_date", "order_id").agg(
        F.count(F.lit(1)).alias("rows"),
        F.sum(F.when(no_rate, 1).otherwise(0)).alias("without_rate"),
        F.max(F.when(no_rate, F.concat_ws(":", "order_id", "currency"))).alias("no_rate_example"),
        *[
            F.sum(F.when(~no_rate & broken, 1).otherwise(0)).alias(f"_rule_{i}")
            for i, broken in enumerate(rules.values())
        ],
    )
    rows = (
        per_id.groupBy("event_date")
        .agg(
            F.sum("rows").alias("rows"),
            F.count(F.lit(1)).alias("distinct_ids"),
            F.sum("without_rate").alias("without_rate"),
            F.slice(F.sort_array(F.collect_list("no_rate_example")), 1, 5).alias("first_without_rate"),
            *[F.sum(f"_rule_{i}").alias(f"_rule_{i}") for i in range(len(rules))],
        )
        .collect()
    )
    stats = {}
    for r in rows:
        broken = {name: r[f"_rule_{i}"] for i, name in enumerate(rules) if r[f"_rule_{i}"]}
        stats[r["event_date"]] = {**{k: r[k] for k in EMPTY_DAY}, "rule_violations": broken}
    return stats


EMPTY_DAY = {"rows": 0, "distinct_ids": 0, "without_rate": 0, "first_without_rate": []}


def valid_order_ids(valid: DataFrame) -> dict[date, int]:
    rows = valid.groupBy("event_date").agg(F.count_distinct("order_id").alias("ids")).collect()
    return {r["event_date"]: r["ids"] for r in rows}


def missing_window_files(
    day: date, lateness: int, landed: Iterable[tuple[date, str]], read: set[tuple[date, str]]
) -> list[str]:
    last = day + timedelta(days=lateness)
    return sorted(f for (a, f) in landed if day <= a <= last and (a, f) not in read)


def staging_outcomes(
    days: list[date],
    stats: dict[date, dict],
    valid_ids: dict[date, int],
    missing_files: dict[date, list[str]],
    schema_errors: list[str],
) -> list[CheckOutcome]:
    outcomes = []
    for day in days:
        s = stats.get(day, {**EMPTY_DAY, "rule_violations": {}})
        violations = s["rule_violations"]
        missing = missing_files.get(day, [])
        outcomes += [
            CheckOutcome(STG_ORDERS, UNIQUE_ORDER_IDS, day, s["rows"] == s["distinct_ids"],
                         {"rows": s["rows"], "distinct_order_ids": s["distinct_ids"]}),
            CheckOutcome(STG_ORDERS, ONE_ROW_PER_VALID_ORDER, day,
                         s["rows"] == valid_ids.get(day, 0),
                         {"expected_rows": valid_ids.get(day, 0), "actual_rows": s["rows"]}),
            CheckOutcome(STG_ORDERS, FX_RATE_PRESENT, day, s["without_rate"] == 0,
                         {"orders_without_rate": s["without_rate"],
                          "first_offending_orders": dg.MetadataValue.json(list(s["first_without_rate"]))}),
            CheckOutcome(STG_ORDERS, WINDOW_COMPLETE, day, not missing,
                         {"landed_files_missing_from_raw": dg.MetadataValue.json(missing[:10]),
                          "missing_count": len(missing)}),
            CheckOutcome(STG_ORDERS, MATCHES_SCHEMA, day, not schema_errors and not violations,
                         {"schema_errors": dg.MetadataValue.json(schema_errors[:10]),
                          "rows_breaking_rules": dg.MetadataValue.json(violations)}),
        ]
    return outcomes
