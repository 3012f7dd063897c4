"""The native engine's JVM jars: where they live, fetching them once, checking them.

Two sets (``JarSet``): Delta Lake's (``DELTA``, in ``.jars/delta``), and Hadoop's s3a with the
AWS SDK (``S3A``, in ``.jars/s3a``, ``s3a_jars.py``), which only the delta-spark engine on a
lake in S3 needs. Set-up (``make setup``) runs ``python -m backfill_assets.delta_jars``: when
a set's jars are not already in its git-ignored folder it copies them from Maven Central with
``mvn`` (``--strict-checksums``: the .sha1 Central serves must match), then checks each file
against the sha256 recorded here. Once they are there it never calls ``mvn`` again, so it works
offline. Where Maven cannot be reached it says so in one line and set-up goes on: the embedded
delta-rs engine needs no jars. The s3a set is fetched only when S3 is used:
``BACKFILL_LAKE_DIR`` or ``BACKFILL_LANDING_DIR`` is ``s3://...``, or ``--s3a`` asks for it.

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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from backfill_assets.s3a_jars import HADOOP_AWS_VERSION, S3A_JARS
from backfill_assets.settings import SparkSettings, s3_in_use

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
S3A_FIX = (
    "run `.venv/bin/python -m backfill_assets.delta_jars --s3a` (`make setup` does when "
    "BACKFILL_LAKE_DIR is s3://...), which fetches them with mvn"
)
DELTA_SESSION_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


class DeltaJarsError(RuntimeError):
    """The native engine's jars are missing, altered, or built for another Spark."""


@dataclass(frozen=True)
class JarSet:
    """A set of jars fetched and checked together, in a folder of its own."""

    title: str  # how messages name the set: "Delta 4.4.0", "s3a (hadoop-aws 3.5.0)"
    jars: dict[str, tuple[str, str]]  # file name -> (Maven coordinates, sha256)
    folder: Callable[[SparkSettings], Path | None]  # the configured folder, None: the default
    default: str  # the default folder's name under the project's .jars/
    fix: str  # how to get the jars, for errors
    not_fetched: str  # what a set-up that could not fetch them still leaves working

    def jar_dir(self, settings: SparkSettings | None = None) -> Path:
        folder = self.folder(SparkSettings.from_env() if settings is None else settings)
        if folder is not None:
            return folder
        return Path(__file__).resolve().parent.parent / ".jars" / self.default

    def jar_paths(self, settings: SparkSettings | None = None) -> list[str]:
        """Where the jars are expected, whether or not they are there."""
        return [str(self.jar_dir(settings) / name) for name in sorted(self.jars)]

    def present(self) -> bool:
        """True when set-up put the jars in place (they may still fail ``checked``)."""
        return any(os.path.exists(path) for path in self.jar_paths())

    def checked(self) -> list[str]:
        """The jar paths, after checking every file and the pyspark version; DeltaJarsError if
        not."""
        import pyspark

        if not pyspark.__version__.startswith(SPARK_LINE + "."):
            raise DeltaJarsError(
                f"{self.title}'s jars are built for Spark {SPARK_LINE}, this is pyspark "
                f"{pyspark.__version__}: update them in {__name__} (and the `native` extra), "
                "then run `make setup`"
            )
        for name, path in zip(sorted(self.jars), self.jar_paths(), strict=True):
            if not os.path.exists(path):
                raise DeltaJarsError(
                    f"{self.title}'s jar {name} is missing from {self.jar_dir()}: {self.fix}"
                )
            stat = os.stat(path)
            if _sha256(path, stat.st_size, stat.st_mtime_ns) != self.jars[name][1]:
                raise DeltaJarsError(
                    f"{self.title}'s jar {path} is corrupt (sha256 differs from the "
                    f"recorded one): delete it and {self.fix}"
                )
        return self.jar_paths()

    def fetch(self) -> str:
        """Make sure the jars are in ``jar_dir()``; one line saying what happened.

        Raises DeltaJarsError only when a download does not match its recorded checksum.
        """
        try:
            self.checked()
            return f"{self.title} jars present in {self.jar_dir()}"
        except DeltaJarsError:
            pass
        target = self.jar_dir()
        mvn = shutil.which("mvn")
        if mvn is None:
            return f"{self.title} jars not fetched (no mvn on PATH); {self.not_fetched}"
        target.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target) as staging:
            for name, (coordinates, _) in sorted(self.jars.items()):
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
                        f"{self.title} jars not fetched (Maven Central unreachable or refused "
                        f"{coordinates}: {reason}); {self.not_fetched}"
                    )
            for name, (_, sha) in self.jars.items():
                got = _sha256(os.path.join(staging, name), 0, 0)
                if got != sha:
                    raise DeltaJarsError(f"downloaded {name} has sha256 {got}, expected {sha}")
            for name in self.jars:
                os.replace(os.path.join(staging, name), target / name)
        self.checked()
        return f"fetched {self.title} jars into {target}"


DELTA = JarSet(
    f"Delta {DELTA_VERSION}",
    JARS,
    lambda s: s.delta_jars,
    "delta",
    FIX,
    "delta-rs works, native tests skip",
)
S3A = JarSet(
    f"s3a (hadoop-aws {HADOOP_AWS_VERSION})",
    S3A_JARS,
    lambda s: s.s3a_jars,
    "s3a",
    S3A_FIX,
    "delta-rs works on S3, delta-spark does not",
)


def jar_dir(settings: SparkSettings | None = None) -> Path:
    """``BACKFILL_DELTA_JARS`` (``settings.delta_jars``) when set, else the project's
    ``.jars/delta``."""
    return DELTA.jar_dir(settings)


def jar_paths(settings: SparkSettings | None = None) -> list[str]:
    """Where Delta's jars are expected, whether or not they are there."""
    return DELTA.jar_paths(settings)


def jars_present() -> bool:
    """True when set-up put Delta's jars in place (they may still fail ``checked_jars``)."""
    return DELTA.present()


def checked_jars() -> list[str]:
    """Delta's jar paths, after checking every file and the pyspark version; DeltaJarsError if
    not."""
    return DELTA.checked()


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
    """Make sure Delta's jars are in ``jar_dir()``; one line saying what happened."""
    return DELTA.fetch()


def _first_error(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if "ERROR" in line]
    text = lines[0] if lines else (output.strip().splitlines() or ["mvn failed"])[-1]
    return text.removeprefix("[ERROR]").strip()[:200]


def main(argv: list[str] | None = None) -> int:
    """Fetch Delta's jars; the s3a jars too with ``--s3a`` or when S3 is used
    (``settings.s3_in_use``)."""
    args = sys.argv[1:] if argv is None else argv
    unknown = [a for a in args if a != "--s3a"]
    if unknown:
        print(f"usage: python -m {__name__} [--s3a]; unknown {unknown}", file=sys.stderr)
        return 2
    sets = [DELTA, S3A] if "--s3a" in args or s3_in_use() else [DELTA]
    try:
        for jar_set in sets:
            print(f"bootstrap: {jar_set.fetch()}", file=sys.stderr)
    except DeltaJarsError as exc:
        print(f"bootstrap: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
