"""Hadoop's s3a filesystem for the delta-spark engine on a lake in S3.

Two halves:

- ``session_conf`` (at session start, from ``spark_config``): the s3a jars (``spark/s3a_jars.py``,
  fetched by set-up into ``.jars/s3a``), ``s3://`` mapped to ``S3AFileSystem`` (Delta and the
  lake name tables ``s3://bucket/prefix/<table>``, as delta-rs does), Delta's log store for
  that scheme (``S3SingleDriverLogStore``: safe from one driver at a time, which the lake's
  commit lock sees to, ``lake/commit_lock.py``), and the classic input stream. hadoop-aws 3.5.0
  reads through the analytics accelerator by default; both passed the s3a test, the classic
  stream is hadoop-aws's long-standing one and needs only the SDK's synchronous Apache client.
- ``configure`` (when a lake on S3 is opened on delta-spark): the settings read from the
  standard AWS variables (``S3Settings``, as for delta-rs) set in the session's Hadoop
  configuration: endpoint, path-style access (with an endpoint of one's own), region, TLS per
  the endpoint's scheme, and the keys through ``SimpleAWSCredentialsProvider``. The keys are
  in no Spark conf, so in no ``spark.conf`` listing or environment page, and Spark redacts
  Hadoop properties matching ``spark.redaction.regex`` (``secret``, ``access.key``) wherever it
  prints them. Tasks get them with the Hadoop configuration they carry, on a cluster too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from backfill_assets.settings import S3Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

S3A_FILESYSTEM = "org.apache.hadoop.fs.s3a.S3AFileSystem"
LOG_STORE = "io.delta.storage.S3SingleDriverLogStore"
SESSION_CONF = {
    "spark.hadoop.fs.s3.impl": S3A_FILESYSTEM,
    "spark.hadoop.fs.s3a.impl": S3A_FILESYSTEM,
    "spark.hadoop.fs.s3a.input.stream.type": "classic",
    "spark.hadoop.fs.s3a.aws.credentials.provider": (
        "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
    ),
    "spark.delta.logStore.s3.impl": LOG_STORE,
    "spark.delta.logStore.s3a.impl": LOG_STORE,
}


def session_conf(jars: list[str]) -> dict[str, str]:
    """What a delta-spark session adds for a lake in S3: ``jars`` and ``SESSION_CONF``."""
    return {"spark.jars": ",".join(jars), **SESSION_CONF}


def hadoop_settings(settings: S3Settings) -> dict[str, str]:
    """The s3a properties for ``settings``, keys included (for the Hadoop configuration only)."""
    endpoint = settings.endpoint
    props = {
        "fs.s3a.endpoint.region": settings.region,
        "fs.s3a.connection.ssl.enabled": "false"
        if endpoint and endpoint.startswith("http://")
        else "true",
    }
    if endpoint:
        props["fs.s3a.endpoint"] = endpoint
        props["fs.s3a.path.style.access"] = "true"  # a server of one's own: no bucket DNS names
    if settings.access_key_id and settings.secret_access_key:
        props["fs.s3a.access.key"] = settings.access_key_id
        props["fs.s3a.secret.key"] = settings.secret_access_key
    return props


def configure(spark: SparkSession, settings: S3Settings) -> None:
    """Put ``settings`` into the session's Hadoop configuration (see the module docstring)."""
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in hadoop_settings(settings).items():
        conf.set(key, value)


def available(spark: SparkSession) -> bool:
    """True when the session's JVM loads ``S3AFileSystem`` (the s3a jars are on its classpath)."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return False
    from py4j.protocol import Py4JError

    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        loader.loadClass(S3A_FILESYSTEM)
        return True
    except Py4JError:
        return False
