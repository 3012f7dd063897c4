"""A real Spark standalone cluster (master + one worker on 127.0.0.1) writing and reading through the lake."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

import pyspark
import pytest

from backfill_assets_tests.lake.lake_support import (
    FAST_JVM_CONF,
    kill_group,
    log_tail,
    start,
    subprocess_env,
)

pytestmark = pytest.mark.slow
SPARK_HOME = os.path.dirname(pyspark.__file__)


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


@pytest.fixture
def cluster(tmp_path):
    """spark://127.0.0.1:<port> with one 2-core worker, torn down even when the test fails."""
    env = subprocess_env(SPARK_HOME=SPARK_HOME, SPARK_LOCAL_IP="127.0.0.1",
                         SPARK_LOG_DIR=str(tmp_path), SPARK_WORKER_DIR=str(tmp_path / "work"),
                         SPARK_DAEMON_JAVA_OPTS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    spark_class = os.path.join(SPARK_HOME, "bin", "spark-class")
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    procs = []
    try:
        master = start([spark_class, "org.apache.spark.deploy.master.Master", "--host",
                        "127.0.0.1", "--port", str(port), "--webui-port", str(free_port())],
                       env, tmp_path / "master.log")
        procs.append(master)
        wait_for_line(tmp_path / "master.log", "I have been elected leader", master)
        worker = start([spark_class, "org.apache.spark.deploy.worker.Worker", "--host",
                        "127.0.0.1", "--webui-port", str(free_port()), "--cores", "2",
                        "--memory", "2g", url], env, tmp_path / "worker.log")
        procs.append(worker)
        wait_for_line(tmp_path / "worker.log", "Successfully registered with master", worker)
        yield url, env
    finally:
        for proc in reversed(procs):
            kill_group(proc)


def test_cluster_write_and_read_through_lake(cluster, tmp_path):
    url, env = cluster
    root = tmp_path / "lake"
    jobs = [
        {"table": "fact/c", "partitions": ["2024-03-01", "2024-03-02"],
         "rows": [["2024-03-01", 1, "a"], ["2024-03-01", 2, "b"], ["2024-03-02", 3, "c"]],
         "run_id": "cluster-1"},
        {"table": "fact/c", "partitions": ["2024-03-01", "2024-03-02"],
         "rows": [["2024-03-02", 4, "d"]], "run_id": "cluster-2", "read_back": True},
    ]
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({
        "root": str(root), "master": url, "jobs": jobs, "results": str(tmp_path / "out"),
        "conf": {**FAST_JVM_CONF, "spark.driver.host": "127.0.0.1",
                 "spark.driver.bindAddress": "127.0.0.1", "spark.executor.memory": "1g",
                 "spark.executor.extraJavaOptions": "-Duser.timezone=UTC -XX:TieredStopAtLevel=1"},
    }))
    driver = start([sys.executable, "-m", "backfill_assets_tests.lake.lake_worker", str(spec)],
                   env, tmp_path / "driver.log")
    try:
        assert driver.wait(timeout=300) == 0, log_tail(tmp_path / "driver.log")
    finally:
        kill_group(driver)
    first, second = [json.loads(line) for line in (tmp_path / "out").read_text().splitlines()]
    assert (first["version"], first["rows_by_partition"]) == (0, {"2024-03-01": 2, "2024-03-02": 1})
    assert (second["version"], second["rows_by_partition"]) == (
        1, {"2024-03-01": 0, "2024-03-02": 1})
    assert (second["read_version"], second["read"]) == (1, [["2024-03-02", 4, "d"]])
    # The work ran on the worker's executor, not in the driver.
    executor_logs = list((tmp_path / "work").glob("app-*/*/stderr"))
    assert executor_logs, "no executor was launched on the worker"
