"""The driver JVM's class-data archive: a Spark session starts sooner (docs/benchmarks.md).

Every Dagster run worker, every CLI command and every child process starts its own Spark
driver, and a fresh JVM spends most of a session's start loading and verifying Spark's classes
(docs/benchmarks.md, "A Spark session's start"). Java's class-data sharing maps them from an
archive instead. ``make class-archive`` (which the tests' targets and ``make ui`` run; ``make
demo`` starts one session and goes without) runs ``python -m backfill_assets.spark.class_archive``:
it starts one session with ``-XX:ArchiveClassesAtExit``, runs a small job through what the
pipeline uses (JSON text, Parquet, shuffles, windows, Python rows), and keeps the archive the
JVM writes as it exits. ``session.spark_config`` then adds ``-XX:SharedArchiveFile`` to the
driver's options while the archive is there.

The JVM checks the archive itself: built by another Java, or for another class path, it is not
used (silently, at the old speed), never half-used. The Java and pyspark it was built with are
recorded beside it, and the target builds it again when either changed.
``BACKFILL_SPARK_CLASS_ARCHIVE`` names another file, or ``off``. A cluster's executors and a
Spark Connect server keep their own JVM options.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from backfill_assets.settings import SparkSettings
from backfill_assets.spark.session import QUIET, archive_path, build_session, spark_config

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def stamp() -> str:
    """What the archive is valid for: the Java that runs Spark, and pyspark's jars."""
    import pyspark

    java = SparkSettings.from_env().java
    version = subprocess.run([java, "-version"], capture_output=True, text=True, check=True).stderr
    return f"{version.strip()}\npyspark {pyspark.__version__} at {Path(pyspark.__file__).parent}\n"


def stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".stamp")


def needs_build(path: Path, current: str) -> bool:
    """Whether ``path`` is missing, or was built for another Java or pyspark than ``current``."""
    marker = stamp_path(path)
    return not (path.is_file() and marker.is_file() and marker.read_text() == current)


def ensure(settings: SparkSettings | None = None) -> str:
    """Build the archive unless one for this Java and pyspark is there; what was done."""
    path = archive_path(settings)
    if path is None:
        return "off (BACKFILL_SPARK_CLASS_ARCHIVE=off)"
    current = stamp()
    if not needs_build(path, current):
        return f"up to date: {path}"
    began = time.monotonic()
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="class-archive-", dir=path.parent) as tmp:
        dumped = Path(tmp) / path.name
        run = subprocess.run(
            [sys.executable, "-m", "backfill_assets.spark.class_archive", "--dump", str(dumped)],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if run.returncode != 0 or not dumped.is_file() or dumped.stat().st_size == 0:
            tail = "\n".join((run.stdout + run.stderr).splitlines()[-5:])
            return f"not built (Spark sessions start without it): {tail}"
        os.replace(dumped, path)
    stamp_path(path).write_text(current)
    took = time.monotonic() - began
    return f"built in {took:.1f} s: {path} ({path.stat().st_size // 2**20} MiB)"


def dump(target: Path) -> None:
    """In a child: one session that writes the archive to ``target`` when its JVM exits."""
    settings = dataclasses.replace(SparkSettings.from_env(), class_archive="off")
    conf = spark_config(master="local[1]", shuffle_partitions=2, settings=settings)
    conf["spark.driver.extraJavaOptions"] += f" -XX:ArchiveClassesAtExit={target} {QUIET}"
    session = build_session(conf)
    with tempfile.TemporaryDirectory(prefix="class-archive-job-") as tmp:
        exercise(session, Path(tmp))
    gateway = session.sparkContext._gateway
    assert gateway is not None  # a local session's
    process = gateway.proc  # the JVM pyspark started
    session.stop()
    gateway.shutdown()
    process.stdin.close()  # the JVM exits when its input closes, and writes the archive then
    process.wait(timeout=300)


def exercise(session: SparkSession, tmp: Path) -> None:
    """A small job through the kinds of work the pipeline's sessions do."""
    text = tmp / "lines.jsonl"
    text.write_text("\n".join(f'{{"id": {i}, "amount": "{i}.50"}}' for i in range(200)))
    lines = session.read.text(str(text)).selectExpr(
        "try_parse_json(value) AS v", "try_cast(substr(value, 8, 2) AS INT) AS n"
    )
    rows = lines.selectExpr(
        "try_variant_get(v, '$.id', 'bigint') AS id",
        "try_cast(try_variant_get(v, '$.amount', 'string') AS DECIMAL(18, 2)) AS amount",
        "n",
    )
    rows.write.partitionBy("n").parquet(str(tmp / "parquet"))
    back = session.read.parquet(str(tmp / "parquet"))
    keys = [(i, f"k{i % 3}") for i in range(50)]
    python_rows = session.createDataFrame(keys, "id long, k string")
    joined = back.join(python_rows, "id", "left").groupBy("k").agg({"amount": "sum"})
    ranked = back.selectExpr(
        "id", "row_number() OVER (PARTITION BY n ORDER BY id DESC) AS rank"
    ).where("rank = 1")
    joined.collect()
    ranked.toPandas()


def main(argv: list[str]) -> int:
    if argv[:1] == ["--dump"]:
        dump(Path(argv[1]))
        return 0
    try:
        done = ensure()
    except (OSError, subprocess.SubprocessError) as exc:  # only a speed-up: set-up goes on
        done = f"not built (Spark sessions start without it): {exc}"
    print(f"spark class archive: {done}")
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    os._exit(code)
