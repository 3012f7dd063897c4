"""``fct_customer_ltv``: customer lifetime value, a whole range in one Spark job.

LTV[D] depends on LTV[D - 1] (Dagster knows it: the asset depends on itself through
``previous_day``), yet a range [S, E] is not E - S + 1 runs in a row: it is one run that reads
the seed (each customer's latest row before S; see ``transforms.ltv`` for why not just the rows
of S - 1) and adds one cumulative window aggregation over the range's published staging.

Held days, named in the run's failure:

- a day D is held when a staging day in [first partition, D] is not published (the reason names
  the first such day); the days of the range before it are built;
- the whole range is held when the seed is not current: some LTV day in [first partition, S - 1]
  is not published, or was published before the staging of a day up to it changed. The range is
  held rather than widened (a run publishes only its own partitions); the reason names the day
  to build from, which is where ``downstream_refresh`` starts its requests;
- a day that fails a check holds the days after it in the range too (they were built on it);
- a day whose staging was republished while it was built is held, and the days after it.
"""

from __future__ import annotations

from datetime import date, timedelta

from pyspark.sql import DataFrame

from backfill_assets.asset_events.lineage import commit_info, write_metadata
from backfill_assets.asset_events.materializations import latest_materializations
from backfill_assets.catalog import (
    CUSTOMER_LTV_TABLE,
    FACT_TABLE,
    FCT_CUSTOMER_LTV,
    STAGING_TABLE,
    STG_ORDERS,
)
from backfill_assets.downstream.downstream_outcomes import ltv_outcomes
from backfill_assets.lake import Lake
from backfill_assets.late_data.stale import first_stale, first_unpublished
from backfill_assets.publishing.publication import Publication
from backfill_assets.settings import Settings
from backfill_assets.transforms.audit import ltv_audit
from backfill_assets.transforms.ltv import customer_ltv, latest_rows
from backfill_assets.transforms.schemas import CUSTOMER_LTV
from backfill_assets.transforms.totals import fact_totals

STAGING, LTV = STG_ORDERS.to_user_string(), FCT_CUSTOMER_LTV.to_user_string()


def buildable_days(step: Publication, settings: Settings, days: list[date]) -> list[date]:
    """The days of the contiguous range ``days`` that can be built; the others held, saying why."""
    instance, start = step.context.instance, settings.start_date
    staging = latest_materializations(instance, STG_ORDERS)
    missing = first_unpublished(start, days[-1], staging)
    if days[0] > start:
        stale = first_stale(
            start,
            days[0] - timedelta(days=1),
            staging,
            latest_materializations(instance, FCT_CUSTOMER_LTV),
        )
        if stale is not None:
            for d in days:
                step.hold(
                    d,
                    f"{LTV} {days[0] - timedelta(days=1)} is not published or older than "
                    f"the staging it sums (first such day {stale}): range held, not widened; "
                    f"build {LTV} from {stale}",
                )
            return []
    if missing is not None:
        for d in days:
            if d >= missing:
                step.hold(d, f"{STAGING} {missing} not published")
    return [d for d in days if missing is None or d < missing]


def publish_ltv(step: Publication, settings: Settings, days: list[date]) -> None:
    """Build, stage, audit and publish LTV of the contiguous ``days`` in one Spark job."""
    days = buildable_days(step, settings, days)
    if not days:
        return
    lake = step.lake
    staging, staging_version = step.read_published(STAGING_TABLE, days, None)
    seed, ltv_version = read_seed(lake, days[0])
    inputs = {STAGING_TABLE.path: staging_version, CUSTOMER_LTV_TABLE.path: ltv_version}
    staged = step.stage(
        CUSTOMER_LTV_TABLE,
        customer_ltv(seed, staging),
        days,
        commit_info(step.context, FCT_CUSTOMER_LTV, days, inputs),
    )
    rows = step.read_staged(staged)
    fact = (
        fact_totals(step.read_published(FACT_TABLE, days, None)[0])
        if lake.exists(FACT_TABLE.path)
        else {}
    )
    passed = step.audit(days, ltv_outcomes(days, ltv_audit(rows, seed, staging), fact))
    moved = lake.changed_since(
        STAGING_TABLE.path, STAGING_TABLE.partition_column, staging_version, days
    )
    good = []
    for d in days:  # a prefix: every later day was built on a held one
        if d not in passed or d in moved:
            why = f"{STAGING} republished while it was built" if d in moved else None
            for later in days[days.index(d) :]:
                step.hold(later, why or f"built on {LTV} {d}, which is held")
            break
        good.append(d)
    if not good:
        return
    write = step.publish(staged, good)
    for d in good:
        step.published(FCT_CUSTOMER_LTV, d, write_metadata(write, d, inputs, CUSTOMER_LTV))


def read_seed(lake: Lake, start: date) -> tuple[DataFrame, int | None]:
    """Each customer's latest LTV row before ``start`` (empty before the first build), and the
    version read."""
    table = CUSTOMER_LTV_TABLE
    if not lake.exists(table.path):
        return lake.spark.createDataFrame([], CUSTOMER_LTV), None
    ltv, version = lake.read_table(table.path)
    return latest_rows(ltv.where(ltv[table.partition_column] < start)), version
