"""The instance's dagster.yaml: the project's file, plus PostgreSQL storage iff
BACKFILL_DAGSTER_PG_URL is set, else the SQLite event log with its engines kept, in Dagster's own
folder of this home."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from backfill_assets.cli.instance import (
    PG_URL_ENV,
    ensure_dagster_home,
    instance_yaml,
    prepare_instance_yaml,
)

PROJECT = Path(__file__).resolve().parents[2]
PROJECT_YAML = PROJECT / "dagster.yaml"
URL = "postgresql://dagster:secret@127.0.0.1:5433/dagster"
PG_STORAGE = {"postgres": {"postgres_url": {"env": PG_URL_ENV}}}


def sqlite_event_log(home: Path) -> dict:
    return {
        "module": "backfill_assets.event_log",
        "class": "EngineReusingSqliteEventLogStorage",
        "config": {"base_dir": f"{home.resolve()}/history/runs"},
    }


def test_without_the_switch_the_instance_gets_the_projects_file_and_its_sqlite_event_log(tmp_path):
    target = prepare_instance_yaml(tmp_path / "home", PROJECT_YAML, env={})
    loaded = yaml.safe_load(target.read_text())
    assert loaded.pop("event_log_storage") == sqlite_event_log(tmp_path / "home")
    assert "storage" not in loaded
    assert loaded == yaml.safe_load(PROJECT_YAML.read_text())
    assert target.read_text().startswith(PROJECT_YAML.read_text())


def test_the_switch_adds_postgres_storage_naming_the_variable_not_the_url(tmp_path):
    target = prepare_instance_yaml(tmp_path / "home", PROJECT_YAML, env={PG_URL_ENV: URL})
    loaded = yaml.safe_load(target.read_text())
    assert loaded["storage"] == PG_STORAGE
    assert "secret" not in target.read_text()
    # Everything else is the project's.
    del loaded["storage"]
    assert loaded == yaml.safe_load(PROJECT_YAML.read_text())


def test_switching_on_twice_then_off_leaves_one_postgres_section_then_the_sqlite_one(tmp_path):
    home = tmp_path / "home"
    for _ in range(2):
        prepare_instance_yaml(home, PROJECT_YAML, env={PG_URL_ENV: URL})
    text = (home / "dagster.yaml").read_text()
    assert text.count("\nstorage:") == 1 and "event_log_storage" not in text
    for _ in range(2):
        prepare_instance_yaml(home, PROJECT_YAML, env={})
    text = (home / "dagster.yaml").read_text()
    assert text.count("event_log_storage:") == 1 and "postgres" not in text
    assert yaml.safe_load(text)["event_log_storage"] == sqlite_event_log(home)


def test_a_moved_home_gets_its_own_folder_named(tmp_path):
    prepare_instance_yaml(tmp_path / "home", PROJECT_YAML, env={})
    shutil.move(tmp_path / "home", tmp_path / "moved")
    target = prepare_instance_yaml(tmp_path / "moved", PROJECT_YAML, env={})
    assert yaml.safe_load(target.read_text())["event_log_storage"] == sqlite_event_log(
        tmp_path / "moved"
    )


def test_an_instance_file_with_its_own_storage_gets_no_sqlite_section(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    own = "storage:\n  sqlite:\n    base_dir: /elsewhere\n"
    (home / "dagster.yaml").write_text(own)
    prepare_instance_yaml(home, PROJECT_YAML, env={})
    assert (home / "dagster.yaml").read_text() == own


def test_an_instance_file_the_user_edited_is_kept_and_gets_the_section(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    prepare_instance_yaml(home, PROJECT_YAML, env={PG_URL_ENV: URL})
    assert yaml.safe_load((home / "dagster.yaml").read_text()) == {
        "telemetry": {"enabled": False},
        "storage": PG_STORAGE,
    }


def test_a_second_storage_section_or_a_non_postgres_url_is_refused():
    with pytest.raises(ValueError, match="already has a storage section"):
        instance_yaml("storage:\n  sqlite:\n    base_dir: x\n", {PG_URL_ENV: URL})
    with pytest.raises(ValueError, match="postgresql://"):
        instance_yaml("", {PG_URL_ENV: "mysql://127.0.0.1/db"})


def test_the_cli_prepares_the_instance_with_the_switch(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv(PG_URL_ENV, URL)
    home = ensure_dagster_home(PROJECT)
    assert yaml.safe_load((home / "dagster.yaml").read_text())["storage"] == PG_STORAGE


def test_make_setup_command_overwrites_the_instance_file_and_applies_the_switch(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("stale: true\n")
    cmd = [sys.executable, "-m", "backfill_assets.cli.instance", str(PROJECT_YAML), str(home)]
    done = subprocess.run(
        cmd,
        env={PG_URL_ENV: URL, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "storage: PostgreSQL" in done.stdout
    loaded = yaml.safe_load((home / "dagster.yaml").read_text())
    assert "stale" not in loaded and loaded["storage"] == PG_STORAGE


def test_the_cli_run_from_another_folder_gives_a_new_home_the_projects_settings(
    tmp_path, monkeypatch
):
    """The project's file was looked for in the working directory: a command run from another
    folder (relative paths resolve there) made an instance without the run queue's limits, the
    run retries, the run monitoring, and with Dagster's telemetry on (which fails every command
    when HOME cannot be written)."""
    elsewhere = tmp_path / "work"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(PG_URL_ENV, raising=False)
    home = ensure_dagster_home()
    loaded = yaml.safe_load((home / "dagster.yaml").read_text())
    project = yaml.safe_load(PROJECT_YAML.read_text())
    assert loaded["telemetry"] == {"enabled": False} == project["telemetry"]
    for section in ("concurrency", "run_retries", "run_monitoring"):
        assert loaded[section] == project[section]
