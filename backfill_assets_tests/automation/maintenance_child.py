"""A child process for the maintenance stop test: runs the weekly maintenance job on a real
Dagster instance (in this process, as a run worker would) and prints what the run said, one
JSON line: its success, and its step's failure."""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

import dagster as dg

from backfill_assets.catalog import MAINTENANCE_JOB
from backfill_assets.definitions import build_definitions
from backfill_assets.settings import Settings


def main(lake_dir: str) -> None:
    defs = build_definitions(
        Settings(Path(lake_dir).parent / "landing", Path(lake_dir), dt.date(2024, 1, 1), 7)
    )
    with dg.DagsterInstance.ephemeral() as instance:
        result = defs.resolve_job_def(MAINTENANCE_JOB).execute_in_process(
            instance=instance, raise_on_error=False
        )
        failures = [
            {
                "message": e.step_failure_data.error.message if e.step_failure_data.error else "",
                "description": (
                    e.step_failure_data.user_failure_data.description
                    if e.step_failure_data.user_failure_data
                    else None
                ),
            }
            for e in result.get_step_failure_events()
        ]
        retries = [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
    print(json.dumps({"success": result.success, "failures": failures, "retries": len(retries)}))


if __name__ == "__main__":
    main(sys.argv[1])
