"""Helpers of the lake tests: the native session's conf, subprocess Spark scripts, markers."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from deltalake import DeltaTable

from backfill_assets.lake import CommitInfo
from backfill_assets.testing.faults import forget_visits

NATIVE_ENV = "BACKFILL_LAKE_NATIVE_SESSION"
NO_JARS = (
    "Delta's jars are not in their folder (BACKFILL_DELTA_JARS, else .jars/delta): run "
    "`make setup`, which downloads them"
)


def native_spark_conf(master: str = "local[2]") -> dict[str, str]:
    """The pipeline's delta-spark session conf, test-sized (DeltaJarsError if the jars are bad);
    with the s3a jars when set-up fetched them."""
    import dataclasses

    from backfill_assets.settings import SparkSettings
    from backfill_assets.spark.delta_jars import S3A
    from backfill_assets.spark.session import spark_config

    # With the s3a jars, one session serves the local and the S3 lakes of the directory.
    settings = dataclasses.replace(SparkSettings.from_env(), lake_on_s3=S3A.present())
    return spark_config(
        master=master,
        shuffle_partitions=2,
        driver_memory="1g",
        lake_engine="delta-spark",
        settings=settings,
    )


# Child JVMs start faster on a busy 2-core box with the C1 compiler only (added to the options
# spark_config gives the driver: UTC, the serial collector, the class-data archive).
FAST_JVM_OPTION = "-XX:TieredStopAtLevel=1"


def wait_for(path: Path, procs: list[subprocess.Popen], timeout: float = 120) -> None:
    """Wait until ``path`` exists; fail early if a child died first."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        for proc in procs:
            if proc.poll() is not None:
                raise AssertionError(
                    f"child {proc.args!r} exited with {proc.returncode} before {path.name} appeared"
                )
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {path}")
        time.sleep(0.05)


def race_past_a_pause(
    pauses: Path, monkeypatch, first: Callable[[], object], second: Callable[[], object]
) -> list[BaseException]:
    """``first`` in a thread, stopped at its first ``before_commit`` pause point; then
    ``second`` in another thread, never stopped; ``first`` resumed once ``second`` finished or
    has waited 5 s (on a lock ``first`` holds). What either raised."""
    pauses.mkdir(exist_ok=True)
    monkeypatch.setenv("BACKFILL_LAKE_PAUSE_DIR", str(pauses))
    monkeypatch.setenv("BACKFILL_LAKE_PAUSE_AT", "before_commit")
    forget_visits()
    (pauses / "before_commit.2.resume").touch()  # the second writer's visit
    errors: list[BaseException] = []

    def run(body: Callable[[], object]) -> None:
        try:
            body()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(body,)) for body in (first, second)]
    threads[0].start()
    try:
        wait_for(pauses / "before_commit.1.reached", [], 300)
        threads[1].start()
        threads[1].join(timeout=5)
    finally:
        (pauses / "before_commit.1.resume").touch()
        for thread in threads:
            if thread.ident is not None:  # started
                thread.join(timeout=300)
        monkeypatch.delenv("BACKFILL_LAKE_PAUSE_DIR")
    return errors


THINGS = "staging/things"  # the table the write-audit-publish and maintenance tests write


def commit(run_id: str) -> CommitInfo:
    return CommitInfo(run_id=run_id, code_version="abc123")


def content(lake, table: str = THINGS) -> list[tuple]:
    df, _ = lake.read_table(table)
    return sorted(tuple(r) for r in df.collect())


def log_files(lake, table: str = THINGS) -> set[str]:
    """The data files the Delta log lists now, read by delta-rs directly."""
    root = lake.table_location(table)
    uris = DeltaTable(root, storage_options=lake.storage.delta_options()).file_uris()
    return {os.path.relpath(u.removeprefix("file://"), root) for u in uris}


def overwrite(lake, location: str, text: str) -> None:
    """Replace the file at ``location`` with ``text`` by hand (a disk fault, a hand edit)."""
    if lake.storage.is_local:
        with open(location, "w", encoding="utf-8") as out:
            out.write(text)
    else:
        lake.storage.put(location, text.encode("utf-8"), create=False)


def stored(lake, table: str, path: str) -> bool:
    """Whether the file ``path`` (relative to ``table``) is in the lake's storage, local or S3."""
    return lake.storage.exists(os.path.join(lake.table_location(table), path))


def age(path: Path, days: float) -> None:
    """Set the last change of the file at ``path`` to ``days`` ago."""
    stamp = time.time() - days * 24 * 3600
    os.utime(path, (stamp, stamp))


def killed_writer(path: Path) -> str:
    """Run ``write_atomically(path, ...)`` in a child killed between its write and its rename,
    as a kill -9 would: the name of the temporary file it leaves beside ``path``."""
    before = set(os.listdir(path.parent)) if path.parent.exists() else set()
    kill = (
        "import os, sys; from backfill_assets.lake import durable; "
        "os.replace = os.link = lambda *a: os._exit(9); "
        "durable.write_atomically(sys.argv[1], 'half', 'manifest')"
    )
    done = subprocess.run([sys.executable, "-c", kill, str(path)], check=False)
    assert done.returncode == 9
    (left,) = set(os.listdir(path.parent)) - before
    return left
