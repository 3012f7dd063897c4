"""Late-data detection: from the cursor and the landing zone to the runs to request.

A tick cannot order the runs it requests, yet staging and fact of a day must read the raw
partitions rebuilt from the files that changed it. So there are two phases:

1. ``detect``: new files -> raw runs of their arrival (or rate) dates, contiguous dates as one
   ranged run, and a *pending group* in the cursor: the event days those files change,
   awaiting the raw runs (by request key);
2. ``release``: groups whose raw runs have succeeded -> staging + fact runs of their days,
   contiguous days of every group released together merged into one ranged run.

The sensor runs phase 2 on a later tick; ``catch-up`` right after phase 1, in one process.
Request keys depend only on what was found (paths and change times), so evaluating the same
cursor twice yields the same keys, and Dagster launches nothing twice for a run key.

A cold start (no cursor) asks when each raw partition was last built (the start of the run
that materialized it): files stamped after that are new, as on any tick; a folder never built
gets its raw partition and every event day of its window requested, without reading its
files (that is a backfill, and can be years of them).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import date, timedelta

from backfill_assets.catalog import (
    EVENT_DAYS_STEP,
    FX_RATES_DATASET,
    ORDERS_DATASET,
    RAW_STEP_OF_DATASET,
)
from backfill_assets.days import days_between, rate_partition
from backfill_assets.landing.layout import DATASETS, Root, join
from backfill_assets.late_data.cursor import LandingCursor, PendingGroup, day_ranges
from backfill_assets.late_data.effects import RateFolders, order_file_effect, rate_effects
from backfill_assets.late_data.scan import FolderScan, scan_dataset
from backfill_assets.settings import RECOUNT_MINUTES

WHY_LENGTH = 240
# A cold start is a backfill: its raw runs span gaps of a few days without folders (weekends
# without rates), building those days empty, rather than becoming a run per week.
COLD_BRIDGE_DAYS = 3
# How often every folder's files are counted, whatever its change time (see ``scan.py``).
RECOUNT_NS = int(RECOUNT_MINUTES * 60 * 10**9)


@dataclass(frozen=True)
class Request:
    """One ranged run to request: a step (``catalog.STEP_ASSETS``) over days."""

    step: str
    start: date
    end: date
    key: str
    why: str

    @property
    def days(self) -> list[date]:
        return days_between(self.start, self.end)


@dataclass(frozen=True)
class Finding:
    """A new file (or a whole folder: ``path`` ends in ``/``) and the event days it changes."""

    path: str
    days: tuple[date, ...]
    detail: str

    def line(self) -> str:
        spans = ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in day_ranges(self.days))
        return f"{self.path}: {self.detail}; event days {spans or 'none'}"


@dataclass
class Detection:
    cursor: LandingCursor
    raw: list[Request]
    group: PendingGroup | None
    findings: list[Finding] = field(default_factory=list)
    settling: int = 0  # new folders and files younger than the settle time: a later look's


def _digest(parts: Iterable[str]) -> str:
    return hashlib.sha1("\n".join(parts).encode()).hexdigest()[:12]


def shorten(parts: list[str]) -> str:
    text = "; ".join(parts)
    if len(text) <= WHY_LENGTH:
        return text
    return text[: WHY_LENGTH - 12].rstrip() + f" … ({len(parts)})"


def _window(
    folder: FolderScan, first: date, last: date, lateness: int, rate_max_age: int
) -> tuple[date, ...]:
    """Every event day a folder's records could reach: arrival - lateness .. arrival for orders,
    R .. R + rate window for rates; used for folders never built, whose files are not read."""
    if folder.dataset == ORDERS_DATASET:
        low, high = folder.day - timedelta(days=lateness), folder.day
    else:
        low, high = folder.day, min(folder.day + timedelta(days=rate_max_age), last)
    days = days_between(low, high)
    return tuple(d for d in days if d >= first)


def _order_findings(root: Root, folder: FolderScan, first: date, lateness: int) -> list[Finding]:
    found = []
    for file in folder.new:
        effect = order_file_effect(join(root, file.path), folder.day, first, lateness)
        late = (
            f", {effect.too_late} record(s) beyond the lateness window" if effect.too_late else ""
        )
        found.append(Finding(file.path, tuple(sorted(effect.days)), f"{folder.how}{late}"))
    return found


def _rate_findings(
    folder: FolderScan, first: date, last: date, rates: RateFolders
) -> list[Finding]:
    effects = rate_effects(rates, folder.day, {f.path for f in folder.new}, first, last)
    found = []
    for file in folder.new:
        mine = {c: days for c, (path, days) in effects.items() if path == file.path}
        days = tuple(sorted({d for ds in mine.values() for d in ds}))
        sets = ", ".join(sorted(mine)) or "no rate in use"
        found.append(Finding(file.path, days, f"{folder.how}, sets {sets}"))
    return found


def _folder_findings(
    root: Root,
    folder: FolderScan,
    whole: bool,
    first: date,
    last: date,
    lateness: int,
    rates: RateFolders,
) -> list[Finding]:
    relative = DATASETS[folder.dataset].relative_folder(folder.day) + "/"
    if whole:
        detail = f"never built, {len(folder.files)} file(s): its whole window"
        window = _window(folder, first, last, lateness, rates.max_age_days)
        return [Finding(relative, window, detail)]
    if folder.dataset == ORDERS_DATASET:
        found = _order_findings(root, folder, first, lateness)
    else:
        found = _rate_findings(folder, first, last, rates)
    return found or [Finding(relative, (), f"{folder.how}, empty")]


def _raw_requests(
    raw_days: dict[str, list[date]], findings: list[Finding], gid: str, bridge_days: int
) -> list[Request]:
    requests = []
    for dataset in DATASETS:
        step = RAW_STEP_OF_DATASET[dataset]
        why = shorten(
            [f"{f.path} {f.detail}" for f in findings if f.path.startswith(dataset + "/")]
        )
        for a, b in _bridged(day_ranges(raw_days[dataset]), bridge_days):
            requests.append(Request(step, a, b, f"{step}:{a}..{b}:{gid}", why))
    return requests


def _bridged(ranges: list[tuple[date, date]], gap_days: int) -> list[tuple[date, date]]:
    """Ranges separated by at most ``gap_days`` missing days, merged."""
    merged: list[tuple[date, date]] = []
    for start, end in ranges:
        if merged and (start - merged[-1][1]).days - 1 <= gap_days:
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def _since_build(folder: FolderScan, built_ns: int) -> FolderScan | None:
    """On a cold start, what of a built folder is newer than its build: files stamped since, or,
    when only the folder changed since (a finished folder moved in over the empty one that was
    built, files and all older), every file in it."""
    newer = tuple(f for f in folder.files if f.stamp_ns >= built_ns)
    if newer:
        return replace(folder, new=newer, how="landed after its last build")
    if folder.stamp_ns >= built_ns and folder.files:
        return replace(folder, new=folder.files, how="folder changed after its last build")
    return None


def detect(
    root: Root,
    first: date,
    last: date,
    lateness: int,
    rate_max_age: int,
    cursor: LandingCursor | None,
    built: Callable[[str], dict[date, int]],
    now_ns: int,
    settle_ns: int,
    recount_ns: int = RECOUNT_NS,
) -> Detection:
    """New files since ``cursor`` among partitions ``first .. last`` (and the rate folders of the
    rate window before ``first``, which raw_fx_rates' first partition holds): raw requests,
    pending group.

    ``built(dataset)`` maps the dates whose raw partition was materialized to when the run that
    did it started (ns); it is asked only on a cold start. ``lateness`` and ``rate_max_age``
    are the settings' windows (days). Every folder's files are counted when the cursor's last
    full count is ``recount_ns`` old or more (0: on every detection).
    """
    cold = cursor is None
    hw_old = 0 if cursor is None else cursor.high_water_ns
    hw_new = max(now_ns - settle_ns, hw_old)
    recount = cursor is None or now_ns - cursor.counted_ns >= recount_ns
    counted_ns = now_ns if recount or cursor is None else cursor.counted_ns
    rates = RateFolders(root, rate_max_age)
    raw_days: dict[str, list[date]] = {d: [] for d in DATASETS}
    counts, findings, keyed, settling = {}, [], [], 0
    for dataset in DATASETS:
        previous = None if cursor is None else cursor.counts.get(dataset, {})
        # The rate window before the first partition is read too, by that partition (rate_dates).
        low = first - timedelta(days=rate_max_age) if dataset == FX_RATES_DATASET else first
        scan = scan_dataset(root, dataset, low, last, previous, hw_old, hw_new, recount)
        counts[dataset] = scan.counts
        settling += scan.settling
        built_at = built(dataset) if cold else {}
        for folder in scan.changed:
            partition = rate_partition(folder.day, first)  # the raw partition that reads it
            if partition in built_at:
                since = _since_build(folder, built_at[partition])
                if since is None:
                    continue
                folder = since
            raw_days[dataset].append(partition)
            whole = cold and partition not in built_at
            findings += _folder_findings(root, folder, whole, first, last, lateness, rates)
            keyed += [f"{f.path}@{f.stamp_ns}" for f in folder.new] or [f"{dataset}/{folder.day}@"]
    gid = _digest(keyed)
    raw = _raw_requests(raw_days, findings, gid, COLD_BRIDGE_DAYS if cold else 0)
    days = sorted({d for f in findings for d in f.days})
    pending = list(() if cursor is None else cursor.pending)
    group = None
    if days:
        group = PendingGroup(
            gid,
            tuple(days),
            tuple(r.key for r in raw),
            now_ns / 1e9,
            shorten([f"{f.path} ({f.detail})" for f in findings if f.days]),
        )
        pending.append(group)
    after = LandingCursor(hw_new, counts, tuple(pending), counted_ns)
    return Detection(after, raw, group, findings, settling)


def event_day_requests(groups: Iterable[PendingGroup]) -> list[Request]:
    """Staging + fact for the days of ``groups``: one ranged run per run of contiguous days."""
    groups = list(groups)
    if not groups:
        return []
    gid = _digest(sorted(g.id for g in groups))
    why = shorten([g.why for g in groups])
    days = {d for g in groups for d in g.days}
    return [
        Request(EVENT_DAYS_STEP, a, b, f"{EVENT_DAYS_STEP}:{a}..{b}:{gid}", why)
        for a, b in day_ranges(days)
    ]


def release(
    cursor: LandingCursor, ready: Callable[[PendingGroup], bool]
) -> tuple[list[Request], LandingCursor]:
    """Requests for the pending groups ``ready`` says may run now, and the cursor without them."""
    verdicts = [(group, ready(group)) for group in cursor.pending]
    released = [g for g, ok in verdicts if ok]
    return event_day_requests(released), cursor.with_pending(g for g, ok in verdicts if not ok)
