"""Which commit last changed each partition, read from the Delta log's commit files.

Commit files (``_delta_log/<version>.json``) are the protocol's stable, engine
neutral record of every add and remove with its partition values, so this
works for commits made by any writer, not only by this layer. The log is read through the
lake's storage (``storage.py``): a local folder or an S3 prefix.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any
from urllib.parse import unquote

from backfill_assets.lake.commit import decode_metadata
from backfill_assets.lake.storage import storage_for

_COMMIT_FILE = re.compile(r"(\d{20})\.json")
_CHECKPOINT_FILE = re.compile(r"(\d{20})\.checkpoint(?:\.\d+\.\d+)?\.parquet")
_SINGLE_CHECKPOINT = re.compile(r"(\d{20})\.checkpoint\.parquet")


def last_written_versions(table_dir: str, column: str, partitions: set[str]) -> dict[str, int]:
    """Partition text -> newest version whose commit added or removed a file in it.

    Scans commit files newest first and stops once every partition is found. A
    partition last written in a commit whose file was already cleaned up (log
    retention) gets the oldest version still in the log: "at or before".
    """
    log_dir = os.path.join(table_dir, "_delta_log")
    versions = sorted(
        (int(m.group(1)) for name in _names(log_dir) if (m := _COMMIT_FILE.fullmatch(name))),
        reverse=True,
    )
    found: dict[str, int] = {}
    for version in versions:
        missing = partitions - found.keys()
        if not missing:
            break
        for value in _touched(os.path.join(log_dir, f"{version:020d}.json"), column) & missing:
            found[value] = version
    oldest = versions[-1] if versions else 0
    return {value: found.get(value, oldest) for value in partitions}


def touched_after(
    table_dir: str, column: str, version: int | None, partitions: set[str]
) -> set[str]:
    """The partitions of ``partitions`` that a commit after ``version`` (any commit when None)
    added or removed a file in. A commit file already cleaned up counts as touching all of
    them: the answer must never be "unchanged" when it cannot be known."""
    log_dir = os.path.join(table_dir, "_delta_log")
    newer = sorted(
        v
        for name in _names(log_dir)
        if (m := _COMMIT_FILE.fullmatch(name))
        and (v := int(m.group(1))) > (-1 if version is None else version)
    )
    expected_first = 0 if version is None else version + 1
    if newer and newer[0] != expected_first:
        return set(partitions)
    touched: set[str] = set()
    for v in newer:
        touched |= _touched(os.path.join(log_dir, f"{v:020d}.json"), column) & partitions
    return touched


def _touched(commit_file: str, column: str) -> set[str]:
    touched: set[str] = set()
    try:
        for line in _lines(commit_file):
            action = json.loads(line)
            for kind in ("add", "remove"):
                if kind in action and action[kind].get("dataChange", True):
                    value = (action[kind].get("partitionValues") or {}).get(column)
                    if value is not None:
                        touched.add(value)
    except FileNotFoundError:
        # Cleaned up between listing and reading: treated like an expired commit.
        pass
    return touched


def commit_of_write(table_dir: str, write_id: str, after: int | None) -> int | None:
    """The version of the commit after ``after`` (any when None) whose userMetadata carries
    ``write_id``, or None. How a writer whose commit attempt raised tells "my commit landed and
    a post-commit step (checkpoint, log clean-up, hook) failed" from "my commit did not land"."""
    log_dir = os.path.join(table_dir, "_delta_log")
    floor = -1 if after is None else after
    for version in sorted(
        (
            int(m.group(1))
            for name in _names(log_dir)
            if (m := _COMMIT_FILE.fullmatch(name)) and int(m.group(1)) > floor
        ),
        reverse=True,
    ):
        if commit_metadata(table_dir, version).get("write_id") == write_id:
            return version
    return None


def commit_metadata(table_dir: str, version: int) -> dict:
    """The CommitInfo document of commit ``version`` ({} when it has none, or its commit file
    was cleaned up): one commit file read, not the table's history."""
    try:
        for line in _lines(os.path.join(table_dir, "_delta_log", f"{version:020d}.json")):
            info = json.loads(line).get("commitInfo")
            if info is not None:
                return decode_metadata(info.get("userMetadata"))
    except FileNotFoundError:
        pass
    return {}


def commit_file_counts(table_dir: str, version: int) -> tuple[int, int]:
    """(add actions, remove actions) of the commit ``version``."""
    adds = removes = 0
    for line in _lines(os.path.join(table_dir, "_delta_log", f"{version:020d}.json")):
        action = json.loads(line)
        adds += "add" in action
        removes += "remove" in action
    return adds, removes


def commit_added_files(table_dir: str, version: int) -> set[str]:
    """The data files (normalised paths relative to the table) the commit ``version`` added."""
    paths = set()
    for line in _lines(os.path.join(table_dir, "_delta_log", f"{version:020d}.json")):
        add = json.loads(line).get("add")
        if add is not None:
            paths.add(relative_path(table_dir, add["path"]))
    return paths


def newest_commit(table_dir: str) -> int | None:
    """The newest version with a commit file, by listing the log (None: no table yet)."""
    log_dir = os.path.join(table_dir, "_delta_log")
    return max(
        (int(m.group(1)) for name in _names(log_dir) if (m := _COMMIT_FILE.fullmatch(name))),
        default=None,
    )


def referenced_files(table_dir: str, since: int | None) -> set[str]:
    """The data files (normalised paths relative to the table) that an add action of a commit
    after ``since`` (any when None), or of a checkpoint after it, names.

    For a file written after version ``since`` (a staged file, since its manifest's base) this
    is every version that can reference it: the current one and every one within the log's
    retention. Checkpoints stand in for the commit files that log clean-up removed. Only vacuum,
    judging by the log, may delete such a file; the staged-file delete paths ask this first."""
    floor = -1 if since is None else since
    log_dir = os.path.join(table_dir, "_delta_log")
    for _attempt in range(3):
        names = _names(log_dir)
        try:
            return _adds(table_dir, log_dir, names, floor)
        except FileNotFoundError:
            continue  # a commit file cleaned up meanwhile: its checkpoint is newer, list again
    raise OSError(f"{log_dir}: the log kept changing while it was read; try again")


def _adds(table_dir: str, log_dir: str, names: list[str], floor: int) -> set[str]:
    paths: set[str] = set()
    for name in names:
        if (m := _COMMIT_FILE.fullmatch(name)) and int(m.group(1)) > floor:
            for line in _lines(os.path.join(log_dir, name)):
                add = json.loads(line).get("add")
                if add is not None:
                    paths.add(relative_path(table_dir, add["path"]))
        elif (m := _CHECKPOINT_FILE.fullmatch(name)) and int(m.group(1)) > floor:
            adds = _checkpoint_adds(os.path.join(log_dir, name))
            paths |= {
                relative_path(table_dir, a["path"]) for a in adds.to_pylist() if a is not None
            }
    return paths


def files_at(
    table_dir: str, version: int, column: str, partitions: set[str]
) -> list[dict[str, Any]] | None:
    """The add actions (as the log spells them, statistics and all) of the files that
    ``partitions`` (values of ``column``) held at ``version``: the newest single-file
    checkpoint at or before it, then each commit file after it, replayed in order.

    Milliseconds where asking Delta's JVM for a version's files reconstructs its state in Spark
    jobs. None when the log cannot be replayed here (a commit it needs was cleaned up with no
    single-file checkpoint after it, a file with a deletion vector): the caller asks the engine.
    """
    log_dir = os.path.join(table_dir, "_delta_log")
    try:
        names = _names(log_dir)
        commits = {int(m.group(1)) for n in names if (m := _COMMIT_FILE.fullmatch(n))}
        base = max(
            (
                v
                for n in names
                if (m := _SINGLE_CHECKPOINT.fullmatch(n)) and (v := int(m.group(1))) <= version
            ),
            default=-1,
        )
        if any(v not in commits for v in range(base + 1, version + 1)):
            return None
        live: dict[str, dict[str, Any]] = {}
        if base >= 0:
            for add in _checkpoint_adds(os.path.join(log_dir, f"{base:020d}.checkpoint.parquet")):
                if add.is_valid:
                    live_add = _from_checkpoint(add.as_py())
                    live[live_add["path"]] = live_add
        for v in range(base + 1, version + 1):
            for line in _lines(os.path.join(log_dir, f"{v:020d}.json")):
                action = json.loads(line)
                if "add" in action:
                    live[action["add"]["path"]] = action["add"]
                elif "remove" in action:
                    live.pop(action["remove"]["path"], None)
    except FileNotFoundError:
        return None  # cleaned up while it was read
    if any(add.get("deletionVector") for add in live.values()):
        return None
    return [a for a in live.values() if a.get("partitionValues", {}).get(column) in partitions]


# An add action's fields in a commit file (a checkpoint may add parsed copies of some).
_ADD_FIELDS = (
    "path",
    "partitionValues",
    "size",
    "modificationTime",
    "dataChange",
    "stats",
    "tags",
    "deletionVector",
    "baseRowId",
    "defaultRowCommitVersion",
    "clusteringProvider",
)


def _from_checkpoint(add: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's add struct as the commit files spell it: maps as objects, no nulls, no
    parsed copies (``stats_parsed``, ``partitionValues_parsed``)."""
    document = {}
    for key, value in add.items():
        if value is None or key not in _ADD_FIELDS:
            continue
        if key in ("partitionValues", "tags") and isinstance(value, list):
            value = dict(value)
        document[key] = value
    return document


def relative_path(table_dir: str, path: str) -> str:
    """A log path (URL-encoded, relative or an absolute URI) relative to the table directory."""
    path = unquote(path)
    if path.startswith(table_dir + "/"):  # an absolute URI of the table's own storage (S3)
        path = path[len(table_dir) + 1 :]
    elif "://" in path:
        path = path.split("://", 1)[1]
    if os.path.isabs(path):
        path = os.path.relpath(path, table_dir)
    return os.path.normpath(path)


def _names(log_dir: str) -> list[str]:
    """The file names in the log folder ([] when there is none: no table yet)."""
    return storage_for(log_dir).list_names(log_dir)


def _lines(path: str) -> list[str]:
    """The lines of a log file; FileNotFoundError when it is gone (cleaned up)."""
    return storage_for(path).read_text(path).splitlines()


def _checkpoint_adds(path: str) -> Any:  # a pyarrow ChunkedArray of structs
    """The ``add`` column of a checkpoint file; FileNotFoundError when it is gone."""
    import pyarrow.parquet as pq

    filesystem, scheme = storage_for(path).arrow_filesystem()
    if filesystem is None:
        return pq.read_table(path, columns=["add"]).column("add")
    try:
        return pq.read_table(
            path.removeprefix(scheme), columns=["add"], filesystem=filesystem
        ).column("add")
    except OSError as exc:
        if "not found" in str(exc).lower() or "does not exist" in str(exc).lower():
            raise FileNotFoundError(path) from exc
        raise
