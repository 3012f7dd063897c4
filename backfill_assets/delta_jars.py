"""Delta Lake's JVM jars for the native engine: where they live, fetching them once, checking them.

Set-up (``make setup``) runs ``python -m backfill_assets.delta_jars``: when the
jars below are not already in the project's git-ignored ``.jars/delta/`` it
copies them from Maven Central with ``mvn`` (``--strict-checksums``: the .sha1
Central serves must match), then checks each file against the sha256 recorded
here. Once they are there it never calls ``mvn`` again, so it works offline.
Where Maven cannot be reached it says so in one line and set-up goes on: the
embedded delta-rs engine needs no jars.

``checked_jars`` is what a Spark session calls before it starts with Delta:
a missing or altered jar, or a pyspark these jars were not built for, is one
clear ``DeltaJarsError`` naming the fix, not a stack trace inside a write.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from backfill_assets.settings import SparkSettings

SPARK_LINE = "4.2"  # the Spark minor version the jars were built for (delta-spark_4.2_2.13)
DELTA_VERSION = "4.4.0"  # also the Python delta-spark pinned in pyproject.toml's `native` extra
# File name -> (Maven coordinates, sha256 of the file Central serves). delta-spark's other
# runtime dependencies (scala-library, antlr4-runtime) ship with pyspark.
JARS = {
    f"delta-spark_{SPARK_LINE}_2.13-{DELTA_VERSION}.jar": (
        f"io.delta:delta-spark_{SPARK_LINE}_2.13:{DELTA_VERSION}",
        "27d4fd8b1f879535c573ed1c718177d6a27f24d3e626ba02e216369725721ead",
    ),
    f"delta-storage-{DELTA_VERSION}.jar": (
        f"io.delta:delta-storage:{DELTA_VERSION}",
        "c46735481fa8e326b0957be02b4420cbcab4b325bb08009b7f2045a95133f1cc",
    ),
}
FIX = "run `make setup`, which fetches them with mvn"
DELTA_SESSION_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


class DeltaJarsError(RuntimeError):
    """Delta's jars are missing, altered, or built for another Spark."""


def jar_dir(settings: SparkSettings | None = None) -> Path:
    """``BACKFILL_DELTA_JARS`` (``settings.delta_jars``) when set, else the project's
    ``.jars/delta``."""
    folder = (SparkSettings.from_env() if settings is None else settings).delta_jars
    if folder is not None:
        return folder
    return Path(__file__).resolve().parent.parent / ".jars" / "delta"


def jar_paths(settings: SparkSettings | None = None) -> list[str]:
    """Where the jars are expected, whether or not they are there."""
    return [str(jar_dir(settings) / name) for name in sorted(JARS)]


def jars_present() -> bool:
    """True when set-up put the jars in place (they may still fail ``checked_jars``)."""
    return any(os.path.exists(path) for path in jar_paths())


def checked_jars() -> list[str]:
    """The jar paths, after checking every file and the pyspark version; DeltaJarsError if not."""
    import pyspark

    if not pyspark.__version__.startswith(SPARK_LINE + "."):
        raise DeltaJarsError(
            f"Delta {DELTA_VERSION}'s jars are built for Spark {SPARK_LINE}, this is pyspark "
            f"{pyspark.__version__}: update JARS in {__name__} (and the `native` extra), then "
            "run `make setup`"
        )
    for name, path in zip(sorted(JARS), jar_paths(), strict=True):
        if not os.path.exists(path):
            raise DeltaJarsError(f"Delta's jar {name} is missing from {jar_dir()}: {FIX}")
        stat = os.stat(path)
        if _sha256(path, stat.st_size, stat.st_mtime_ns) != JARS[name][1]:
            raise DeltaJarsError(
                f"Delta's jar {path} is corrupt (sha256 differs from the "
                f"recorded one): delete it and {FIX}"
            )
    return jar_paths()


def delta_conf(jars: list[str]) -> dict[str, str]:
    """Spark conf that puts ``jars`` on the classpath and turns on Delta's extension and catalog."""
    return {"spark.jars": ",".join(jars), **DELTA_SESSION_CONF}


@functools.lru_cache(maxsize=8)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch() -> str:
    """Make sure the jars are in ``jar_dir()``; one line saying what happened.

    Raises DeltaJarsError only when a download does not match its recorded checksum.
    """
    try:
        checked_jars()
        return f"Delta {DELTA_VERSION} jars present in {jar_dir()}"
    except DeltaJarsError:
        pass
    target = jar_dir()
    mvn = shutil.which("mvn")
    if mvn is None:
        return "Delta jars not fetched (no mvn on PATH); delta-rs works, native tests skip"
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target) as staging:
        for name, (coordinates, _) in sorted(JARS.items()):
            run = subprocess.run(
                [
                    mvn,
                    "-q",
                    "-B",
                    "--strict-checksums",
                    "dependency:copy",
                    f"-Dartifact={coordinates}",
                    f"-DoutputDirectory={staging}",
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if run.returncode != 0 or not os.path.exists(os.path.join(staging, name)):
                reason = _first_error(run.stdout + run.stderr)
                return (
                    f"Delta jars not fetched (Maven Central unreachable or refused "
                    f"{coordinates}: {reason}); delta-rs works, native tests skip"
                )
        for name, (_, sha) in JARS.items():
            got = _sha256(os.path.join(staging, name), 0, 0)
            if got != sha:
                raise DeltaJarsError(f"downloaded {name} has sha256 {got}, expected {sha}")
        for name in JARS:
            os.replace(os.path.join(staging, name), target / name)
    checked_jars()
    return f"fetched Delta {DELTA_VERSION} jars into {target}"


def _first_error(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if "ERROR" in line]
    text = lines[0] if lines else (output.strip().splitlines() or ["mvn failed"])[-1]
    return text.removeprefix("[ERROR]").strip()[:200]


def main() -> int:
    try:
        print(f"bootstrap: {fetch()}", file=sys.stderr)
    except DeltaJarsError as exc:
        print(f"bootstrap: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
