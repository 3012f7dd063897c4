"""Stopping a backfill: SIGINT or SIGTERM to the real command ends it within seconds with 130 or
143, starts no later run, retries nothing, publishes nothing after the signal, and a re-run
converges on the reference."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import date, timedelta
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.events import DagsterEventType
from deltalake import DeltaTable

from backfill_assets.cli.instance import prepare_instance_yaml
from backfill_assets.demo.generate import generate_feed
from backfill_assets.settings import RETRY_DELAY_ENV
from backfill_assets_testkit.pipeline_env import assert_matches_reference, pipeline_env
from backfill_assets_testkit.processes import REPO, kill_group, log_tail, subprocess_env

pytestmark = pytest.mark.slow

START, END = date(2024, 1, 1), date(2024, 1, 4)
RANGE = ("--start", START.isoformat(), "--end", END.isoformat())
BACKFILL = [sys.executable, "-m", "backfill_assets.cli", "backfill", *RANGE]
TABLES = ("raw/orders", "quarantine/orders", "raw/fx_rates", "staging/orders", "fact/daily_revenue")
REACH_SECONDS = 240  # the command's JVM started and its first run reached the pause
STOP_SECONDS = 60  # the signal to the command's exit: the bound the issue sets


def command_env(root: Path, pause_at: str) -> dict[str, str]:
    (root / "home").mkdir(exist_ok=True)
    prepare_instance_yaml(root / "home", REPO / "dagster.yaml")
    (root / "pause").mkdir(exist_ok=True)
    return subprocess_env(
        DAGSTER_HOME=str(root / "home"),
        BACKFILL_LANDING_DIR=str(root / "landing"),
        BACKFILL_LAKE_DIR=str(root / "lake"),
        BACKFILL_START_DATE="2023-12-20",
        BACKFILL_MAX_LATENESS_DAYS="7",
        BACKFILL_SPARK_SHUFFLE_PARTITIONS="2",
        BACKFILL_LAKE_PAUSE_DIR=str(root / "pause"),
        BACKFILL_LAKE_PAUSE_AT=pause_at,
        **{RETRY_DELAY_ENV: "0.5"},
    )


def start_backfill(root: Path, env: dict[str, str], ignore_sigint: bool = False):
    """The command in a process group of its own, as a terminal's foreground job would be;
    ``ignore_sigint``: started as a background job is, SIGINT ignored."""

    def ignore() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    log = root / "command.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            BACKFILL,
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=ignore if ignore_sigint else None,
        )
    return proc, log


def wait_reached(proc: subprocess.Popen, marker: Path, log: Path) -> None:
    deadline = time.monotonic() + REACH_SECONDS
    while not marker.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"the command never reached {marker.name}:\n{log_tail(log)}")
        time.sleep(0.1)


def wait_exit(proc: subprocess.Popen, log: Path) -> int:
    try:
        return proc.wait(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        pytest.fail(f"the command did not stop within {STOP_SECONDS} s:\n{log_tail(log)}")


def runs_and_retries(home: Path) -> tuple[list[dg.DagsterRun], int]:
    """The instance's runs, and how many step retries any of them had."""
    with dg.DagsterInstance.from_config(str(home)) as instance:
        runs = list(instance.get_runs())
        retries = sum(
            len(
                instance.get_records_for_run(
                    run.run_id, of_type=DagsterEventType.STEP_UP_FOR_RETRY
                ).records
            )
            for run in runs
        )
    return runs, retries


def versions(table: Path) -> list[int]:
    """The table's commits, read from its log directory (none when it was never created)."""
    log = table / "_delta_log"
    if not log.exists():
        return []
    return sorted(int(p.name.split(".")[0]) for p in log.glob("*.json"))


def rerun_matches_reference(root: Path) -> None:
    env = command_env(root, pause_at="")
    env.pop("BACKFILL_LAKE_PAUSE_DIR")
    done = subprocess.run(
        BACKFILL,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with pipeline_env(root, start_date="2023-12-20") as pipeline:
        days = [date.fromordinal(d) for d in range(START.toordinal(), END.toordinal() + 1)]
        assert_matches_reference(pipeline, root / "landing", days)


def test_ctrl_c_mid_raw_cancels_the_job_and_starts_no_later_run(tmp_path):
    generate_feed(tmp_path / "landing", START, END, orders_per_day=40, seed=11)
    env = command_env(tmp_path, pause_at="mid_files")
    proc, log = start_backfill(tmp_path, env)
    try:
        # raw_orders' job is writing its files: a task of it waits at the pause
        wait_reached(proc, tmp_path / "pause" / "mid_files.1.reached", log)
        began = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the whole group
        code = wait_exit(proc, log)
        took = time.monotonic() - began
    finally:
        kill_group(proc)  # the paused Python worker, if it outlived the command
    out = log.read_text(errors="replace")
    assert code == 130, out
    assert took < STOP_SECONDS
    runs, retries = runs_and_retries(tmp_path / "home")
    assert len(runs) == 1, [r.job_name for r in runs]  # no later run of the plan
    assert runs[0].status == dg.DagsterRunStatus.FAILURE
    assert retries == 0, out
    assert versions(tmp_path / "lake" / "raw" / "orders") == []  # nothing published
    assert versions(tmp_path / "lake" / "quarantine" / "orders") == []
    stop_lines = [line for line in out.splitlines() if line.startswith("backfill-assets: stopped")]
    assert len(stop_lines) == 1, out
    assert "stopped by SIGINT" in stop_lines[0], stop_lines[0]
    assert "Not published: raw_orders 2024-01-01" in stop_lines[0], stop_lines[0]
    assert "Published before the stop: none" in stop_lines[0], stop_lines[0]
    assert "py4j" not in out.lower(), out  # no traceback of the cancelled JVM call


def test_a_second_ctrl_c_ends_the_command_at_once(tmp_path):
    """The first Ctrl-C lands while the step waits before its commit, which it never leaves (the
    test seam is not resumed): only a second Ctrl-C can end the command, and at once."""
    generate_feed(tmp_path / "landing", START, END, orders_per_day=10, seed=13)
    env = command_env(tmp_path, pause_at="before_commit")
    proc, log = start_backfill(tmp_path, env)
    try:
        wait_reached(proc, tmp_path / "pause" / "before_commit.1.reached", log)
        deadline = time.monotonic() + 10
        while proc.poll() is None and time.monotonic() < deadline:
            os.killpg(proc.pid, signal.SIGINT)  # as an impatient person presses Ctrl-C again
            time.sleep(0.2)
        code = wait_exit(proc, log)
    finally:
        kill_group(proc)
    out = log.read_text(errors="replace")
    assert code == 130, out
    assert "a second SIGINT: exiting now" in out, out
    runs, retries = runs_and_retries(tmp_path / "home")
    assert len(runs) == 1 and retries == 0, out
    assert versions(tmp_path / "lake" / "raw" / "orders") == []
    assert versions(tmp_path / "lake" / "quarantine" / "orders") == []


def staging_run_started(home: Path) -> bool:
    """A run of staging and the fact is in progress (the command's later run)."""
    with dg.DagsterInstance.from_config(str(home)) as instance:
        return any(
            run.status == dg.DagsterRunStatus.STARTED
            and "stg_orders" in {key.to_user_string() for key in run.asset_selection or ()}
            for run in instance.get_runs()
        )


def test_sigterm_during_stagings_commit_in_a_command_started_with_sigint_ignored(tmp_path):
    """A background job (SIGINT ignored) keeps SIGTERM working past its first runs: stopped while
    staging's commit is under way, staging lands whole, the fact of the same step is not
    published, no later run (downstream) starts, and a re-run converges on the reference."""
    generate_feed(tmp_path / "landing", START, END, orders_per_day=20, seed=12)
    env = command_env(tmp_path, pause_at="before_commit")
    proc, log = start_backfill(tmp_path, env, ignore_sigint=True)
    pause, home = tmp_path / "pause", tmp_path / "home"
    try:
        visit = 1  # raw's and the rates' commits go on; the first one in staging's run waits
        while True:
            wait_reached(proc, pause / f"before_commit.{visit}.reached", log)
            if staging_run_started(home):
                break
            (pause / f"before_commit.{visit}.resume").touch()
            visit += 1
        before = {t: versions(tmp_path / "lake" / t) for t in TABLES}
        os.kill(proc.pid, signal.SIGTERM)
        time.sleep(1)  # the signal is handled while the commit waits
        (pause / f"before_commit.{visit}.resume").touch()
        code = wait_exit(proc, log)
    finally:
        kill_group(proc)
    out = log.read_text(errors="replace")
    assert code == 143, out
    runs, retries = runs_and_retries(home)
    assert retries == 0, out
    assert runs[0].status == dg.DagsterRunStatus.FAILURE  # the newest: staging's
    assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs[1:])  # raw's and the rates'
    # The commit under way (staging's) landed, whole: one commit more of that table alone; the
    # step's fact was not published after it.
    after = {t: versions(tmp_path / "lake" / t) for t in TABLES}
    assert {t: after[t] for t in TABLES if after[t] != before[t]} == {"staging/orders": [0]}
    staged = DeltaTable(str(tmp_path / "lake" / "staging" / "orders")).to_pyarrow_table()
    days = {d.isoformat() for d in staged.column("event_date").to_pylist()}
    assert days == {(START + timedelta(days=i)).isoformat() for i in range(4)}
    assert after["fact/daily_revenue"] == []
    stop = [line for line in out.splitlines() if line.startswith("backfill-assets: stopped")]
    assert len(stop) == 1 and "stopped by SIGTERM" in stop[0], out
    assert "Not published: fct_daily_revenue 2024-01-01..2024-01-04" in stop[0], stop[0]
    rerun_matches_reference(tmp_path)
