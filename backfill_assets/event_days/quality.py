"""The event-day step's warning checks: each day's volume, status and currency shares and
revenue per order against a robust band of the same figure over the trailing published days
(``transforms.drift``). They warn (severity WARN) and publish the day; a check named in
``BACKFILL_BLOCKING_QUALITY_CHECKS`` holds the day instead, like the contract's checks.

Their figures come from the aggregations the contract's checks already run (``staging_stats``,
``fact_totals``), which also read the trailing days: no Spark job of their own."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date

import dagster as dg

from backfill_assets.catalog import FCT_DAILY_REVENUE, STG_ORDERS
from backfill_assets.publishing.publication import CheckOutcome
from backfill_assets.settings import QUALITY_CHECK_NAMES, QualitySettings
from backfill_assets.transforms.drift import (
    DayFigures,
    Verdict,
    history_of,
    revenue_per_order_verdict,
    row_count_verdict,
    share_verdict,
)

ROW_COUNT, STATUS_SHARE, CURRENCY_SHARE, REVENUE_PER_ORDER = QUALITY_CHECK_NAMES

_BAND = (
    "Its band: the median of the same figure over the trailing published days (28 by "
    "default), +- k (4) times 1.4826 * MAD, at least +-5% of the median (+-2 points for a "
    "share); fewer than 7 trailing days with orders: it passes, 'not enough history'. "
    "Warns by default (the day is published); BACKFILL_BLOCKING_QUALITY_CHECKS can make it "
    "hold the day. Metadata: actual, band_lower, band_upper, band_median, history_days."
)
_WHAT = {
    ROW_COUNT: "The day's orders (staging rows; the fact's orders) lie within their band.",
    STATUS_SHARE: "Each status's share of the day's orders lies within its band.",
    CURRENCY_SHARE: "Each currency's share of the day's orders lies within its band.",
    REVENUE_PER_ORDER: "Paid USD revenue per paid order lies within its band.",
}
STAGING_QUALITY = (ROW_COUNT, STATUS_SHARE, CURRENCY_SHARE, REVENUE_PER_ORDER)
FACT_QUALITY = (ROW_COUNT, STATUS_SHARE, REVENUE_PER_ORDER)  # the fact has no currency


def quality_checks(settings: QualitySettings) -> list[dg.AssetCheckSpec]:
    """The warning checks of staging and fact; blocking only where the setting names them."""
    return [
        dg.AssetCheckSpec(
            name,
            asset=asset,
            blocking=name in settings.blocking,
            description=f"{_WHAT[name]} {_BAND}",
        )
        for asset, names in ((STG_ORDERS, STAGING_QUALITY), (FCT_DAILY_REVENUE, FACT_QUALITY))
        for name in names
    ]


def _verdict(
    name: str, today: DayFigures, history: list[DayFigures], s: QualitySettings
) -> Verdict:
    if name == ROW_COUNT:
        return row_count_verdict(today, history, s.band_k, s.min_history)
    if name == REVENUE_PER_ORDER:
        return revenue_per_order_verdict(today, history, s.band_k, s.min_history)
    return share_verdict(
        today, history, "status" if name == STATUS_SHARE else "currency", s.band_k, s.min_history
    )


def verdict_metadata(v: Verdict) -> dict:
    """Floats and ints, so Dagster plots each over the partitions' evaluations."""
    meta: dict = {"actual": dg.MetadataValue.float(float(v.actual or 0.0))}
    if v.band is None:
        meta["note"] = dg.MetadataValue.text("not enough history: passes without a band")
        meta["history_days"] = dg.MetadataValue.int(0)
    else:
        meta.update(
            {
                "band_lower": dg.MetadataValue.float(v.band.lower),
                "band_upper": dg.MetadataValue.float(v.band.upper),
                "band_median": dg.MetadataValue.float(v.band.median),
                "history_days": dg.MetadataValue.int(v.band.history_days),
            }
        )
    if v.worst_key is not None:
        meta["worst"] = dg.MetadataValue.text(v.worst_key)
    for key, share in sorted(v.actuals.items()):
        meta[f"share_{key}"] = dg.MetadataValue.float(share)
    if v.out_of_band:
        meta["out_of_band"] = dg.MetadataValue.json(
            {k: {"actual": a, "lower": lo, "upper": hi} for k, (a, lo, hi) in v.out_of_band.items()}
        )
    return meta


def quality_outcomes(
    asset_key: dg.AssetKey,
    days: list[date],
    figures: Mapping[date, DayFigures],
    held: set[date],
    settings: QualitySettings,
) -> list[CheckOutcome]:
    """Every warning check of ``asset_key`` on each day of ``days`` (a day without orders
    has none: its volume is 0).

    ``figures`` holds the days being built and their trailing published days; a day held by
    the contract's checks (``held``) is no one's history, as it will not be published."""
    names = STAGING_QUALITY if asset_key == STG_ORDERS else FACT_QUALITY
    histories = history_of(days, figures, held, settings.trailing_days)
    none = DayFigures(0, {}, None if asset_key == FCT_DAILY_REVENUE else {}, 0)
    outcomes = []
    for day in days:
        for name in names:
            v = _verdict(name, figures.get(day, none), histories[day], settings)
            outcomes.append(
                CheckOutcome(
                    asset_key,
                    name,
                    day,
                    v.passed,
                    verdict_metadata(v),
                    blocking=name in settings.blocking,
                )
            )
    return outcomes


PLOTTED = ("actual", "band_lower", "band_upper")


def plotted(outcomes: list[CheckOutcome], asset_key: dg.AssetKey) -> dict[date, dict]:
    """Per day, each warning check's value and band as materialization metadata
    (``quality/<check>/actual``, ``.../band_lower``, ``.../band_upper``): an asset's Plots tab
    in Dagster draws its materializations' numeric metadata over the partitions."""
    out: dict[date, dict] = {}
    for o in outcomes:
        if o.asset_key != asset_key or o.check_name not in QUALITY_CHECK_NAMES:
            continue
        day = out.setdefault(o.partition, {})
        for name in PLOTTED:
            if name in o.metadata:
                day[f"quality/{o.check_name}/{name}"] = o.metadata[name]
    return out
