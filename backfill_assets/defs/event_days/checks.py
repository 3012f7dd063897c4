"""The event-day step's checks: staging's and the fact's, evaluated on each event day before
it is published (``event_days.outcomes`` evaluates them)."""

from __future__ import annotations

import dagster as dg

from backfill_assets.catalog import FCT_DAILY_REVENUE, STG_ORDERS
from backfill_assets.event_days.outcomes import (
    AMOUNT_USD_FITS,
    CODE_DEFECT,
    FX_RATE_PRESENT,
    MATCHES_SCHEMA,
    ONE_ROW_PER_VALID_ORDER,
    TOTALS_MATCH_STAGING,
    UNIQUE_ORDER_IDS,
    WINDOW_COMPLETE,
)

STAGING_CHECKS = [
    dg.AssetCheckSpec(
        UNIQUE_ORDER_IDS,
        asset=STG_ORDERS,
        blocking=True,
        description="staging[D] has unique order_ids." + CODE_DEFECT,
    ),
    dg.AssetCheckSpec(
        ONE_ROW_PER_VALID_ORDER,
        asset=STG_ORDERS,
        blocking=True,
        description="staging[D] has one row per distinct order_id among the valid "
        "records with event date D in its arrival window." + CODE_DEFECT,
    ),
    dg.AssetCheckSpec(
        FX_RATE_PRESENT,
        asset=STG_ORDERS,
        blocking=True,
        description="Every order of D has a USD rate of its currency on D "
        "from a rate date at most 7 days before (no rate: the day is held, never "
        "published with a guess). Held: land the missing currency's rate in "
        "fx_rates/rate_date=R/, materialize raw_fx_rates for R, and re-execute the "
        "run from failure (CLI: backfill-assets reexecute <run id>).",
    ),
    dg.AssetCheckSpec(
        AMOUNT_USD_FITS,
        asset=STG_ORDERS,
        blocking=True,
        description="Every order of D priced in USD (amount * usd_per_unit, rounded half-up "
        "to cents) fits DECIMAL(18,2): one that does not holds the day, never published with "
        "a guess. The metadata names the orders: their amount or their currency's rate is "
        "wrong at the source. Held: land a corrected version of the order (a later updated_at) "
        "or a restated rate file, rebuild raw_orders or raw_fx_rates for its date, and "
        "re-execute the run from failure.",
    ),
    dg.AssetCheckSpec(
        WINDOW_COMPLETE,
        asset=STG_ORDERS,
        blocking=True,
        description="staging[D] was built from every landed order file of the "
        "arrival dates D .. D + max lateness and every landed rate file of the rate "
        "dates D - 7 .. D (the raw layer is up to date; files of zero records "
        "count as read). Held: rebuild raw_orders or raw_fx_rates for the dates "
        "named in the check's metadata, then re-execute from failure.",
    ),
    dg.AssetCheckSpec(
        MATCHES_SCHEMA,
        asset=STG_ORDERS,
        blocking=True,
        description="staging[D] satisfies the contract's pandera schema: its "
        "columns and types, and every priced row each of the model's data rules." + CODE_DEFECT,
    ),
]

FACT_CHECKS = [
    dg.AssetCheckSpec(
        TOTALS_MATCH_STAGING,
        asset=FCT_DAILY_REVENUE,
        blocking=True,
        description="fact[D] totals equal staging[D]: orders, each status count, and paid "
        "revenue to the cent. A day held in staging is held here too; re-execution from "
        "failure rebuilds both." + CODE_DEFECT,
    )
]
