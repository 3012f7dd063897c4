"""The driver JVM's class-data archive (``spark/class_archive.py``): set-up's archive maps for
the pipeline's own sessions, the driver asks for it only while it is there, and set-up builds
it again for another Java or pyspark."""

from __future__ import annotations

import pytest

from backfill_assets.settings import SparkSettings
from backfill_assets.spark import class_archive as archive
from backfill_assets.spark.session import archive_options, archive_path
from backfill_assets_tests.spark.test_spark_smoke import session_child

# With -Xshare:on a JVM that cannot map the archive (another Java, another class path) does not
# start at all: a session that runs a job proves the archive serves Spark's own classes.
STRICT_SESSION = (
    "from backfill_assets.spark.session import build_session, spark_config\n"
    "conf = spark_config(master='local[1]')\n"
    "conf['spark.driver.extraJavaOptions'] += ' -Xshare:on'\n"
    "spark = build_session(conf)\n"
    "args = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()"
    ".getInputArguments()\n"
    "print(spark.range(7).count(), [a for a in args if a.startswith('-XX:SharedArchiveFile')])\n"
)


def settings(value: str | None) -> SparkSettings:
    return SparkSettings.from_env({} if value is None else {"BACKFILL_SPARK_CLASS_ARCHIVE": value})


def test_the_driver_maps_the_archive_only_while_it_is_there(tmp_path):
    there = tmp_path / "classes.jsa"
    there.write_bytes(b"x")
    assert archive_options(settings(str(there))) == (
        f"-XX:SharedArchiveFile={there} -Xlog:cds=off -Xlog:cds+dynamic=off"
    )
    assert archive_options(settings(str(tmp_path / "missing.jsa"))) == ""
    assert archive_options(settings("off")) == ""
    assert archive_path(settings(None)).name == "spark-classes.jsa"


def test_another_java_or_pyspark_needs_a_new_archive(tmp_path):
    path = tmp_path / "classes.jsa"
    assert archive.needs_build(path, "java 17\npyspark 4.2\n")  # none yet
    path.write_bytes(b"x")
    assert archive.needs_build(path, "java 17\npyspark 4.2\n")  # built, but for what is unknown
    archive.stamp_path(path).write_text("java 17\npyspark 4.2\n")
    assert not archive.needs_build(path, "java 17\npyspark 4.2\n")
    assert archive.needs_build(path, "java 21\npyspark 4.2\n")
    assert archive.needs_build(path, "java 17\npyspark 4.3\n")


@pytest.mark.slow
def test_set_ups_archive_serves_a_pipeline_session():
    path = archive_path()
    if path is None:
        pytest.skip("BACKFILL_SPARK_CLASS_ARCHIVE=off")
    assert path.is_file(), (
        "no class archive: `make class-archive` (run by the tests' targets) builds it, "
        "`python -m backfill_assets.spark.class_archive` says why not"
    )
    assert not archive.needs_build(path, archive.stamp())  # set-up's is for this Java, pyspark
    printed = session_child(STRICT_SESSION, {})
    assert printed == f"7 ['-XX:SharedArchiveFile={path}']"
