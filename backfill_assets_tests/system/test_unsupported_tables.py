"""A table to which another Delta writer gave a reader feature that delta-rs cannot honour
(deletion vectors, column mapping): `backfill` and `correct` launch no run and name the table
and the feature; a run launched anyway fails its step at once, naming them, and is not retried.
Real runs of the pipeline on delta-rs, the feature committed to the log by hand."""

from __future__ import annotations

from datetime import date

import dagster as dg
import pytest

from backfill_assets.backfill_plan import RunPlan
from backfill_assets.catalog import RAW_ORDERS
from backfill_assets.cli.backfill import run_backfill
from backfill_assets.cli.runner import execute
from backfill_assets.demo.generate import generate_feed
from backfill_assets_testkit.pipeline_env import pipeline_env
from backfill_assets_testkit.reader_features import declare_reader_feature

DAY = date(2024, 1, 2)


@pytest.mark.parametrize("feature", ["deletionVectors", "columnMapping"])
def test_a_table_delta_rs_cannot_read_stops_the_backfill_before_any_run(
    tmp_path, spark, monkeypatch, feature
):
    monkeypatch.setenv("BACKFILL_LAKE_ENGINE", "delta-rs")
    with pipeline_env(tmp_path) as env:
        generate_feed(env.settings.landing_dir, date(2024, 1, 1), DAY, orders_per_day=5, seed=3)
        assert execute(RunPlan((RAW_ORDERS,), DAY, DAY), env.instance).success
        declare_reader_feature(env.settings.lake_dir / "raw" / "orders", feature)
        runs = env.instance.get_runs_count()

        with pytest.raises(ValueError) as refused:
            run_backfill(env.settings, DAY, DAY)
        assert str(refused.value).startswith(
            f"no run launched: table raw/orders needs reader features ['{feature}']"
        ), refused.value
        assert "BACKFILL_LAKE_ENGINE=delta-spark" in str(refused.value)
        assert env.instance.get_runs_count() == runs

        # launched anyway (the check bypassed): one attempt, its failure naming the feature
        outcome = execute(RunPlan((RAW_ORDERS,), DAY, DAY), env.instance)
        retries = env.instance.all_logs(
            outcome.run_id, of_type=dg.DagsterEventType.STEP_UP_FOR_RETRY
        )
    assert not outcome.success
    assert feature in (outcome.error or ""), outcome.error
    assert retries == []
