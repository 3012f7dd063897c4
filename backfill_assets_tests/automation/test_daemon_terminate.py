"""With the real dagster-daemon: Terminate on a running ranged run (what the UI's Terminate
calls, ``run_launcher.terminate``) ends it Canceled within 30 s, with no step retry, no run
retry, and nothing published."""

from __future__ import annotations

import time
from datetime import date
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster._core.events import DagsterEventType

from backfill_assets.automation.state import load_cursor
from backfill_assets.cli.instance import prepare_instance_yaml
from backfill_assets_tests.automation.landing_files import order, write_orders
from backfill_assets_tests.automation.test_daemon_dead_run import LAUNCH_SECONDS, stop_all, tree
from backfill_assets_tests.automation.test_daemon_e2e import (
    PROJECT,
    daemon_env,
    start_daemon,
    wait_for,
)

TERMINATE_SECONDS = 30  # Terminate to Canceled: the bound the runbook promises
RETRY_WATCH_SECONDS = 20  # long enough for the daemon's run-retry pass to have acted


def published_versions(lake: Path) -> list[Path]:
    return sorted(lake.glob("*/*/_delta_log/*.json"))


@pytest.mark.e2e
def test_terminate_cancels_a_running_step_without_retry(tmp_path):
    (tmp_path / "home").mkdir()
    config = yaml.safe_load((PROJECT / "dagster.yaml").read_text())
    config["run_monitoring"].update(poll_interval_seconds=5)
    (tmp_path / "home" / "dagster.yaml").write_text(yaml.safe_dump(config))
    prepare_instance_yaml(tmp_path / "home", PROJECT / "dagster.yaml")
    (tmp_path / "landing" / "orders").mkdir(parents=True)
    pause = tmp_path / "pause"
    pause.mkdir()
    env = {
        **daemon_env(tmp_path),
        "BACKFILL_LAKE_PAUSE_DIR": str(pause),
        "BACKFILL_LAKE_PAUSE_AT": "mid_files",  # inside raw's Spark job: the driver waits in py4j
    }
    log, seen = tmp_path / "daemon.log", set()
    with dg.DagsterInstance.from_config(str(tmp_path / "home")) as instance, open(log, "wb") as out:
        daemon = start_daemon(env, out)
        try:
            wait_for("the sensor's first tick", lambda: load_cursor(instance), daemon, log)
            write_orders(
                tmp_path / "landing",
                date(2024, 1, 3),
                "a.jsonl",
                [order("o1", "2024-01-03T08:00:00Z"), order("o2", "2024-01-03T09:00:00Z")],
            )
            wait_for(
                "raw's job paused mid-write",
                lambda: (pause / "mid_files.1.reached").exists(),
                daemon,
                log,
                LAUNCH_SECONDS,
            )
            [run] = instance.get_runs()
            assert run.status == dg.DagsterRunStatus.STARTED
            seen |= tree(daemon.pid)
            began = time.monotonic()
            instance.run_launcher.terminate(run.run_id)
            ended = wait_for(
                "the terminated run to end",
                lambda: (r := instance.get_run_by_id(run.run_id)) is not None and r.is_finished,
                daemon,
                log,
                TERMINATE_SECONDS + 30,
            )
            took = time.monotonic() - began
            assert ended
            time.sleep(RETRY_WATCH_SECONDS)
            final = instance.get_run_by_id(run.run_id)
            runs = instance.get_runs()
            retries = instance.get_records_for_run(
                run.run_id, of_type=DagsterEventType.STEP_UP_FOR_RETRY
            ).records
        finally:
            survivors = stop_all(daemon, seen)
    assert final is not None and final.status == dg.DagsterRunStatus.CANCELED, log.read_text()[
        -3000:
    ]
    assert took <= TERMINATE_SECONDS, took
    assert retries == []
    assert [r.run_id for r in runs] == [run.run_id]  # no run retry was launched
    assert published_versions(tmp_path / "lake") == []
    assert survivors == []
