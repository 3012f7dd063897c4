"""Where the PostgreSQL tests find the server: Debian's install under /usr/lib/postgresql even
when no ``pg_ctl`` is on the PATH; and where there is none at all, they fail naming the set-up
step that installs it, they do not skip."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys

import pytest

from backfill_assets_testkit.processes import REPO, subprocess_env

pytestmark = pytest.mark.slow  # child processes, one of them a pytest
DEBIAN = "/usr/lib/postgresql"


def env_without_postgres_on_path(tmp_path) -> dict[str, str]:
    """The suite's environment with a PATH of one empty folder (no pg_ctl, initdb, mvn) and no
    BACKFILL_PG_BIN."""
    empty = tmp_path / "bin"
    empty.mkdir()
    env = subprocess_env(PATH=str(empty))
    env.pop("BACKFILL_PG_BIN", None)
    return env


def test_with_no_pg_ctl_on_the_path_debians_install_is_found(tmp_path):
    installed = sorted(
        (path for path in glob.glob(f"{DEBIAN}/*/bin/pg_ctl") if os.access(path, os.X_OK)),
        key=lambda path: int(path.split("/")[-3]),
    )
    if not installed:
        pytest.fail(
            f"no PostgreSQL server under {DEBIAN}: run `scripts/test-deps.sh` (`make test` does)",
            pytrace=False,
        )
    found = subprocess.run(
        [
            sys.executable,
            "-c",
            "from backfill_assets_testkit.postgres_server import "
            "server_bin_dir; print(server_bin_dir())",
        ],
        env=env_without_postgres_on_path(tmp_path),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert found.stdout.strip() == os.path.dirname(installed[-1])  # the newest


def test_with_no_server_anywhere_a_postgres_test_fails_naming_the_set_up_step(tmp_path):
    """Debian's folder hidden under an empty tmpfs in a mount namespace of the child's own, and
    nothing on its PATH: the test errors in set-up with the step to run, and nothing skips."""
    tools = {name: shutil.which(name) or "" for name in ("unshare", "sh", "mount")}
    missing = [name for name, path in tools.items() if not path]
    assert not missing, f"util-linux's {missing} are not here: `apt-get install util-linux`"
    hide = f'if [ -d {DEBIAN} ]; then {tools["mount"]} -t tmpfs none {DEBIAN}; fi; exec "$@"'
    case = "postgres/test_dagster_on_postgres.py::test_the_instance_stores_everything_in_postgresql"
    command = [tools["unshare"], "--mount", "--propagation", "private", tools["sh"], "-c", hide]
    command += ["sh", sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA"]
    done = subprocess.run(
        [*command, f"backfill_assets_tests/{case}"],
        env=env_without_postgres_on_path(tmp_path),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 error" in done.stdout and "skipped" not in done.stdout, done.stdout
    assert "run `scripts/test-deps.sh` (`make test` does)" in done.stdout
