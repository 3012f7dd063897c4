"""The I/O-fault harness over whole steps of the pipeline: raw, the event days, LTV.

A lake is built from a landing zone with one file held back (the "before"), the file lands,
and the steps before the one under test run again. Then, on a fresh copy of that lake for each
point N, the step runs through Dagster with an ``OSError`` at its Nth I/O operation
(``testing/iofault.py``; the run fails, or its retry absorbs the error), and every partition
of every table must hold its content from before or from after. The step then runs again and
``backfill-assets maintain``'s work runs: no staged version is left open, every table reads,
and each equals the test suite's reference implementation computed from the landing zone.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sys
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from types import SimpleNamespace

from deltalake import DeltaTable

from backfill_assets.backfill_plan import RunPlan
from backfill_assets.catalog import (
    CORRECTION_REASON_TAG,
    CORRECTION_TAG,
    FCT_CUSTOMER_LTV,
    FCT_DAILY_REVENUE,
    RAW_ORDERS,
    STG_ORDERS,
)
from backfill_assets.cli.backfill import run_backfill
from backfill_assets.cli.runner import execute
from backfill_assets.corrections import registry
from backfill_assets.demo.generate import generate_feed
from backfill_assets.lake import CommitInfo, Lake
from backfill_assets.lake.maintenance import maintain_tables
from backfill_assets.resources import code_version
from backfill_assets.testing.iofault import arm
from backfill_assets_testkit.iofault_harness import run_child
from backfill_assets_testkit.reference import Reference, customer_ltv

FIRST, LAST = date(2024, 1, 1), date(2024, 1, 3)
HELD_BACK_ARRIVAL = date(2024, 1, 2)
DAYS = [FIRST + timedelta(days=i) for i in range((LAST - FIRST).days + 1)]


@dataclass(frozen=True)
class Step:
    name: str
    assets: tuple
    before: tuple  # the steps that run (without faults) between the file landing and this one
    current: tuple[str, ...]  # the tables that equal the reference afterwards; the rest: before
    correction: bool = False  # run as the correction CORRECTION: staged beside production


CORRECTION = "fix-iofault"


RAW = Step("raw", (RAW_ORDERS,), (), ("raw/orders",))
EVENT_DAYS = Step(
    "event_days",
    (STG_ORDERS, FCT_DAILY_REVENUE),
    ((RAW_ORDERS,),),
    ("raw/orders", "staging/orders", "fact/daily_revenue"),
)
LTV = Step(
    "ltv",
    (FCT_CUSTOMER_LTV,),
    ((RAW_ORDERS,), (STG_ORDERS, FCT_DAILY_REVENUE)),
    ("raw/orders", "staging/orders", "fact/daily_revenue", "fact/customer_ltv"),
)
CORRECT = Step(
    "correct", (STG_ORDERS, FCT_DAILY_REVENUE), ((RAW_ORDERS,),), ("raw/orders",), correction=True
)
STEPS = (RAW, EVENT_DAYS, LTV, CORRECT)
TABLES = (
    "raw/orders",
    "quarantine/orders",
    "staging/orders",
    "fact/daily_revenue",
    "fact/customer_ltv",
)
PARTITION = {
    "raw/orders": "arrival_date",
    "quarantine/orders": "arrival_date",
    "staging/orders": "event_date",
    "fact/daily_revenue": "event_date",
    "fact/customer_ltv": "as_of_date",
}


def prepare(env) -> Path:
    """The "before" lake: the whole pipeline over a landing zone with one file held back, which
    then lands. Returns a copy of that lake."""
    landing = env.settings.landing_dir
    generate_feed(landing, FIRST, LAST, orders_per_day=8, seed=4)
    folder = landing / "orders" / f"arrival_date={HELD_BACK_ARRIVAL}"
    held = sorted(folder.iterdir())[0]
    aside = env.home.parent / "held-back" / held.name
    aside.parent.mkdir(parents=True, exist_ok=True)
    held.rename(aside)
    with contextlib.redirect_stdout(io.StringIO()):
        run_backfill(env.settings, FIRST, LAST)
    aside.rename(held)
    template = env.home.parent / "before"
    shutil.copytree(env.settings.lake_dir, template)
    return template


def step_template(env, before: Path, step: Step) -> Path:
    """The lake the step under test starts from: ``before`` with the steps before it run."""
    _restore(env, before)
    for assets in step.before:
        assert execute(RunPlan(assets, FIRST, LAST), env.instance).success
    if step.correction:
        registry.open_correction(
            env.settings.lake_dir, CORRECTION, "restated", FIRST, LAST, code_version()
        )
    template = env.home.parent / f"start-{step.name}"
    shutil.rmtree(template, ignore_errors=True)
    shutil.copytree(env.settings.lake_dir, template)
    return template


def operations(env, template: Path, step: Step, log: Path) -> list[str]:
    """The names of the step's I/O operations, in order."""
    _restore(env, template)
    log.unlink(missing_ok=True)
    with arm("count", log=str(log)):
        assert _execute(env, step).success
    return [line.split(" ", 1)[1].strip() for line in log.read_text().splitlines()]


def run_point(env, template: Path, step: Step, n: int, mode: str = "error") -> list[str]:
    """The step failed at operation ``n`` (an ``OSError`` in this process, or a SIGKILL of a
    child running it), checked, run again, maintained, checked: the problems found."""
    problems: list[str] = []
    where = f"{step.name}/{mode}:{n}"
    _restore(env, template)
    before = snapshot(env)
    if mode == "error":
        with arm("error", n):
            _execute(env, step)
    else:
        problems += kill_in_child(step, n)
    try:
        middle = snapshot(env)
    except Exception as exc:
        return [f"unreadable at {where}: {type(exc).__name__}: {exc}"]
    if not _execute(env, step).success:
        problems.append(f"unconverged at {where}: the step's re-run failed")
    lake = Lake(env.settings.lake_dir, _spark())
    maintain_tables(
        lake,
        [(t, PARTITION[t]) for t in TABLES],
        retention_days=7,
        commit=CommitInfo(run_id="maintain", code_version="test"),
    )
    for table in TABLES:
        left = [s.id for s in lake.staging.versions(table)] if lake.exists(table) else []
        if [i for i in left if not (step.correction and i == CORRECTION)]:
            problems.append(f"orphans at {where}: {table} has open staged versions {left}")
    if step.correction:
        problems += [f"unconverged at {where}: {m}" for m in correction_against_reference(env)]
    after = snapshot(env)
    for table in TABLES:
        for day in set(middle[table]) | set(before[table]) | set(after[table]):
            seen = middle[table].get(day, Counter())
            if seen not in (before[table].get(day, Counter()), after[table].get(day, Counter())):
                problems.append(f"torn at {where}: {table} {day}")
    problems += [
        f"unconverged at {where}: {m}" for m in against_reference(env, after, step.current)
    ]
    problems += [
        f"unconverged at {where}: {table} changed, downstream of the step"
        for table in ("staging/orders", "fact/daily_revenue", "fact/customer_ltv")
        if table not in step.current and after[table] != before[table]
    ]
    return problems


def _spark():
    """The session the pipeline's runs in this process started (the lake's engine takes it on
    delta-spark, and ignores it on delta-rs), or None."""
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


def kill_in_child(step: Step, n: int) -> list[str]:
    """The step run through Dagster in a child process (the pipeline's environment, this
    process's) that the seam SIGKILLs at operation ``n``: what went wrong, if anything."""
    child = run_child("backfill_assets_testkit.iofault_steps", [step.name], f"kill:{n}")
    if child.returncode != -9:
        ended = f"the child ended {child.returncode}, not killed: {child.stderr[-1500:]}"
        return [f"unconverged at {step.name}/kill:{n}: {ended}"]
    return []


def _execute(env, step: Step):
    if not step.correction:
        return execute(RunPlan(step.assets, FIRST, LAST), env.instance)
    tags = {CORRECTION_TAG: CORRECTION, CORRECTION_REASON_TAG: "restated"}
    return execute(RunPlan(step.assets, FIRST, LAST), env.instance, tags, correction=True)


def correction_against_reference(env) -> list[str]:
    """Where the correction's record or its staged rows differ from the reference: every day
    staged, none held, and the staged rows of staging/orders the reference's."""
    import pyarrow.parquet as pq

    c = registry.get(env.settings.lake_dir, CORRECTION)
    problems = []
    if c.pending:
        problems.append(f"the record keeps an intent: {c.pending}")
    for table in ("staging/orders", "fact/daily_revenue"):
        if c.table(table).ready_days() != DAYS:
            problems.append(f"{table}: ready days {c.table(table).ready_days()}")
    staged = Lake(env.settings.lake_dir, _spark()).staging.version("staging/orders", CORRECTION)
    if staged is None:
        return [*problems, "no staged version of staging/orders"]
    got = Counter(
        (f.partition, r["order_id"], r["amount_usd"])
        for f in staged.files
        for r in pq.read_table(env.settings.lake_dir / "staging/orders" / f.path).to_pylist()
    )
    reference = Reference(env.settings.landing_dir, env.settings.max_lateness_days)
    want = Counter((s.event_date, s.order_id, s.amount_usd) for s in reference.staging(DAYS)[0])
    if got != want:
        problems.append("the staged staging/orders differs from the reference")
    return problems


def _restore(env, template: Path) -> None:
    shutil.rmtree(env.settings.lake_dir, ignore_errors=True)
    shutil.copytree(template, env.settings.lake_dir)


def snapshot(env) -> dict[str, dict[date, Counter]]:
    """Every table's rows per partition, read through its log with delta-rs (raises when a
    file the log references is gone)."""
    found: dict[str, dict[date, Counter]] = {}
    for table in TABLES:
        path = env.settings.lake_dir / table
        parts: dict[date, Counter] = defaultdict(Counter)
        if (path / "_delta_log").is_dir():
            for row in DeltaTable(str(path)).to_pyarrow_table().to_pylist():
                parts[row[PARTITION[table]]][tuple(sorted(row.items()))] += 1
        found[table] = dict(parts)
    return found


def against_reference(
    env, snap: dict[str, dict[date, Counter]], tables: tuple[str, ...]
) -> list[str]:
    """Where the lake differs from the reference implementation over the landing zone."""
    reference = Reference(env.settings.landing_dir, env.settings.max_lateness_days)
    arrivals = [d for d in reference.arrival_dates if FIRST <= d <= LAST + timedelta(days=7)]
    expected = reference.expected(arrivals)

    def rows(table: str, pick: Callable[[dict], tuple]) -> Counter:
        return Counter(
            pick(dict(r))
            for part in snap[table].values()
            for r, k in part.items()
            for _ in range(k)
        )

    staging, _ = reference.staging(DAYS)
    ltv, _ = customer_ltv(reference, FIRST, LAST)
    checks = {
        "raw/orders": (
            rows(
                "raw/orders",
                lambda r: (r["arrival_date"], r["source_file"], r["line_number"], r["payload"]),
            ),
            Counter(
                (r.arrival_date, r.source_file, r.line_number, r.payload)
                for r in expected.raw_orders
            ),
        ),
        "staging/orders": (
            rows("staging/orders", lambda r: (r["event_date"], r["order_id"], r["amount_usd"])),
            Counter((s.event_date, s.order_id, s.amount_usd) for s in staging),
        ),
        "fact/daily_revenue": (
            rows(
                "fact/daily_revenue",
                lambda r: (r["event_date"], r["country"], r["orders"], r["revenue_usd"]),
            ),
            Counter(
                (f.event_date, f.country, f.orders, f.revenue_usd) for f in reference.fact(DAYS)
            ),
        ),
        "fact/customer_ltv": (
            rows(
                "fact/customer_ltv",
                lambda r: (
                    r["as_of_date"],
                    r["customer_id"],
                    r["orders"],
                    r["lifetime_revenue_usd"],
                ),
            ),
            Counter((r[0], r[1], r[2], r[4]) for r in ltv),
        ),
    }
    return [
        f"{table} differs from the reference"
        for table, (got, want) in checks.items()
        if table in tables and got != want
    ]


def _child(step_name: str) -> None:
    """The step, run through Dagster on the parent's instance (``pipeline_env``'s, whose home
    this process inherits): the killed run stays started there, as in production, until the
    next run's start releases it (``publishing.run_workers``)."""
    from backfill_assets.settings import Settings
    from backfill_assets_testkit.pipeline_env import dagster_test_instance

    step = next(s for s in STEPS if s.name == step_name)
    with dagster_test_instance(Path(os.environ["DAGSTER_HOME"])) as instance:
        _execute(SimpleNamespace(settings=Settings.from_env(), instance=instance), step)


if __name__ == "__main__":
    _child(sys.argv[1])
    sys.stdout.flush()
    os._exit(0)  # deltalake readers can abort the interpreter at exit (delta-rs#2184)
