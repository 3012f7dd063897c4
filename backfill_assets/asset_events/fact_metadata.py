"""What a published fact day (or month) records in Dagster: its figures, and what changed against
the version it replaced."""

from __future__ import annotations

import dagster as dg

from backfill_assets.transforms.totals import ZERO


def change_metadata(new: dict, old: dict | None, replaced_version: int | None) -> dict:
    """What a rebuild changed against the version it replaced: orders and revenue deltas."""
    old = old or ZERO
    return {
        "replaced_delta_version": dg.MetadataValue.int(
            -1 if replaced_version is None else replaced_version
        ),
        "orders_delta": dg.MetadataValue.int(new.get("orders", 0) - old["orders"]),
        "paid_orders_delta": dg.MetadataValue.int(new.get("paid_orders", 0) - old["paid_orders"]),
        "revenue_usd_delta": dg.MetadataValue.text(
            str(new.get("revenue_usd", ZERO["revenue_usd"]) - old["revenue_usd"])
        ),
    }


def fact_metadata(totals: dict, before: dict | None, replaced_version: int | None) -> dict:
    """A published fact day's figures, and what changed against the version it replaced."""
    return {
        "orders": dg.MetadataValue.int(totals.get("orders", 0)),
        "paid_orders": dg.MetadataValue.int(totals.get("paid_orders", 0)),
        "revenue_usd": dg.MetadataValue.float(float(totals.get("revenue_usd", 0))),
        "revenue_usd_exact": dg.MetadataValue.text(str(totals.get("revenue_usd", "0.00"))),
        **change_metadata(totals, before, replaced_version),
    }
