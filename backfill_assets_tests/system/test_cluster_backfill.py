"""The pipeline on a real Spark standalone cluster (a master and two workers started from the
pyspark wheel on 127.0.0.1) via BACKFILL_SPARK_MASTER: a backfill with a held day, the landing
zone and the lake in S3 only, so that nothing the workers read or write is on a shared disk
(the lake layer on a cluster sharing this machine's disk: ``lake/test_lake_cluster.py``)."""

from __future__ import annotations

import pytest

from backfill_assets_testkit.pipeline_env import pipeline_env
from backfill_assets_testkit.remote_backfill import (
    assert_held_day_backfill_matches_reference,
    backfill_in_child,
    write_held_day_feed,
)
from backfill_assets_testkit.s3_landing import upload
from backfill_assets_testkit.spark_servers import standalone_cluster

# a cluster of its own and S3, mostly waited on: the side lane
pytestmark = [pytest.mark.slow, pytest.mark.beside]


@pytest.mark.parametrize("engine", ["delta-rs", "delta-spark"])
def test_a_cluster_backfill_reading_and_writing_only_s3_matches_the_contract(
    tmp_path, s3_server, s3_bucket, engine
):
    """The landing zone and the lake in a bucket: the executors read the landed files and the
    tables, and write the tables, through S3 (their tasks carry the settings), nothing on disk;
    on each engine (delta-spark's executors get Delta's and the s3a jars from the driver)."""
    local = tmp_path / "feed"
    reference = write_held_day_feed(local)
    landing = upload(local, s3_server, s3_bucket, "landing")
    lake = f"s3://{s3_bucket}/lake"
    with (
        pipeline_env(tmp_path / "pipeline", landing=landing, lake=lake) as env,
        standalone_cluster(tmp_path / "cluster", workers=2, cores=1, memory="1g") as cluster,
    ):
        proc = backfill_in_child(
            {**cluster.env, "BACKFILL_SPARK_MASTER": cluster.url, "BACKFILL_LAKE_ENGINE": engine}
        )
        assert_held_day_backfill_matches_reference(env, reference, proc)
        assert cluster.executor_logs(0) and cluster.executor_logs(1), proc.stderr[-3000:]
    assert not (tmp_path / "pipeline" / "lake").exists()
    assert not (tmp_path / "pipeline" / "landing").exists()
