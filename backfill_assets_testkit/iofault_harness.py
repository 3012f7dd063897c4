"""The I/O-fault harness: every lake path failed at each of its I/O operations in turn.

For a path (stage, publish, discard, ``keep_staged``, expiry, vacuum, compaction) and a point N
from 1 to the path's last I/O operation (``testing/iofault.py`` counts them), on a fresh copy
of the path's starting lake:

1. inject the fault at operation N: an ``OSError`` in this process (``error``), or a SIGKILL of a
   child process running the path (``kill``);
2. check the lake as a reader finds it: the table reads, and each partition holds its content
   from before the path or from after it, never a mix and never nothing;
3. recover as an operator would: run the path again, then ``Lake.maintain`` (which settles every
   open staged version's intent), and check again: every file the log references exists, every
   open manifest agrees with the log and has no intent left, and the end state equals the one
   computed here in plain Python (``Path.after``);
4. close every staged version and vacuum with no retention: no data file is left that the
   table's version does not reference.

``bench/iofault.py`` sweeps every point of every path; ``test_iofault.py`` a sample. The lakes
live under ``work``: a local folder, or an ``s3://bucket/prefix`` whose templates are copied
object by object (``copy_tree``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from deltalake import DeltaTable

import backfill_assets.lake.manifests as manifests
from backfill_assets.lake import CommitInfo, Lake, LakeError
from backfill_assets.lake.log import commit_metadata, referenced_files
from backfill_assets.storage.stores import S3_SCHEME, S3Storage, split, storage_for
from backfill_assets.testing.iofault import arm

TABLE = "staging/things"
COLUMN = "d"
SCHEMA = "d date, id bigint, tag string"
D1, D2, D3 = dt.date(2024, 1, 1), dt.date(2024, 1, 2), dt.date(2024, 1, 3)
DAYS = (D1, D2, D3)
OLD = [(D1, 1, "old"), (D2, 2, "old"), (D3, 3, "old")]
NEW = [(D1, 10, "new"), (D2, 20, "new")]
KEPT_BEFORE = [(D1, 9, "kept")]
STAGE_ID = "s"
INTO = "fix"
REPO = Path(__file__).resolve().parents[1]

Rows = list[tuple]


def commit(run_id: str) -> CommitInfo:
    return CommitInfo(run_id=run_id, code_version="abc123")


def by_day(rows: Rows) -> dict[dt.date, Rows]:
    found: dict[dt.date, Rows] = {d: [] for d in DAYS}
    for row in rows:
        found[row[0]].append(tuple(row))
    return {d: sorted(r) for d, r in found.items()}


def overlay(base: Rows, new: Rows, days: list[dt.date]) -> Rows:
    """``base`` with the rows of ``days`` replaced by ``new``'s: what a publish of them leaves."""
    return sorted([r for r in base if r[0] not in days] + [r for r in new if r[0] in days])


@dataclasses.dataclass(frozen=True)
class LakePath:
    """One path under test: how its starting lake is built, the path itself, what an operator
    runs again after a failure, and the table's content and open staged versions at the end."""

    name: str
    setup: Callable[[Lake], None]
    run: Callable[[Lake], object]
    rerun: Callable[[Lake], object]
    after: Rows
    staged_after: dict[str, Rows]  # open staged version id -> its rows, at the end
    needs_spark: bool = False  # the path itself writes through Spark (its child starts one)


def _frame(lake: Lake, rows: Rows):
    return lake.spark.createDataFrame(rows, SCHEMA)


def _write_old(lake: Lake) -> None:
    lake.replace_partitions(TABLE, _frame(lake, OLD), COLUMN, DAYS, commit("old"))


def _stage_new(lake: Lake, spread: int = 1) -> None:
    lake.staging.stage(TABLE, _frame(lake, NEW), COLUMN, [D1, D2], commit("new"), STAGE_ID, spread)


def _open(lake: Lake, stage_id: str = STAGE_ID) -> manifests.StagedVersion:
    staged = lake.staging.version(TABLE, stage_id)
    if staged is None:
        raise LakeError(f"staged version {stage_id} is not open")
    return staged


def _publish_rest(days: list[dt.date]) -> Callable[[Lake], object]:
    """Publish what of ``days`` the staged version has not published yet (as a step re-run does:
    the manifest, settled, says what landed)."""

    def run(lake: Lake) -> object:
        staged = _open(lake)
        rest = [d for d in days if d not in staged.published]
        return lake.staging.publish(staged, rest) if rest else None

    return run


def _restage(lake: Lake) -> object:
    """A failed stage's re-run: its cleanup closes whatever it left open, then it stages anew."""
    left = lake.staging.version(TABLE, STAGE_ID)
    if left is not None:
        lake.staging.discard(left)
    _stage_new(lake)
    return None


def _setup_staged(lake: Lake) -> None:
    _write_old(lake)
    _stage_new(lake)


def _setup_half_published(lake: Lake) -> None:
    _setup_staged(lake)
    lake.staging.publish(_open(lake), [D1])


def _setup_keep(lake: Lake) -> None:
    _write_old(lake)
    earlier = lake.staging.stage(
        TABLE, _frame(lake, KEPT_BEFORE), COLUMN, [D1], commit("k"), "earlier"
    )
    lake.staging.keep(earlier, [D1], into=INTO)
    lake.staging.discard(earlier)
    _stage_new(lake)


def _setup_rewritten(lake: Lake) -> None:
    """Two versions, the first's files no longer referenced: something for vacuum to delete."""
    _write_old(lake)
    lake.replace_partitions(TABLE, _frame(lake, OLD), COLUMN, DAYS, commit("again"))


MANY = [(d, i, "many") for d in DAYS for i in range(40)]


def _setup_small_files(lake: Lake) -> None:
    """Each partition in several files: something for compaction to join."""
    staged = lake.staging.stage(
        TABLE, _frame(lake, MANY), COLUMN, DAYS, commit("many"), "many", spread=3
    )
    lake.staging.publish(staged)
    lake.staging.discard(staged)


def _keep(lake: Lake) -> object:
    return lake.staging.keep(_open(lake), [D1], into=INTO)


def _discard(lake: Lake) -> object:
    staged = lake.staging.version(TABLE, STAGE_ID)
    return 0 if staged is None else lake.staging.discard(staged)


PATHS = [
    LakePath("stage", _write_old, _stage_new, _restage, OLD, {STAGE_ID: NEW}, needs_spark=True),
    LakePath(
        "publish_all",
        _setup_staged,
        _publish_rest([D1, D2]),
        _publish_rest([D1, D2]),
        overlay(OLD, NEW, [D1, D2]),
        {STAGE_ID: NEW},
    ),
    LakePath(
        "publish_some",
        _setup_staged,
        _publish_rest([D1]),
        _publish_rest([D1]),
        overlay(OLD, NEW, [D1]),
        {STAGE_ID: NEW},
    ),
    LakePath("discard", _setup_half_published, _discard, _discard, overlay(OLD, NEW, [D1]), {}),
    LakePath(
        "keep_staged",
        _setup_keep,
        _keep,
        _keep,
        OLD,
        {STAGE_ID: [r for r in NEW if r[0] != D1], INTO: [r for r in NEW if r[0] == D1]},
    ),
    LakePath(
        "expire_staged",
        _setup_half_published,
        lambda lake: lake.staging.expire(TABLE, 0),
        lambda lake: lake.staging.expire(TABLE, 0),
        overlay(OLD, NEW, [D1]),
        {},
    ),
    LakePath(
        "vacuum",
        _setup_rewritten,
        lambda lake: lake.vacuum(TABLE, 0),
        lambda lake: lake.vacuum(TABLE, 0),
        OLD,
        {},
    ),
    LakePath(
        "compact",
        _setup_small_files,
        lambda lake: lake.compact(TABLE, COLUMN, commit("compact")),
        lambda lake: lake.compact(TABLE, COLUMN, commit("compact")),
        sorted(MANY),
        {},
    ),
]
BY_NAME = {p.name: p for p in PATHS}


# Reading the lake as a reader does (delta-rs, no Spark) --------------------------------------


def _table(root: str) -> DeltaTable:
    return DeltaTable(f"{root}/{TABLE}", storage_options=storage_for(root).delta_options())


def table_rows(root: str) -> Rows:
    """Every row of the table, read through its log: raises when a referenced file is gone."""
    data = _table(root).to_pyarrow_table().to_pylist()
    return sorted((r[COLUMN], r["id"], r["tag"]) for r in data)


def staged_rows(root: str, staged: manifests.StagedVersion) -> Rows:
    import pyarrow.parquet as pq

    filesystem, scheme = storage_for(root).arrow_filesystem()
    rows = []
    for f in staged.files:
        where = f"{root}/{TABLE}/{f.path}".removeprefix(scheme)
        for r in pq.read_table(where, filesystem=filesystem).to_pylist():
            rows.append((f.partition, r["id"], r["tag"]))
    return sorted(rows)


def _all_files(folder: str) -> list[str]:
    """Every file under ``folder``, recursively, relative to it."""
    storage = storage_for(folder)
    if isinstance(storage, S3Storage):
        bucket, prefix = split(folder)
        pages = storage.client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=prefix + "/"
        )
        return [o["Key"][len(prefix) + 1 :] for page in pages for o in page.get("Contents", [])]
    return [
        os.path.relpath(os.path.join(d, n), folder)
        for d, _, names in os.walk(folder)
        for n in names
    ]


def data_files(root: str) -> set[str]:
    return {
        os.path.normpath(p)
        for p in _all_files(f"{root}/{TABLE}")
        if not p.startswith(("_delta_log/", "_staged/")) and p.endswith(".parquet")
    }


def current_files(root: str) -> set[str]:
    table = f"{root}/{TABLE}"
    return {
        os.path.normpath(u.removeprefix("file://").removeprefix(table + "/"))
        for u in _table(root).file_uris()
    }


def stored(root: str, path: str) -> bool:
    """Whether the table's file ``path`` is in storage."""
    return storage_for(root).exists(f"{root}/{TABLE}/{path}")


def remove_tree(root: str) -> None:
    storage = storage_for(root)
    if not isinstance(storage, S3Storage):
        shutil.rmtree(root, ignore_errors=True)
        return
    for name in _all_files(root):
        storage.delete(f"{root}/{name}")


def copy_tree(source: str, target: str) -> None:
    """A fresh copy of the lake at ``source`` at ``target`` (on S3, object by object)."""
    remove_tree(target)
    storage = storage_for(source)
    if not isinstance(storage, S3Storage):
        shutil.copytree(source, target)
        return
    for name in _all_files(source):
        bucket, key = split(f"{source}/{name}")
        target_bucket, target_key = split(f"{target}/{name}")
        if key.endswith("/"):  # a folder's marker, as Hadoop's s3a makes them: no object to copy
            storage.client.put_object(Bucket=target_bucket, Key=target_key, Body=b"")
            continue
        storage.client.copy_object(
            Bucket=target_bucket, Key=target_key, CopySource={"Bucket": bucket, "Key": key}
        )


def place(work: str | Path, name: str) -> str:
    """The location of the lake ``name`` under ``work`` (a folder or an s3:// prefix)."""
    work = os.fspath(work)
    return f"{work}/{name}" if work.startswith(S3_SCHEME) else os.path.join(work, name)


# One point -----------------------------------------------------------------------------------


@dataclasses.dataclass
class Tally:
    paths: set[str] = dataclasses.field(default_factory=set)
    points: int = 0
    faults: Counter = dataclasses.field(default_factory=Counter)  # "error" / "kill"
    problems: Counter = dataclasses.field(default_factory=Counter)
    details: list[str] = dataclasses.field(default_factory=list)

    def flag(self, kind: str, where: str, detail: str) -> None:
        self.problems[kind] += 1
        self.details.append(f"{kind} at {where}: {detail}")

    def line(self) -> str:
        p = self.problems
        return (
            f"IOFAULT paths={len(self.paths)} points={self.points} "
            f"crashes={self.faults['kill']} errors={self.faults['error']} "
            f"unreadable={p['unreadable']} torn={p['torn']} lost_files={p['lost_files']} "
            f"orphans={p['orphans']} record_mismatch={p['record_mismatch']} "
            f"unconverged={p['unconverged']}"
        )


def _check_readable(root: str, before: Rows, after: Rows, tally: Tally, where: str) -> None:
    try:
        rows = by_day(table_rows(root))
    except Exception as exc:
        tally.flag("unreadable", where, f"{type(exc).__name__}: {exc}")
        return
    old, new = by_day(before), by_day(after)
    for day in DAYS:
        if rows[day] not in (old[day], new[day]):
            tally.flag("torn", where, f"{day}: {rows[day]}")


def _check_settled(lake: Lake, root: str, path: LakePath, tally: Tally, where: str) -> None:
    try:
        rows = table_rows(root)
    except Exception as exc:
        tally.flag("lost_files", where, f"{type(exc).__name__}: {exc}")
        return
    if rows != path.after:
        tally.flag("unconverged", where, f"table {rows} != {path.after}")
    live = current_files(root)
    missing = [f for f in live if not stored(root, f)]
    if missing:
        tally.flag("lost_files", where, f"referenced files gone: {missing}")
    table_dir = f"{root}/{TABLE}"
    opened = {s.id: s for s in manifests.open_versions(table_dir)}
    if {k for k in opened} != set(path.staged_after):
        tally.flag("unconverged", where, f"open staged versions {sorted(opened)}")
    for sid, staged in opened.items():
        if staged.publishing is not None or staged.moving is not None:
            tally.flag("record_mismatch", where, f"{sid} still records an intent")
        logged = referenced_files(table_dir, staged.base_version, lake.engine.snapshot_files)
        for day, version in staged.published.items():
            # The commit the manifest names wrote that day (the staged files themselves, or a
            # copy of their rows on an engine that copies).
            if day.isoformat() not in commit_metadata(table_dir, version).get("partitions", []):
                tally.flag("record_mismatch", where, f"{sid}: {day} not in version {version}")
        for f in staged.files:
            if not stored(root, f.path):
                tally.flag("lost_files", where, f"{sid}'s staged file {f.path} is gone")
            elif f.partition not in staged.published and os.path.normpath(f.path) in logged:
                tally.flag("record_mismatch", where, f"{sid}: {f.partition} is in the log")
        if sid in path.staged_after and staged_rows(root, staged) != sorted(path.staged_after[sid]):
            tally.flag("unconverged", where, f"{sid} holds {staged_rows(root, staged)}")


def _check_no_orphans(lake: Lake, root: str, tally: Tally, where: str) -> None:
    for staged in lake.staging.versions(TABLE):
        lake.staging.discard(staged)
    lake.vacuum(TABLE, 0)
    left = data_files(root) - current_files(root)
    if left:
        tally.flag("orphans", where, f"{sorted(left)}")


def run_point(
    make_lake: Callable[[str], Lake],
    template: str,
    work: str | Path,
    path: LakePath,
    mode: str,
    n: int,
    tally: Tally,
    engine: str,
) -> None:
    """Fail ``path`` at I/O operation ``n`` on a copy of ``template``, recover, check."""
    where = f"{engine}/{path.name}/{mode}:{n}"
    root = place(work, f"{path.name}-{mode}-{n}")
    copy_tree(template, root)
    before = table_rows(root)
    lake = make_lake(root)
    if mode == "error":
        try:
            with arm("error", n):
                path.run(lake)
        except OSError:
            pass
        except LakeError:
            pass  # the injected error surfaced as the lake's own, clear error
    else:
        kill_in_child(root, path.name, engine, n)
    tally.paths.add(path.name)
    tally.points += 1
    tally.faults[mode] += 1
    _check_readable(root, before, path.after, tally, where)
    try:
        path.rerun(lake)
        lake.maintain(TABLE, 24)
    except Exception as exc:
        tally.flag("unconverged", where, f"recovery raised {type(exc).__name__}: {exc}")
        return
    _check_settled(lake, root, path, tally, where)
    _check_no_orphans(lake, root, tally, where)


def operations(
    make_lake: Callable[[str], Lake], template: str, work: str | Path, path: LakePath
) -> int:
    """How many I/O operations ``path`` makes from its starting lake."""
    root = place(work, f"{path.name}-count")
    copy_tree(template, root)
    lake = make_lake(root)  # opened first: opening a lake on S3 checks it, outside the count
    with arm("count") as plan:
        path.run(lake)
    remove_tree(root)
    return plan.done


def build_template(make_lake: Callable[[str], Lake], work: str | Path, path: LakePath) -> str:
    template = place(work, f"{path.name}-template")
    remove_tree(template)
    path.setup(make_lake(template))
    return template


def child_needs_spark(path: LakePath, engine: str) -> bool:
    """Whether a child running ``path`` on ``engine`` starts a Spark session of its own:
    delta-spark's lakes, and the paths that write data through Spark."""
    return engine != "delta-rs" or path.needs_spark


def run_child(
    module: str, args: list[str], plan: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``python -m module args`` from the repository in a child process whose I/O seam follows
    ``plan`` (``env``: the child's environment, by default this process's)."""
    env = dict(os.environ if env is None else env)
    env["BACKFILL_IOFAULT"] = plan
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def kill_in_child(root: str, path_name: str, engine: str, n: int) -> None:
    """Run ``path_name`` on the lake at ``root`` in a child process the seam SIGKILLs at
    operation ``n``; the child starts Spark only when ``child_needs_spark``."""
    args = [root, path_name, engine]
    done = run_child("backfill_assets_testkit.iofault_harness", args, f"kill:{n}")
    if done.returncode not in (-9, 0):
        raise AssertionError(f"child of {path_name} at {n} failed: {done.stderr[-2000:]}")


def _child(root: str, path_name: str, engine: str) -> None:
    path = BY_NAME[path_name]
    session = None
    if child_needs_spark(path, engine):
        from backfill_assets.spark.session import build_session, spark_config

        conf = spark_config(master="local[1]", shuffle_partitions=2, lake_engine=engine)
        session = build_session(conf)
        session.sparkContext.setLogLevel("ERROR")
    path.run(Lake(root, session, engine=engine))


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2], sys.argv[3])
    sys.stdout.flush()
    os._exit(0)  # deltalake readers can abort the interpreter at exit (delta-rs#2184)
