"""What a command's runs need, checked before it launches any: the engine's jars (Delta's for
``delta-spark``, and Hadoop's s3a ones when its lake is on S3), as the runs' Spark session
would check them, the landing zone, and every table of the lake readable by the runs' engine. A
run that lacked one would fail inside a step, be retried, and leave a summary of retries in
place of the cause; this is one line naming the fix, with no run launched."""

from __future__ import annotations

from pathlib import Path

from backfill_assets.settings import Settings, SparkSettings
from backfill_assets.storage.stores import is_s3


def check_run_needs(settings: Settings) -> None:
    """ValueError, saying what is missing and how to get it, unless the runs a command is about
    to launch have what they need. The jars are checked where set-up puts them; the tables'
    protocols are read from the lake's logs (on S3 after the lake's own check)."""
    from backfill_assets.spark.delta_jars import DeltaJarsError
    from backfill_assets.spark.session import check_delta_jars, spark_config

    spark = SparkSettings.from_env()
    try:  # the conf each run's session starts with, checked as the session checks it
        check_delta_jars(spark_config(settings=spark))
    except DeltaJarsError as exc:
        raise ValueError(f"no run launched: {exc}") from None
    landing = settings.landing_dir
    if not is_s3(landing) and not Path(landing).is_dir():
        raise ValueError(
            f"no run launched: the landing zone {landing} is not a folder: set "
            "BACKFILL_LANDING_DIR to where the feed lands (`backfill-assets generate` writes one)"
        )
    if runs_on_delta_rs(spark):
        check_tables_supported(settings)


def runs_on_delta_rs(spark: SparkSettings) -> bool:
    """Whether the runs' lake will be delta-rs: asked for, or ``auto`` on a session without
    Delta (a Spark Connect server's own Delta is known only to its session)."""
    return spark.lake_engine == "delta-rs" or (spark.lake_engine == "auto" and not spark.remote)


def check_tables_supported(settings: Settings) -> None:
    """ValueError naming the table and the features when delta-rs cannot serve one of the
    pipeline's tables (another writer enabled deletion vectors, say): no retry of a run changes
    a table's protocol."""
    from backfill_assets.catalog import LAKE_TABLES
    from backfill_assets.lake import Lake, LakeError

    try:
        lake = Lake(settings.lake_dir, None, engine="delta-rs")
        for table in LAKE_TABLES:
            lake.check_supported(table.path)
    except LakeError as exc:
        raise ValueError(f"no run launched: {exc}") from None
