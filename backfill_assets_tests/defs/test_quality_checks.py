"""The warning checks in a real pipeline run: a volume drop and a currency spike on known days
warn on exactly those days and publish; a blocking setting holds the day, its neighbours publish."""

from __future__ import annotations

from collections import Counter
from datetime import date, timedelta

import dagster as dg
import pytest
from dagster._core.events import DagsterEventType

from backfill_assets.backfill_plan import RunPlan, plan_backfill
from backfill_assets.catalog import EVENT_DAYS_STEP, FCT_DAILY_REVENUE, STEP_ASSETS, STG_ORDERS
from backfill_assets.cli.runner import execute
from backfill_assets.demo.generate import generate_feed
from backfill_assets_testkit.pipeline_env import pipeline_env
from backfill_assets_testkit.reference import Reference

# Runs the pipeline through Dagster on real Spark and Delta: `make test`, not `make test-fast`.
pytestmark = pytest.mark.slow

START, END = date(2024, 1, 1), date(2024, 2, 5)  # 36 days
DROP = date(2024, 1, 20)  # a fifth of the usual orders
SPIKE = date(2024, 1, 27)  # every USD order of the day turned into EUR
ORDERS = 60


def _spike_currency(landing, day: date) -> int:
    """Rewrite the day's landed order files: USD orders become EUR (a test's tampering)."""
    changed = 0
    for path in sorted((landing / "orders").glob(f"arrival_date=*/orders-{day:%Y%m%d}-*.jsonl")):
        text = path.read_text(encoding="utf-8")
        changed += text.count('"currency":"USD"')
        path.write_text(text.replace('"currency":"USD"', '"currency":"EUR"'), encoding="utf-8")
    return changed


@pytest.fixture(scope="module")
def env(tmp_path_factory, spark):
    root = tmp_path_factory.mktemp("quality")
    with pipeline_env(root, start_date="2024-01-01") as penv:
        landing = penv.settings.landing_dir
        # Each event day's files depend only on the seed and the day: three ranges, one feed.
        generate_feed(landing, START, DROP - timedelta(days=1), orders_per_day=ORDERS, seed=5)
        generate_feed(landing, DROP, DROP, orders_per_day=ORDERS // 5, seed=5)
        generate_feed(landing, DROP + timedelta(days=1), END, orders_per_day=ORDERS, seed=5)
        assert _spike_currency(landing, SPIKE) > 0
        yield penv


@pytest.fixture(scope="module")
def first_run(env):
    return [execute(plan, env.instance) for plan in plan_backfill(env.settings, START, END)]


def _warned(outcome, asset_key) -> dict[str, set[date]]:
    by_check: dict[str, set[date]] = {}
    for day, names in outcome.warnings.get(asset_key, {}).items():
        for name in names:
            by_check.setdefault(name, set()).add(day)
    return by_check


def test_the_feed_has_the_drop_and_the_spike(env):
    """Independently of the pipeline: the reference's staging of the feed."""
    rows, held = Reference(env.settings.landing_dir).staging(
        [DROP - timedelta(days=1), DROP, SPIKE - timedelta(days=1), SPIKE]
    )
    assert not held
    per_day = Counter(r.event_date for r in rows)
    assert per_day[DROP] * 3 < per_day[DROP - timedelta(days=1)]
    usd = Counter(r.event_date for r in rows if r.currency == "USD")
    assert usd[SPIKE] == 0 and usd[SPIKE - timedelta(days=1)] > 5


def test_exactly_the_injected_days_warn_and_every_day_publishes(env, first_run):
    event_days = first_run[-1]
    assert event_days.success, event_days.error
    assert (
        len(event_days.published[STG_ORDERS]) == len(event_days.published[FCT_DAILY_REVENUE]) == 36
    )
    assert _warned(event_days, STG_ORDERS) == {
        "row_count_band": {DROP},
        "currency_share_band": {SPIKE},
    }
    assert _warned(event_days, FCT_DAILY_REVENUE) == {"row_count_band": {DROP}}


def _evaluations(env, run_id: str, asset_key, check: str) -> dict[date, dg.AssetCheckEvaluation]:
    out = {}
    for record in env.instance.all_logs(run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION):
        ev = record.dagster_event.asset_check_evaluation_data
        if ev.asset_key == asset_key and ev.check_name == check:
            out[date.fromisoformat(ev.partition)] = ev
    return out


def test_a_warning_carries_its_band_and_the_actual_value(env, first_run):
    rows, _ = Reference(env.settings.landing_dir).staging([DROP])
    evs = _evaluations(env, first_run[-1].run_id, STG_ORDERS, "row_count_band")
    assert len(evs) == 36
    drop = evs[DROP]
    assert not drop.passed and drop.severity == dg.AssetCheckSeverity.WARN
    meta = {k: v.value for k, v in drop.metadata.items()}
    assert meta["actual"] == len(rows)
    assert meta["actual"] < meta["band_lower"] <= meta["band_median"] <= meta["band_upper"]
    assert meta["history_days"] == 19  # Jan 1 .. Jan 19
    assert "note" in {k for k, _ in evs[START].metadata.items()}  # no history on the first day


def test_the_materializations_carry_the_figures_the_plots_tab_draws(env, first_run):
    """Dagster's Plots tab draws an asset's numeric materialization metadata over its
    partitions: each day's materialization carries each warning check's value and band."""
    rows, _ = Reference(env.settings.landing_dir).staging([DROP])
    records = env.instance.fetch_materializations(STG_ORDERS, limit=1000).records
    drop = next(r.asset_materialization for r in records if r.partition_key == DROP.isoformat())
    meta = {k: v.value for k, v in drop.metadata.items()}
    assert meta["quality/row_count_band/actual"] == len(rows)
    assert meta["quality/row_count_band/actual"] < meta["quality/row_count_band/band_lower"]
    assert meta["quality/row_count_band/band_upper"] > meta["quality/row_count_band/band_lower"]
    assert {"quality/currency_share_band/actual", "quality/revenue_per_order_band/actual"} <= set(
        meta
    )
    fact = env.instance.fetch_materializations(FCT_DAILY_REVENUE, limit=1000).records
    fact_drop = next(r.asset_materialization for r in fact if r.partition_key == DROP.isoformat())
    assert fact_drop.metadata["quality/row_count_band/actual"].value == len(rows)


def test_a_blocking_setting_holds_the_day_and_its_neighbours_publish(env, first_run, monkeypatch):
    monkeypatch.setenv("BACKFILL_BLOCKING_QUALITY_CHECKS", "row_count_band")
    around = RunPlan(
        STEP_ASSETS[EVENT_DAYS_STEP], DROP - timedelta(days=1), DROP + timedelta(days=1)
    )
    outcome = execute(around, env.instance)
    assert not outcome.success
    assert set(outcome.published[STG_ORDERS]) == {
        DROP - timedelta(days=1),
        DROP + timedelta(days=1),
    }
    assert set(outcome.published[FCT_DAILY_REVENUE]) == set(outcome.published[STG_ORDERS])
    assert outcome.failed_checks[STG_ORDERS] == {DROP: ["row_count_band"]}
    assert DROP in outcome.held
    # The history now comes from the published table: the band is the first run's.
    first = _evaluations(env, first_run[-1].run_id, STG_ORDERS, "row_count_band")[DROP]
    again = _evaluations(env, outcome.run_id, STG_ORDERS, "row_count_band")[DROP]
    assert again.metadata["band_median"] == first.metadata["band_median"]


def test_plan_reports_the_key_distribution_of_the_valid_records(env, first_run):
    from backfill_assets.cli.key_distribution import key_distribution, render_skew

    report = key_distribution(env.settings, START, END)
    reference = Reference(env.settings.landing_dir)
    valid = [
        rec.fields
        for a in reference.arrival_dates
        for rec in reference.records(a)
        if rec.reason is None and START <= rec.fields["event_date"] <= END
    ]
    assert report.source.startswith("raw/orders") and report.rows == len(valid)
    for k in report.keys:
        expected = Counter(f[k.key] for f in valid)
        assert k.keys == len(expected)
        assert [(s.value, s.rows) for s in k.top] == sorted(
            expected.items(), key=lambda kv: (-kv[1], str(kv[0]))
        )[:5]
        assert k.null.rows == 0
    assert report.hot == []  # no customer, country or day holds 3x an even share
    assert "NULL 0.0%" in "\n".join(render_skew(report))


def test_the_salted_write_publishes_the_same_staging(env, first_run, monkeypatch):
    days = [date(2024, 1, 2), date(2024, 1, 3)]
    before = Counter(
        tuple(sorted(r.items())) for r in env.rows("staging/orders") if r["event_date"] in days
    )
    monkeypatch.setenv("BACKFILL_SKEW_MITIGATION", "on")
    outcome = execute(RunPlan(STEP_ASSETS[EVENT_DAYS_STEP], days[0], days[-1]), env.instance)
    assert outcome.success, outcome.error
    after = Counter(
        tuple(sorted(r.items())) for r in env.rows("staging/orders") if r["event_date"] in days
    )
    assert after == before and before
    from deltalake import DeltaTable

    files = DeltaTable(str(env.settings.lake_dir / "staging/orders")).file_uris()
    per_day = Counter(d for d in days for f in files if f"event_date={d}/" in f)
    assert all(per_day[d] > 1 for d in days), per_day  # each day written by several tasks
