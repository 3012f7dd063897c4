"""The shared Spark session runs in UTC with ANSI mode on."""

from pyspark.sql import functions as F


def test_session_is_utc_and_ansi(spark):
    row = spark.range(1).select(
        F.try_to_timestamp(F.lit("2024-01-01T23:30:00-02:00")).alias("ts"),
        F.date_format(
            F.to_timestamp(F.lit("2024-01-01T23:30:00-02:00")), "yyyy-MM-dd"
        ).alias("utc_day"),
    ).first()
    assert row["utc_day"] == "2024-01-02"
    assert spark.conf.get("spark.sql.ansi.enabled") == "true"
