"""The pipeline on a Spark Connect server (started from the pyspark wheel on 127.0.0.1) via BACKFILL_SPARK_REMOTE."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import pyspark
import pytest

from backfill_assets.generate import generate_feed
from backfill_assets_tests.pipeline_env import pipeline_env
from backfill_assets_tests.reference import Reference

pytestmark = pytest.mark.slow
SPARK_HOME = Path(pyspark.__file__).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory):
    port = _free_port()
    log = tmp_path_factory.mktemp("connect") / "server.log"
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "PYSPARK_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1"}
    cmd = [str(SPARK_HOME / "bin" / "spark-submit"), "--class",
           "org.apache.spark.sql.connect.service.SparkConnectServer", "--master", "local[2]",
           "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
           "--conf", f"spark.connect.grpc.binding.port={port}",
           "--conf", "spark.sql.session.timeZone=UTC", "--conf", "spark.ui.enabled=false",
           "--conf", "spark.sql.shuffle.partitions=2", "spark-internal"]
    with open(log, "w") as out:
        server = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while "Spark Connect server started" not in log.read_text():
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"Spark Connect server did not start:\n{log.read_text()[-3000:]}")
            time.sleep(1)
        yield f"sc://127.0.0.1:{port}"
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def test_backfill_through_spark_connect_matches_the_contract(connect_url, tmp_path):
    with pipeline_env(tmp_path) as env:
        landing = env.settings.landing_dir
        generate_feed(landing, date(2024, 1, 1), date(2024, 1, 4), orders_per_day=15, seed=4)
        proc = subprocess.run(
            [sys.executable, "-m", "backfill_assets.cli", "backfill", "--start", "2024-01-02", "--end", "2024-01-03"],
            env={**os.environ, "BACKFILL_SPARK_REMOTE": connect_url}, capture_output=True, text=True, timeout=600,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        days = [date(2024, 1, 2), date(2024, 1, 3)]
        expected = {(f.event_date, f.country): (f.orders, f.paid_orders, f.revenue_usd)
                    for f in Reference(landing, 7).fact(days)}
        actual = {(r["event_date"], r["country"]): (r["orders"], r["paid_orders"], r["revenue_usd"])
                  for r in env.rows("fact/daily_revenue")}
        assert actual == expected and expected
