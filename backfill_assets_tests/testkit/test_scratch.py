"""The test run's scratch folder (``scratch.py``): every temp folder of the run's processes
points into it, and a run removes it when it ends."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from pyspark import SparkFiles

from backfill_assets_testkit import scratch


def _inside(path: str | Path, folder: str | Path) -> bool:
    return Path(path).resolve().is_relative_to(Path(folder).resolve())


def test_the_first_process_makes_the_folder_and_points_every_temp_folder_into_it():
    env = {"SPARK_SUBMIT_OPTS": "-XX:+UseSerialGC"}
    folder = scratch.enter(env)
    try:
        assert folder is not None and folder.is_dir()
        assert stat.S_IMODE(folder.stat().st_mode) == 0o755  # PostgreSQL's own user reads it
        assert env["TMPDIR"] == env["SPARK_LOCAL_DIRS"] == env[scratch.SCRATCH_ENV] == str(folder)
        assert env["SPARK_SUBMIT_OPTS"] == f"-XX:+UseSerialGC -Djava.io.tmpdir={folder}"
        assert not _inside(env["PYTEST_DEBUG_TEMPROOT"], folder)
        before = dict(env)
        assert scratch.enter(env) is None  # a process the run started makes none of its own
        assert env == before
    finally:
        if folder is not None:
            scratch.remove(folder)
    assert not folder.exists()


def test_this_runs_processes_and_its_spark_session_keep_their_temp_files_in_the_scratch(
    spark, tmp_path
):
    folder = os.environ[scratch.SCRATCH_ENV]
    assert _inside(tempfile.gettempdir(), folder)
    child = subprocess.run(
        [sys.executable, "-c", "import tempfile; print(tempfile.gettempdir())"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert _inside(child.stdout.strip(), folder)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    assert _inside(jvm.java.lang.System.getProperty("java.io.tmpdir"), folder)
    assert _inside(SparkFiles.getRootDirectory(), folder)  # Spark's scratch on the driver
    assert not _inside(tmp_path, folder)  # pytest keeps its own, with its retention


CONFTEST = """
from backfill_assets_testkit import scratch

scratch.use_for_this_run()
"""

PROBE = """
import os
import tempfile


def test_probe():
    handle, path = tempfile.mkstemp(suffix=".left-behind")
    os.close(handle)
    print("PROBE", path, os.environ["TMPDIR"])
"""


def test_a_run_removes_its_scratch_folder_and_what_was_left_in_it(tmp_path):
    system_temp = tmp_path / "system-temp"
    system_temp.mkdir()
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "conftest.py").write_text(CONFTEST)
    (tmp_path / "project" / "test_probe.py").write_text(textwrap.dedent(PROBE))
    env = {k: v for k, v in os.environ.items() if k != scratch.SCRATCH_ENV}
    env["TMPDIR"] = str(system_temp)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "test_probe.py"],
        cwd=tmp_path / "project",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    [line] = [x for x in done.stdout.splitlines() if "PROBE" in x]
    left, run_temp = line.split("PROBE ", 1)[1].split()
    assert Path(run_temp).parent == system_temp and Path(run_temp).name.startswith("backfill-")
    assert _inside(left, run_temp)
    assert not Path(left).exists()
    assert list(system_temp.iterdir()) == []
