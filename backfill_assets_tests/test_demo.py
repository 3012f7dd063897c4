"""`backfill-assets demo`: by default the 60 days ending yesterday (UTC), that first day the first
partition, recorded where `make ui` reads it; a configured start date and --start/--end still
decide."""

from __future__ import annotations

import os
import subprocess
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from backfill_assets.cli import main as cli
from backfill_assets.cli.demo import DemoRange, demo_range

PROJECT_DIR = Path(__file__).resolve().parents[1]


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
    assert os.environ["BACKFILL_START_DATE"] == first.isoformat()  # the in-process runs' partitions
    assert (root / "home" / "backfill_start_date").read_text().strip() == first.isoformat()
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
    assert (root / "home" / "backfill_start_date").read_text().strip() == "2024-01-01"


def test_a_weekend_first_day_stays_the_first_day():
    """The first partition reads the rates landed in the week before it (raw_fx_rates), so a
    demo starting on a weekend needs no earlier start to have rates."""
    sunday = date(2026, 11, 22)
    assert demo_range(sunday + timedelta(days=59)) == DemoRange(
        sunday, sunday, sunday + timedelta(59)
    )
    assert demo_range(sunday + timedelta(days=60)).start == date(2026, 11, 23)


def test_make_ui_takes_the_demo_first_partition_unless_one_is_set(tmp_path):
    """The command `make ui` runs, `dagster dev` swapped for printing the start date it gets."""
    (tmp_path / "backfill_start_date").write_text("2026-01-02\n")
    dry = subprocess.run(
        ["make", "-s", "-n", "ui", f"DAGSTER_HOME={tmp_path}"],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    [command] = [line for line in dry.splitlines() if ".venv/bin/dagster dev" in line]
    probe = command.replace(".venv/bin/dagster dev", "printenv BACKFILL_START_DATE #")

    def start_seen(**env: str) -> str:
        return subprocess.run(
            ["bash", "-c", probe],
            check=False,
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin", **env},
        ).stdout.strip()

    assert start_seen() == "2026-01-02"
    assert start_seen(BACKFILL_START_DATE="2025-05-05") == "2025-05-05"
    (tmp_path / "backfill_start_date").unlink()
    assert start_seen() == ""  # no demo yet: unset, the configured default applies
