"""Spark servers the tests start from the pyspark wheel on 127.0.0.1: a standalone cluster (a
master and N workers) and a Spark Connect server. Each is torn down (its process group killed)
even when the test fails."""

from __future__ import annotations

import contextlib
import socket
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyspark

from backfill_assets_testkit.processes import kill_group, log_tail, start, subprocess_env

SPARK_HOME = Path(pyspark.__file__).parent
# Daemons start faster on a busy 2-core box with the C1 compiler only.
FAST_DAEMON_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_line(log: Path, text: str, proc, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"{text!r} never appeared in {log.name}:\n{log_tail(log)}")
        time.sleep(0.2)


@dataclass(frozen=True)
class Cluster:
    url: str  # spark://127.0.0.1:<port>
    env: dict[str, str]  # the environment the daemons run with, for drivers to reuse
    work_dirs: list[Path]  # one per worker: its executors' logs land here

    def executor_logs(self, worker: int) -> list[Path]:
        return list(self.work_dirs[worker].glob("app-*/*/stderr"))


@contextlib.contextmanager
def standalone_cluster(
    root: Path, workers: int = 1, cores: int = 2, memory: str = "2g"
) -> Iterator[Cluster]:
    """A master and ``workers`` workers (``cores`` and ``memory`` each) on 127.0.0.1."""
    root.mkdir(parents=True, exist_ok=True)
    env = subprocess_env(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(root),
        SPARK_DAEMON_JAVA_OPTS=FAST_DAEMON_OPTS,
    )
    # The executors a worker starts inherit its environment, not the drivers' options: the native
    # libraries they unpack (liblz4, snappy) go into the run's temp folder, not the system's.
    daemon_env = {**env, "JDK_JAVA_OPTIONS": f"-Djava.io.tmpdir={tempfile.gettempdir()}"}
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    work_dirs = [root / ("work" if workers == 1 else f"work-{i}") for i in range(workers)]
    procs = []
    try:
        master = start(
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(free_port()),
            ],
            daemon_env,
            root / "master.log",
        )
        procs.append(master)
        wait_for_line(root / "master.log", "I have been elected leader", master)
        for i, work in enumerate(work_dirs):
            log = root / f"worker-{i}.log" if workers > 1 else root / "worker.log"
            worker = start(
                [
                    spark_class,
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--webui-port",
                    str(free_port()),
                    "--cores",
                    str(cores),
                    "--memory",
                    memory,
                    "--work-dir",
                    str(work),
                    url,
                ],
                daemon_env,
                log,
            )
            procs.append(worker)
        for i, worker in enumerate(procs[1:]):
            log = root / f"worker-{i}.log" if workers > 1 else root / "worker.log"
            wait_for_line(log, "Successfully registered with master", worker)
        yield Cluster(url, env, work_dirs)
    finally:
        for proc in reversed(procs):
            kill_group(proc)


@contextlib.contextmanager
def connect_server(root: Path, master: str = "local[2]", timeout: float = 180) -> Iterator[str]:
    """A Spark Connect server on a free 127.0.0.1 port; yields its ``sc://`` URL."""
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = root / "connect-server.log"
    env = subprocess_env(SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1")
    cmd = [
        str(SPARK_HOME / "bin" / "spark-submit"),
        "--class",
        "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--master",
        master,
        "--conf",
        "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf",
        f"spark.connect.grpc.binding.port={port}",
        "--conf",
        "spark.sql.session.timeZone=UTC",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.sql.shuffle.partitions=2",
        "spark-internal",
    ]
    server = start(cmd, env, log)
    try:
        wait_for_line(log, "Spark Connect server started", server, timeout)
        yield f"sc://127.0.0.1:{port}"
    finally:
        kill_group(server)
