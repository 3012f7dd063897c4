"""The shared Spark session runs in UTC with ANSI mode on; a session from spark_config() collects
with the collector it names."""

import os
import subprocess
import sys

import pytest
from pyspark.sql import functions as F


def test_session_is_utc_and_ansi(spark):
    row = (
        spark.range(1)
        .select(
            F.try_to_timestamp(F.lit("2024-01-01T23:30:00-02:00")).alias("ts"),
            F.date_format(F.to_timestamp(F.lit("2024-01-01T23:30:00-02:00")), "yyyy-MM-dd").alias(
                "utc_day"
            ),
        )
        .first()
    )
    assert row["utc_day"] == "2024-01-02"
    assert spark.conf.get("spark.sql.ansi.enabled") == "true"


COLLECTORS = (
    "from backfill_assets.spark.session import build_session, spark_config\n"
    "spark = build_session(spark_config(master='local[1]'))\n"
    "management = spark._jvm.java.lang.management.ManagementFactory\n"
    "beans = management.getGarbageCollectorMXBeans()\n"
    "hotspot = management.getPlatformMXBean(\n"
    "    spark._jvm.java.lang.Class.forName('com.sun.management.HotSpotDiagnosticMXBean')\n"
    ")\n"
    "free = hotspot.getVMOption('MinHeapFreeRatio').getValue()\n"
    "print(sorted(bean.getName() for bean in beans), free)\n"
)


@pytest.mark.parametrize(
    ("setting", "collectors"),
    [
        # the serial collector's two generations, grown when less than 20% is free after a
        # full collection
        (None, "['Copy', 'MarkSweepCompact'] 20"),
        ("-XX:+UseG1GC", "['G1 Old Generation', 'G1 Young Generation'] 40"),  # Java's default
    ],
)
def test_the_driver_jvm_runs_the_collector_spark_config_names(setting, collectors):
    env = {"BACKFILL_SPARK_DRIVER_GC": setting} if setting else {}
    assert session_child(COLLECTORS, env, drop=("BACKFILL_SPARK_DRIVER_GC",)) == collectors


def session_child(code: str, env: dict[str, str], drop: tuple[str, ...] = ()) -> str:
    """The last line ``code`` prints in a new Python process (its own Spark driver), with
    ``env`` over this one's environment less ``drop`` and the JVM options a shell may add."""
    dropped = ("SPARK_SUBMIT_OPTS", "JDK_JAVA_OPTIONS", *drop)
    full = {k: v for k, v in os.environ.items() if k not in dropped}
    full.update(env, PYSPARK_PYTHON=sys.executable)
    run = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout.strip().splitlines()[-1]
