"""Customer LTV and monthly revenue end to end on real Spark, Delta and Dagster, compared with
LTV and monthly totals computed in plain Python from the reference implementation's staging
rows: a backfill with a held day, the held day repaired and its range rebuilt from a seed, a
late order for an old day, a month held for its missing days, and a correction's cutover and
rollback, each of which ``downstream_refresh`` answers with one ranged run of LTV and one of the
month."""

from __future__ import annotations

import contextlib
import io
import json
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

import dagster as dg
import pytest
from dagster._core.remote_origin import (
    InProcessCodeLocationOrigin,
    RemoteJobOrigin,
    RemoteRepositoryOrigin,
)
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._core.utils import make_new_run_id
from deltalake import DeltaTable

from backfill_assets.automation.state import run_request
from backfill_assets.backfill_plan import RunPlan
from backfill_assets.catalog import (
    CUSTOMER_LTV_STEP,
    DOWNSTREAM_SENSOR,
    EVENT_DAYS_STEP,
    FACT_TABLE,
    FCT_CUSTOMER_LTV,
    MONTHLY_ASSETS,
    MONTHLY_JOB,
    MONTHLY_REVENUE_TABLE,
    RANGE_END,
    RANGE_START,
    RAW_FX_RATES,
    RPT_MONTHLY_REVENUE,
    STEP_ASSETS,
)
from backfill_assets.cli.main import main, run_backfill
from backfill_assets.cli.runner import execute
from backfill_assets.definitions import build_definitions
from backfill_assets.demo.generate import generate_feed, remove_rates, restate_rates
from backfill_assets.lake import Lake
from backfill_assets.lake.commit import CommitInfo
from backfill_assets.late_data import Request
from backfill_assets.testing.faults import STAGED, forget_visits
from backfill_assets_testkit.pipeline_env import PipelineEnv, copied_env, pipeline_env
from backfill_assets_testkit.reference import Reference, customer_ltv

# Runs the pipeline through Dagster on real Spark and Delta: `make test`, not `make test-fast`.
pytestmark = pytest.mark.slow

FIRST, LAST = date(2024, 1, 1), date(2024, 2, 2)  # the first partition; the feed's last day
JAN, FEB = date(2024, 1, 1), date(2024, 2, 1)
HELD = date(2024, 1, 10)  # its EUR rates (and the 7 days before) are removed
LATE_DAY, LATE_ARRIVAL = date(2024, 1, 4), date(2024, 1, 9)


def days(first: date, last: date) -> list[date]:
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


def order(oid: str, customer: str, day: date, status: str, amount: str, hour: int = 10) -> dict:
    stamp = f"{day}T{hour:02d}:00:00Z"
    return {
        "order_id": oid,
        "customer_id": customer,
        "event_time": stamp,
        "updated_at": stamp,
        "status": status,
        "amount": amount,
        "currency": "USD",
        "country": "US",
    }


# Customers who come back: across days, across months, with gaps (the seed of a range must find
# a customer last seen long before it), and an order that is paid in a later version.
REPEAT = [
    order("r1-a", "REPEAT-1", date(2024, 1, 2), "paid", "10.50"),
    order("r1-b", "REPEAT-1", date(2024, 1, 2), "placed", "3.00", 11),
    order("r1-c", "REPEAT-1", date(2024, 1, 5), "paid", "7.25"),
    order("r1-d", "REPEAT-1", date(2024, 1, 20), "cancelled", "1.00"),
    order("r1-e", "REPEAT-1", date(2024, 2, 1), "paid", "2.00"),
    order("r2-a", "REPEAT-2", date(2024, 1, 3), "paid", "100.00"),
    order("r2-b", "REPEAT-2", date(2024, 1, 14), "placed", "4.00"),
    {
        **order("r2-b", "REPEAT-2", date(2024, 1, 14), "paid", "4.00"),
        "updated_at": "2024-01-14T18:00:00Z",
    },
    order("r2-c", "REPEAT-2", date(2024, 2, 2), "paid", "1.99"),
    order("r3-a", "REPEAT-3", date(2024, 1, 1), "paid", "5.00"),
]


def land(landing, arrival: date, name: str, records: list[dict]) -> None:
    folder = landing / "orders" / f"arrival_date={arrival}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in records))


def expected_ltv(reference: Reference, last: date) -> tuple[set, date | None]:
    return customer_ltv(reference, FIRST, last)


def expected_months(reference: Reference, months: list[date]) -> set:
    out: dict = defaultdict(lambda: [0, 0, Decimal("0.00")])
    for month in months:
        following = (month + timedelta(days=31)).replace(day=1)
        for f in reference.fact(days(month, following - timedelta(days=1))):
            agg = out[(month, f.country)]
            agg[0] += f.orders
            agg[1] += f.paid_orders
            agg[2] += f.revenue_usd
    return {(m, c, *v) for (m, c), v in out.items()}


def ltv_rows(env) -> set:
    return {
        (
            r["as_of_date"],
            r["customer_id"],
            r["orders"],
            r["paid_orders"],
            r["lifetime_revenue_usd"],
            r["first_order_date"],
            r["last_order_date"],
        )
        for r in env.rows("fact/customer_ltv")
    }


def month_rows(env) -> set:
    return {
        (r["month"], r["country"], r["orders"], r["paid_orders"], r["revenue_usd"])
        for r in env.rows("fact/monthly_revenue")
    }


def latest_materialization(env, key, partition: date):
    records = env.instance.fetch_materializations(key, limit=1000).records
    return next(
        r.asset_materialization for r in records if r.partition_key == partition.isoformat()
    )


@pytest.fixture(scope="module")
def landed(tmp_path_factory, spark):
    """The feed landed; ``first_backfill`` backfills it. Tests only read it: each that acts works
    on a copy of it, or of a state built from it."""
    root = tmp_path_factory.mktemp("downstream")
    with pipeline_env(root, start_date=FIRST.isoformat()) as penv:
        landing = penv.settings.landing_dir
        generate_feed(landing, FIRST, LAST, orders_per_day=8, seed=5)
        for arrival in sorted({date.fromisoformat(r["event_time"][:10]) for r in REPEAT}):
            land(
                landing,
                arrival,
                "zz-repeat.jsonl",
                [r for r in REPEAT if r["event_time"].startswith(str(arrival))],
            )
        remove_rates(landing, "EUR", HELD - timedelta(days=7), HELD)
        yield penv


@pytest.fixture(scope="module")
def first_backfill(landed):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = run_backfill(landed.settings, FIRST, LAST)
    return code, out.getvalue()


@pytest.fixture
def backfilled(landed, first_backfill, tmp_path):
    """A copy of ``landed`` as the first backfill left it, the held day held, for this test
    alone."""
    with copied_env(landed, tmp_path / "env") as copy:
        yield copy


@pytest.fixture(scope="module")
def repaired(landed, first_backfill, tmp_path_factory):
    """A copy of ``landed`` after the first backfill where the held day's missing EUR rate landed
    and raw and the event day were rebuilt; then LTV of [HELD, LAST] in one run, seeded from
    each customer's latest row before HELD; then January. Tests only read it."""
    with copied_env(landed, tmp_path_factory.mktemp("repaired")) as penv:
        rates = penv.settings.landing_dir / "fx_rates" / f"rate_date={HELD}"
        rates.mkdir(parents=True, exist_ok=True)
        (rates / "zz-eur.csv").write_text("currency,usd_per_unit\nEUR,1.09000000\n")
        for plan in (
            RunPlan((RAW_FX_RATES,), HELD, HELD),
            RunPlan(STEP_ASSETS[EVENT_DAYS_STEP], HELD, HELD),
            RunPlan(STEP_ASSETS[CUSTOMER_LTV_STEP], HELD, LAST),
            RunPlan(MONTHLY_ASSETS, JAN, JAN),
        ):
            outcome = execute(plan, penv.instance)
            assert outcome.success, (plan, outcome.error)
        yield penv


@pytest.fixture
def current(repaired, tmp_path):
    """A copy of ``repaired``, where LTV and January are current, for this test alone."""
    with copied_env(repaired, tmp_path / "env") as copy:
        yield copy


def test_the_reference_holds_the_day_without_a_rate(landed):
    _, held = Reference(landed.settings.landing_dir).staging(days(FIRST, LAST))
    assert held == {HELD}


def test_ltv_equals_the_sequential_computation_and_holds_from_the_unpublished_day(
    landed, first_backfill
):
    code, output = first_backfill
    expected, first_held = expected_ltv(Reference(landed.settings.landing_dir), LAST)
    assert first_held == HELD
    assert ltv_rows(landed) == expected
    assert {r[0] for r in expected} == set(days(FIRST, HELD - timedelta(days=1)))
    assert max(r[2] for r in expected) >= 3  # customers come back: the sums are cumulative
    # Every later day is held, naming the staging day that is missing.
    assert code == 1
    assert f"fct_customer_ltv {LAST}: " in output and f"stg_orders {HELD} not published" in output
    runs = [
        r for r in landed.instance.get_runs() if set(r.asset_selection or ()) == {FCT_CUSTOMER_LTV}
    ]
    assert len(runs) == 1  # the whole range: one run


def test_a_month_is_held_naming_its_missing_days(backfilled, first_backfill):
    _, output = first_backfill
    assert month_rows(backfilled) == set()  # January lacks its held day; February its last 27 days
    assert f"{RPT_MONTHLY_REVENUE.to_user_string()} 2024-02 left out" in output
    held_january = [
        r
        for r in backfilled.instance.get_runs()
        if tuple(r.asset_selection or ()) == MONTHLY_ASSETS
    ]
    assert len(held_january) == 1
    failure = execute(RunPlan(MONTHLY_ASSETS, JAN, JAN), backfilled.instance)
    assert not failure.success and f"fct_daily_revenue not published: {HELD}" in failure.error


def test_the_repaired_day_rebuilds_ltv_from_a_seed_in_one_run(repaired):
    ltv_runs = [
        r
        for r in repaired.instance.get_runs()
        if set(r.asset_selection or ()) == {FCT_CUSTOMER_LTV}
    ]
    assert len(ltv_runs) == 2  # the first backfill's and the repair's
    expected, first_held = expected_ltv(Reference(repaired.settings.landing_dir), LAST)
    assert first_held is None and ltv_rows(repaired) == expected
    # REPEAT-1 was last seen on Jan 5, not on Jan 11: the seed found them anyway.
    assert (
        date(2024, 1, 20),
        "REPEAT-1",
        4,
        2,
        Decimal("17.75"),
        date(2024, 1, 2),
        date(2024, 1, 20),
    ) in expected
    assert month_rows(repaired) == expected_months(Reference(repaired.settings.landing_dir), [JAN])


def test_a_range_whose_seed_is_stale_is_held_naming_where_to_start(current):
    # Staging of an early day is republished: LTV from then on is stale; a range after it
    # cannot be seeded.
    assert execute(
        RunPlan(STEP_ASSETS[EVENT_DAYS_STEP], date(2024, 1, 6), date(2024, 1, 6)), current.instance
    ).success
    before = ltv_rows(current)
    outcome = execute(
        RunPlan(STEP_ASSETS[CUSTOMER_LTV_STEP], date(2024, 1, 20), LAST), current.instance
    )
    assert not outcome.success
    assert "range held, not widened; build fct_customer_ltv from 2024-01-06" in outcome.error
    assert ltv_rows(current) == before


def test_a_late_order_for_an_old_day_rebuilds_ltv_to_the_latest_day_and_its_month(current):
    land(
        current.settings.landing_dir,
        LATE_ARRIVAL,
        "zz-late.jsonl",
        [order("late-1", "REPEAT-2", LATE_DAY, "paid", "50.00", 23)],
    )
    january_before = latest_materialization(current, RPT_MONTHLY_REVENUE, JAN)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = run_backfill(current.settings, LATE_DAY, LATE_DAY)
    assert code == 0, out.getvalue()
    assert f"fct_customer_ltv {LATE_DAY}..{LAST}" in out.getvalue()  # the CLI's ranged run
    reference = Reference(current.settings.landing_dir)
    expected, _ = expected_ltv(reference, LAST)
    assert ltv_rows(current) == expected
    assert (
        date(2024, 1, 14),
        "REPEAT-2",
        3,
        3,
        Decimal("154.00"),
        date(2024, 1, 3),
        date(2024, 1, 14),
    ) in expected
    assert month_rows(current) == expected_months(reference, [JAN])
    january = latest_materialization(current, RPT_MONTHLY_REVENUE, JAN)
    assert january.metadata["revenue_usd_delta"].value == "50.00"
    assert january.metadata["paid_orders_delta"].value == 1
    assert january.metadata["replaced_delta_version"].value >= 0
    assert january.metadata["revenue_usd_exact"].value == str(
        sum(r[4] for r in expected_months(reference, [JAN]))
    )
    assert (
        january_before.metadata["revenue_usd_exact"].value
        != january.metadata["revenue_usd_exact"].value
    )


def evaluate_downstream_sensor(env) -> list[dg.RunRequest]:
    sensor = build_definitions(env.settings).get_repository_def().get_sensor_def(DOWNSTREAM_SENSOR)
    result = sensor.evaluate_tick(dg.build_sensor_context(instance=env.instance))
    return list(result.run_requests or [])


def selected(request: dg.RunRequest) -> tuple[dg.AssetKey, ...]:
    """The assets a request of the sensor selects (it always names them)."""
    assert request.asset_selection is not None, request
    return tuple(request.asset_selection)


def run_requested(env, requests: list[dg.RunRequest]) -> None:
    """Execute what the sensor requested, as the daemon would: each request one ranged run."""
    for request in requests:
        plan = RunPlan(
            selected(request),
            date.fromisoformat(request.tags[RANGE_START]),
            date.fromisoformat(request.tags[RANGE_END]),
        )
        assert execute(plan, env.instance, tags=dict(request.tags)).success


def test_the_sensor_requests_nothing_while_ltv_and_months_are_current(current):
    assert evaluate_downstream_sensor(current) == []


def ltv_requests(env) -> list[dg.RunRequest]:
    return [r for r in evaluate_downstream_sensor(env) if selected(r) == (FCT_CUSTOMER_LTV,)]


def queue(
    env, request: dg.RunRequest, status: dg.DagsterRunStatus = dg.DagsterRunStatus.QUEUED
) -> dg.DagsterRun:
    """Put the request in the run queue as the daemon does, with the code location it would be
    launched from, without running it (or record it as in ``status``, as if it had started)."""
    location = InProcessCodeLocationOrigin(
        LoadableTargetOrigin(module_name="backfill_assets.definitions")
    )
    assert request.job_name is not None, "the sensor names the job of each request"
    origin = RemoteJobOrigin(RemoteRepositoryOrigin(location, "__repository__"), request.job_name)
    return env.instance.add_run(
        dg.DagsterRun(
            job_name=request.job_name,
            run_id=make_new_run_id(),
            status=status,
            tags=dict(request.tags),
            asset_selection=frozenset(selected(request)),
            remote_job_origin=origin,
        )
    )


def test_the_sensor_adds_nothing_to_a_queued_run_that_covers_what_is_stale(current):
    execute(
        RunPlan(STEP_ASSETS[EVENT_DAYS_STEP], date(2024, 1, 20), date(2024, 1, 20)),
        current.instance,
    )
    ltv = ltv_requests(current)[0]
    assert (ltv.tags[RANGE_START], ltv.tags[RANGE_END]) == ("2024-01-20", str(LAST))
    queued = queue(current, ltv)
    try:
        # staging changes again before the queued run starts: the queued run will read it
        execute(
            RunPlan(STEP_ASSETS[EVENT_DAYS_STEP], date(2024, 1, 25), date(2024, 1, 25)),
            current.instance,
        )
        assert ltv_requests(current) == []
        # a change before the queued run's range needs a wider run
        execute(
            RunPlan(STEP_ASSETS[EVENT_DAYS_STEP], date(2024, 1, 15), date(2024, 1, 15)),
            current.instance,
        )
        [wider] = ltv_requests(current)
        assert (wider.tags[RANGE_START], wider.tags[RANGE_END]) == ("2024-01-15", str(LAST))
    finally:
        current.instance.delete_run(queued.run_id)
    run_requested(current, evaluate_downstream_sensor(current))
    assert evaluate_downstream_sensor(current) == []


def test_the_sensor_waits_while_a_run_that_writes_staging_is_queued_or_running(current):
    """LTV is cumulative: each rebuild reads from its first stale day to the latest. While a
    run of the event days is still to come, a rebuild now would be done again after it."""
    run_requested(current, evaluate_downstream_sensor(current))  # current first (already, in order)
    execute(
        RunPlan(STEP_ASSETS[EVENT_DAYS_STEP], date(2024, 1, 20), date(2024, 1, 20)),
        current.instance,
    )
    assert ltv_requests(current) != []  # stale, and nothing upstream in flight
    late = run_request(
        Request(EVENT_DAYS_STEP, date(2024, 1, 22), date(2024, 1, 22), "late", "late data")
    )
    for status in (
        dg.DagsterRunStatus.QUEUED,
        dg.DagsterRunStatus.STARTING,
        dg.DagsterRunStatus.STARTED,
    ):
        event_days = queue(current, late, status)
        try:
            assert ltv_requests(current) == [], status
        finally:
            current.instance.delete_run(event_days.run_id)
    [ltv] = ltv_requests(current)  # the event days' run ended: now one rebuild
    assert (ltv.tags[RANGE_START], ltv.tags[RANGE_END]) == ("2024-01-20", str(LAST))
    run_requested(current, evaluate_downstream_sensor(current))
    assert evaluate_downstream_sensor(current) == []


@dataclass(frozen=True)
class CutOver:
    """A copy of ``repaired`` where GBP's rates of Jan 1-2 were restated, a correction of Jan 1-3
    staged, diffed and cut over, and the downstream sensor's requests then run. Tests only read
    it."""

    env: PipelineEnv
    before: tuple[set, set]  # LTV and the months as the cutover found them
    requests: list[dg.RunRequest]  # the sensor's answer to the cutover
    again: list[dg.RunRequest]  # its answer when evaluated again before they ran


@pytest.fixture(scope="module")
def cut_over(repaired, tmp_path_factory) -> Iterator[CutOver]:
    with copied_env(repaired, tmp_path_factory.mktemp("cut_over")) as env:
        before = ltv_rows(env), month_rows(env)
        gbp = (date(2024, 1, 1), date(2024, 1, 2), Decimal("1.05"))
        assert restate_rates(env.settings.landing_dir, "GBP", *gbp) == 2
        correct = ["--start", "2024-01-01", "--end", "2024-01-03", "--reason", "GBP", "--id"]
        for args in (["correct", *correct, "gbp"], ["diff", "gbp"], ["cutover", "gbp", "--force"]):
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                assert main(args) == 0, out.getvalue()
        requests = evaluate_downstream_sensor(env)
        again = evaluate_downstream_sensor(env)
        run_requested(env, requests)
        yield CutOver(env, before, requests, again)


def test_a_cutover_makes_the_sensor_rebuild_ltv_to_the_latest_day_and_its_month(cut_over):
    env, requests = cut_over.env, cut_over.requests
    by_assets = {tuple(r.asset_selection): r for r in requests}
    ltv, month = by_assets[(FCT_CUSTOMER_LTV,)], by_assets[MONTHLY_ASSETS]
    assert (ltv.tags[RANGE_START], ltv.tags[RANGE_END]) == (str(FIRST), str(LAST))  # one ranged run
    assert (month.tags[RANGE_START], month.tags[RANGE_END], month.job_name) == (
        str(JAN),
        str(JAN),
        MONTHLY_JOB,
    )
    assert cut_over.again[0].run_key == requests[0].run_key  # the same request
    reference = Reference(env.settings.landing_dir)  # GBP restated
    expected, _ = expected_ltv(reference, LAST)
    assert ltv_rows(env) == expected
    assert month_rows(env) == expected_months(reference, [JAN])
    assert evaluate_downstream_sensor(env) == []


def test_a_rollback_makes_the_sensor_rebuild_ltv_and_the_month_as_they_were(
    cut_over, tmp_path, capsys
):
    ltv_before, months_before = cut_over.before
    with copied_env(cut_over.env, tmp_path / "env") as env:
        assert ltv_rows(env) != ltv_before  # the cutover changed them
        assert main(["rollback", "gbp"]) == 0, capsys.readouterr()
        requests = evaluate_downstream_sensor(env)
        spans = {
            tuple(r.asset_selection): (r.tags[RANGE_START], r.tags[RANGE_END]) for r in requests
        }
        assert spans == {
            (FCT_CUSTOMER_LTV,): (str(FIRST), str(LAST)),
            MONTHLY_ASSETS: (str(JAN), str(JAN)),
        }
        run_requested(env, requests)
        assert (ltv_rows(env), month_rows(env)) == (ltv_before, months_before)
        assert evaluate_downstream_sensor(env) == []


def test_status_shows_each_month_published_with_its_rows_or_held_with_the_failed_check(
    current, capsys
):
    capsys.readouterr()
    assert main(["status", "--start", str(FIRST), "--end", str(LAST)]) == 0
    lines = capsys.readouterr().out.splitlines()
    months = {line.split()[0]: line.split()[1:] for line in lines[lines.index("") + 2 :]}
    january = len(
        {(m, c) for m, c, *_ in expected_months(Reference(current.settings.landing_dir), [JAN])}
    )
    # January was published; February was held by the run that found its days missing.
    assert months == {str(JAN): ["published", str(january)], str(FEB): ["-"]}


def test_a_month_whose_fact_is_republished_while_it_is_built_is_held(
    current, spark, tmp_path, monkeypatch
):
    # January is published. One of its fact days is rewritten while the month is staged:
    # the month read the fact before that commit, so it is held, and the table keeps the month
    # it had; the next run publishes it from the fact as it is now.
    rewritten = date(2024, 1, 15)
    monkeypatch.setenv("BACKFILL_LAKE_PAUSE_DIR", str(tmp_path))
    monkeypatch.setenv("BACKFILL_LAKE_PAUSE_AT", STAGED)
    forget_visits()
    lake = Lake(current.settings.lake_dir, spark)
    monthly = current.settings.lake_dir / MONTHLY_REVENUE_TABLE.path
    before, version_before = month_rows(current), DeltaTable(str(monthly)).version()

    def rewrite_a_fact_day_once_the_month_is_staged() -> None:
        reached = tmp_path / f"{STAGED}.1.reached"
        for _ in range(6000):
            if reached.exists():
                break
            time.sleep(0.05)
        try:
            rows, _ = lake.read_partitions(
                FACT_TABLE.path, FACT_TABLE.partition_column, [rewritten]
            )
            copy = spark.createDataFrame(rows.collect(), rows.schema)
            commit = CommitInfo("test-rewrite", "test")
            lake.replace_partitions(
                FACT_TABLE.path, copy, FACT_TABLE.partition_column, [rewritten], commit
            )
        finally:
            (tmp_path / f"{STAGED}.1.resume").touch()

    writer = threading.Thread(target=rewrite_a_fact_day_once_the_month_is_staged)
    writer.start()
    outcome = execute(RunPlan(MONTHLY_ASSETS, JAN, JAN), current.instance)
    writer.join(timeout=600)
    assert not outcome.success
    assert f"fct_daily_revenue republished while it was built: {rewritten}" in outcome.error
    assert DeltaTable(str(monthly)).version() == version_before and month_rows(current) == before

    monkeypatch.delenv("BACKFILL_LAKE_PAUSE_AT")
    assert execute(RunPlan(MONTHLY_ASSETS, JAN, JAN), current.instance).success
    assert month_rows(current) == before  # the fact day was rewritten with the rows it had
