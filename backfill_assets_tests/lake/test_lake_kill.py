"""SIGKILL of a writing process at each pause point: the table stays at the old or the new version,
never between; killed between stage and publish, it keeps the old version and an open staged
version."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable

from backfill_assets.lake import CommitInfo, Lake, LakeError
from backfill_assets_testkit.processes import kill_group, log_tail, start, subprocess_env
from backfill_assets_tests.lake.lake_support import wait_for

# The module's writer processes start in its first test's set-up (their waits are 300 s each).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
D1, D2 = dt.date(2024, 1, 1), dt.date(2024, 1, 2)
POINTS = ["before_files", "mid_files", "after_files", "before_commit", "after_commit"]
STAGED = "staged"  # a write-audit-publish writer, killed between stage and publish
# delta-spark writes a write's files and commits them in one JVM call: its after_files and
# before_commit are the same pause task (DeltaSparkEngine._with_pause_points), so the writer
# killed at before_commit covers both there; on delta-rs they are two points apart.
SAME_POINT = {"delta-spark": {"after_files": "before_commit"}}
OLD = [("2024-01-01", 1, "old"), ("2024-01-02", 2, "old")]
NEW = [["2024-01-01", 10, "new"], ["2024-01-01", 11, "new"], ["2024-01-02", 20, "new"]]


@pytest.fixture(scope="module")
def killed(engine, spark, tmp_path_factory):
    """One table per pause point, each at version 0; one writer per table, killed when paused."""
    if not isinstance(engine, str):
        return engine  # delta-spark in the parent: the tests ran in the native child
    base = tmp_path_factory.mktemp("kill")
    lake = Lake(base / "lake", spark, engine=engine)
    old = spark.createDataFrame([(D1, 1, "old"), (D2, 2, "old")], "d date, id bigint, tag string")
    points = [p for p in POINTS if p not in SAME_POINT.get(engine, {})] + [STAGED]
    # Version 0 is written once; the other tables start as byte-for-byte copies of it.
    first = lake.path(f"kill/{points[0]}")
    lake.replace_partitions(f"kill/{points[0]}", old, "d", [D1, D2], CommitInfo("setup", "t"))
    procs = {}
    try:
        for point in points:
            if point != points[0]:
                shutil.copytree(first, lake.path(f"kill/{point}"))
            pause = base / f"pause-{point}"
            pause.mkdir()
            spec = base / f"{point}.json"
            spec.write_text(
                json.dumps(
                    {
                        "root": str(base / "lake"),
                        "results": str(base / f"{point}.out"),
                        "engine": engine,
                        "jobs": [
                            {
                                "table": f"kill/{point}",
                                "partitions": ["2024-01-01", "2024-01-02"],
                                "rows": NEW,
                                "run_id": f"killed-{point}",
                                "wap": point == STAGED,
                            }
                        ],
                    }
                )
            )
            env = subprocess_env(BACKFILL_LAKE_PAUSE_DIR=str(pause), BACKFILL_LAKE_PAUSE_AT=point)
            procs[point] = start(
                [sys.executable, "-m", "backfill_assets_tests.lake.lake_worker", str(spec)],
                env,
                base / f"{point}.log",
            )
        for point, proc in procs.items():
            try:
                wait_for(base / f"pause-{point}" / f"{point}.1.reached", [proc], 300)
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n{log_tail(base / f'{point}.log')}") from None
            kill_group(proc)
            assert proc.returncode == -9
    finally:
        for proc in procs.values():
            kill_group(proc)
    return lake


def points(*names: str) -> list:
    """``names`` as parameters; on an engine where one is the same pause as another
    (``SAME_POINT``) it is not collected."""
    return [
        pytest.param(
            name,
            marks=[
                pytest.mark.same_case_as(engine, same)
                for engine, pairs in SAME_POINT.items()
                for point, same in pairs.items()
                if point == name
            ],
        )
        for name in names
    ]


def table_state(lake, point):
    df, version = lake.read_table(f"kill/{point}")
    return version, sorted((str(r["d"]), r["id"], r["tag"]) for r in df.collect())


def orphans(lake, point) -> set[str]:
    """Parquet files on disk that the Delta snapshot (read by delta-rs directly) does not list."""
    table_dir = Path(lake.path(f"kill/{point}"))
    listed = {
        Path(uri.removeprefix("file://")).resolve()
        for uri in DeltaTable(str(table_dir)).file_uris()
    }
    on_disk = {p.resolve() for p in table_dir.glob("d=*/*.parquet")}
    return {str(p.relative_to(table_dir.resolve())) for p in on_disk - listed}


@pytest.mark.parametrize("point", points(*POINTS))
def test_kill_leaves_old_or_new_version(killed, point):
    lake = killed
    version, rows = table_state(lake, point)
    if point == "after_commit":
        assert (version, rows) == (1, sorted(tuple(r) for r in NEW))
        assert lake.history(f"kill/{point}")[0]["metadata"]["run_id"] == "killed-after_commit"
    else:
        assert (version, rows) == (0, OLD)
        assert [h["version"] for h in lake.history(f"kill/{point}")] == [0]


@pytest.mark.parametrize("point", points("mid_files", "after_files", "before_commit"))
def test_kill_leftover_files_hidden_then_vacuumed_after_retention(killed, point):
    lake = killed
    table = f"kill/{point}"
    left = orphans(lake, point)
    assert left, "a writer killed after writing files should leave some behind"
    assert lake.partitions(table, "d")[0].rows == 1
    assert lake.vacuum(table, retention_hours=1) == []
    for name in left:
        path = lake.path(table) / name
        stamp = path.stat().st_mtime - 3 * 3600
        os.utime(path, (stamp, stamp))
    assert sorted(lake.vacuum(table, retention_hours=1)) == sorted(left)
    assert orphans(lake, point) == set()
    assert table_state(lake, point)[1] == OLD


def test_kill_then_next_writer_succeeds(killed):
    lake = killed
    df = lake.spark.createDataFrame([(D2, 99, "after")], "d date, id bigint, tag string")
    table = "kill/before_commit"
    before = lake.version(table)
    result = lake.replace_partitions(table, df, "d", [D2], CommitInfo("next", "t"))
    assert result.version == before + 1 and result.attempts == 1
    assert table_state(lake, "before_commit")[1] == [
        ("2024-01-01", 1, "old"),
        ("2024-01-02", 99, "after"),
    ]


def test_kill_between_stage_and_publish_leaves_the_table_unchanged(killed):
    lake, table = killed, f"kill/{STAGED}"
    assert table_state(lake, STAGED) == (0, OLD)
    assert [h["version"] for h in lake.history(table)] == [0]
    (open_version,) = lake.staging.versions(table)
    assert open_version.rows_by_partition == {D1: 2, D2: 1}
    assert open_version.base_version == 0 and open_version.published == {}
    staged_files = {f.path for f in open_version.files}
    assert staged_files == orphans(lake, STAGED)  # on disk, in no version
    with pytest.raises(LakeError, match="open staged versions"):
        lake.vacuum(table, retention_hours=0)
    assert lake.staging.expire(table, retention_hours=0) == [open_version.id]
    assert lake.staging.versions(table) == [] and orphans(lake, STAGED) == set()
    assert table_state(lake, STAGED) == (0, OLD)
