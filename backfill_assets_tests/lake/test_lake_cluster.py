"""A real Spark standalone cluster (master + one worker on 127.0.0.1) writing and reading through
the lake."""

from __future__ import annotations

import json
import sys

import pytest

from backfill_assets_testkit.processes import kill_group, log_tail, start
from backfill_assets_testkit.spark_servers import standalone_cluster

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(tmp_path):
    """spark://127.0.0.1:<port> with one 2-core worker, torn down even when the test fails."""
    with standalone_cluster(tmp_path, workers=1) as running:
        yield running.url, running.env


def test_cluster_write_and_read_through_lake(cluster, tmp_path):
    url, env = cluster
    root = tmp_path / "lake"
    jobs = [
        {
            "table": "fact/c",
            "partitions": ["2024-03-01", "2024-03-02"],
            "rows": [["2024-03-01", 1, "a"], ["2024-03-01", 2, "b"], ["2024-03-02", 3, "c"]],
            "run_id": "cluster-1",
        },
        {
            "table": "fact/c",
            "partitions": ["2024-03-01", "2024-03-02"],
            "rows": [["2024-03-02", 4, "d"]],
            "run_id": "cluster-2",
            "read_back": True,
        },
    ]
    spec = tmp_path / "spec.json"
    spec.write_text(
        json.dumps(
            {
                "root": str(root),
                "master": url,
                "jobs": jobs,
                "results": str(tmp_path / "out"),
                "conf": {
                    "spark.driver.host": "127.0.0.1",
                    "spark.driver.bindAddress": "127.0.0.1",
                    "spark.executor.memory": "1g",
                    "spark.executor.extraJavaOptions": "-Duser.timezone=UTC "
                    "-XX:TieredStopAtLevel=1",
                },
            }
        )
    )
    driver = start(
        [sys.executable, "-m", "backfill_assets_tests.lake.lake_worker", str(spec)],
        env,
        tmp_path / "driver.log",
    )
    try:
        assert driver.wait(timeout=300) == 0, log_tail(tmp_path / "driver.log")
    finally:
        kill_group(driver)
    first, second = [json.loads(line) for line in (tmp_path / "out").read_text().splitlines()]
    assert (first["version"], first["rows_by_partition"]) == (0, {"2024-03-01": 2, "2024-03-02": 1})
    assert (second["version"], second["rows_by_partition"]) == (
        1,
        {"2024-03-01": 0, "2024-03-02": 1},
    )
    assert (second["read_version"], second["read"]) == (1, [["2024-03-02", 4, "d"]])
    # The work ran on the worker's executor, not in the driver.
    executor_logs = list((tmp_path / "work").glob("app-*/*/stderr"))
    assert executor_logs, "no executor was launched on the worker"
