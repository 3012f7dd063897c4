"""Which days `backfill-assets demo` generates and backfills, and the first partition it uses.

By default the demo covers the 60 days ending yesterday (UTC) and its first day is
also the first daily partition, so every partition bar in the UI shows the demo's
days and nothing else: all published, a held day as failed, none missing. The
demo records that first partition in the lake it builds (``data/lake`` by default),
where ``Settings`` reads it in every later process on that lake (`make ui`, the CLI),
so they all see the same partitions; a lake of other data keeps the contract's default.
A configured ``BACKFILL_START_DATE`` and ``--start``/``--end`` still decide.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

from backfill_assets.settings import FIRST_PARTITION_FILE, SegmentSettings, Settings

DEMO_DAYS = 60


@dataclass(frozen=True)
class DemoRange:
    first_partition: date
    start: date
    end: date

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1


def demo_range(
    yesterday: date,
    days: int = DEMO_DAYS,
    configured_start: date | None = None,
    start: date | None = None,
    end: date | None = None,
) -> DemoRange:
    """The event days to generate and backfill, and the first partition.

    ``start``/``end`` (either or both) win; else a configured start date gives the
    ``days`` from it (to yesterday at most); else the ``days`` ending yesterday.
    The first partition is the configured start date when there is one, else the
    range's first day, whatever its weekday: the generated feed publishes rates on
    weekdays only, and the first partition reads those of the week before it.
    """
    if days < 1:
        raise ValueError("--days must be at least 1")
    span = timedelta(days=days - 1)
    if start is not None and end is not None:
        pass
    elif start is not None:
        end = min(start + span, yesterday)
    elif end is not None:
        start = end - span
    elif configured_start:
        start, end = configured_start, min(configured_start + span, yesterday)
    else:
        end, start = yesterday, yesterday - span
    if start > end:
        raise ValueError(f"the demo's range {start} .. {end} is empty")
    return DemoRange(configured_start or start, start, end)


def use_first_partition(settings: Settings, first: date) -> Settings:
    """Make ``first`` the first partition of this process's runs and, on a local lake, of every
    later process on the demo's lake: recorded in the lake, where ``Settings`` reads it when
    BACKFILL_START_DATE is unset (`make ui`, the CLI run directly). Another lake, or this one
    emptied, starts at the contract's default."""
    os.environ["BACKFILL_START_DATE"] = first.isoformat()  # this process's runs: definitions
    if isinstance(settings.lake_dir, Path):
        settings.lake_dir.mkdir(parents=True, exist_ok=True)
        recorded = settings.lake_dir / FIRST_PARTITION_FILE
        recorded.write_text(first.isoformat() + "\n", encoding="utf-8")
    return dataclasses.replace(settings, start_date=first)


@contextlib.contextmanager
def segment_service(settings: Settings) -> Iterator[Settings]:
    """The customer-segment service for the demo's runs: the configured one, else one started
    here on a free port of 127.0.0.1 for as long as the demo runs (its URL in
    ``BACKFILL_SEGMENTS_URL``, where the runs' definitions read it). Yields the settings."""
    if settings.segments is not None:
        yield settings
        return
    from backfill_assets.enrichment.service import SegmentService

    rps = SegmentSettings.service_rps()
    with SegmentService(rps) as service:
        os.environ["BACKFILL_SEGMENTS_URL"] = service.url
        print(f"demo: customer-segment service on {service.url} ({rps} requests/s)", flush=True)
        try:
            yield dataclasses.replace(settings, segments=SegmentSettings.from_env())
        finally:
            os.environ.pop("BACKFILL_SEGMENTS_URL", None)


DEMO_BUCKET = "demo"


@contextlib.contextmanager
def local_s3(settings: Settings) -> Iterator[Settings]:
    """`demo --storage s3`: a SeaweedFS server started here (``demo/local_s3.py``), its data in the
    folder ``s3`` beside the local landing zone, the landing zone and the lake in its bucket
    ``demo``. The standard AWS variables and the two folder settings point every process of
    the demo there while it runs (the keys only in the environment, never printed). The server
    stops with the demo; its data stays, and the next `demo --storage s3` serves it again."""
    from backfill_assets.demo.local_s3 import S3Server, binary_problem

    problem = binary_problem()
    if problem:
        raise RuntimeError(f"demo --storage s3 needs SeaweedFS: {problem}")
    local = settings.landing_dir
    folder = (Path(local) if isinstance(local, Path) else Path("data/landing").resolve()).parent
    server = S3Server.start(folder / "s3")
    try:
        client = server.client()
        if DEMO_BUCKET not in {b["Name"] for b in client.list_buckets().get("Buckets", [])}:
            server.create_bucket(DEMO_BUCKET)
        landing, lake = f"s3://{DEMO_BUCKET}/landing", f"s3://{DEMO_BUCKET}/lake"
        env = server.env(BACKFILL_LANDING_DIR=landing, BACKFILL_LAKE_DIR=lake)
        os.environ.update(env)  # for the demo's runs; the demo's process ends with it
        print(f"demo: S3 server on {server.endpoint}, data in {server.folder}", flush=True)
        try:
            yield dataclasses.replace(settings, landing_dir=landing, lake_dir=lake)
        finally:
            for name in env:
                os.environ.pop(name, None)
    finally:
        server.stop()


RESTATED_CURRENCY, RESTATEMENT = "EUR", Decimal("1.03")


def restated_period(start: date, end: date) -> tuple[date, date]:
    """Two weeks of rate dates, ending a week before the range does (so every day they reach
    is in the range), clipped to its start."""
    last = max(start, end - timedelta(days=7))
    return max(start, last - timedelta(days=13)), last


def correction_tour(settings: Settings, start: date, end: date) -> int:
    """The demo's last act: the rate provider restates two weeks of EUR rates; the correction
    is built beside production, diffed, cut over, rolled back and cut over again. The demo
    then runs ``refresh_downstream``."""
    from backfill_assets.cli import corrections
    from backfill_assets.corrections import registry
    from backfill_assets.demo.generate import restate_rates

    first, last = restated_period(start, end)
    files = restate_rates(settings.landing_dir, RESTATED_CURRENCY, first, last, RESTATEMENT)
    print(
        f"\ndemo: the provider restates {RESTATED_CURRENCY} by {RESTATEMENT}x for {first}..{last} "
        f"({files} rate files land beside the originals)",
        flush=True,
    )
    fix_end = min(end, last + timedelta(days=settings.rate_max_age_days))
    cid = registry.new_id(first)
    steps = [
        (
            "correct",
            lambda: corrections.correct(
                settings,
                first,
                fix_end,
                f"provider restated {RESTATED_CURRENCY} rates {first}..{last}",
                cid,
            ),
        ),
        ("diff", lambda: corrections.diff(settings, cid, None)),
        ("cutover", lambda: corrections.cutover(settings, cid, 10.0, False, False)),
        ("rollback", lambda: corrections.rollback(settings, cid)),
        ("cutover again", lambda: corrections.cutover(settings, cid, 10.0, False, False)),
    ]
    for name, step in steps:
        print(f"\ndemo: backfill-assets {name} {cid}", flush=True)
        code = corrections.run_step(name, step)
        if code:
            return code
    return 0


def refresh_downstream(settings: Settings) -> int:
    """What ``downstream_refresh`` would request after the tour's cutover, run here: the demo
    runs no daemon, and customer LTV and the monthly report would stay stale without it."""
    import dagster as dg

    from backfill_assets.cli.catch_up import run_requests
    from backfill_assets.cli.outcome_table import report_outcomes
    from backfill_assets.defs.automation.downstream import stale_downstream

    with dg.DagsterInstance.get() as instance:
        requests = stale_downstream(settings, instance)
        print(
            "\ndemo: what downstream_refresh would request after the cutover: "
            + ("; ".join(r.why for r in requests) or "nothing"),
            flush=True,
        )
        outcomes = run_requests(instance, requests, command="demo")
    return report_outcomes(outcomes) if outcomes else 0
