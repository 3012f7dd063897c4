"""The Dagster instance the command line runs through: ``DAGSTER_HOME``, prepared once."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def ensure_dagster_home(project_dir: Path | None = None) -> Path:
    """DAGSTER_HOME, defaulting to ./.dagster_home with the project's dagster.yaml in it."""
    home = Path(os.environ.setdefault("DAGSTER_HOME", str(Path(".dagster_home").resolve())))
    home.mkdir(parents=True, exist_ok=True)
    project_yaml = (project_dir or Path.cwd()) / "dagster.yaml"
    if not (home / "dagster.yaml").exists() and project_yaml.exists():
        shutil.copy(project_yaml, home / "dagster.yaml")
    return home
