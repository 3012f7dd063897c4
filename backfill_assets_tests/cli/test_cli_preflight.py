"""`backfill` and `correct` check what their runs need before they launch any: with the
delta-spark engine and its jars missing (Delta's; the s3a ones for a lake on S3), or no landing
zone, the command stops with one line naming the fix, exits non-zero, and the Dagster instance
holds no run. Real subprocesses of the command line, empty jar folders; no S3 server: nothing is
asked of S3 before the check."""

from __future__ import annotations

import subprocess
import sys
from datetime import date
from pathlib import Path

import dagster as dg
import pytest

from backfill_assets.demo.generate import generate_feed
from backfill_assets_testkit.processes import REPO, subprocess_env

pytestmark = pytest.mark.slow  # subprocesses of the command line
RANGE = ["--start", "2024-01-02", "--end", "2024-01-03"]


@pytest.fixture
def base_env(tmp_path) -> dict[str, str]:
    """A landed feed, a fresh Dagster home, the delta-spark engine and empty jar folders."""
    generate_feed(tmp_path / "landing", date(2024, 1, 1), date(2024, 1, 4), orders_per_day=5)
    (tmp_path / "home").mkdir()
    (tmp_path / "no-jars").mkdir()
    return {
        "BACKFILL_LANDING_DIR": str(tmp_path / "landing"),
        "BACKFILL_LAKE_DIR": str(tmp_path / "lake"),
        "BACKFILL_START_DATE": "2023-12-20",
        "DAGSTER_HOME": str(tmp_path / "home"),
        "BACKFILL_LAKE_ENGINE": "delta-spark",
        "BACKFILL_DELTA_JARS": str(tmp_path / "no-jars"),
        "BACKFILL_S3A_JARS": str(tmp_path / "no-jars"),
    }


def run_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "backfill_assets.cli", *args],
        env=subprocess_env(**env),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def runs_in(home: str) -> int:
    with dg.DagsterInstance.from_config(home) as instance:
        return instance.get_runs_count()


def assert_refused(done: subprocess.CompletedProcess, env: dict[str, str], fix: str) -> None:
    assert done.returncode != 0, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("backfill-assets: no run launched: ") and fix in lines[0], lines
    assert runs_in(env["DAGSTER_HOME"]) == 0
    assert not Path(env["BACKFILL_LAKE_DIR"]).exists()


@pytest.mark.parametrize("command", [["backfill"], ["correct", "--reason", "restated rates"]])
def test_without_deltas_jars_a_command_launches_no_run_and_names_the_set_up_step(base_env, command):
    done = run_cli(base_env, *command, *RANGE)
    jar = "delta-spark_4.2_2.13-4.4.0.jar"
    assert_refused(done, base_env, f"{jar} is missing from {base_env['BACKFILL_DELTA_JARS']}")
    assert "run `make setup`" in done.stderr


def test_a_lake_on_s3_without_the_s3a_jars_launches_no_run_and_names_the_step(base_env, tmp_path):
    """Delta's jars in place, the s3a folder empty, the lake in a bucket no server serves."""
    env = {
        **base_env,
        "BACKFILL_DELTA_JARS": str(REPO / ".jars" / "delta"),  # where `make setup` put them
        "BACKFILL_LAKE_DIR": "s3://nowhere/lake",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",  # nothing listens: any request would fail
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "id",
        "AWS_SECRET_ACCESS_KEY": "secret",
    }
    done = run_cli(env, "backfill", *RANGE)
    assert done.returncode != 0, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("backfill-assets: no run launched: s3a (hadoop-aws 3.5.0)'s jar")
    assert "delta_jars --s3a" in lines[0]
    assert runs_in(env["DAGSTER_HOME"]) == 0


def test_no_landing_zone_launches_no_run_and_names_the_setting(base_env, tmp_path):
    env = {**base_env, "BACKFILL_LAKE_ENGINE": "delta-rs"}
    env["BACKFILL_LANDING_DIR"] = str(tmp_path / "not-landed")
    done = run_cli(env, "backfill", *RANGE)
    assert_refused(done, env, f"the landing zone {tmp_path / 'not-landed'} is not a folder")
    assert "BACKFILL_LANDING_DIR" in done.stderr
