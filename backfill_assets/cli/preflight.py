"""What a command's runs need, checked before it launches any: the engine's jars (Delta's for
``delta-spark``, and Hadoop's s3a ones when its lake is on S3), as the runs' Spark session
would check them, and the landing zone. A run that lacked one would fail inside a step, be
retried, and leave a summary of retries in place of the cause; this is one line naming the fix,
with no run launched."""

from __future__ import annotations

from pathlib import Path

from backfill_assets.lake.storage import is_s3
from backfill_assets.settings import Settings, SparkSettings


def check_run_needs(settings: Settings) -> None:
    """ValueError, saying what is missing and how to get it, unless the runs a command is about
    to launch have what they need. No I/O beyond the local disk: the jars are checked where
    set-up puts them, an S3 landing zone or lake is left to its own checks."""
    from backfill_assets.delta_jars import DeltaJarsError
    from backfill_assets.spark_session import check_delta_jars, spark_config

    try:  # the conf each run's session starts with, checked as the session checks it
        check_delta_jars(spark_config(settings=SparkSettings.from_env()))
    except DeltaJarsError as exc:
        raise ValueError(f"no run launched: {exc}") from None
    landing = settings.landing_dir
    if not is_s3(landing) and not Path(landing).is_dir():
        raise ValueError(
            f"no run launched: the landing zone {landing} is not a folder: set "
            "BACKFILL_LANDING_DIR to where the feed lands (`backfill-assets generate` writes one)"
        )
