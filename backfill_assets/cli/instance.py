"""The Dagster instance the command line runs through: ``DAGSTER_HOME`` and its ``dagster.yaml``,
the project's file plus a storage section for this instance.

The embedded default is SQLite under ``DAGSTER_HOME``, with Dagster's own files and layout; the
section names the event log class that stores them with each file's engine kept
(``backfill_assets/event_log.py``), at this home's ``history/runs``. Setting
``BACKFILL_DAGSTER_PG_URL`` (``postgresql://user@host:port/db``) puts runs, event logs and
schedules on PostgreSQL (``dagster-postgres``) instead. That section names the variable, not its
value, so a password in the URL is never written to disk and every process that opens the
instance (the CLI, the tests, ``make ui``'s webserver and daemon, their run workers) must see
the variable too. An instance file with a storage section of its own gets no SQLite section.

Every writer of ``$DAGSTER_HOME/dagster.yaml`` goes through :func:`prepare_instance_yaml`:
``make setup`` (``python -m backfill_assets.cli.instance``) and the CLI. No Dagster import:
``make`` runs this before anything else.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from backfill_assets.settings import PG_URL_ENV, dagster_home, pg_url

if TYPE_CHECKING:
    import dagster as dg

PROJECT_DIR = Path(__file__).resolve().parents[2]  # the checkout: dagster.yaml, the Makefile
PG_MARKER = f"# {PG_URL_ENV} is set: runs, event logs and schedules on PostgreSQL."
PG_SECTION = f"""{PG_MARKER}
storage:
  postgres:
    postgres_url:
      env: {PG_URL_ENV}
"""
SQLITE_MARKER = (
    "# SQLite under this DAGSTER_HOME: Dagster's event log files, stored with each "
    "file's engine kept (backfill_assets/event_log.py)."
)
STORAGE_KEYS = ("storage:", "run_storage:", "event_log_storage:", "schedule_storage:")


def sqlite_section(home: Path) -> str:
    """The event log section of an instance on SQLite at ``home``: Dagster's own folder."""
    base_dir = json.dumps(str(home.resolve() / "history" / "runs"))  # a quoted YAML scalar
    return f"""{SQLITE_MARKER}
event_log_storage:
  module: backfill_assets.event_log
  class: EngineReusingSqliteEventLogStorage
  config:
    base_dir: {base_dir}
"""


def instance_yaml(base: str, env: Mapping[str, str] | None = None, home: Path | None = None) -> str:
    """``base`` (a dagster.yaml's text) with the PostgreSQL section iff the switch is set, else
    (given the instance's ``home``) the SQLite event log section, unless ``base`` has its own."""
    own = base.split(PG_MARKER, 1)[0].split(SQLITE_MARKER, 1)[0].rstrip("\n")
    text = own + "\n" if own else ""
    has_storage = any(line.startswith(STORAGE_KEYS) for line in own.splitlines())
    if pg_url(env) is None:
        if home is None or has_storage:
            return text
        return text + ("\n" if text else "") + sqlite_section(home)
    if has_storage:
        raise ValueError(
            f"{PG_URL_ENV} is set but the instance's dagster.yaml already has a "
            "storage section: remove one of them"
        )
    return text + ("\n" if text else "") + PG_SECTION


def prepare_instance_yaml(
    home: Path, project_yaml: Path, overwrite: bool = False, env: Mapping[str, str] | None = None
) -> Path:
    """Write ``home/dagster.yaml``: from ``project_yaml`` when absent (or ``overwrite``), else
    the existing file; either way with the storage section matching the switch now."""
    home.mkdir(parents=True, exist_ok=True)
    target = home / "dagster.yaml"
    if target.exists() and not overwrite:
        base = target.read_text()
    elif project_yaml.exists():
        base = project_yaml.read_text()
    else:
        base = ""
    text = instance_yaml(base, env, home)
    if not target.exists() or target.read_text() != text:
        target.write_text(text)
    return target


def ensure_dagster_home(project_dir: Path | None = None) -> Path:
    """DAGSTER_HOME, defaulting to ./.dagster_home with the project's dagster.yaml in it and the
    storage section (PostgreSQL when BACKFILL_DAGSTER_PG_URL is set). The project's file is the
    checkout's (``project_dir``), whatever the working directory."""
    os.environ.setdefault("DAGSTER_HOME", str(Path(".dagster_home").resolve()))  # for Dagster
    home = dagster_home()
    prepare_instance_yaml(home, (project_dir or PROJECT_DIR) / "dagster.yaml")
    return home


def open_instance() -> dg.DagsterInstance:
    """The Dagster instance of ``DAGSTER_HOME`` (prepared first): use it as a context manager."""
    import dagster as dg

    ensure_dagster_home()
    return dg.DagsterInstance.get()


def main(argv: list[str] | None = None) -> int:
    """``python -m backfill_assets.cli.instance PROJECT_YAML DAGSTER_HOME``, as ``make setup``
    runs it: the project's file copied over the instance's, with the switch applied."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        print(
            "usage: python -m backfill_assets.cli.instance PROJECT_YAML DAGSTER_HOME",
            file=sys.stderr,
        )
        return 2
    try:
        target = prepare_instance_yaml(Path(args[1]), Path(args[0]), overwrite=True)
    except ValueError as exc:
        print(f"dagster.yaml: {exc}", file=sys.stderr)
        return 1
    storage = "PostgreSQL" if pg_url() else "SQLite"
    print(f"dagster instance: {target} (storage: {storage})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
