"""Helpers shared by the lake tests: Delta jar discovery, subprocess Spark scripts, markers."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NATIVE_ENV = "BACKFILL_LAKE_NATIVE_SESSION"
NO_JARS = "Delta's JVM jars are not on this machine (set BACKFILL_DELTA_JARS)"


def delta_jars() -> list[str]:
    """Delta's jars from BACKFILL_DELTA_JARS, else from an Ivy cache; [] when absent."""
    folder = os.environ.get("BACKFILL_DELTA_JARS")
    if folder:
        jars = glob.glob(os.path.join(folder, "*.jar"))
    else:
        home = os.path.expanduser("~")
        jars = glob.glob(os.path.join(home, ".ivy2*", "jars", "io.delta_*.jar"))
    if not any("delta-spark" in os.path.basename(j) for j in jars):
        return []
    return sorted(jars)


def native_spark_conf(jars: list[str], master: str = "local[2]") -> dict[str, str]:
    from backfill_assets.spark_session import spark_config

    conf = spark_config(master=master, shuffle_partitions=2, driver_memory="1g")
    conf.update(
        {
            "spark.jars": ",".join(jars),
            "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
            "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
            "spark.databricks.delta.retentionDurationCheck.enabled": "false",
        }
    )
    return conf


# Child JVMs start faster on a busy 2-core box with the C1 compiler only.
FAST_JVM_CONF = {
    "spark.driver.extraJavaOptions": "-Duser.timezone=UTC -XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}


def subprocess_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """A child in its own process group, so a kill takes its JVM and workers with it."""
    with open(log, "wb") as handle:
        return subprocess.Popen(args, cwd=REPO, env=env, stdout=handle,
                                stderr=subprocess.STDOUT, start_new_session=True)


def kill_group(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass


def wait_for(path: Path, procs: list[subprocess.Popen], timeout: float = 120) -> None:
    """Wait until ``path`` exists; fail early if a child died first."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        for proc in procs:
            if proc.poll() is not None:
                raise AssertionError(
                    f"child {proc.args} exited with {proc.returncode} before {path.name} appeared"
                )
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {path}")
        time.sleep(0.05)


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
