"""Dagster resources: Spark (lazy, no JVM at load time) and the pipeline's lake and landing zone."""

from __future__ import annotations

import time
from pathlib import Path

import dagster as dg
from dagster_pyspark import LazyPySparkResource
from pyspark.sql import SparkSession

from backfill_assets.enrichment.client import SegmentClient, SharedBucket
from backfill_assets.lake import Lake
from backfill_assets.settings import RunSettings, Settings, SparkSettings, location
from backfill_assets.signals import handlers_kept
from backfill_assets.spark.session import (
    check_delta_jars,
    spark_config,
    use_this_python_for_workers,
)

SESSION_STARTED = "Spark session started in"


class SparkResource(LazyPySparkResource):
    """dagster-pyspark's lazy session (no JVM until a step asks for it), on this Python, with
    the step's signal handlers kept (``backfill_assets.signals``)."""

    @property
    def spark_session(self) -> SparkSession:
        if self._spark_session is not None:
            return self._spark_session
        started = time.monotonic()
        use_this_python_for_workers()
        check_delta_jars(self.spark_config)
        with handlers_kept():
            session = super().spark_session
        # in a step's event log: where a run's time goes (bench/freshness.py reads it)
        dg.get_dagster_logger().info(f"{SESSION_STARTED} {time.monotonic() - started:.1f} s")
        return session

    def started_session(self) -> SparkSession | None:
        """The session if a step has started it, else None (never starts one)."""
        return self._spark_session


class PipelineResource(dg.ConfigurableResource):
    """Where the landing zone and the Delta lake are, and the contract's lateness window."""

    landing_dir: str
    lake_dir: str
    max_lateness_days: int
    lake_engine: str = "auto"

    @property
    def landing(self) -> Path | str:
        """The landing root: a local folder, or an ``s3://bucket/prefix`` location."""
        return location("BACKFILL_LANDING_DIR", self.landing_dir)

    def lake(self, spark: SparkSession) -> Lake:
        return Lake(self.lake_dir, spark, engine=self.lake_engine)


class SegmentsResource(dg.ConfigurableResource):
    """The customer-segment service, reached through the one shared client; ``url`` empty when
    it is not configured (``BACKFILL_SEGMENTS_URL``)."""

    url: str = ""
    rps: int = 20
    live_share: float = 0.4
    batch_size: int = 50
    bucket_path: str = ""

    @property
    def configured(self) -> bool:
        return bool(self.url)

    def client(self, lane: str) -> SegmentClient:
        bucket = SharedBucket(self.bucket_path, self.rps, self.live_share)
        return SegmentClient(self.url, bucket, lane, batch_size=self.batch_size)


def code_version() -> str:
    """The code version recorded in every commit: ``BACKFILL_CODE_VERSION``, else the git sha
    when deployed from a checkout."""
    return RunSettings.from_env().code_version or _git_sha() or "unversioned"


def _git_sha() -> str | None:
    head = Path(__file__).resolve().parent.parent / ".git" / "HEAD"
    try:
        ref = head.read_text().strip()
        if ref.startswith("ref: "):
            return (head.parent / ref[5:]).read_text().strip()[:12]
        return ref[:12]
    except OSError:
        return None


def build_resources(settings: Settings) -> dict:
    spark = SparkSettings.from_env()
    return {
        "spark": SparkResource(spark_config=spark_config(settings=spark)),
        "pipeline": PipelineResource(
            landing_dir=str(settings.landing_dir),
            lake_dir=str(settings.lake_dir),
            max_lateness_days=settings.max_lateness_days,
            lake_engine=spark.lake_engine,
        ),
        "segments": segments_resource(settings),
    }


def segments_resource(settings: Settings) -> SegmentsResource:
    s = settings.segments
    if s is None:
        return SegmentsResource()
    return SegmentsResource(
        url=s.url,
        rps=s.rps,
        live_share=s.live_share,
        batch_size=s.batch_size,
        bucket_path=str(s.bucket_path),
    )
