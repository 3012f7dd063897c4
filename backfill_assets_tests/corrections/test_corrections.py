"""A versioned correction end to end: a provider restates its rates; the correction is built
beside production, diffed, held back by its guardrails, cut over, rolled back and cut over
again, each table compared with the reference implementation on the original and on the
restated landing."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import dagster as dg
import pytest
from deltalake import DeltaTable

from backfill_assets.backfill_plan import RunPlan
from backfill_assets.catalog import (
    CORRECTION_CUTOVER_JOB,
    CORRECTION_DIFF_JOB,
    CORRECTION_DISCARD_JOB,
    CORRECTION_ROLLBACK_JOB,
    CORRECTION_TAG,
    CORRECTIONS,
    CORRECTIONS_PARTITIONS,
    EVENT_DAYS_STEP,
    FCT_CUSTOMER_LTV,
    FCT_DAILY_REVENUE,
    RANGE_END,
    RANGE_START,
    RPT_MONTHLY_REVENUE,
    STEP_ASSETS,
    STG_ORDERS,
    STG_ORDERS_ENRICHED,
)
from backfill_assets.cli.demo import correction_tour, restated_period
from backfill_assets.cli.main import main, run_backfill
from backfill_assets.cli.runner import execute
from backfill_assets.corrections import diff, registry
from backfill_assets.corrections.registry import CorrectionError
from backfill_assets.definitions import backfill_job, build_definitions, correction_job
from backfill_assets.demo.generate import generate_feed, restate_rates
from backfill_assets.lake import Lake
from backfill_assets.settings import Settings
from backfill_assets_testkit.pipeline_env import PipelineEnv, copied_env, pipeline_env
from backfill_assets_testkit.reference import Reference
from backfill_assets_tests.corrections.test_pending import CHANGED_ASSETS

# Runs the pipeline through Dagster on real Spark and Delta: `make test`, not `make test-fast`.
pytestmark = pytest.mark.slow

FEED_START, FEED_END = date(2024, 1, 1), date(2024, 1, 14)
START, END = date(2024, 1, 2), date(2024, 1, 12)  # production
FIX_START, FIX_END = date(2024, 1, 2), date(2024, 1, 9)  # the correction
RESTATED = [date(2024, 1, 3), date(2024, 1, 4)]  # rate dates the provider restates
CID = "eur-restatement"
TABLES = ("staging/orders", "fact/daily_revenue")


def _days(first: date, last: date) -> list[date]:
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


def rows_of(env, table, days) -> set:
    wanted = set(days)
    return {
        tuple(sorted((k, v) for k, v in r.items() if not k.startswith("_")))
        for r in env.rows(table)
        if r["event_date"] in wanted
    }


def expected_rows(reference: Reference, days) -> dict[str, set]:
    staging, held = reference.staging(days)
    assert not held
    fact = reference.fact(days)

    def as_set(rows):
        return {tuple(sorted(vars(r).items())) for r in rows}

    return {"staging/orders": as_set(staging), "fact/daily_revenue": as_set(fact)}


def assert_tables_equal(env, reference: Reference, days) -> None:
    expected = expected_rows(reference, days)
    for table in TABLES:
        assert rows_of(env, table, days) == expected[table], table


def active_files(env, table) -> dict[str, set[str]]:
    """The table's live files per day, by their paths in the table (the same in a copy)."""
    by_day: dict[str, set[str]] = {}
    t = DeltaTable(str(env.settings.lake_dir / table))
    for uri in t.file_uris():
        path = uri.split(f"/{table}/", 1)[1]
        day = path.split("event_date=")[1].split("/")[0]
        by_day.setdefault(day, set()).add(path)
    return by_day


# The module's states, each built once from the one before it (a copy of it) and only read by
# tests: production, backfilled from the original landing; the landing restated; the correction
# staged; diffed; production changed since the diff; cut over; a second correction made from the
# form and discarded. A test that acts does so on a copy of the state it starts from (`copy_of`).


REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class State:
    """A state of the module's lake and Dagster instance, and what the commands that made it
    returned and printed, in order."""

    env: PipelineEnv
    said: tuple[tuple[int, str, str], ...] = ()  # per command: its exit code, stdout, stderr


def run_main(args: list[str]) -> tuple[int, str, str]:
    """``backfill-assets`` with ``args`` in this process: its exit code, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def copy_of(tmp_path) -> Iterator[Callable[[State], PipelineEnv]]:
    """``copy_of(state)``: a copy of ``state``'s lake and instance for this test alone, with the
    pipeline's environment pointing at it while the test runs."""
    copies: list[PipelineEnv] = []
    with contextlib.ExitStack() as stack:

        def copy(state: State) -> PipelineEnv:
            root = tmp_path / f"copy{len(copies)}"
            copies.append(stack.enter_context(copied_env(state.env, root)))
            return copies[-1]

        yield copy


@pytest.fixture(scope="module")
def production(tmp_path_factory, spark) -> Iterator[State]:
    """The feed landed (and a copy of it kept as ``original_landing``) and backfilled."""
    root = tmp_path_factory.mktemp("correction")
    with pipeline_env(root) as penv:
        generate_feed(penv.settings.landing_dir, FEED_START, FEED_END, orders_per_day=30, seed=3)
        shutil.copytree(penv.settings.landing_dir, root / "original_landing")
        assert run_backfill(penv.settings, START, END) == 0
        yield State(penv)


@pytest.fixture(scope="module")
def original(production):
    env = production.env
    return Reference(
        env.settings.landing_dir.parent / "original_landing", env.settings.max_lateness_days
    )


@pytest.fixture(scope="module")
def restatement(production, tmp_path_factory) -> Iterator[State]:
    """Production, and EUR restated in the landing zone for the ``RESTATED`` days."""
    with copied_env(production.env, tmp_path_factory.mktemp("restatement")) as env:
        rate = Decimal("1.03")
        assert restate_rates(env.settings.landing_dir, "EUR", RESTATED[0], RESTATED[-1], rate) == 2
        yield State(env)


@pytest.fixture(scope="module")
def restated(restatement):
    env = restatement.env
    return Reference(env.settings.landing_dir, env.settings.max_lateness_days)


@pytest.fixture(scope="module")
def staged(restatement, tmp_path_factory) -> Iterator[State]:
    """The restatement, and the correction ``CID`` of the ``FIX`` days staged by `correct`."""
    with copied_env(restatement.env, tmp_path_factory.mktemp("staged")) as env:
        reason = "provider restated EUR for Jan 3-4"
        fix = ["--start", str(FIX_START), "--end", str(FIX_END), "--reason", reason]
        yield State(env, (run_main(["correct", *fix, "--id", CID]),))


@pytest.fixture(scope="module")
def diffed(staged, tmp_path_factory) -> Iterator[State]:
    """The staged correction, diffed."""
    with copied_env(staged.env, tmp_path_factory.mktemp("diffed")) as env:
        yield State(env, (run_main(["diff", CID]),))


@pytest.fixture(scope="module")
def rebuilt(diffed, changed_days, tmp_path_factory) -> Iterator[State]:
    """The diffed correction after the live lane rebuilt a day the restatement does not touch:
    a cutover refused, the diff again, a cutover without ``--skip-rebuilt`` refused."""
    with copied_env(diffed.env, tmp_path_factory.mktemp("rebuilt")) as env:
        unchanged = next(d for d in _days(FIX_START, FIX_END) if d not in changed_days)
        plan = RunPlan(STEP_ASSETS[EVENT_DAYS_STEP], unchanged, unchanged)
        assert execute(plan, env.instance).success
        commands = (["cutover", CID], ["diff", CID], ["cutover", CID])
        yield State(env, tuple(run_main(args) for args in commands))


@dataclass(frozen=True)
class CutOver(State):
    held: date | None = None  # the changed day held by a check while it was cut over
    before: dict[str, dict[str, set[str]]] | None = None  # live files per table before it


@pytest.fixture(scope="module")
def cut_over(rebuilt, changed_days, tmp_path_factory) -> Iterator[CutOver]:
    """The correction cut over with ``--skip-rebuilt``, its first changed day held by a check
    then (and released after: it stays as production had it)."""
    with copied_env(rebuilt.env, tmp_path_factory.mktemp("cut_over")) as env:
        held = changed_days[0]
        set_held(env, held, ["stg_orders.fx_rate_present"])
        before = {t: active_files(env, t) for t in TABLES}
        said = run_main(["cutover", CID, "--skip-rebuilt"])
        set_held(env, held, None)
        yield CutOver(env, (said,), held, before)


@dataclass(frozen=True)
class FormCorrection(State):
    correction: registry.Correction | None = None  # as the form's run recorded it
    run_tags: tuple[str | None, ...] = ()  # the correction tag of each run tagged with its id
    staged_rows: frozenset = frozenset()  # its staged orders, before it was discarded
    discarded: bool = False  # the UI's discard job succeeded


@pytest.fixture(scope="module")
def form_discarded(cut_over, spark, tmp_path_factory) -> Iterator[FormCorrection]:
    """The cut over correction, and a second one over the same days started from the form with
    no id, then discarded by the UI's job."""
    with copied_env(cut_over.env, tmp_path_factory.mktemp("form_discarded")) as env:
        ok, why = build_from_form(env, {"reason": FORM_REASON})  # no id: one is made
        assert ok, why
        c = form_correction(env)
        runs = env.instance.get_runs(dg.RunsFilter(tags={CORRECTION_TAG: c.id}))
        staged = lake(env, spark).staging.version("staging/orders", c.id)
        assert staged is not None, c.id
        rows = lake(env, spark).staging.read(staged, _days(FIX_START, FIX_END)).collect()

        def utc(value):  # Spark gives the session's (UTC) wall time, delta-rs an aware datetime
            return value.replace(tzinfo=UTC) if isinstance(value, datetime) else value

        staged_rows = frozenset(
            tuple(sorted((k, utc(v)) for k, v in r.asDict().items() if not k.startswith("_")))
            for r in rows
        )
        done, _ = run_action(env, CORRECTION_DISCARD_JOB, correction_id=c.id)
        yield FormCorrection(
            env,
            (),
            c,
            tuple(r.tags.get(CORRECTION_TAG) for r in runs),
            staged_rows,
            done.success,
        )


@pytest.fixture(scope="module")
def changed_days(original, restated):
    """The days whose staging the restatement changes, per the reference alone."""
    days = [
        d
        for d in _days(FIX_START, FIX_END)
        if expected_rows(original, [d]) != expected_rows(restated, [d])
    ]
    assert days and len(days) < len(_days(FIX_START, FIX_END))
    return days


def lake(env, spark) -> Lake:
    return Lake(env.settings.lake_dir, spark)


def test_the_correction_job_refuses_a_run_without_a_correction_id(production, copy_of):
    env = copy_of(production)
    before = {t: DeltaTable(str(env.settings.lake_dir / t)).version() for t in TABLES}
    outcome = execute(
        RunPlan(STEP_ASSETS[EVENT_DAYS_STEP], FIX_START, FIX_END), env.instance, correction=True
    )
    assert not outcome.success and CORRECTION_TAG in (outcome.error or "")
    assert {t: DeltaTable(str(env.settings.lake_dir / t)).version() for t in TABLES} == before


def test_correct_stages_beside_production_and_publishes_nothing(staged, restatement, original):
    env, [(code, out, err)] = staged.env, staged.said
    assert code == 0, err
    assert out.strip().splitlines()[-1] == CID
    # Production is the original landing's, file for file.
    assert_tables_equal(env, original, _days(START, END))
    before = {t: active_files(restatement.env, t) for t in TABLES}
    assert {t: active_files(env, t) for t in TABLES} == before
    c = registry.get(env.settings.lake_dir, CID)
    assert c.state == registry.State.STAGED and c.reason.startswith("provider restated")
    assert c.code_version and all(r["code_version"] == c.code_version for r in c.runs)
    assert {r["table"] for r in c.runs} == set(TABLES)
    assert all(r["input_versions"] for r in c.runs)
    runs = env.instance.get_runs(dg.RunsFilter(tags={CORRECTION_TAG: CID}))
    assert len(runs) == 1 and runs[0].status == dg.DagsterRunStatus.SUCCESS
    # Every asset the correction will change warns, naming it and the partitions it changes.
    days, months = f"{FIX_START}..{FIX_END}", f"{FIX_START:%Y-%m}"
    assert pending_marks(env) == {
        STG_ORDERS: f"correction pending: {CID} will change {days}",
        FCT_DAILY_REVENUE: f"correction pending: {CID} will change {days}",
        STG_ORDERS_ENRICHED: f"correction pending: {CID} will change {days}",
        FCT_CUSTOMER_LTV: f"correction pending: {CID} will change {FIX_START} onward",
        RPT_MONTHLY_REVENUE: f"correction pending: {CID} will change {months}",
    }
    # And each partition it will change says so (LTV: the backfill left it to the downstream
    # sensor, which no test runs here: none built, none marked; test_pending covers it).
    assert partition_marks(env) == marked_by(CID)


def marked_by(value: str) -> dict[dg.AssetKey, dict[str, str]]:
    """The correction's partitions of each changed asset, each marked with ``value``."""
    days = {str(d): value for d in _days(FIX_START, FIX_END)}
    return {
        STG_ORDERS: days,
        FCT_DAILY_REVENUE: days,
        STG_ORDERS_ENRICHED: days,
        FCT_CUSTOMER_LTV: {},
        RPT_MONTHLY_REVENUE: {"2024-01-01": value},
    }


def partition_marks(env) -> dict[dg.AssetKey, dict[str, str]]:
    """Each changed asset's partitions with a "correction pending" marker: its latest value."""
    marks: dict[dg.AssetKey, dict[str, str]] = {}
    for asset in CHANGED_ASSETS:
        latest = marks.setdefault(asset, {})
        for record in env.instance.fetch_observations(asset, limit=10_000).records:
            seen = record.asset_observation
            if seen and "correction_pending" in seen.metadata and seen.partition not in latest:
                latest[seen.partition] = seen.metadata["correction_pending"].value
    return marks


def pending_marks(env) -> dict[dg.AssetKey, str]:
    """Each changed asset's latest ``correction_pending`` check: "" when it passed, else its
    description."""
    marks = {}
    for asset in CHANGED_ASSETS:
        key = dg.AssetCheckKey(asset, "correction_pending")
        record = env.instance.get_latest_asset_check_evaluation_record(key)
        assert record is not None, key
        evaluation = record.event.dagster_event.event_specific_data
        marks[asset] = "" if evaluation.passed else evaluation.description
    return marks


def test_a_correction_never_mixes_code_versions(staged, copy_of, monkeypatch, capsys):
    copy_of(staged)
    monkeypatch.setenv("BACKFILL_CODE_VERSION", "another-build")
    code = main(
        [
            "correct",
            "--start",
            str(FIX_START),
            "--end",
            str(FIX_START),
            "--reason",
            "same id, other code",
            "--id",
            CID,
            "--rebuild",
        ]
    )
    assert code == 1 and "never mixes code versions" in capsys.readouterr().err


def test_a_diff_whose_staged_versions_expire_while_it_reads_them_says_so(
    staged, copy_of, spark, monkeypatch
):
    """Maintenance's expiry closes the correction's staged versions between the diff's look-up
    of them and its read of their files: a CorrectionError that says so and what to do, not
    Spark's error about a missing file."""
    env = copy_of(staged)
    corrected = lake(env, spark)
    read = corrected.staging.read

    def expired_meanwhile(version, partitions=None):
        frame = read(version, partitions)
        assert corrected.staging.expire(version.table, 0) == [version.id]
        return frame

    monkeypatch.setattr(corrected.staging, "read", expired_meanwhile)
    c = registry.get(env.settings.lake_dir, CID)
    with pytest.raises(CorrectionError, match=r"closed .*while the diff read it.* correct "):
        diff.compute(corrected, c)


def test_diff_shows_exactly_the_restated_days(diffed, original, restated, changed_days):
    env, [(code, out, err)] = diffed.env, diffed.said
    assert code == 0, err
    listed = out.split("changed days: ")[1].splitlines()[0]
    assert listed == ", ".join(map(str, changed_days))
    # Revenue before and after per day, as the reference computes it.
    for day in changed_days:
        before = sum(f.revenue_usd for f in original.fact([day]))
        after = sum(f.revenue_usd for f in restated.fact([day]))
        assert f"| {day} |" in out and f"| {before} | {after} | {after - before} |" in out
        # the fact's rows by country: added, removed, changed, the day's line's last cell
        old = {f.country: f for f in original.fact([day])}
        new = {f.country: f for f in restated.fact([day])}
        cell = (
            f"+{len(new.keys() - old.keys())} / -{len(old.keys() - new.keys())} / "
            f"~{sum(1 for k in new.keys() & old.keys() if new[k] != old[k])} |"
        )
        (line,) = [x for x in out.splitlines() if x.startswith(f"| {day} |")]
        assert line.endswith(f"| {cell}")
    # The guardrail's verdict at its default 10%, from the reference's revenue per day.
    moves = {}
    for day in _days(FIX_START, FIX_END):
        before = sum(f.revenue_usd for f in original.fact([day]))
        after = sum(f.revenue_usd for f in restated.fact([day]))
        moves[day] = float((after - before) / before * 100) if before else (None if after else 0)
    refused = [d for d, pct in moves.items() if pct is None or abs(pct) > 10]
    if refused:
        assert (
            f"**Guardrail:** refuses {len(refused)} day(s) moving more than 10%: {refused[0]}"
            in out
        )
    else:
        assert "**Guardrail:** passes: no day's revenue moves more than 10%" in out
    c = registry.get(env.settings.lake_dir, CID)
    assert c.state == registry.State.DIFFED
    assert (
        (env.settings.lake_dir / registry.FOLDER / f"{CID}.md")
        .read_text()
        .startswith(f"# Correction {CID}")
    )
    observed = env.instance.fetch_observations(FCT_DAILY_REVENUE, limit=100).records
    per_day = {
        r.partition_key: r.asset_observation.metadata
        for r in observed
        if r.partition_key and "revenue_usd_after" in r.asset_observation.metadata
    }
    day = changed_days[0]
    assert per_day[day.isoformat()]["revenue_usd_after"].value == float(
        sum(f.revenue_usd for f in restated.fact([day]))
    )


def test_cutover_refuses_past_the_revenue_guardrail(diffed, original, copy_of, capsys):
    env = copy_of(diffed)
    assert main(["cutover", CID, "--max-revenue-change-pct", "0.0001"]) == 1
    assert "--force" in capsys.readouterr().err
    assert_tables_equal(env, original, _days(START, END))


def test_cutover_refuses_when_production_changed_since_the_diff(rebuilt, original):
    # The live lane rebuilt a day the restatement does not touch (``rebuilt``).
    (refused, _, why), (diffed_again, report, _), (again, _, why_again) = rebuilt.said
    assert refused == 1 and "diff" in why
    assert diffed_again == 0
    assert "Rebuilt in production after the correction was staged" in report
    assert again == 1 and "--skip-rebuilt" in why_again
    assert_tables_equal(rebuilt.env, original, _days(START, END))


def set_held(env, day, checks) -> None:
    """Mark ``day`` held by the correction's checks in its record, as a failed check does."""
    path = env.settings.lake_dir / registry.FOLDER / f"{CID}.json"
    document = json.loads(path.read_text())
    for table in TABLES:
        held = document["tables"][table]["held"]
        if checks:
            held[day.isoformat()] = checks
        else:
            held.pop(day.isoformat(), None)
    path.write_text(json.dumps(document))


def test_cutover_publishes_the_correction_but_no_held_day_and_touches_nothing_else(
    cut_over, original, restated, changed_days
):
    env, held, before = cut_over.env, cut_over.held, cut_over.before
    [(code, _, err)] = cut_over.said
    assert code == 0, err
    outside = [d.isoformat() for d in _days(START, END) if not FIX_START <= d <= FIX_END]
    assert_tables_equal(env, original, [held])  # held by a check: never cut over
    assert_tables_equal(env, restated, [d for d in _days(START, END) if d != held])
    after = {t: active_files(env, t) for t in TABLES}
    for t in TABLES:
        assert {d: after[t][d] for d in outside} == {d: before[t][d] for d in outside}
    # Metadata only: the published files are the staged ones, no copy.
    manifest = env.settings.lake_dir / "staging/orders/_staged" / f"{CID}.json"
    staged = {f["path"] for f in json.loads(manifest.read_text())["files"]}
    live = {p for d in changed_days[1:] for p in after["staging/orders"][d.isoformat()]}
    assert live <= staged
    mats = env.instance.fetch_materializations(STG_ORDERS, limit=200).records
    cut = {
        r.partition_key
        for r in mats
        if r.asset_materialization.metadata.get("correction") is not None
    }
    c = registry.get(env.settings.lake_dir, CID)
    assert cut == set(c.cutover["days"]) and c.state == registry.State.CUT_OVER


def fact_figures_shown(env, days) -> dict[date, tuple[int, int, Decimal]]:
    """Per day, the figures of the fact's latest materialization: what the asset's page and its
    Plots tab show."""
    shown = {}
    for day in days:
        records = env.instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=FCT_DAILY_REVENUE, asset_partitions=[str(day)]),
            limit=1,
        ).records
        assert records, day
        meta = records[0].asset_materialization.metadata
        assert "revenue_usd_exact" in meta, f"{day}: no figures in {sorted(meta)}"
        shown[day] = (
            meta["orders"].value,
            meta["paid_orders"].value,
            Decimal(meta["revenue_usd_exact"].value),
        )
    return shown


def reference_figures(reference: Reference, days) -> dict[date, tuple[int, int, Decimal]]:
    return {
        d: (
            sum(f.orders for f in reference.fact([d])),
            sum(f.paid_orders for f in reference.fact([d])),
            sum((f.revenue_usd for f in reference.fact([d])), Decimal(0)),
        )
        for d in days
    }


def test_rollback_restores_production_then_cutover_again(
    cut_over, original, restated, copy_of, capsys
):
    env = copy_of(cut_over)
    cut = [date.fromisoformat(d) for d in registry.get(env.settings.lake_dir, CID).cutover["days"]]
    assert main(["rollback", CID]) == 0, capsys.readouterr().err
    assert_tables_equal(env, original, _days(START, END))
    assert registry.get(env.settings.lake_dir, CID).state == registry.State.ROLLED_BACK
    assert fact_figures_shown(env, cut) == reference_figures(original, cut)
    assert main(["cutover", CID, "--skip-rebuilt"]) == 0, capsys.readouterr().err
    assert_tables_equal(env, restated, _days(START, END))
    assert fact_figures_shown(env, cut) == reference_figures(restated, cut)


def test_rollback_and_cutover_on_delta_rs_run_where_no_spark_session_could_start(
    cut_over, original, restated, copy_of
):
    """On delta-rs a rollback and a cutover commit file references only: as commands of their
    own they start no Spark session (a master Spark cannot reach would fail one), and leave
    the tables and the fact's figures as the reference has them."""
    env = copy_of(cut_over)
    cut = [date.fromisoformat(d) for d in registry.get(env.settings.lake_dir, CID).cutover["days"]]
    no_spark = {**os.environ, "BACKFILL_SPARK_MASTER": "no-such-master"}  # a session fails
    for command, expected in (
        (["rollback", CID], original),
        (["cutover", CID, "--skip-rebuilt"], restated),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "backfill_assets.cli", *command],
            env=no_spark,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert_tables_equal(env, expected, _days(START, END))
        assert fact_figures_shown(env, cut) == reference_figures(expected, cut)


ACTION_OPS = {
    CORRECTION_DIFF_JOB: "diff_correction",
    CORRECTION_CUTOVER_JOB: "cut_over_correction",
    CORRECTION_ROLLBACK_JOB: "roll_back_correction",
    CORRECTION_DISCARD_JOB: "discard_correction",
}


def run_action(env, job: str, **config) -> tuple[dg.ExecuteInProcessResult, str]:
    """One of the UI's correction jobs, launched with ``config`` as its form; (the result, the
    failure's message or "")."""
    job_def = build_definitions(Settings.from_env()).resolve_job_def(job)
    result = job_def.execute_in_process(
        run_config={"ops": {ACTION_OPS[job]: {"config": config}}},
        instance=env.instance,
        raise_on_error=False,
    )
    failures = [e for e in result.all_events if e.is_step_failure]
    message = str(failures[0].step_failure_data.user_failure_data or "") if failures else ""
    return result, message


def test_the_ui_jobs_roll_back_and_cut_over_as_the_commands_do(
    cut_over, original, restated, copy_of
):
    env = copy_of(cut_over)
    done, _ = run_action(env, CORRECTION_ROLLBACK_JOB, correction_id=CID)
    assert done.success
    assert_tables_equal(env, original, _days(START, END))
    assert registry.get(env.settings.lake_dir, CID).state == registry.State.ROLLED_BACK
    assert env.instance.get_run_by_id(done.run_id).tags[CORRECTION_TAG] == CID
    # Rolled back, it may be cut over again: still pending.
    assert all(CID in mark for mark in pending_marks(env).values()), pending_marks(env)
    assert partition_marks(env) == marked_by(CID)

    before = {t: active_files(env, t) for t in TABLES}
    refused, why = run_action(
        env, CORRECTION_CUTOVER_JOB, correction_id=CID, max_revenue_change_pct=0.0001
    )
    assert not refused.success and "refusing: revenue moves more than 0.0001%" in why, why
    assert {t: active_files(env, t) for t in TABLES} == before

    done, _ = run_action(env, CORRECTION_CUTOVER_JOB, correction_id=CID, skip_rebuilt=True)
    assert done.success
    assert_tables_equal(env, restated, _days(START, END))
    assert registry.get(env.settings.lake_dir, CID).state == registry.State.CUT_OVER
    runs = env.instance.get_runs(dg.RunsFilter(tags={CORRECTION_TAG: CID}))
    assert {r.job_name for r in runs} >= {CORRECTION_ROLLBACK_JOB, CORRECTION_CUTOVER_JOB}
    assert set(pending_marks(env).values()) == {""}  # cut over: nothing pending
    assert partition_marks(env) == marked_by("none")


@pytest.mark.parametrize("job", [CORRECTION_DIFF_JOB, CORRECTION_DISCARD_JOB])
def test_a_ui_job_for_an_unknown_correction_says_so_and_changes_nothing(production, copy_of, job):
    env = copy_of(production)
    before = {t: active_files(env, t) for t in TABLES}
    refused, why = run_action(env, job, correction_id="no-such-fix")
    assert not refused.success and "no correction 'no-such-fix'" in why, why
    assert {t: active_files(env, t) for t in TABLES} == before


def build_from_form(
    env, config: dict, job=correction_job, days: tuple[date, date] = (FIX_START, FIX_END)
) -> tuple[bool, str]:
    """A run of ``job`` over ``days`` (the correction's range) with the Launchpad's form
    ``config``, no tag typed: (success, the failure's message or "")."""
    with dg.execute_job(
        dg.reconstructable(job),
        instance=env.instance,
        asset_selection=list(STEP_ASSETS[EVENT_DAYS_STEP]),
        tags={RANGE_START: days[0].isoformat(), RANGE_END: days[1].isoformat()},
        run_config={"ops": {"staging_and_fact": {"config": config}}},
        raise_on_error=False,
    ) as result:
        failures = [e for e in result.all_events if e.is_step_failure]
        message = str(failures[0].step_failure_data.user_failure_data or "") if failures else ""
        return result.success, message


def form_correction(env) -> registry.Correction:
    """The correction the form started (with no id: the run made one)."""
    [c] = [c for c in registry.all_corrections(env.settings.lake_dir) if c.reason == FORM_REASON]
    return c


FORM_REASON = "from the form"


def test_a_correction_started_from_the_form_stages_the_references_rows(form_discarded, restated):
    env, c = form_discarded.env, form_discarded.correction
    assert c is not None and re.fullmatch(rf"c{FIX_START:%Y%m%d}-[0-9a-f]{{6}}", c.id), c
    assert c.state == registry.State.STAGED and c.created_by
    assert form_discarded.run_tags == (c.id,)
    days = _days(FIX_START, FIX_END)
    assert set(form_discarded.staged_rows) == expected_rows(restated, days)["staging/orders"]
    assert form_discarded.discarded
    assert registry.get(env.settings.lake_dir, c.id).state == registry.State.DISCARDED


@pytest.mark.parametrize(
    "config, job, message",
    [
        ({"correction_id": "no-reason", "reason": "  "}, correction_job, "needs a reason"),
        ({"correction_id": "not an id", "reason": "why"}, correction_job, "not an id"),
        ({"correction_id": "", "reason": ""}, correction_job, "needs a reason"),
        ({"correction_id": CID, "reason": "why"}, correction_job, f"correction {CID} exists"),
        ({"correction_id": "nope", "reason": "why", "rebuild": True}, correction_job, "no corr"),
        ({"correction_id": "in-backfill", "reason": "why"}, backfill_job, "leave the correction"),
    ],
    ids=["empty-reason", "bad-id", "empty-form", "duplicate-id", "rebuild-unknown", "outside"],
)
def test_a_bad_form_is_refused_with_its_reason_and_builds_nothing(
    cut_over, copy_of, config, job, message
):
    assert_refused(copy_of(cut_over), message, config, job)


def test_a_closed_correction_is_refused_even_to_rebuild(form_discarded, copy_of):
    env = copy_of(form_discarded)
    config = {"correction_id": form_correction(env).id, "reason": "why", "rebuild": True}
    assert_refused(env, "discarded", config, correction_job)


def test_correct_refuses_a_taken_id_unless_asked_to_rebuild(cut_over, copy_of, capsys):
    env = copy_of(cut_over)
    command = ["correct", "--start", str(FIX_START), "--end", str(FIX_START), "--reason", "again"]
    assert main([*command, "--id", CID]) == 1
    assert f"correction {CID} exists" in capsys.readouterr().err
    assert main([*command, "--id", "never-made", "--rebuild"]) == 1
    assert "no correction 'never-made' to rebuild" in capsys.readouterr().err
    assert registry.load(env.settings.lake_dir, "never-made") is None


def test_a_range_production_never_published_is_refused_and_builds_nothing(
    production, copy_of, capsys
):
    env = copy_of(production)
    never = (date(2024, 2, 1), date(2024, 2, 3))  # after the feed and the backfill
    config = {"correction_id": "too-early", "reason": "why"}
    assert_refused(env, "production has no published", config, correction_job, never)
    command = ["correct", "--start", str(never[0]), "--end", str(never[1]), "--reason", "why"]
    assert main([*command, "--id", "too-early"]) == 1  # the command refuses alike
    assert "production has no published" in capsys.readouterr().err
    assert registry.load(env.settings.lake_dir, "too-early") is None


def assert_refused(env, message: str, *form) -> None:
    before = {t: active_files(env, t) for t in TABLES}
    records = sorted(c.id for c in registry.all_corrections(env.settings.lake_dir))
    ok, why = build_from_form(env, *form)
    assert not ok and message in why, why
    assert {t: active_files(env, t) for t in TABLES} == before
    assert sorted(c.id for c in registry.all_corrections(env.settings.lake_dir)) == records


def test_the_corrections_asset_shows_each_correction_as_its_record_says(form_discarded):
    """Its partitions are the corrections; each one's latest observation is the record's state:
    the first cut over, the form's discarded."""
    env = form_discarded.env
    form_id = form_correction(env).id
    assert set(env.instance.get_dynamic_partitions(CORRECTIONS_PARTITIONS)) == {CID, form_id}
    for cid, state in ((CID, "cut over"), (form_id, "discarded")):
        [latest] = env.instance.fetch_observations(
            dg.AssetRecordsFilter(asset_key=CORRECTIONS, asset_partitions=[cid]), limit=1
        ).records
        shown = {k: v.value for k, v in latest.asset_observation.metadata.items()}
        record = registry.get(env.settings.lake_dir, cid)
        assert shown["state"] == record.state == state
        assert (shown["reason"], shown["created_by"], shown["created_at"]) == (
            record.reason,
            record.created_by,
            record.created_at,
        )
        assert shown["range"] == f"{FIX_START}..{FIX_END}"
        # the diff's report opens from the correction: the file diff wrote beside the record
        report = env.settings.lake_dir / registry.FOLDER / f"{cid}.md"
        if cid == CID:  # diffed
            assert (
                shown["report"] == report.read_text()
                and f"# Correction {cid}" in report.read_text()
            )
        else:  # never diffed
            assert (
                not report.exists() and shown["report"] == "No diff yet: run correction_diff_job."
            )


def test_corrections_lists_each_with_its_state(cut_over, copy_of, capsys):
    copy_of(cut_over)
    assert main(["corrections"]) == 0
    line = next(row for row in capsys.readouterr().out.splitlines() if row.startswith(CID))
    assert "cut over" in line and "provider restated EUR" in line


def test_after_the_retention_maintain_decommissions_it_and_rollback_is_refused(
    cut_over, copy_of, capsys
):
    env = copy_of(cut_over)
    record = env.settings.lake_dir / registry.FOLDER / f"{CID}.json"
    document = json.loads(record.read_text())
    document["created_at"] = (datetime.now(UTC) - timedelta(days=15)).isoformat(timespec="seconds")
    record.write_text(json.dumps(document))  # made 15 days ago; the retention is 14
    assert main(["maintain"]) == 0, capsys.readouterr().err
    assert f"correction {CID} decommissioned" in capsys.readouterr().out
    assert not (env.settings.lake_dir / "staging/orders/_staged" / f"{CID}.json").exists()
    assert main(["rollback", CID]) == 1
    assert "decommissioned" in capsys.readouterr().err


def test_the_demos_correction_tour_prints_the_references_numbers(production, copy_of, capsys):
    """`make demo`'s last act on production: EUR restated for Jan 2..5, then correct, diff,
    cutover, rollback, cutover. Its printed totals are the reference's before and after."""
    env = copy_of(production)
    before_tour = env.settings.landing_dir.parent / "before_tour"
    shutil.copytree(env.settings.landing_dir, before_tour)
    first, last = restated_period(START, END)
    fix_days = _days(first, min(END, last + timedelta(days=7)))
    old = Reference(before_tour, env.settings.max_lateness_days)

    assert correction_tour(env.settings, START, END) == 0
    out = capsys.readouterr().out
    new = Reference(env.settings.landing_dir, env.settings.max_lateness_days)
    changed = [d for d in fix_days if expected_rows(old, [d]) != expected_rows(new, [d])]
    assert changed and out.split("changed days: ")[1].splitlines()[0] == ", ".join(
        map(str, changed)
    )

    def total(ref, field):
        return sum(getattr(f, field) for f in ref.fact(fix_days))

    assert (
        f"| **total** | {total(old, 'orders')} | {total(new, 'orders')} | "
        f"{total(old, 'paid_orders')} "
        f"| {total(new, 'paid_orders')} | {total(old, 'revenue_usd')} | "
        f"{total(new, 'revenue_usd')} |"
    ) in out
    assert_tables_equal(env, new, _days(START, END))
    assert out.count("cut over:") == 2 and "rolled back:" in out
