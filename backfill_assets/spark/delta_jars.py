"""The native engine's JVM jars: where they live, fetching them once, checking them.

Two sets (``JarSet``): Delta Lake's (``DELTA``, in ``.jars/delta``), and Hadoop's s3a with the
AWS SDK (``S3A``, in ``.jars/s3a``, ``spark/s3a_jars.py``), which only the delta-spark engine on a
lake in S3 needs. Set-up (``make setup``) runs ``python -m backfill_assets.spark.delta_jars``:
each of a set's jars that is not already in its git-ignored folder with its recorded sha256 is
downloaded over HTTPS from Maven Central (``MAVEN_CENTRAL``, or ``BACKFILL_MAVEN_REPO``: a
mirror with Central's layout) with the standard library, checked against the sha256 recorded
here, and renamed into place: a jar is there whole and checked, or not at all, whatever
interrupts the download. Once they are there it downloads nothing, so it works offline. A jar
that cannot be downloaded, or whose bytes differ from the recorded sha256, is a
``DeltaJarsError`` naming it, and set-up fails. The s3a set is fetched only when S3 is used:
``BACKFILL_LAKE_DIR`` or ``BACKFILL_LANDING_DIR`` is ``s3://...``, or ``--s3a`` asks for it
(``make test`` does: the suite runs delta-spark on S3 too).

``checked_jars`` is what a Spark session calls before it starts with Delta:
a missing or altered jar, or a pyspark these jars were not built for, is one
clear ``DeltaJarsError`` naming the fix, not a stack trace inside a write.
"""

from __future__ import annotations

import functools
import hashlib
import http.client
import os
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from backfill_assets.settings import SparkSettings, s3_in_use
from backfill_assets.spark.s3a_jars import HADOOP_AWS_VERSION, S3A_JARS

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
FIX = "run `make setup`, which downloads them from Maven Central"
S3A_FIX = (
    "run `.venv/bin/python -m backfill_assets.spark.delta_jars --s3a` (`make setup` does when "
    "BACKFILL_LAKE_DIR is s3://..., `make test` always), which downloads them from Maven Central"
)
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
DOWNLOAD_TRIES = 3  # a jar's download is tried this many times before set-up fails
DOWNLOAD_TIMEOUT = 60  # seconds without a byte from the server before a try fails
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

    def jar_dir(self, settings: SparkSettings | None = None) -> Path:
        folder = self.folder(SparkSettings.from_env() if settings is None else settings)
        if folder is not None:
            return folder
        return Path(__file__).resolve().parents[2] / ".jars" / self.default

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
                    f"recorded one): {self.fix}, which replaces it"
                )
        return self.jar_paths()

    def fetch(self) -> str:
        """Make sure the jars are in ``jar_dir()``, each with its recorded sha256; one line
        saying what happened.

        From ``BACKFILL_MAVEN_REPO`` (``settings.maven_repo``), else ``MAVEN_CENTRAL``. Raises
        DeltaJarsError, naming the jar, when one cannot be downloaded or its bytes do not have
        the recorded sha256; the jars already renamed into place stay, each whole and checked.
        """
        target = self.jar_dir()
        wanted = [
            name
            for name in sorted(self.jars)
            if not (target / name).is_file() or _file_sha256(target / name) != self.jars[name][1]
        ]
        if not wanted:
            return f"{self.title} jars present in {target}"
        root = (SparkSettings.from_env().maven_repo or MAVEN_CENTRAL).rstrip("/")
        target.mkdir(parents=True, exist_ok=True)
        _remove_partial_downloads(target)
        for name in wanted:
            coordinates, sha = self.jars[name]
            _download(f"{root}/{maven_path(coordinates)}", target / name, sha, self.title)
        self.checked()
        return f"downloaded {len(wanted)} {self.title} jars into {target}"


DELTA = JarSet(
    f"Delta {DELTA_VERSION}",
    JARS,
    lambda s: s.delta_jars,
    "delta",
    FIX,
)
S3A = JarSet(
    f"s3a (hadoop-aws {HADOOP_AWS_VERSION})",
    S3A_JARS,
    lambda s: s.s3a_jars,
    "s3a",
    S3A_FIX,
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


def maven_path(coordinates: str) -> str:
    """The path of a jar under a Maven repository's root: ``group:artifact:version`` is
    ``group/as/folders/artifact/version/artifact-version.jar``."""
    group, artifact, version = coordinates.split(":")
    return f"{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.jar"


PARTIAL = ".part"  # a download under way is ``.<jar name>.<random>.part`` in the jars' folder


def _download(url: str, path: Path, sha256: str, title: str) -> None:
    """Download ``url`` to ``path`` through a temporary file in its folder, renamed into place
    only once its bytes have ``sha256`` and are on disk; DeltaJarsError naming the jar if not."""
    error = ""
    for attempt in range(DOWNLOAD_TRIES):
        if attempt:
            time.sleep(2**attempt)
        handle, partial = tempfile.mkstemp(prefix=f".{path.name}.", suffix=PARTIAL, dir=path.parent)
        try:
            digest = hashlib.sha256()
            with os.fdopen(handle, "wb") as out:
                with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT) as response:
                    for block in iter(lambda: response.read(1 << 20), b""):
                        digest.update(block)
                        out.write(block)
                out.flush()
                os.fsync(out.fileno())
            if digest.hexdigest() != sha256:
                raise DeltaJarsError(
                    f"{title}'s jar {path.name} downloaded from {url} has sha256 "
                    f"{digest.hexdigest()}, not the recorded {sha256}: not installed"
                )
            os.chmod(partial, 0o644)  # mkstemp's file is its owner's alone; a jar is for all
            os.replace(partial, path)
            return
        except (OSError, http.client.HTTPException) as exc:  # URLError is an OSError
            error = str(exc)
            if isinstance(exc, urllib.error.HTTPError) and exc.code in (403, 404, 410):
                break  # the repository has no such file: asking again will not make one
        finally:
            if os.path.exists(partial):
                os.unlink(partial)
    tries = f"{attempt + 1} tries" if attempt else "1 try"
    raise DeltaJarsError(
        f"{title}'s jar {path.name} could not be downloaded from {url} ({tries}; the last: {error})"
    )


def _remove_partial_downloads(folder: Path) -> None:
    """Remove what downloads that were killed left in ``folder``."""
    for leftover in folder.glob(f".*{PARTIAL}"):
        leftover.unlink(missing_ok=True)


def _file_sha256(path: Path) -> str:
    stat = path.stat()
    return _sha256(str(path), stat.st_size, stat.st_mtime_ns)


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
