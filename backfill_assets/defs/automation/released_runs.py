"""``release_dead_runs``: the daemon's side of ``publishing.run_workers``. A run whose process was
killed holds its ``spark`` pool slot until it is released; the CLI releases such runs before it
starts its own, and this sensor does on every tick, so the daemon's runs do not wait for a
command to be typed."""

from __future__ import annotations

import inspect

import dagster as dg

from backfill_assets.catalog import RELEASE_SENSOR
from backfill_assets.publishing.run_workers import release_orphaned_runs
from backfill_assets.settings import AutomationSettings


def build_release_sensor(auto: AutomationSettings) -> dg.SensorDefinition:
    def release_dead_runs(context: dg.SensorEvaluationContext) -> dg.SkipReason:
        """Marks failed every unfinished run whose process on this host is gone (SIGKILLed, or
        killed for memory) and frees its slots of the spark pool, which every later Spark step
        would otherwise wait for; Dagster then retries the crashed run once (dagster.yaml)."""
        released = release_orphaned_runs(context.instance, launched_here=True)
        for run_id in released:
            context.log.warning(f"released run {run_id}: its process is gone (killed?)")
        return dg.SkipReason(
            f"released {len(released)} run(s) whose process is gone"
            if released
            else "every unfinished run's process is alive"
        )

    return dg.sensor(
        name=RELEASE_SENSOR,
        minimum_interval_seconds=auto.sensor_interval_seconds,
        # It only ever fails runs whose process is gone: on wherever the daemon runs.
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=inspect.cleandoc(release_dead_runs.__doc__ or ""),
    )(release_dead_runs)
