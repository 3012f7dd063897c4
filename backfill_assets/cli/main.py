"""`backfill-assets`: generate a feed, backfill a range through Dagster, show status."""

from __future__ import annotations

import argparse
import signal
import sys
from datetime import date

from backfill_assets import signals
from backfill_assets.cli import corrections
from backfill_assets.cli.backfill import PlanStopped, run_backfill
from backfill_assets.cli.instance import ensure_dagster_home
from backfill_assets.settings import Settings


def _date(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {text!r}") from None


def cmd_generate(args: argparse.Namespace, settings: Settings) -> int:
    from backfill_assets.demo.generate import generate_feed

    summary = generate_feed(
        settings.landing_dir,
        args.start,
        args.end,
        orders_per_day=args.orders_per_day,
        seed=args.seed,
        max_lateness_days=settings.max_lateness_days,
        hot_customer_share=args.hot_customer_share,
    )
    print(
        f"generated {summary.records} records in {summary.order_files} order files and "
        f"{summary.rate_files} rate files under {settings.landing_dir}"
    )
    return 0


def cmd_backfill(args: argparse.Namespace, settings: Settings) -> int:
    return run_backfill(settings, args.start, args.end, args.allow_empty_overwrite)


def cmd_plan(args: argparse.Namespace, settings: Settings) -> int:
    from backfill_assets.cli.plan_report import make_plan, render_plan

    ensure_dagster_home()
    print(render_plan(make_plan(settings, args.start, args.end)))
    return 0


def cmd_reexecute(args: argparse.Namespace, settings: Settings) -> int:
    """Re-execute a failed ranged run from failure: only its held days are rebuilt."""
    import dagster as dg

    from backfill_assets.cli.outcome_table import report_outcomes
    from backfill_assets.cli.runner import outcome_of_run, reexecute_from_failure

    ensure_dagster_home()
    with dg.DagsterInstance.get() as instance:
        outcome = reexecute_from_failure(instance, args.run_id)
        # The days the failed run (or an earlier attempt) published stay published: the table
        # shows the whole range, and exit 0 means every day of it is now published.
        group = instance.get_run_group(args.run_id)
        if group is None:
            raise ValueError(
                f"run {args.run_id} has no run group in this Dagster instance: its re-execution "
                "ran, but the days its earlier attempts published cannot be counted; "
                "backfill-assets status shows what is published"
            )
        for run in group[1]:
            earlier = outcome_of_run(instance, outcome.plan, run.run_id, False)
            for key, days in earlier.published.items():
                for day, rows in days.items():
                    outcome.published.setdefault(key, {}).setdefault(day, rows)
    return report_outcomes([outcome])


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    if args.storage == "s3":
        from backfill_assets.cli.demo import local_s3

        with local_s3(settings) as on_s3:
            return _demo(args, on_s3)
    return _demo(args, settings)


def _demo(args: argparse.Namespace, settings: Settings) -> int:
    from backfill_assets.cli.demo import (
        correction_tour,
        demo_range,
        refresh_downstream,
        segment_service,
        use_first_partition,
    )
    from backfill_assets.days import last_partition
    from backfill_assets.demo.generate import generate_feed

    configured = settings.start_date if settings.start_date_configured else None
    days = demo_range(last_partition(), args.days, configured, args.start, args.end)
    ensure_dagster_home()
    settings = use_first_partition(settings, days.first_partition)
    summary = generate_feed(
        settings.landing_dir,
        days.start,
        days.end,
        orders_per_day=args.orders_per_day,
        seed=args.seed,
        max_lateness_days=settings.max_lateness_days,
        last_arrival=last_partition(),
    )
    print(
        f"demo: generated {summary.records} records for {days.start}..{days.end} "
        f"into {settings.landing_dir}; first partition {days.first_partition}"
    )
    with segment_service(settings) as settings:
        code = run_backfill(settings, days.start, days.end)
        if args.no_correction:
            return code
        return (
            code or correction_tour(settings, days.start, days.end) or refresh_downstream(settings)
        )


def cmd_catch_up(args: argparse.Namespace, settings: Settings) -> int:
    from backfill_assets.cli.catch_up import run_catch_up

    return run_catch_up(settings)


def cmd_maintain(args: argparse.Namespace, settings: Settings) -> int:
    from backfill_assets.cli.maintain import run_maintain

    return run_maintain(settings)


def cmd_repair_manifest(args: argparse.Namespace, settings: Settings) -> int:
    """Set a corrupt staged manifest aside (the error that found it names this command)."""
    from backfill_assets.lake.manifests import set_aside_broken

    moved = set_aside_broken(args.path)
    print(
        f"set aside as {moved}: its files that no table version references are left to "
        "vacuum (`backfill-assets maintain`, after the retention); published ones stay"
    )
    return 0


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    from backfill_assets.cli.status import print_status

    ensure_dagster_home()
    return print_status(settings, args.start, args.end)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="backfill-assets", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="write a synthetic feed into BACKFILL_LANDING_DIR")
    g.add_argument("--start", type=_date, required=True)
    g.add_argument("--end", type=_date, required=True)
    g.add_argument("--orders-per-day", type=int, default=200)
    g.add_argument("--seed", type=int, default=7)
    g.add_argument(
        "--hot-customer-share",
        type=float,
        default=0.0,
        help="share of the orders placed by one customer, C00000 (a skewed key)",
    )
    g.set_defaults(func=cmd_generate)
    b = sub.add_parser("backfill", help="rebuild raw, staging and fact for an event-date range")
    b.add_argument("--start", type=_date, required=True)
    b.add_argument("--end", type=_date, required=True)
    b.add_argument(
        "--allow-empty-overwrite",
        action="store_true",
        help="rebuild raw partitions whose landing files are gone (publishing them empty)",
    )
    b.set_defaults(func=cmd_backfill)
    pl = sub.add_parser(
        "plan", help="dry run: partitions, inputs, missing inputs, bytes, time estimate"
    )
    pl.add_argument("--start", type=_date, required=True)
    pl.add_argument("--end", type=_date, required=True)
    pl.set_defaults(func=cmd_plan)
    r = sub.add_parser(
        "reexecute", help="re-execute a failed backfill run from failure (held days only)"
    )
    r.add_argument("run_id")
    r.set_defaults(func=cmd_reexecute)
    d = sub.add_parser(
        "demo", help="generate 60 days (by default ending yesterday) and backfill them"
    )
    d.add_argument("--days", type=int, default=60)
    d.add_argument("--start", type=_date, help="first day (default: BACKFILL_START_DATE if set)")
    d.add_argument("--end", type=_date, help="last day (default: yesterday, UTC)")
    d.add_argument("--orders-per-day", type=int, default=200)
    d.add_argument("--seed", type=int, default=7)
    d.add_argument(
        "--no-correction",
        action="store_true",
        help="stop after the backfill (skip the restated-rates correction)",
    )
    d.add_argument(
        "--storage",
        choices=("local", "s3"),
        default="local",
        help="s3: the landing zone and the lake on a SeaweedFS server started for the demo",
    )
    d.set_defaults(func=cmd_demo)
    s = sub.add_parser("status", help="per partition and layer: published, checks, rows")
    s.add_argument("--start", type=_date)
    s.add_argument("--end", type=_date)
    s.set_defaults(func=cmd_status)
    c = sub.add_parser(
        "catch-up",
        help="rebuild now the raw partitions and event days that "
        "files landed since the late-data sensor's cursor change",
    )
    c.set_defaults(func=cmd_catch_up)
    m = sub.add_parser(
        "maintain",
        help="recover interrupted correction commands; every table: vacuum with "
        "BACKFILL_RETENTION_DAYS honoured (default 14, at least 7), compact small files, "
        "write checkpoints",
    )
    m.set_defaults(func=cmd_maintain)
    rm = sub.add_parser(
        "repair-manifest",
        help="set aside a corrupt staged manifest (<table>/_staged/<id>.json) that an error named",
    )
    rm.add_argument("path")
    rm.set_defaults(func=cmd_repair_manifest)
    corrections.add_parsers(sub, _date)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run a command. A SIGINT or SIGTERM stops it: no later run is started, a running one
    stops publishing (``publishing.interrupts``), and the exit code is 130 or 143; a second
    one ends the process at once."""
    args = parser().parse_args(argv)
    signals.watch_signals(on_second=_second_signal)
    try:
        settings = Settings.from_env()
        return args.func(args, settings)
    except ValueError as exc:
        print(f"backfill-assets: {exc}", file=sys.stderr)
        return 2
    except PlanStopped as stop:
        print(f"backfill-assets: {stop}", file=sys.stderr)
        return signals.exit_code()
    except (KeyboardInterrupt, signals.Stopped):
        name = signals.signal_name(signals.received() or signal.SIGINT)
        print(f"backfill-assets: stopped by {name}", file=sys.stderr)
        return signals.exit_code()


def _second_signal(signum: int) -> str:
    return (
        f"backfill-assets: a second {signals.signal_name(signum)}: exiting now (a publish "
        "under way lands or not; the next command or `backfill-assets maintain` recovers)"
    )
