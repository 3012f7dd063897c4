"""Fault harness: SIGKILLs with resume, the live lane against a backfill, fuzzed landing input.

    .venv/bin/python bench/chaos.py --kills 20 --days 30 --seed 7

Every figure is checked against the test suite's reference implementation of the data
contract (``backfill_assets_testkit/reference.py``, pure Python), reading the tables with
delta-rs: nothing of the pipeline under test computes an expected value.

1. **kills**: an all-layer ``backfill-assets backfill`` of ``--days`` days is SIGKILLed (its
   whole process group: the CLI, its JVM, Spark's Python workers) at a seeded random moment,
   printed, then resumed by running the same command again, which may be killed in turn.
   After each kill, every partition Dagster reports materialized, and every partition in the
   lake, is compared with the reference: ``torn`` counts partitions holding a proper part of
   their rows, ``duplicate_keys`` rows sharing a table's key, ``lost_rows`` reference rows
   missing from a partition Dagster reports materialized, ``mismatched_partitions`` any
   other difference. After the last kill the resume runs to the end and every partition of
   the range must equal the reference.
2. **live**: the real ``dagster-daemon`` with the late-data sensor and the daily schedule on,
   while a ``--live-backfill-days`` backfill runs over the same days; the late deliveries of
   the last ``--live-days`` days land during it. At the end the tables must equal the
   reference, and Dagster's materialized partitions must be those the lake holds.
   ``live_conflicts_retried`` counts the steps Dagster retried (a lost publish race).
3. **fuzz**: ``--fuzz-cases`` landing files drawn by hypothesis (random bytes, invalid
   UTF-8, NUL bytes, very long lines, deeply nested JSON, duplicate keys, amounts at the
   edges of DECIMAL(18,2), timestamps at zone and calendar extremes, names with spaces,
   unicode or ``..``) land in one zone beside decoys outside it, and one raw run reads them
   all. Each landed record must be in raw, each rejected one in quarantine with the reason
   an independent classifier gives (the reference's ``judge``; a line that is not UTF-8 is
   ``malformed_json``), and no decoy's content may appear anywhere.

``crashes`` counts commands that ended other than with 0 (all published) or 1 (days held),
or hung past their time limit. The last line is exactly::

    CHAOS kills=<n> torn=<n> duplicate_keys=<n> lost_rows=<n> mismatched_partitions=<n>
    live_conflicts_retried=<n> fuzz_cases=<n> crashes=<n>"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, fields
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backfill_assets.days import days_between
from backfill_assets_testkit.fuzz_feed import FUZZ_ARRIVALS, LATENESS, classify, draw_fuzz_cases
from backfill_assets_testkit.reference import (
    FactRow,
    QuarantineRow,
    RawRow,
    Reference,
    StagingRow,
)

FIRST_DAY = date(2024, 1, 1)


@dataclass
class Counts:
    kills: int = 0
    torn: int = 0
    duplicate_keys: int = 0
    lost_rows: int = 0
    mismatched_partitions: int = 0
    live_conflicts_retried: int = 0
    fuzz_cases: int = 0
    crashes: int = 0

    def line(self) -> str:
        return "CHAOS " + " ".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self))


# ---------------------------------------------------------------- the lake against the reference


@dataclass(frozen=True)
class Checked:
    """A table of the contract: its path, partition column, key, and reference row type."""

    path: str
    partition: str
    key: tuple[str, ...]
    row: type


CHECKED = (
    Checked("raw/orders", "arrival_date", ("arrival_date", "source_file", "line_number"), RawRow),
    Checked(
        "quarantine/orders",
        "arrival_date",
        ("arrival_date", "source_file", "line_number"),
        QuarantineRow,
    ),
    Checked("staging/orders", "event_date", ("event_date", "order_id"), StagingRow),
    Checked("fact/daily_revenue", "event_date", ("event_date", "country"), FactRow),
)
ASSET_OF_TABLE = {
    "raw/orders": "raw_orders",
    "staging/orders": "stg_orders",
    "fact/daily_revenue": "fct_daily_revenue",
}


def table_rows(lake: Path, path: str, columns: list[str] | None = None) -> list[dict]:
    """A table's rows read with delta-rs; none when the table was never written."""
    from deltalake import DeltaTable

    if not (lake / path / "_delta_log").is_dir():
        return []
    return DeltaTable(str(lake / path)).to_pyarrow_table(columns=columns).to_pylist()


def lake_partitions(lake: Path, table: Checked) -> dict[date, Counter]:
    """The table's rows per partition, as the reference's row type, read with delta-rs."""

    names = [f.name for f in fields(table.row)]
    out: dict[date, Counter] = {}
    for row in table_rows(lake, table.path, names):
        out.setdefault(row[table.partition], Counter())[table.row(**row)] += 1
    return out


def reference_partitions(
    reference: Reference, table: Checked, days: list[date]
) -> dict[date, Counter]:
    rows: list[RawRow] | list[QuarantineRow] | list[StagingRow] | list[FactRow]
    if table.row is RawRow:
        rows = reference.raw_orders(days)
    elif table.row is QuarantineRow:
        rows = reference.quarantine(days)
    elif table.row is StagingRow:
        rows = reference.staging(days)[0]
    else:
        rows = reference.fact(days)
    out: dict[date, Counter] = {d: Counter() for d in days}
    for row in rows:
        out[getattr(row, table.partition)][row] += 1
    return out


def materialized(home: Path) -> dict[str, set[date]]:
    """Per asset, the partitions Dagster reports materialized."""
    import dagster as dg

    os.environ["DAGSTER_HOME"] = str(home)
    with dg.DagsterInstance.get() as instance:
        return {
            asset: {
                date.fromisoformat(p)
                for p in instance.get_materialized_partitions(dg.AssetKey(asset))
            }
            for asset in ASSET_OF_TABLE.values()
        }


def audit(
    counts: Counts,
    lake: Path,
    home: Path,
    reference: Reference,
    days: dict[str, list[date]],
    complete: bool,
) -> list[str]:
    """Compare the lake (and Dagster's materialized partitions) with the reference; add what
    is wrong to ``counts`` and return it in words. ``complete``: every partition of ``days``
    must be there (the end of a run); otherwise only those Dagster reports or the lake holds."""
    reported = materialized(home)
    problems = []
    for table in CHECKED:
        table_days = days[table.partition]
        expected = reference_partitions(reference, table, table_days)
        actual = lake_partitions(lake, table)
        keys = Counter(
            tuple(getattr(r, k) for k in table.key)
            for rows in actual.values()
            for r in rows.elements()
        )
        duplicated = sum(n - 1 for n in keys.values() if n > 1)
        if duplicated:
            counts.duplicate_keys += duplicated
            problems.append(f"{table.path}: {duplicated} duplicate key(s)")
        asset = ASSET_OF_TABLE.get(table.path)  # quarantine/orders: none of its own
        must = set(table_days) if complete else (reported.get(asset, set()) if asset else set())
        for day in sorted(set(actual) | (must & set(table_days))):
            want, got = expected.get(day, Counter()), actual.get(day, Counter())
            if got == want:
                continue
            missing = sum((want - got).values())
            if day in must:
                counts.lost_rows += missing
            if got and got < want:
                counts.torn += 1
                problems.append(
                    f"{table.path}[{day}]: torn, {sum(got.values())} of {sum(want.values())} rows"
                )
            elif got or day in must:
                counts.mismatched_partitions += 1
                problems.append(
                    f"{table.path}[{day}]: {sum(got.values())} rows, {missing} missing, "
                    f"{sum((got - want).values())} unexpected"
                )
    return problems


# ------------------------------------------------------------------------ processes

# Every process the harness starts, each in its own process group: stopped with the harness,
# however it ends (its last line, an exception, SIGTERM, Ctrl-C; see ``stop_started``).
STARTED: list[subprocess.Popen] = []
STOP_GRACE_SECONDS = 20.0


def spawn(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """``args`` in its own process group (so a kill takes all of it: a CLI's JVM and Spark's
    Python workers, the daemon's code servers and run workers), stopped with the harness."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            args, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    STARTED.append(proc)
    return proc


def group_members(pgid: int) -> list[psutil.Process]:
    """The live processes of process group ``pgid``: its leader may have exited before the rest
    (a daemon before its code server and the runs that server started)."""
    members = []
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) == pgid and process.status() != psutil.STATUS_ZOMBIE:
                members.append(process)
        except (ProcessLookupError, psutil.NoSuchProcess):
            pass
    return members


def stop_started() -> None:
    """SIGTERM every process group the harness started that still has a process, SIGKILL what
    is left after ``STOP_GRACE_SECONDS``; descendants that left their group go the same way."""
    for proc in STARTED:
        proc.poll()
    running = [p for p in STARTED if p.returncode is None or group_members(p.pid)]
    found: set[psutil.Process] = set()
    for proc in running:
        for member in group_members(proc.pid):
            found.add(member)
            try:
                found.update(member.children(recursive=True))
            except psutil.NoSuchProcess:
                pass
    tree = list(found)
    for proc in running:
        signal_group(proc, signal.SIGTERM)
    _, alive = psutil.wait_procs(tree, timeout=STOP_GRACE_SECONDS)
    for proc in running:
        signal_group(proc, signal.SIGKILL)
    for process in alive:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=10)
    for proc in running:
        proc.poll()  # reaped: no zombie left behind


def signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def exit_on_signal(signum: int, _frame) -> None:
    """SIGTERM or SIGINT: unwind (``finally`` blocks run), then stop every started process."""
    signal.signal(signum, signal.SIG_IGN)  # a second signal does not interrupt the stopping
    raise SystemExit(128 + signum)


def pipeline_env(root: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "DAGSTER_HOME": str(root / "home"),
        "BACKFILL_LANDING_DIR": str(root / "landing"),
        "BACKFILL_LAKE_DIR": str(root / "lake"),
        "BACKFILL_START_DATE": FIRST_DAY.isoformat(),
        "BACKFILL_MAX_LATENESS_DAYS": str(LATENESS),
        "BACKFILL_SPARK_SHUFFLE_PARTITIONS": "4",
        "PYSPARK_PYTHON": sys.executable,
        "DAGSTER_DISABLE_TELEMETRY": "yes",
        **extra,
    }


def start_cli(env: dict[str, str], log: Path, *args: str) -> subprocess.Popen:
    """A ``backfill-assets`` command in its own process group (so a kill takes all of it)."""
    return spawn([sys.executable, "-m", "backfill_assets.cli", *args], env, log)


def kill_group(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
    proc.wait()


def prepare(root: Path, days: int, orders_per_day: int, seed: int) -> list[date]:
    """A fresh landing zone of ``days`` generated days and an instance configured like `make`'s."""
    from backfill_assets.demo.generate import generate_feed

    (root / "home").mkdir(parents=True)
    shutil.copy(ROOT / "dagster.yaml", root / "home" / "dagster.yaml")
    end = FIRST_DAY + timedelta(days=days - 1)
    generate_feed(
        root / "landing",
        FIRST_DAY,
        end,
        orders_per_day=orders_per_day,
        seed=seed,
        max_lateness_days=LATENESS,
    )
    return days_between(FIRST_DAY, end)


def range_days(event_days: list[date]) -> dict[str, list[date]]:
    """The partitions a backfill of ``event_days`` builds, by partition column."""
    start, end = event_days[0], event_days[-1]
    return {
        "arrival_date": days_between(start, end + timedelta(days=LATENESS)),
        "event_date": event_days,
    }


# ------------------------------------------------------------------------------ kills


def kills(
    counts: Counts,
    work: Path,
    n_kills: int,
    n_days: int,
    orders_per_day: int,
    rng: random.Random,
    seed: int,
    run_timeout_s: float,
) -> None:
    root = work / "kills"
    event_days = prepare(root, n_days, orders_per_day, seed)
    reference = Reference(root / "landing", LATENESS)
    env = pipeline_env(root)
    days = range_days(event_days)
    args = ("backfill", "--start", event_days[0].isoformat(), "--end", event_days[-1].isoformat())
    horizon = 20.0 + 2.0 * n_days  # seconds a whole backfill takes, until one is measured
    attempt = 0
    while counts.kills < n_kills:
        attempt += 1
        moment = rng.uniform(1.0, horizon)
        began = time.monotonic()
        proc = start_cli(env, root / "backfill.log", *args)
        try:
            code = proc.wait(timeout=moment)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            counts.kills += 1
            problems = audit(counts, root / "lake", root / "home", reference, days, complete=False)
            print(
                f"kill {counts.kills}: at {moment:.1f}s of attempt {attempt}: "
                f"{'; '.join(problems) or 'every partition equals the reference'}",
                flush=True,
            )
            continue
        horizon = time.monotonic() - began
        print(
            f"attempt {attempt} finished (exit {code}) in {horizon:.0f}s before its kill at "
            f"{moment:.1f}s; the next kills draw from [1, {horizon:.0f}]s",
            flush=True,
        )
        if code not in (0, 1):
            counts.crashes += 1
    finish(counts, root, env, reference, days, args, run_timeout_s, "kills: the resume")


def finish(
    counts: Counts,
    root: Path,
    env: dict[str, str],
    reference: Reference,
    days: dict[str, list[date]],
    args: tuple[str, ...],
    run_timeout_s: float,
    what: str,
) -> None:
    """Run ``args`` to its end, then every partition of ``days`` must equal the reference."""
    proc = start_cli(env, root / "backfill.log", *args)
    try:
        code: int | str = proc.wait(timeout=run_timeout_s)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        code = "hung"
    if code != 0:
        counts.crashes += 1
        print(f"{what} ended {code}; log: {root / 'backfill.log'}", flush=True)
    problems = audit(counts, root / "lake", root / "home", reference, days, complete=True)
    print(f"{what}: {'; '.join(problems) or 'every partition equals the reference'}", flush=True)


# ------------------------------------------------------------------------------- live


def hold_late_deliveries(landing: Path, held: Path, event_days: list[date]) -> list[list[Path]]:
    """Moves the late files of ``event_days`` (each day's files after its first, which land
    in later arrival folders) out of the landing zone into ``held``: one delivery per day,
    as the paths they will land at again."""
    deliveries = []
    for day in event_days:
        late = sorted(
            p
            for p in landing.glob(f"orders/arrival_date=*/orders-{day:%Y%m%d}-*.jsonl")
            if not p.name.endswith("-01.jsonl")
        )
        for path in late:
            target = held / path.relative_to(landing)
            target.parent.mkdir(parents=True, exist_ok=True)
            path.rename(target)
        if late:
            deliveries.append(late)
    return deliveries


def land(held: Path, landing: Path, delivery: list[Path]) -> None:
    """Lands a delivery: each file renamed into its arrival folder (atomic, like an upload
    that writes aside and renames)."""
    for path in delivery:
        path.parent.mkdir(parents=True, exist_ok=True)
        (held / path.relative_to(landing)).rename(path)


def start_daemon(env: dict[str, str], log: Path) -> subprocess.Popen:
    return spawn(
        [str(Path(sys.executable).parent / "dagster-daemon"), "run", "-w", "workspace.yaml"],
        env,
        log,
    )


def stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM ``proc``'s process group, then SIGKILL it if any of it is left after the grace:
    stopped when every process of the group has gone, not only its leader."""
    for sig, grace in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if proc.poll() is not None and not group_members(proc.pid):
                return
            time.sleep(0.2)


def wait_quiet(home: Path, daemon: subprocess.Popen, quiet_s: float, timeout_s: float) -> bool:
    """Waits until no run is queued or running and none was created for ``quiet_s`` seconds
    (the sensors have ticked on everything that landed); False on the time limit."""
    import dagster as dg

    os.environ["DAGSTER_HOME"] = str(home)
    deadline = time.monotonic() + timeout_s
    with dg.DagsterInstance.get() as instance:
        seen, since = -1, time.monotonic()
        while time.monotonic() < deadline and daemon.poll() is None:
            runs = instance.get_runs()
            if len(runs) != seen or any(not r.is_finished for r in runs):
                seen, since = len(runs), time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                return True
            time.sleep(2)
    return False


def dagster_disagreements(
    home: Path, lake: Path, first: date, days: dict[str, list[date]]
) -> list[str]:
    """Partitions whose status in Dagster (what the UI shows) is not "materialized" although
    the lake holds them published, and materialized ones the lake lacks."""
    import dagster as dg

    os.environ["DAGSTER_HOME"] = str(home)
    partitions = dg.DailyPartitionsDefinition(start_date=first.isoformat())
    wrong = []
    with dg.DagsterInstance.get() as instance:
        for table in CHECKED:
            asset = ASSET_OF_TABLE.get(table.path)
            if asset is None:
                continue
            published = published_partitions(lake, table)
            keys = [d.isoformat() for d in days[table.partition]]
            status = instance.get_status_by_partition(dg.AssetKey(asset), keys, partitions) or {}
            for key in keys:
                state = status.get(key)
                shown = getattr(state, "value", state)
                in_lake = date.fromisoformat(key) in published
                if in_lake != (shown == "MATERIALIZED"):
                    wrong.append(
                        f"{asset}[{key}]: Dagster shows {shown}, lake "
                        f"{'has' if in_lake else 'lacks'} it"
                    )
    return wrong


def published_partitions(lake: Path, table: Checked) -> set[date]:
    """The partitions the table's log says were written, empty ones included (a partition of
    zero rows is published as a commit naming it, see the lake layer's commit info)."""
    from deltalake import DeltaTable

    if not (lake / table.path / "_delta_log").is_dir():
        return set()
    out: set[date] = set()
    for commit in DeltaTable(str(lake / table.path)).history():
        for day in json.loads(commit.get("userMetadata") or "{}").get("partitions", []):
            out.add(date.fromisoformat(day))
    return out


def retried_steps(home: Path) -> list[tuple[bool, str]]:
    """Every step Dagster retried, in every run: (a lost publish race?, what it was)."""
    import dagster as dg
    from dagster._core.events import DagsterEventType

    os.environ["DAGSTER_HOME"] = str(home)
    out = []
    with dg.DagsterInstance.get() as instance:
        for run in instance.get_runs():
            for event in instance.all_logs(run.run_id, of_type=DagsterEventType.STEP_UP_FOR_RETRY):
                error = event.get_dagster_event().step_retry_data.error
                cause = error.cause or error
                out.append(
                    (
                        cause.cls_name == "LakeConflict",
                        f"{run.run_id[:8]} {event.step_key}: {cause.message.strip()[:160]}",
                    )
                )
    return out


def live(
    counts: Counts,
    work: Path,
    n_days: int,
    live_days: int,
    orders_per_day: int,
    rng: random.Random,
    seed: int,
    run_timeout_s: float,
) -> None:
    """The daemon's sensor and schedule fold the last ``live_days`` days' late deliveries in
    while a backfill of ``n_days`` days ending yesterday runs over the same days."""
    from backfill_assets.cli.demo import demo_range
    from backfill_assets.demo.generate import generate_feed

    root = work / "live"
    (root / "home").mkdir(parents=True)
    shutil.copy(ROOT / "dagster.yaml", root / "home" / "dagster.yaml")
    yesterday = date.today() - timedelta(days=1)  # the schedule's yesterday (UTC on this machine)
    span = demo_range(yesterday, n_days)
    landing = root / "landing"
    generate_feed(
        landing,
        span.start,
        span.end,
        orders_per_day=orders_per_day,
        seed=seed,
        max_lateness_days=LATENESS,
        last_arrival=span.end,
    )
    event_days = days_between(span.start, span.end)
    deliveries = hold_late_deliveries(landing, root / "held", event_days[-live_days:])
    # The schedule ticks once, a minute or two into the backfill (a schedule's run key is
    # unique per tick, not per day: ticking every minute would request yesterday every minute).
    tick = datetime.now(UTC) + timedelta(seconds=150)
    env = pipeline_env(
        root,
        BACKFILL_START_DATE=span.first_partition.isoformat(),
        BACKFILL_AUTOMATION="on",
        BACKFILL_SENSOR_INTERVAL_SECONDS="5",
        BACKFILL_LANDING_SETTLE_SECONDS="1",
        BACKFILL_DAILY_CRON=f"{tick.minute} {tick.hour} * * *",
    )
    horizon = 30.0 + 2.0 * n_days
    moments = sorted(rng.uniform(5.0, horizon) for _ in deliveries)
    print(
        f"live: a {n_days}-day backfill ({span.start}..{span.end}) under the daemon, "
        f"daily_refresh at {tick:%H:%M} UTC; {len(deliveries)} late deliveries land at "
        f"{', '.join(f'{m:.0f}s' for m in moments)}",
        flush=True,
    )
    daemon = start_daemon(env, root / "daemon.log")
    try:
        time.sleep(10)  # the daemon's first sensor ticks take the built state (none) as seen
        began = time.monotonic()
        proc = start_cli(
            env,
            root / "backfill.log",
            "backfill",
            "--start",
            span.start.isoformat(),
            "--end",
            span.end.isoformat(),
        )
        for moment, delivery in zip(moments, deliveries, strict=True):
            time.sleep(max(0.0, began + moment - time.monotonic()))
            land(root / "held", landing, delivery)
        code: int | str
        try:
            code = proc.wait(timeout=max(1.0, run_timeout_s - (time.monotonic() - began)))
        except subprocess.TimeoutExpired:
            kill_group(proc)
            code = "hung"
        print(f"live: the backfill ended {code} after {time.monotonic() - began:.0f}s", flush=True)
        if code not in (0, 1):
            counts.crashes += 1
        # every late delivery queues runs behind the backfill's in the one-slot spark pool
        if not wait_quiet(root / "home", daemon, quiet_s=40.0, timeout_s=3 * run_timeout_s):
            counts.crashes += 1
            print(f"live: the daemon's runs did not settle; log: {root / 'daemon.log'}", flush=True)
    finally:
        stop_group(daemon)
    retried = retried_steps(root / "home")
    counts.live_conflicts_retried += sum(conflict for conflict, _ in retried)
    for conflict, line in retried:
        print(
            f"live: retried ({'a lost race' if conflict else 'another cause'}) {line}", flush=True
        )
    days = {"arrival_date": event_days, "event_date": event_days}
    reference = Reference(landing, LATENESS)
    problems = audit(counts, root / "lake", root / "home", reference, days, complete=True)
    disagreements = dagster_disagreements(root / "home", root / "lake", span.first_partition, days)
    counts.mismatched_partitions += len(disagreements)
    print(
        "live: "
        + (
            "; ".join(problems + disagreements)
            or "every partition equals the reference, and Dagster shows each materialized"
        ),
        flush=True,
    )


# ------------------------------------------------------------------------------- fuzz

DECOY = "decoy-outside-the-landing-root"


def fuzz(counts: Counts, work: Path, n_cases: int, seed: int, run_timeout_s: float) -> None:

    root = work / "fuzz"
    landing = root / "landing"
    (root / "home").mkdir(parents=True)
    shutil.copy(ROOT / "dagster.yaml", root / "home" / "dagster.yaml")
    expected: dict[tuple[date, str, int], tuple[str | None, str | None]] = {}
    cases = draw_fuzz_cases(n_cases, seed)
    for i, (day, name, content) in enumerate(cases):
        name = f"{i:04d} {name}"  # unique, and a space in every name
        folder = landing / "orders" / f"arrival_date={day.isoformat()}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(content)
        landed = name.endswith(".jsonl") and not name.startswith(("_", "."))
        for number, payload, reason in classify(content, day) if landed else ():
            expected[(day, f"orders/{folder.name}/{name}", number)] = (payload, reason)
    plant_decoys(root, landing)
    counts.fuzz_cases += len(cases)
    env = pipeline_env(root)
    last = FUZZ_ARRIVALS[-1]
    proc = start_cli(
        env,
        root / "backfill.log",
        "backfill",
        "--start",
        FIRST_DAY.isoformat(),
        "--end",
        last.isoformat(),
    )
    try:
        code: int | str = proc.wait(timeout=run_timeout_s)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        code = "hung"
    if code not in (0, 1):
        counts.crashes += 1
        print(f"fuzz: the backfill ended {code}; log: {root / 'backfill.log'}", flush=True)
    raw = {
        (r["arrival_date"], r["source_file"], r["line_number"]): r["payload"]
        for r in table_rows(root / "lake", "raw/orders")
    }
    reasons = {
        (r["arrival_date"], r["source_file"], r["line_number"]): r["reason"]
        for r in table_rows(root / "lake", "quarantine/orders")
    }
    wrong = []
    for key, (payload, reason) in expected.items():
        if key not in raw:
            wrong.append(f"{key}: not in raw")
        elif payload is not None and raw[key] != payload:
            wrong.append(f"{key}: raw payload differs")
        if reasons.get(key) != reason:
            wrong.append(f"{key}: reason {reasons.get(key)!r}, expected {reason!r}")
    extra = set(raw) - set(expected)
    wrong += [f"{key}: in raw, not landed" for key in sorted(extra)]
    leaked = sum(DECOY in (p or "") for p in raw.values())
    wrong += [f"{leaked} decoy line(s) from outside the landing root in raw"] if leaked else []
    counts.lost_rows += sum(1 for key in expected if key not in raw)
    counts.mismatched_partitions += len(
        {key[0] for key in (set(expected) ^ set(raw))}
        | {k[0] for k, (p, r) in expected.items() if reasons.get(k) != r}
    )
    print(
        f"fuzz: {len(cases)} files, {len(expected)} records: "
        f"{'; '.join(wrong[:10]) or 'each in raw, each rejected one in quarantine with its reason'}"
        + (f" (+{len(wrong) - 10} more)" if len(wrong) > 10 else ""),
        flush=True,
    )


def plant_decoys(root: Path, landing: Path) -> None:
    """Files outside the landing root that a path escaping it would reach: a sibling tree laid
    out like the landing zone, and symbolic links from inside the zone to it."""
    outside = root / "outside"
    line = json.dumps({"order_id": DECOY, "customer_id": DECOY}).encode() + b"\n"
    for day in FUZZ_ARRIVALS[:2]:
        folder = outside / "orders" / f"arrival_date={day.isoformat()}"
        folder.mkdir(parents=True)
        (folder / "decoy.jsonl").write_bytes(line)
    first = landing / "orders" / f"arrival_date={FUZZ_ARRIVALS[0].isoformat()}"
    first.mkdir(parents=True, exist_ok=True)
    (first / "linked-out.jsonl").symlink_to(
        outside / "orders" / f"arrival_date={FUZZ_ARRIVALS[0].isoformat()}" / "decoy.jsonl"
    )
    (first / "linked-folder").symlink_to(outside / "orders", target_is_directory=True)
    (
        landing / "orders" / f"arrival_date={(FUZZ_ARRIVALS[-1] + timedelta(days=1)).isoformat()}"
    ).symlink_to(
        outside / "orders" / f"arrival_date={FUZZ_ARRIVALS[1].isoformat()}",
        target_is_directory=True,
    )


# -------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--days", type=int, default=30, help="days of the killed backfill")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--orders-per-day", type=int, default=100)
    p.add_argument(
        "--live-backfill-days",
        type=int,
        default=60,
        help="days of the live lane's backfill (0: no live lane)",
    )
    p.add_argument(
        "--live-days", type=int, default=10, help="last days whose late deliveries land during it"
    )
    p.add_argument("--fuzz-cases", type=int, default=200, help="landing files hypothesis draws")
    p.add_argument(
        "--run-timeout", type=float, default=900.0, help="seconds before a command counts as hung"
    )
    p.add_argument("--workdir", type=Path, help="keep the work here (default: a temporary folder)")
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, exit_on_signal)
    signal.signal(signal.SIGINT, exit_on_signal)
    try:
        return run(args)
    finally:
        stop_started()


def run(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    counts = Counts()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="chaos-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"chaos: seed {args.seed}, work in {work}", flush=True)
    if args.kills:
        kills(
            counts,
            work,
            args.kills,
            args.days,
            args.orders_per_day,
            rng,
            args.seed,
            args.run_timeout,
        )
    if args.live_backfill_days:
        live(
            counts,
            work,
            args.live_backfill_days,
            min(args.live_days, args.live_backfill_days),
            args.orders_per_day,
            rng,
            args.seed,
            args.run_timeout,
        )
    if args.fuzz_cases:
        fuzz(counts, work, args.fuzz_cases, args.seed, args.run_timeout)
    print(counts.line(), flush=True)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # delta-rs readers can abort the interpreter at exit (delta-rs#2184)
