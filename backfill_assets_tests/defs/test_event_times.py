"""A step's materializations, as Dagster's UI lists them: each day's its own event on the asset's
Events page, which keys events by run id, millisecond and kind and keeps one per key."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import dagster as dg
import pytest

from backfill_assets.cli.instance import prepare_instance_yaml
from backfill_assets.lake import Lake
from backfill_assets.publishing.publication import Publication

# Opens a lake on the session's Spark: `make test`, not `make test-fast`.
pytestmark = pytest.mark.slow

PROJECT_YAML = Path(__file__).resolve().parents[2] / "dagster.yaml"
DAYS = [date(2024, 1, 1) + timedelta(days=i) for i in range(366)]
ASSET = dg.AssetKey("paced_probe")


def test_a_steps_materializations_are_each_stored_in_a_millisecond_of_their_own(spark, tmp_path):
    @dg.asset(key=ASSET)
    def paced_probe(context):
        with Publication(context, Lake(str(tmp_path / "lake"), spark)) as step:
            for day in DAYS:  # as a ranged step publishes its days, one after the other
                step.published(ASSET, day, {"day": day.isoformat()})
            yield from step.drain()
        yield dg.Output(None)

    home = tmp_path / "home"  # as the CLI prepares it: our SQLite event log, which stores an
    prepare_instance_yaml(home, PROJECT_YAML, env={})  # event in about a millisecond
    with dg.DagsterInstance.from_config(str(home)) as instance:
        result = dg.materialize([paced_probe], instance=instance)
        records = instance.fetch_materializations(ASSET, limit=1000).records
    stored = [r for r in records if r.partition_key is not None]
    assert sorted(r.partition_key for r in stored) == [d.isoformat() for d in DAYS]
    keys = {(r.event_log_entry.run_id, int(r.timestamp * 1000)) for r in stored}
    assert {r.event_log_entry.run_id for r in stored} == {result.run_id}
    assert len(keys) == len(stored), "materializations of one run share a millisecond"
