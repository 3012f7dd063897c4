"""How the late-data automation runs, from the environment when the definitions load."""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import dagster as dg
from dagster._utils.schedules import is_valid_cron_string

from backfill_assets.catalog import BACKFILL_JOB
from backfill_assets.late_data.detect import RECOUNT_NS


@dataclass(frozen=True)
class AutomationSettings:
    """``BACKFILL_AUTOMATION=on`` starts the sensor and the schedule as RUNNING.

    ``BACKFILL_LANDING_RECOUNT_MINUTES`` (default 10; 0: every tick) is how often the sensor
    counts every landing folder's files, whatever the folder's change time (``late_data/scan.py``).
    ``BACKFILL_DAILY_CRON`` (default ``0 2 * * *``, UTC) is when ``daily_refresh`` ticks.

    Off by default: switching on a sensor that rebuilds history is an operator's decision (in
    the UI, or with this variable in a deployment), not a side effect of loading the code in a
    laptop's ``dagster dev`` or a test.
    """

    running: bool = False
    sensor_interval_seconds: int = 60
    settle_seconds: float = 2.0
    rerun_days: int = 3
    recount_minutes: float = RECOUNT_NS / 60e9
    daily_cron: str = "0 2 * * *"

    @classmethod
    def from_env(cls, env: os._Environ | dict | None = None) -> AutomationSettings:
        env = os.environ if env is None else env
        try:
            settings = cls(
                running=env.get("BACKFILL_AUTOMATION", "off").strip().lower()
                in ("on", "1", "true"),
                sensor_interval_seconds=int(env.get("BACKFILL_SENSOR_INTERVAL_SECONDS", "60")),
                settle_seconds=float(env.get("BACKFILL_LANDING_SETTLE_SECONDS", "2")),
                rerun_days=int(env.get("BACKFILL_RERUN_DAYS", "3")),
                recount_minutes=float(
                    env.get("BACKFILL_LANDING_RECOUNT_MINUTES", str(RECOUNT_NS / 60e9))
                ),
                daily_cron=env.get("BACKFILL_DAILY_CRON", cls.daily_cron).strip(),
            )
        except ValueError as exc:
            raise ValueError(f"bad late-data automation setting: {exc}") from exc
        if (
            settings.sensor_interval_seconds < 1
            or settings.settle_seconds < 0
            or settings.rerun_days < 1
            or not settings.recount_minutes >= 0
        ):
            raise ValueError(
                "need BACKFILL_SENSOR_INTERVAL_SECONDS >= 1, "
                "BACKFILL_LANDING_SETTLE_SECONDS >= 0, BACKFILL_RERUN_DAYS >= 1, "
                "BACKFILL_LANDING_RECOUNT_MINUTES >= 0"
            )
        if not is_valid_cron_string(settings.daily_cron):
            raise ValueError(
                f"BACKFILL_DAILY_CRON is not a cron expression: {settings.daily_cron!r}"
            )
        return settings

    @property
    def default_status(self) -> dg.DefaultSensorStatus:
        return dg.DefaultSensorStatus.RUNNING if self.running else dg.DefaultSensorStatus.STOPPED

    @property
    def default_schedule_status(self) -> dg.DefaultScheduleStatus:
        return (
            dg.DefaultScheduleStatus.RUNNING if self.running else dg.DefaultScheduleStatus.STOPPED
        )

    def sensor(
        self,
        evaluate: Callable[..., Any],
        name: str,
        status: dg.DefaultSensorStatus,
        jobs: list | None = None,
    ) -> dg.SensorDefinition:
        """A sensor of the pipeline, evaluated every ``sensor_interval_seconds``, its docstring
        the description the UI shows; it requests runs of ``backfill_job`` unless ``jobs``."""
        target = {"jobs": jobs} if jobs else {"job_name": BACKFILL_JOB}
        return dg.sensor(
            name=name,
            minimum_interval_seconds=self.sensor_interval_seconds,
            default_status=status,
            description=inspect.cleandoc(evaluate.__doc__ or ""),
            **target,
        )(evaluate)

    @property
    def settle_ns(self) -> int:
        return int(self.settle_seconds * 1e9)

    @property
    def recount_ns(self) -> int:
        return int(self.recount_minutes * 60e9)
