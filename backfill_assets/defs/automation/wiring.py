"""The automation's settings as Dagster declares them: default statuses and the sensor shape."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import dagster as dg

from backfill_assets.catalog import BACKFILL_JOB
from backfill_assets.settings import AutomationSettings


def sensor_status(auto: AutomationSettings) -> dg.DefaultSensorStatus:
    """RUNNING with ``BACKFILL_AUTOMATION=on``, else STOPPED."""
    return dg.DefaultSensorStatus.RUNNING if auto.running else dg.DefaultSensorStatus.STOPPED


def schedule_status(auto: AutomationSettings) -> dg.DefaultScheduleStatus:
    """RUNNING with ``BACKFILL_AUTOMATION=on``, else STOPPED."""
    return dg.DefaultScheduleStatus.RUNNING if auto.running else dg.DefaultScheduleStatus.STOPPED


def pipeline_sensor(
    auto: AutomationSettings,
    evaluate: Callable,
    name: str,
    status: dg.DefaultSensorStatus,
    jobs: list | None = None,
) -> dg.SensorDefinition:
    """A sensor of the pipeline, evaluated every ``sensor_interval_seconds``, its docstring
    the description the UI shows; it requests runs of ``backfill_job`` unless ``jobs``."""
    target = {"jobs": jobs} if jobs else {"job_name": BACKFILL_JOB}
    return dg.sensor(
        name=name,
        minimum_interval_seconds=auto.sensor_interval_seconds,
        default_status=status,
        description=inspect.cleandoc(evaluate.__doc__ or ""),
        **target,
    )(evaluate)
