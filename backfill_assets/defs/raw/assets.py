"""Raw layer: what landed, verbatim, one Delta partition per arrival (or rate) date. The builds:
``raw/``."""

from functools import partial

import dagster as dg

from backfill_assets.catalog import (
    QUARANTINE_TABLE,
    RAW_FX_RATES,
    RAW_FX_RATES_STEP,
    RAW_FX_RATES_TABLE,
    RAW_ORDERS,
    RAW_ORDERS_STEP,
    RAW_ORDERS_TABLE,
)
from backfill_assets.defs.partitions import daily_partitions
from backfill_assets.defs.raw.checks import RAW_FX_RATES_CHECKS, RAW_ORDERS_CHECKS
from backfill_assets.publishing.steps import publishing_step
from backfill_assets.raw.raw_fx_rates import build_raw_fx_rates
from backfill_assets.raw.raw_orders import ORDER_TABLES, build_raw_orders
from backfill_assets.settings import Settings


def build_raw_assets(settings: Settings) -> list[dg.AssetsDefinition]:
    partitions = daily_partitions(settings)
    raw_orders = publishing_step(
        RAW_ORDERS_STEP,
        dg.AssetSpec(
            RAW_ORDERS,
            group_name="raw",
            description="Every order record that landed on arrival date A, verbatim "
            f"(Delta table {RAW_ORDERS_TABLE.path}), and the rejected ones with their reason "
            f"({QUARANTINE_TABLE.path}); raw keeps each record's verdict and typed fields "
            "in `_` columns, which staging reads. Partitioned by arrival date; columns "
            "and rules in docs/contract.md. New or late files for A: materialize this "
            "partition (or run `backfill-assets catch-up`), then staging and fact of the "
            "event days they carry.",
            metadata={"tables": ", ".join(t.path for t in ORDER_TABLES)},
        ),
        RAW_ORDERS_CHECKS,
        partitions,
        build_raw_orders,
    )
    raw_fx_rates = publishing_step(
        RAW_FX_RATES_STEP,
        dg.AssetSpec(
            RAW_FX_RATES,
            group_name="raw",
            description="Every exchange-rate line published for rate date R, as landed "
            f"(Delta table {RAW_FX_RATES_TABLE.path}). Partitioned by rate date; the first "
            "partition also holds the rate dates of the 7 days before it, whose rates its "
            "first days may take. A missing "
            "or wrong rate: land a CSV in fx_rates/rate_date=R/ (the file whose name sorts "
            "last wins), materialize this partition (the first one for a date before it), "
            "then re-execute the held staging run from failure.",
            metadata={"tables": RAW_FX_RATES_TABLE.path},
        ),
        RAW_FX_RATES_CHECKS,
        partitions,
        partial(build_raw_fx_rates, settings),
    )
    return [raw_orders, raw_fx_rates]
