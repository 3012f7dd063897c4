"""``backfill-assets plan``'s key distribution: the shares of the heavy stages' keys (event date
for staging's dedupe and write, country for the fact, customer for the LTV) among the records a
backfill would stage, the NULL bucket included, and the hot keys (``transforms.skew``).

Read from the valid records' typed fields that raw/orders keeps in its ``_`` columns when raw
holds the range's arrivals, with delta-rs and Arrow (no Spark); else from a sample of the
landing lines, whose records are not validated yet: a missing or unreadable key counts in the
NULL bucket."""

from __future__ import annotations

import io
import json
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc

from backfill_assets.catalog import ORDERS_DATASET, RAW_ORDERS_TABLE
from backfill_assets.days import days_between
from backfill_assets.lake import Lake
from backfill_assets.landing.layout import join, list_landing_files, open_landed
from backfill_assets.settings import Settings
from backfill_assets.transforms.skew import KeyShare, shares

KEYS = ("event_date", "country", "customer_id")
SAMPLE_LINES = 200_000  # landing lines read at most when raw is not built


@dataclass(frozen=True)
class KeyReport:
    key: str
    keys: int
    top: list[KeyShare]
    null: KeyShare


@dataclass(frozen=True)
class SkewReport:
    source: str
    rows: int
    keys: list[KeyReport]
    threshold: float

    @property
    def hot(self) -> list[KeyShare]:
        return [s for k in self.keys for s in k.top if s.hot]


def key_distribution(settings: Settings, start: date, end: date) -> SkewReport:
    arrivals = days_between(start, end + timedelta(days=settings.max_lateness_days))
    counts, source = _from_raw(settings, start, end, arrivals)
    if counts is None:
        counts, source = _from_landing(settings, start, end, arrivals)
    threshold = settings.skew.hot_key_share
    reports = []
    for key in KEYS:
        top, null = shares(key, counts[key], threshold)
        reports.append(KeyReport(key, len([v for v in counts[key] if v is not None]), top, null))
    return SkewReport(source, sum(counts[KEYS[0]].values()), reports, threshold)


def _from_raw(
    settings: Settings, start: date, end: date, arrivals: list[date]
) -> tuple[dict[str, Counter[object]] | None, str]:
    """The keys of raw's valid records (stored verdict NULL), or None when raw holds none of
    the arrivals or predates its ``_`` columns."""
    lake = Lake(settings.lake_dir, None, engine="delta-rs")
    try:
        table = lake.read_arrow(
            RAW_ORDERS_TABLE.path,
            RAW_ORDERS_TABLE.partition_column,
            arrivals,
            ["_reason", *(f"_{k}" for k in KEYS)],
        )
    except pa.ArrowInvalid:  # a raw table written before raw kept its parsed columns
        return None, ""
    if table is None or table.num_rows == 0:
        return None, ""
    valid = pc.is_null(table["_reason"])
    in_range = pc.and_(
        pc.greater_equal(table["_event_date"], start), pc.less_equal(table["_event_date"], end)
    )
    table = table.filter(pc.and_(valid, in_range))
    counts = {}
    for key in KEYS:
        grouped = table.group_by(f"_{key}").aggregate([([], "count_all")]).to_pylist()
        counts[key] = Counter({r[f"_{key}"]: r["count_all"] for r in grouped})
    return counts, f"{RAW_ORDERS_TABLE.path} (valid records)"


def _from_landing(
    settings: Settings, start: date, end: date, arrivals: list[date]
) -> tuple[dict[str, Counter[object]], str]:
    files = list_landing_files(settings.landing_dir, ORDERS_DATASET, arrivals)
    per_file = max(1_000, SAMPLE_LINES // max(len(files), 1))
    counts: dict[str, Counter[object]] = {key: Counter() for key in KEYS}
    read = 0
    for f in files:
        landed = open_landed(join(settings.landing_dir, f.relative_path))
        with io.TextIOWrapper(landed, encoding="utf-8", errors="replace") as handle:
            for n, line in enumerate(handle):
                if n >= per_file:
                    break
                if not line.strip():
                    continue
                rec = _record(line)
                day = _event_date(rec.get("event_time"))
                if day is not None and not start <= day <= end:
                    continue
                read += 1
                counts["event_date"][day] += 1
                for key in KEYS[1:]:
                    value = rec.get(key)
                    counts[key][value if isinstance(value, str) and value else None] += 1
    return (
        counts,
        f"landing files (up to {per_file:,} lines of each of {len(files)} files, not yet "
        "validated)",
    )


def _record(line: str) -> dict:
    try:
        rec = json.loads(line)
    except ValueError:
        return {}
    return rec if isinstance(rec, dict) else {}


def _event_date(text: object) -> date | None:
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return moment.astimezone(UTC).date()


def render_skew(report: SkewReport) -> list[str]:
    lines = [
        f"key distribution of the {report.rows:,} records staging would read, from {report.source}:"
    ]
    for k in report.keys:
        shown = ", ".join(f"{s.value} {s.share:.1%}{' HOT' if s.hot else ''}" for s in k.top)
        lines.append(f"  {k.key:<12}{k.keys:>8,} keys; top {shown}; NULL {k.null.share:.1%}")
    for s in report.hot:
        lines.append(
            f"HOT KEY {s.key}={s.value}: {s.share:.1%} of the records (above "
            f"{report.threshold:.0%} and 3x an even share): staging salts its write "
            '(BACKFILL_SKEW_MITIGATION=auto; docs/operations.md, "Skew")'
        )
    return lines
