"""``diff``: a correction's staged partitions against production's, per partition and table.

Per table and day: rows added, removed and changed, by key (staging: ``order_id``; fact:
``country``). For the fact: orders, paid orders and revenue before and after, and the change
in %. The production versions compared with are recorded: a cutover refuses if production
changed after them. So is the exact file set compared, per table and day (the staged files'
paths): a cutover publishes only those files, and refuses when the correction's staged version
holds others for a day (a rebuild kept since the diff). Days production rebuilt after the
correction was staged (the live lane ran meanwhile) are flagged: a cutover never overwrites
them silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal

from pyspark.sql import DataFrame

from backfill_assets.catalog import FACT_TABLE, STAGING_TABLE, Table
from backfill_assets.corrections import registry
from backfill_assets.corrections.registry import Correction, CorrectionError, State
from backfill_assets.lake import Lake, StagedVersion
from backfill_assets.transforms.compare import row_changes
from backfill_assets.transforms.totals import ZERO, fact_totals

# The tables a correction rebuilds, in the order a cutover publishes them, and their row keys.
CORRECTED: tuple[Table, ...] = (STAGING_TABLE, FACT_TABLE)
ROW_KEYS = {STAGING_TABLE.path: ("order_id",), FACT_TABLE.path: ("country",)}


def ready_days(correction: Correction) -> list[date]:
    """Days every corrected table staged and no check held: what may be cut over."""
    per_table = [set(correction.table(t.path).ready_days()) for t in CORRECTED]
    return sorted(set.intersection(*per_table))


def held_days(correction: Correction) -> dict[str, list[str]]:
    held: dict[str, list[str]] = {}
    for t in CORRECTED:
        for day, checks in correction.table(t.path).held.items():
            held.setdefault(day, []).extend(c for c in checks if c not in held.get(day, []))
    return dict(sorted(held.items()))


def pct_change(before: Decimal, after: Decimal) -> float | None:
    """The change in %, None when there was nothing before (any change is infinite)."""
    if before == 0:
        return 0.0 if after == 0 else None
    return float((after - before) / before * 100)


@dataclass
class DayDiff:
    day: date
    rows: dict[str, dict]  # table path -> rows_before, rows_after, added, removed, changed
    fact_before: dict
    fact_after: dict

    @property
    def revenue_pct(self) -> float | None:
        return pct_change(self.fact_before["revenue_usd"], self.fact_after["revenue_usd"])

    @property
    def changed(self) -> bool:
        return any(r["added"] or r["removed"] or r["changed"] for r in self.rows.values())


@dataclass
class Diff:
    correction: Correction
    days: list[DayDiff]
    versions: dict[str, int | None]
    rebuilt: dict[str, list[date]] = field(
        default_factory=dict
    )  # table -> days rebuilt since staged
    files: dict[str, dict[str, list[str]]] = field(
        default_factory=dict
    )  # table -> day -> the staged files compared (paths in the table)

    def totals(self, which: str) -> dict:
        total = dict(ZERO)
        for d in self.days:
            side = d.fact_before if which == "before" else d.fact_after
            total = {k: total[k] + side[k] for k in total}
        return total

    @property
    def changed_days(self) -> list[date]:
        return [d.day for d in self.days if d.changed]


def _empty_like(lake: Lake, frame: DataFrame) -> DataFrame:
    return lake.spark.createDataFrame([], frame.schema)


def compute(lake: Lake, correction: Correction) -> Diff:
    """Compare every ready day of ``correction`` with production (read pinned, once per table)."""
    days = ready_days(correction)
    if not days:
        raise CorrectionError(
            f"correction {correction.id} has no day ready to compare "
            f"(held: {held_days(correction) or 'none'})"
        )
    try:
        return _compare(lake, correction, days)
    except CorrectionError:
        raise
    except Exception as exc:
        closed = [t.path for t in CORRECTED if _closed(lake, t.path, correction.id)]
        if not closed:
            raise
        raise CorrectionError(
            f"correction {correction.id}: its staged version of {', '.join(closed)} was closed "
            "(expired by maintain after the retention, or discarded) while the diff read it. "
            f"Run backfill-assets correct again for {correction.start}..{correction.end}, then "
            "diff the new correction"
        ) from exc


def _closed(lake: Lake, table: str, stage_id: str) -> bool:
    """True when ``stage_id``'s staged version of ``table`` is closed or being closed."""
    staged = lake.staging.version(table, stage_id)
    return staged is None or staged.closing


def _compare(lake: Lake, correction: Correction, days: list[date]) -> Diff:
    rows: dict[str, dict] = {}
    versions: dict[str, int | None] = {}
    rebuilt: dict[str, list[date]] = {}
    sides: dict[str, tuple] = {}
    files: dict[str, dict[str, list[str]]] = {}
    for table in CORRECTED:
        staged = lake.staging.version(table.path, correction.id)
        if staged is None:
            raise CorrectionError(
                f"correction {correction.id} has no staged {table.path}: "
                "discarded or decommissioned"
            )
        after = lake.staging.read(staged, days)
        files[table.path] = file_set(staged, days)
        if lake.exists(table.path):
            before, versions[table.path] = lake.read_partitions(
                table.path, table.partition_column, days
            )
        else:
            before, versions[table.path] = _empty_like(lake, after), None
        rows[table.path] = row_changes(before, after, table.partition_column, ROW_KEYS[table.path])
        changed = lake.changed_since(table.path, table.partition_column, staged.base_version, days)
        if changed and versions[table.path] is not None:
            rebuilt[table.path] = sorted(changed)
        sides[table.path] = (before, after)
    fact_before, fact_after = (fact_totals(side) for side in sides[FACT_TABLE.path])
    no_change = dict.fromkeys(("rows_before", "rows_after", "added", "removed", "changed"), 0)
    return Diff(
        correction,
        [
            DayDiff(
                d,
                {t.path: rows[t.path].get(d, no_change) for t in CORRECTED},
                fact_before.get(d, ZERO),
                fact_after.get(d, ZERO),
            )
            for d in days
        ],
        versions,
        rebuilt,
        files,
    )


def file_set(staged: StagedVersion, days: list[date]) -> dict[str, list[str]]:
    """Per day, the sorted paths of ``staged``'s files: what a diff compared, what a cutover
    publishes."""
    found: dict[str, list[str]] = {d.isoformat(): [] for d in days}
    for f in staged.files_of(days):
        found[f.partition.isoformat()].append(f.path)
    return {d: sorted(paths) for d, paths in found.items()}


def files_since_diff(correction: Correction, staged: StagedVersion, days: list[date]) -> list[date]:
    """The ``days`` whose files in ``staged`` are not the ones the correction's diff compared
    (all of them when the diff recorded no file set: a diff made before file sets were)."""
    compared = correction.diff.get("files", {}).get(staged.table)
    if compared is None:
        return list(days)
    now = file_set(staged, days)
    return [d for d in days if compared.get(d.isoformat()) != now[d.isoformat()]]


def record(lake: Lake, diff: Diff) -> Correction:
    """Save what the diff compared with in the correction's record: state ``diffed``."""
    correction = diff.correction
    if correction.state in State.CLOSED:
        raise CorrectionError(f"correction {correction.id} is {correction.state}")
    if correction.pending:  # its outcome would be lost under this save: recover it first
        raise CorrectionError(
            f"correction {correction.id} has an interrupted {correction.pending['action']}: "
            f"run backfill-assets {correction.pending['action']} {correction.id} first"
        )
    correction.diff = {
        "at": registry.now(),
        "versions": diff.versions,
        "days": {
            d.day.isoformat(): {
                "revenue_before": str(d.fact_before["revenue_usd"]),
                "revenue_after": str(d.fact_after["revenue_usd"]),
                "orders_before": d.fact_before["orders"],
                "orders_after": d.fact_after["orders"],
                "paid_orders_before": d.fact_before["paid_orders"],
                "paid_orders_after": d.fact_after["paid_orders"],
                "revenue_pct": d.revenue_pct,
                "changed": d.changed,
            }
            for d in diff.days
        },
        "rebuilt": {t: [d.isoformat() for d in days] for t, days in diff.rebuilt.items()},
        "files": diff.files,
    }
    if correction.state in (State.STAGED, State.DIFFED, State.ROLLED_BACK):
        correction.state = State.DIFFED
    correction.note("diffed", f"{len(diff.changed_days)} of {len(diff.days)} day(s) changed")
    registry.save(lake.location, correction)
    return correction
