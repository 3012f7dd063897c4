"""Every name the pipeline shares, spelled once: asset keys, tables, layers, jobs, run tags.

A leaf module: it imports nothing of the project, so everything may import it. No other
module spells a table path, an asset key, a job's name or a run tag.
"""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg


@dataclass(frozen=True)
class Table:
    """A Delta table under the lake root, and the date column it is partitioned by."""

    path: str
    partition_column: str


# The contract's tables (docs/architecture.md, docs/contract.md).
RAW_ORDERS_TABLE = Table("raw/orders", "arrival_date")
QUARANTINE_TABLE = Table("quarantine/orders", "arrival_date")
RAW_FX_RATES_TABLE = Table("raw/fx_rates", "rate_date")
STAGING_TABLE = Table("staging/orders", "event_date")
FACT_TABLE = Table("fact/daily_revenue", "event_date")
# Downstream of the daily fact (docs/contract.md, "Extensions"): a stateful table and a report.
CUSTOMER_LTV_TABLE = Table("fact/customer_ltv", "as_of_date")
MONTHLY_REVENUE_TABLE = Table("fact/monthly_revenue", "month")
# Staging enriched with each customer's segment as of the event day, and the cache of the
# segment service's answers it is built from, keyed by (customer_id, valid_from).
ENRICHED_TABLE = Table("staging/orders_enriched", "event_date")
CUSTOMER_SEGMENTS_TABLE = Table("staging/customer_segments", "valid_from")

# Asset keys, in layer order.
RAW_ORDERS = dg.AssetKey("raw_orders")
RAW_FX_RATES = dg.AssetKey("raw_fx_rates")
STG_ORDERS = dg.AssetKey("stg_orders")
STG_ORDERS_ENRICHED = dg.AssetKey("stg_orders_enriched")
FCT_DAILY_REVENUE = dg.AssetKey("fct_daily_revenue")
# Every correction, one partition each (its id): state, who, when, why (corrections/events.py).
CORRECTIONS = dg.AssetKey("corrections")
CORRECTIONS_PARTITIONS = "corrections"
FCT_CUSTOMER_LTV = dg.AssetKey("fct_customer_ltv")
RPT_MONTHLY_REVENUE = dg.AssetKey("rpt_monthly_revenue")
# The daily layers (a column per layer in the CLI's per-day tables); the monthly report apart.
LAYERS = (
    RAW_ORDERS,
    RAW_FX_RATES,
    STG_ORDERS,
    FCT_DAILY_REVENUE,
    FCT_CUSTOMER_LTV,
    STG_ORDERS_ENRICHED,
)
MONTHLY_ASSETS = (RPT_MONTHLY_REVENUE,)

# What each asset writes; the first table is the one its partitions are counted in.
ASSET_TABLES: dict[dg.AssetKey, tuple[Table, ...]] = {
    RAW_ORDERS: (RAW_ORDERS_TABLE, QUARANTINE_TABLE),
    RAW_FX_RATES: (RAW_FX_RATES_TABLE,),
    STG_ORDERS: (STAGING_TABLE,),
    STG_ORDERS_ENRICHED: (ENRICHED_TABLE, CUSTOMER_SEGMENTS_TABLE),
    FCT_DAILY_REVENUE: (FACT_TABLE,),
    FCT_CUSTOMER_LTV: (CUSTOMER_LTV_TABLE,),
    RPT_MONTHLY_REVENUE: (MONTHLY_REVENUE_TABLE,),
}

# Every table of the lake, for whatever runs over all of them (maintenance).
LAKE_TABLES: tuple[Table, ...] = tuple(dict.fromkeys(t for ts in ASSET_TABLES.values() for t in ts))

# The landing datasets (see ``landing.layout``) and the raw asset that copies each.
ORDERS_DATASET, FX_RATES_DATASET = "orders", "fx_rates"
RAW_ASSET_OF_DATASET = {ORDERS_DATASET: RAW_ORDERS, FX_RATES_DATASET: RAW_FX_RATES}

# Steps: the unit a run request names. Staging and fact are one step (defs/event_days/).
RAW_ORDERS_STEP, RAW_FX_RATES_STEP, EVENT_DAYS_STEP = "raw_orders", "raw_fx_rates", "event_days"
EVENT_DAYS_OP = "staging_and_fact"  # the event days' op, whose config is the correction form
CUSTOMER_LTV_STEP, MONTHLY_REVENUE_STEP = "customer_ltv", "monthly_revenue"
ENRICH_STEP = "enrich_orders"
STEP_ASSETS: dict[str, tuple[dg.AssetKey, ...]] = {
    RAW_ORDERS_STEP: (RAW_ORDERS,),
    RAW_FX_RATES_STEP: (RAW_FX_RATES,),
    EVENT_DAYS_STEP: (STG_ORDERS, FCT_DAILY_REVENUE),
    CUSTOMER_LTV_STEP: (FCT_CUSTOMER_LTV,),
    ENRICH_STEP: (STG_ORDERS_ENRICHED,),
    MONTHLY_REVENUE_STEP: (RPT_MONTHLY_REVENUE,),
}
RAW_STEP_OF_DATASET = {ORDERS_DATASET: RAW_ORDERS_STEP, FX_RATES_DATASET: RAW_FX_RATES_STEP}

# The three asset jobs: every daily layer's, the monthly report's and the one that builds
# corrections beside production; then the sensors and schedules that request their runs.
BACKFILL_JOB = "backfill_job"
CORRECTION_JOB = "correction_job"
# A correction from the UI as `correct` runs it: the form's job records the request, and the
# sensor runs raw over the range, then correction_job (defs/corrections/ui_requests.py).
CORRECTION_START_JOB = "correction_start_job"
CORRECTION_REQUEST_SENSOR = "correction_requests"
# A built correction's actions from the UI (defs/corrections/jobs.py): a job of one op each.
CORRECTION_DIFF_JOB = "correction_diff_job"
CORRECTION_CUTOVER_JOB = "correction_cutover_job"
CORRECTION_ROLLBACK_JOB = "correction_rollback_job"
CORRECTION_DISCARD_JOB = "correction_discard_job"
MONTHLY_JOB = "monthly_report_job"  # a job's assets share one partitioning: the months apart
STEP_JOBS = {MONTHLY_REVENUE_STEP: MONTHLY_JOB}  # the job of a step's runs, when not BACKFILL_JOB
LATE_DATA_SENSOR = "late_data_sensor"
DOWNSTREAM_SENSOR = "downstream_refresh"
FOLLOW_UP_SENSOR = "daily_refresh_follow_up"
DAILY_SCHEDULE = "daily_refresh"
RELEASE_SENSOR = "release_dead_runs"  # fails runs whose process died, frees their pool slots
# Lake upkeep (vacuum, compaction, checkpoints): its job, its one op, its weekly schedule.
MAINTENANCE_JOB = "lake_maintenance_job"
MAINTENANCE_OP = "maintain_lake"
MAINTENANCE_SCHEDULE = "weekly_lake_maintenance"

# Run tags. Dagster's own pair makes a run ranged; ours say who asked and why.
RANGE_START = "dagster/asset_partition_range_start"
RANGE_END = "dagster/asset_partition_range_end"
REQUEST_TAG = "backfill_assets/request"  # the request's key: one run per detection
WHY_TAG = "backfill_assets/why"
FOLLOW_UP_TAG = "backfill_assets/follow_up"  # on the schedule's raw run: follow it up
EVENT_DAYS_TAG = "backfill_assets/event_days"  # on that run: "first..last" event days
# On a CLI backfill's raw runs, FOLLOW_UP_TAG's other value: the backfill's own staging run
# (same PLAN_TAG) follows them, and EVENT_DAYS_TAG spans the event days they reach.
FOLLOWED_BY_PLAN = "plan"
PLAN_TAG = "backfill_assets/plan"  # the backfill invocation a run belongs to
CLI_TAG = "backfill_assets/cli"  # the command that started the run
CORRECTION_TAG = "backfill_assets/correction"  # the correction a run builds (nothing published)
CORRECTION_REASON_TAG = "backfill_assets/correction_reason"
# On a correction_start_job run: the range ("first..last") and the rebuild box of the request.
CORRECTION_RANGE_TAG = "backfill_assets/correction_range"
CORRECTION_REBUILD_TAG = "backfill_assets/correction_rebuild"
WORKER_TAG = "backfill_assets/worker"  # host:pid:start of the process executing the run
CURSOR_KEY = "backfill_assets/late_data_cursor"  # catch-up's cursor while the sensor has none
