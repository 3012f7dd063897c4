"""`backfill-assets demo`: by default the 60 days ending yesterday (UTC), that first day the first
partition, recorded where `make ui` reads it; a configured start date and --start/--end still
decide."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from backfill_assets.cli import main as cli
from backfill_assets.cli.demo import DemoRange, demo_range
from backfill_assets.settings import FIRST_PARTITION_FILE, Settings

# Runs the pipeline through Dagster on real Spark and Delta: `make test`, not `make test-fast`.
pytestmark = pytest.mark.slow

PROJECT_DIR = Path(__file__).resolve().parents[2]


def _yesterday() -> date:
    return datetime.now(UTC).date() - timedelta(days=1)


@pytest.fixture
def demo_env(tmp_path, monkeypatch):
    """The demo's environment in tmp_path, its backfill a recorder of what it is asked."""
    # Set first so that undoing the patch also removes what the demo itself sets.
    monkeypatch.setenv("BACKFILL_START_DATE", "")
    monkeypatch.delenv("BACKFILL_START_DATE")
    monkeypatch.setenv("BACKFILL_LANDING_DIR", str(tmp_path / "landing"))
    monkeypatch.setenv("BACKFILL_LAKE_DIR", str(tmp_path / "lake"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    asked = []
    monkeypatch.setattr(
        cli, "run_backfill", lambda settings, start, end: asked.append((settings, start, end)) or 0
    )
    return tmp_path, asked


def test_default_demo_is_the_60_days_ending_yesterday_and_starts_the_partitions(demo_env):
    root, asked = demo_env
    yesterday = _yesterday()
    first = yesterday - timedelta(days=59)  # whatever its weekday: see the test below

    assert cli.main(["demo", "--no-correction", "--orders-per-day", "1"]) == 0

    [(settings, start, end)] = asked
    assert (start, end) == (first, yesterday)
    assert settings.start_date == first
    assert Settings.from_env().start_date == first  # the runs' partitions, and every later process
    assert (root / "lake" / FIRST_PARTITION_FILE).read_text().strip() == first.isoformat()
    landed = sorted(p.name for p in (root / "landing" / "orders").iterdir())
    # As of yesterday: nothing has landed later, which staging's window check would miss in raw.
    assert (landed[0], landed[-1]) == (f"arrival_date={first}", f"arrival_date={yesterday}")


def test_a_configured_start_date_and_start_end_still_decide(demo_env, monkeypatch):
    root, asked = demo_env
    assert (
        cli.main(
            [
                "demo",
                "--no-correction",
                "--orders-per-day",
                "1",
                "--start",
                "2024-01-01",
                "--end",
                "2024-01-03",
            ]
        )
        == 0
    )
    assert asked[-1][1:] == (date(2024, 1, 1), date(2024, 1, 3))
    assert asked[-1][0].start_date == date(2024, 1, 1)
    monkeypatch.setenv("BACKFILL_START_DATE", "2024-01-01")
    assert cli.main(["demo", "--no-correction", "--orders-per-day", "1", "--days", "3"]) == 0
    assert asked[-1][1:] == (date(2024, 1, 1), date(2024, 1, 3))
    assert (
        cli.main(
            [
                "demo",
                "--no-correction",
                "--orders-per-day",
                "1",
                "--start",
                "2024-01-05",
                "--days",
                "2",
            ]
        )
        == 0
    )
    assert asked[-1][0].start_date == date(2024, 1, 1)  # the configured first partition
    assert asked[-1][1:] == (date(2024, 1, 5), date(2024, 1, 6))
    assert (root / "lake" / FIRST_PARTITION_FILE).read_text().strip() == "2024-01-01"


def test_a_weekend_first_day_stays_the_first_day():
    """The first partition reads the rates landed in the week before it (raw_fx_rates), so a
    demo starting on a weekend needs no earlier start to have rates."""
    sunday = date(2026, 11, 22)
    assert demo_range(sunday + timedelta(days=59)) == DemoRange(
        sunday, sunday, sunday + timedelta(59)
    )
    assert demo_range(sunday + timedelta(days=60)).start == date(2026, 11, 23)


# The first partition of the definitions `dagster dev` loads (workspace.yaml names the module).
LOAD_DEFINITIONS = (
    "from backfill_assets.catalog import BACKFILL_JOB; "
    "from backfill_assets.definitions import defs; "
    "print(defs().resolve_job_def(BACKFILL_JOB).partitions_def.get_first_partition_key())"
)


def test_the_cli_run_directly_and_make_ui_see_the_first_partition_the_demo_recorded(demo_env):
    """After `make demo`, `backfill-assets ...` run directly and the definitions `make ui` loads
    start the partitions on the same day: the one the demo recorded in its lake, unless one is
    set; on another lake, the contract's default."""
    root, _ = demo_env
    days = ["--start", "2026-01-02", "--end", "2026-01-03"]
    assert cli.main(["demo", "--no-correction", "--orders-per-day", "1", *days]) == 0
    dry = subprocess.run(
        ["make", "-s", "-n", "ui", f"DAGSTER_HOME={root / 'home'}"],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    [command] = [line for line in dry.splitlines() if ".venv/bin/dagster dev" in line]
    ui = command.replace(".venv/bin/dagster dev", f"{sys.executable} -c '{LOAD_DEFINITIONS}' #")

    def first_partitions(**extra: str) -> tuple[str, str]:
        """(what `make ui`'s definitions start at, what the CLI run directly starts at)."""
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(root),
            "DAGSTER_HOME": str(root / "home"),
            "BACKFILL_LANDING_DIR": str(root / "landing"),
            "BACKFILL_LAKE_DIR": str(root / "lake"),
            **extra,
        }
        loaded = subprocess.run(
            ["bash", "-c", ui], cwd=PROJECT_DIR, capture_output=True, text=True, env=env
        )
        assert loaded.returncode == 0, loaded.stderr
        # a day before any first partition: the CLI refuses it, naming its first partition
        plan = [sys.executable, "-m", "backfill_assets.cli", "plan", "--start", "2020-01-01"]
        cli_run = subprocess.run(
            [*plan, "--end", "2020-01-01"], cwd=PROJECT_DIR, capture_output=True, text=True, env=env
        )
        refused = re.search(r"within the partitions (\S+) \.\.", cli_run.stderr)
        assert cli_run.returncode == 2 and refused, cli_run.stderr
        return loaded.stdout.strip().splitlines()[-1], refused.group(1)

    assert first_partitions() == ("2026-01-02", "2026-01-02")
    assert first_partitions(BACKFILL_START_DATE="2025-05-05") == ("2025-05-05", "2025-05-05")
    other_lake = {"BACKFILL_LAKE_DIR": str(root / "other_lake")}
    assert first_partitions(**other_lake) == ("2024-01-01", "2024-01-01")  # another lake's
    (root / "lake" / FIRST_PARTITION_FILE).unlink()
    assert first_partitions() == ("2024-01-01", "2024-01-01")  # no demo yet: the default


def test_the_demo_on_s3_lands_and_backfills_on_a_server_of_its_own(tmp_path, monkeypatch):
    """`demo --storage s3`: nothing on the local disk but the server's data and Dagster's
    instance; a server started again on that data serves the landed feed and raw tables equal
    to the reference's on the same files."""
    from deltalake import DeltaTable

    from backfill_assets.demo.local_s3 import S3Server, binary_problem
    from backfill_assets_testkit.reference import Reference

    if binary_problem():
        pytest.fail(f"{binary_problem()}: run `make setup`", pytrace=False)
    env = {
        "BACKFILL_LANDING_DIR": str(tmp_path / "landing"),
        "BACKFILL_LAKE_DIR": str(tmp_path / "lake"),
        "DAGSTER_HOME": str(tmp_path / "home"),
        "BACKFILL_START_DATE": "",
    }
    command = [sys.executable, "-m", "backfill_assets.cli", "demo", "--storage", "s3"]
    command += ["--days", "2", "--orders-per-day", "5", "--no-correction"]
    done = subprocess.run(
        command, env={**os.environ, **env}, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert not (tmp_path / "landing").exists() and not (tmp_path / "lake").exists()
    config = json.loads(next((tmp_path / "s3").glob("*/s3.json")).read_text())
    secret = config["identities"][0]["credentials"][0]["secretKey"]
    assert secret not in done.stdout + done.stderr

    server = S3Server.start(tmp_path / "s3")
    try:
        client, local = server.client(), tmp_path / "fetched"
        for page in client.get_paginator("list_objects_v2").paginate(
            Bucket="demo", Prefix="landing/"
        ):
            for obj in page.get("Contents", []):
                target = local / obj["Key"].removeprefix("landing/")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(client.get_object(Bucket="demo", Key=obj["Key"])["Body"].read())
        options = {k: v for k, v in server.env().items() if k != "AWS_ALLOW_HTTP"}
        options["AWS_ALLOW_HTTP"] = "true"
        raw = DeltaTable("s3://demo/lake/raw/orders", storage_options=options)
        rows = raw.to_pyarrow_table().to_pylist()
    finally:
        server.stop()
    expected = Reference(local, 7).expected(Reference(local, 7).arrival_dates).raw_orders
    assert sorted((r["source_file"], r["line_number"], r["payload"]) for r in rows) == sorted(
        (r.source_file, r.line_number, r.payload) for r in expected
    )
    assert len(rows) >= 10
