"""`backfill-assets correct | diff | cutover | rollback | corrections | discard | forget`.

The commands of a versioned correction (see ``backfill_assets.corrections``): each prints
what it did and exits 0, or prints why it refused and exits 1. Those that read tables open
a local Spark session, as do those that commit when the engine is delta-spark; those that
commit record it in Dagster too. Each first recovers an
operation of the correction left interrupted (``recovery.py``) and says what it did; a broken
record is refused, naming its file and ``forget`` (``repair.py``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import date

from backfill_assets.catalog import CLI_TAG, CORRECTION_REASON_TAG, CORRECTION_TAG
from backfill_assets.cli.backfill import run_plans
from backfill_assets.cli.instance import open_instance
from backfill_assets.corrections import actions, lifecycle, recovery, registry, repair, requests
from backfill_assets.corrections import diff as diffing
from backfill_assets.corrections.registry import CorrectionError
from backfill_assets.lake import Lake
from backfill_assets.resources import code_version
from backfill_assets.settings import Settings


def _lake(settings: Settings, reads: bool) -> Lake:
    """The lake the command acts on. A command that only commits file references (``reads``
    False: cutover, rollback, discard, forget) starts no Spark session on delta-rs, when that
    is the engine a session would take (``engine_without_session``); it then takes a second
    or so instead of the session's start."""
    from backfill_assets.resources import build_resources
    from backfill_assets.spark.session import engine_without_session

    if not reads and engine_without_session() == "delta-rs":
        return Lake(settings.lake_dir, None, engine="delta-rs")
    resources = build_resources(settings)
    return resources["pipeline"].lake(resources["spark"].spark_session)


def _open(
    settings: Settings, correction_id: str, reads: bool = False
) -> tuple[Lake, recovery.Recovery | None]:
    """The lake (``_lake``), once the record of ``correction_id`` is known to be readable (no
    Spark is started for a refusal), and the recovery of what it left interrupted, reported."""
    registry.get(settings.lake_dir, correction_id)
    lake = _lake(settings, reads)
    with open_instance() as instance:
        found = actions.recover(lake, instance, correction_id)
    if found is not None:
        print(found, flush=True)
    return lake, found


def report_recovery(
    lake_root: registry.LakeRoot, found: recovery.Recovery, prefix: str = ""
) -> None:
    """Print what a recovery did, and record it in Dagster."""
    print(f"{prefix}{found}", flush=True)
    with open_instance() as instance:
        actions.record_recovered(instance, lake_root, found)


def correct(
    settings: Settings,
    start: date,
    end: date,
    reason: str,
    correction_id: str | None,
    rebuild: bool = False,
) -> int:
    """Raw for the range (the landing's record, published as usual), then staging and fact as
    the correction ``correction_id``: staged, checked, not published. ValueError, with nothing
    recorded and no run launched, while the runs would lack what they need (``preflight.py``)."""
    from backfill_assets.cli.preflight import check_run_needs

    check_run_needs(settings)
    cid = correction_id or registry.new_id(start)
    existing = registry.load(settings.lake_dir, cid)
    if existing is not None and existing.pending:
        _open(settings, cid)
    reason = requests.check(settings, cid, reason, start, end, rebuild)  # as the UI's form
    registry.open_correction(settings.lake_dir, cid, reason, start, end, code_version())
    outcomes = run_plans(
        settings,
        start,
        end,
        False,
        tags={CLI_TAG: "correct"},
        correction_tags={CORRECTION_TAG: cid, CORRECTION_REASON_TAG: reason},
    )
    c = registry.get(settings.lake_dir, cid)
    ready, held = diffing.ready_days(c), diffing.held_days(c)
    failed_raw = [o for o in (outcomes or [])[:-1] if not o.success]
    print(
        f"correction {cid}: {len(ready)} day(s) staged beside production with passing checks"
        + (
            f"; held: {'; '.join(f'{d}: {chr(44).join(r)}' for d, r in held.items())}"
            if held
            else ""
        )
    )
    for o in failed_raw:
        print(
            f"  raw run {o.run_id[:8]} failed: {(o.error or '').splitlines()[0] if o.error else ''}"
        )
    print(cid)
    return 0 if ready and not held and not failed_raw and outcomes is not None else 1


def diff(settings: Settings, correction_id: str, report_path: str | None) -> int:
    lake, _ = _open(settings, correction_id, reads=True)
    with open_instance() as instance:
        done = actions.diff(lake, instance, correction_id, report_path)
    print(done.markdown)
    print(f"changed days: {', '.join(map(str, done.result.changed_days)) or 'none'}")
    print(f"report: {done.report_path}")
    return 0


def cutover(
    settings: Settings, correction_id: str, max_pct: float, force: bool, skip_rebuilt: bool
) -> int:
    lake, found = _open(settings, correction_id)
    with open_instance() as instance:
        outcome = actions.cutover(
            lake, instance, correction_id, max_pct, force, skip_rebuilt, found
        )
    print(actions.cutover_summary(correction_id, outcome, "cut over"))
    if outcome.skipped:
        print(
            "left to production (rebuilt there after the correction was staged): "
            + ", ".join(map(str, outcome.skipped))
        )
    return 0


def rollback(settings: Settings, correction_id: str) -> int:
    lake, found = _open(settings, correction_id)
    with open_instance() as instance:
        outcome = actions.rollback(lake, instance, correction_id, found)
    print(actions.cutover_summary(correction_id, outcome, "rolled back"))
    return 0


def discard(settings: Settings, correction_id: str) -> int:
    lake, found = _open(settings, correction_id)
    with open_instance() as instance:
        deleted = actions.discard(lake, instance, correction_id, found)
    print(f"correction {correction_id} discarded: {deleted} staged file(s) deleted")
    return 0


def forget(settings: Settings, correction_id: str) -> int:
    done = repair.forget(_lake(settings, reads=False), correction_id)
    print(
        f"correction {correction_id} forgotten: its broken record moved to {done.path}; "
        f"{done.deleted} staged file(s) deleted"
    )
    if done.in_production:
        print(
            "production holds its cutover (no rollback through backfill-assets any more; "
            "correct those days again to change them): "
            + "; ".join(f"{t} v{v}: {', '.join(ds)}" for t, (v, ds) in done.in_production.items())
        )
    else:
        print("nothing of it is in production")
    return 0


def listing(settings: Settings) -> int:
    found, broken = registry.scan(settings.lake_dir)
    if not found and not broken:
        print("no corrections")
        return 0
    print(f"{'id':<24}{'state':<16}{'range':<25}{'by':<12}{'created (UTC)':<27}reason")
    for c in found:
        pending = c.pending.get("action")
        print(
            f"{c.id:<24}{c.state:<16}{c.start + '..' + c.end:<25}{c.created_by:<12}"
            f"{c.created_at:<27}{c.reason}"
            + (
                f" [{pending} interrupted at {c.pending.get('at')}: the next command on it, "
                "or maintain, completes or undoes it]"
                if pending
                else ""
            )
        )
    for b in broken:
        print(f"{b.correction_id:<24}{'broken record':<16}{'':<25}{'':<12}{'':<27}see below")
    for b in broken:
        print(f"backfill-assets corrections: {b}", file=sys.stderr)
    return 1 if broken else 0


def run_step(command: str, step: Callable[[], int]) -> int:
    """Run one correction command; a refusal prints its reason and exits 1."""
    try:
        return step()
    except CorrectionError as exc:
        print(f"backfill-assets {command}: {exc}", file=sys.stderr)
        return 1


def run(command: str, settings: Settings, args: argparse.Namespace) -> int:
    steps = {
        "correct": lambda: correct(
            settings, args.start, args.end, args.reason, args.id, args.rebuild
        ),
        "diff": lambda: diff(settings, args.id, args.report),
        "cutover": lambda: cutover(
            settings, args.id, args.max_revenue_change_pct, args.force, args.skip_rebuilt
        ),
        "rollback": lambda: rollback(settings, args.id),
        "discard": lambda: discard(settings, args.id),
        "forget": lambda: forget(settings, args.id),
        "corrections": lambda: listing(settings),
    }
    return run_step(command, steps[command])


def add_parsers(sub: argparse._SubParsersAction, date_type: Callable[[str], date]) -> None:
    c = sub.add_parser(
        "correct",
        help="build staging and fact for a range beside production "
        "(a correction: checked, not published); prints its id",
    )
    c.add_argument("--start", type=date_type, required=True)
    c.add_argument("--end", type=date_type, required=True)
    c.add_argument("--reason", required=True, help="why: shown to the people who read the numbers")
    c.add_argument("--id", help="the correction's id (default: generated)")
    c.add_argument(
        "--rebuild",
        action="store_true",
        help="build days of the existing staged correction --id again (its held days, once "
        "their inputs are fixed)",
    )
    d = sub.add_parser("diff", help="a correction against production, per partition and table")
    d.add_argument("id")
    d.add_argument("--report", help="write the markdown report here (default: beside the record)")
    u = sub.add_parser("cutover", help="publish a diffed correction: one commit per table")
    u.add_argument("id")
    u.add_argument(
        "--max-revenue-change-pct",
        type=float,
        default=lifecycle.DEFAULT_MAX_REVENUE_CHANGE_PCT,
        help="refuse when a day's revenue moves more (default %(default)s)",
    )
    u.add_argument("--force", action="store_true", help="cut over past the revenue guardrail")
    u.add_argument(
        "--skip-rebuilt",
        action="store_true",
        help="leave to production the days it rebuilt after the correction was staged",
    )
    r = sub.add_parser("rollback", help="put the cut-over partitions back as they were")
    r.add_argument("id")
    x = sub.add_parser("discard", help="drop a correction's staged files")
    x.add_argument("id")
    f = sub.add_parser(
        "forget",
        help="repair a correction whose record is broken: check the lake, close its staged "
        "versions, move the record aside to <id>.json.broken",
    )
    f.add_argument("id")
    sub.add_parser("corrections", help="every correction: state, range, who, when, why")
    commands = (
        ("correct", c),
        ("diff", d),
        ("cutover", u),
        ("rollback", r),
        ("discard", x),
        ("forget", f),
    )
    for name, p in commands:
        p.set_defaults(func=lambda args, settings, name=name: run(name, settings, args))
    sub.choices["corrections"].set_defaults(
        func=lambda args, settings: run("corrections", settings, args)
    )
