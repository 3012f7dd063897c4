"""Raw checks: raw equals the landing zone, and quarantine accounts for every rejected record
(their outcomes: ``raw/raw_outcomes.py``)."""

from __future__ import annotations

import dagster as dg

from backfill_assets.catalog import RAW_FX_RATES, RAW_ORDERS
from backfill_assets.raw.raw_outcomes import (
    QUARANTINE_RECONCILES,
    RATES_MATCH_LANDING,
    RAW_MATCHES_LANDING,
)

RAW_ORDERS_CHECKS = [
    dg.AssetCheckSpec(
        RAW_MATCHES_LANDING,
        asset=RAW_ORDERS,
        blocking=True,
        description="raw[A] holds exactly the records read from the landing files of arrival "
        "date A: same files, same record count per file, same line numbers and payloads (each "
        "stored line against the checksum it had when read), checked on the staged rows "
        "before they are published. Failed: a staged file was lost, cut short or changed "
        "before the check; nothing was published. Re-execute from failure.",
    ),
    dg.AssetCheckSpec(
        QUARANTINE_RECONCILES,
        asset=RAW_ORDERS,
        blocking=True,
        description="Valid records of raw[A] plus quarantine[A] equal raw[A], and every "
        "quarantine row carries the reason the contract's rules give (docs/contract.md). "
        "Failed: nothing was published; re-execute from failure once the folder has settled.",
    ),
]

RAW_FX_RATES_CHECKS = [
    dg.AssetCheckSpec(
        RATES_MATCH_LANDING,
        asset=RAW_FX_RATES,
        blocking=True,
        description="raw_fx_rates[R] holds exactly the rate lines of the landing files of rate "
        "date R (the first partition: of the rate dates of the 7 days before it too). Failed: "
        "nothing was published; re-execute from failure once the folder has settled.",
    )
]
