"""Late-data automation: the sensor, the daily schedule and its follow-up, over ``late_data``
(``backfill-assets catch-up`` runs the same detection from the command line);
``downstream_refresh``, which rebuilds LTV and the monthly report after any change to the event
days; the weekly lake maintenance schedule (``backfill-assets maintain`` runs it from the
command line); and ``release_dead_runs``, which frees the pool slots of runs whose process died."""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg

from backfill_assets.defs.automation.downstream import build_downstream_sensor
from backfill_assets.defs.automation.follow_up import build_follow_up_sensor
from backfill_assets.defs.automation.maintenance_schedule import build_maintenance_schedule
from backfill_assets.defs.automation.released_runs import build_release_sensor
from backfill_assets.defs.automation.schedules import build_daily_schedule
from backfill_assets.defs.automation.sensors import build_late_data_sensor
from backfill_assets.settings import AutomationSettings, Settings


@dataclass(frozen=True)
class Automation:
    sensors: list[dg.SensorDefinition]
    schedules: list[dg.ScheduleDefinition]
    settings: AutomationSettings


def build_automation(
    settings: Settings, auto: AutomationSettings | None = None, downstream_jobs: list | None = None
) -> Automation:
    """``downstream_jobs``: the jobs that build LTV and the monthly report (without them, no
    ``downstream_refresh`` sensor)."""
    auto = auto or AutomationSettings.from_env()
    downstream = (
        [build_downstream_sensor(settings, auto, downstream_jobs)] if downstream_jobs else []
    )
    return Automation(
        [
            build_late_data_sensor(settings, auto),
            build_follow_up_sensor(auto),
            *downstream,
            build_release_sensor(auto),
        ],
        [build_daily_schedule(settings, auto), build_maintenance_schedule(auto)],
        auto,
    )
