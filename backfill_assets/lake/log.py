"""Which commit last changed each partition, read from the Delta log's commit files.

Commit files (``_delta_log/<version>.json``) are the protocol's stable, engine
neutral record of every add and remove with its partition values, so this
works for commits made by any writer, not only by this layer. The log is read through the
lake's storage (``storage/stores.py``): a local folder or an S3 prefix.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from backfill_assets.lake.commit import decode_metadata
from backfill_assets.lake.errors import LakeError, TornCommit
from backfill_assets.storage.stores import storage_for

_COMMIT_FILE = re.compile(r"(\d{20})\.json")
# a checkpoint of any kind: classic, multi-part or V2 (``<version>.checkpoint.<uuid>.json``)
_ANY_CHECKPOINT = re.compile(r"(\d{20})\.checkpoint(?:\.[^/]+)?\.(?:parquet|json)")
_PHYSICAL_NAME = "delta.columnMapping.physicalName"


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
    key = _PartitionKey(table_dir, column)
    found: dict[str, int] = {}
    for version in versions:
        missing = partitions - found.keys()
        if not missing:
            break
        for value in _touched(os.path.join(log_dir, f"{version:020d}.json"), key) & missing:
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
    key = _PartitionKey(table_dir, column)
    touched: set[str] = set()
    for v in newer:
        touched |= _touched(os.path.join(log_dir, f"{v:020d}.json"), key) & partitions
    return touched


class _PartitionKey:
    """Reads one column's value from the log's ``partitionValues``, which are keyed by the
    column's physical name: under column mapping (``delta.columnMapping.mode`` name or id) the
    one the table's schema gives it in ``delta.columnMapping.physicalName``, else its name.

    The schema is read once, and only when a partitionValues lacks the name itself: a table
    without column mapping, or one upgraded to it (whose old columns keep their names as
    physical names), costs no read of its metaData."""

    def __init__(self, table_dir: str, column: str) -> None:
        self.table_dir = table_dir
        self.column = column
        self._physical: str | None = None

    def value(self, partition_values: dict[str, str | None] | None) -> str | None:
        if not partition_values:
            return None
        if self.column in partition_values:
            return partition_values[self.column]
        if self._physical is None:
            self._physical = physical_name(newest_metadata(self.table_dir), self.column)
        return partition_values.get(self._physical)


def physical_name(metadata: dict[str, Any] | None, column: str) -> str:
    """The key of ``column``'s values in the partitionValues of a table with ``metadata`` (a
    metaData action): its physical name under column mapping, else ``column`` itself."""
    if not metadata or "schemaString" not in metadata:
        return column
    for field in json.loads(metadata["schemaString"]).get("fields", []):
        if field.get("name") == column:
            return (field.get("metadata") or {}).get(_PHYSICAL_NAME, column)
    return column


def newest_metadata(table_dir: str) -> dict[str, Any] | None:
    """The table's newest metaData action: from the newest commit file that has one, else from
    the newest checkpoint at or before them (None: no log, or none found in what is left)."""
    log_dir = os.path.join(table_dir, "_delta_log")
    for _attempt in range(3):
        names = _names(log_dir)
        checkpoints = {
            int(m.group(1)): name for name in names if (m := _ANY_CHECKPOINT.fullmatch(name))
        }
        floor = max(checkpoints, default=-1)
        commits = sorted(
            (
                v
                for n in names
                if (m := _COMMIT_FILE.fullmatch(n)) and (v := int(m.group(1))) > floor
            ),
            reverse=True,
        )
        try:
            for version in commits:
                found = _json_metadata(os.path.join(log_dir, f"{version:020d}.json"))
                if found is not None:
                    return found
            for name in names:
                if (m := _ANY_CHECKPOINT.fullmatch(name)) and int(m.group(1)) == floor:
                    found = _checkpoint_metadata(os.path.join(log_dir, name))
                    if found is not None:
                        return found
            return None
        except FileNotFoundError:
            continue  # cleaned up meanwhile: a newer checkpoint holds it, list again
    raise OSError(f"{log_dir}: the log kept changing while it was read; try again")


def _touched(commit_file: str, key: _PartitionKey) -> set[str]:
    touched: set[str] = set()
    try:
        for line in _lines(commit_file):
            action = json.loads(line)
            for kind in ("add", "remove"):
                if kind in action and action[kind].get("dataChange", True):
                    value = key.value(action[kind].get("partitionValues"))
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


def find_write(
    table_dir: str,
    write_id: str,
    after: int | None,
    transaction_version: Callable[[str, str], int | None],
) -> int | None:
    """``commit_of_write``, and once log cleanup deleted that commit file, the version the
    write's Delta transaction id records (``commit.txn_version``; ``transaction_version`` is the
    engine's, which reads the table's snapshot: its checkpoint keeps the id). None: the write
    never landed."""
    found = commit_of_write(table_dir, write_id, after)
    if found is not None:
        return found
    recorded = transaction_version(table_dir, write_id)
    if recorded is None:
        return None
    return recorded if after is None else max(recorded, after + 1)


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
    """The newest version with a commit file, by listing the log (None: no table yet); on local
    disk TornCommit when that file is torn (``torn_commit``)."""
    log_dir = os.path.join(table_dir, "_delta_log")
    newest = max(
        (int(m.group(1)) for name in _names(log_dir) if (m := _COMMIT_FILE.fullmatch(name))),
        default=None,
    )
    if newest is not None and storage_for(log_dir).is_local:
        _check_whole(log_dir, newest, whole=False)
    return newest


def torn_commit(table_dir: str, whole: bool = False) -> None:
    """TornCommit when the newest commit file of the table at ``table_dir`` (local disk) is empty
    or cut short: what a power loss can leave of a commit written without a sync. No Delta
    writer leaves one while it runs (each writes a temporary file and renames it), so it is a
    commit that never wholly reached the disk. The log stays authoritative: nothing is repaired
    here; the error names the file and what to do. ``whole``: parse every line, not only look
    at the file's end."""
    log_dir = os.path.join(table_dir, "_delta_log")
    newest = max(
        (int(m.group(1)) for name in _names(log_dir) if (m := _COMMIT_FILE.fullmatch(name))),
        default=None,
    )
    if newest is not None:
        _check_whole(log_dir, newest, whole)


_TAIL_BYTES = 4096


def _check_whole(log_dir: str, version: int, whole: bool) -> None:
    path = os.path.join(log_dir, f"{version:020d}.json")
    try:
        with open(path, "rb") as commit_file:
            if not whole:
                commit_file.seek(max(0, commit_file.seek(0, os.SEEK_END) - _TAIL_BYTES))
            data = commit_file.read()
    except FileNotFoundError:
        return  # cleaned up or moved aside meanwhile
    body = data.rstrip(b"\n")
    torn = not body or b"\0" in data or not body.endswith(b"}")
    if whole and not torn:
        try:
            for line in body.split(b"\n"):
                json.loads(line)
        except ValueError:
            torn = True
    if not torn:
        return
    state = "empty" if not body else "cut short"
    after = (
        "the table then has no commit: write it again"
        if version == 0
        else f"the table is then at version {version - 1}, as its last whole commit left it; "
        "run the write that was interrupted again"
    )
    raise TornCommit(
        f"{path} is torn ({state}): the commit of version {version} never wholly reached the "
        "disk (a crash or power loss while it was written), and no reader can open the table "
        f"past it. If no process is writing to the table, set it aside: `mv {path} "
        f"{path}.torn`; {after}"
    )


def referenced_files(
    table_dir: str, since: int | None, snapshot_files: Callable[[str, int], set[str]]
) -> set[str]:
    """The data files (normalised paths relative to the table) that an add action of a version
    after ``since`` (any when None) names, or more.

    For a file written after version ``since`` (a staged file, since its manifest's base) this
    is every version that can reference it: the current one and every one within the log's
    retention. The commit files say which files each version added; where log cleanup deleted
    some, the snapshot of the oldest version still readable after them (``snapshot_files``: the
    engine's, which reads any checkpoint Delta writes, V2 and its sidecars included) stands in
    for them.
    Only vacuum, judging by the log, may delete such a file; the staged-file delete paths ask
    this first."""
    floor = -1 if since is None else since
    log_dir = os.path.join(table_dir, "_delta_log")
    for _attempt in range(3):
        names = _names(log_dir)
        try:
            return _referenced(table_dir, log_dir, names, floor, snapshot_files)
        except FileNotFoundError:
            continue  # a commit file cleaned up meanwhile: its checkpoint is newer, list again
    raise OSError(f"{log_dir}: the log kept changing while it was read; try again")


def _referenced(
    table_dir: str,
    log_dir: str,
    names: list[str],
    floor: int,
    snapshot_files: Callable[[str, int], set[str]],
) -> set[str]:
    commits = {int(m.group(1)) for n in names if (m := _COMMIT_FILE.fullmatch(n))}
    checkpoints = {int(m.group(1)) for n in names if (m := _ANY_CHECKPOINT.fullmatch(n))}
    paths: set[str] = set()
    for version in sorted(v for v in commits if v > floor):
        for line in _lines(os.path.join(log_dir, f"{version:020d}.json")):
            add = json.loads(line).get("add")
            if add is not None:
                paths.add(relative_path(table_dir, add["path"]))
    latest = max(commits | checkpoints, default=floor)
    gone = [v for v in range(floor + 1, latest + 1) if v not in commits]
    if gone:
        # the oldest version a reader can still open: a commit file after a checkpoint after
        # the gap (Delta's JVM opens no version whose commit file is gone)
        checkpoint = min((v for v in checkpoints if v >= gone[-1]), default=None)
        oldest = min(
            (v for v in commits if checkpoint is not None and v >= checkpoint), default=None
        )
        if oldest is None:
            raise LakeError(
                f"{log_dir}: versions {gone[0]} to {gone[-1]} have no commit file, and no "
                "checkpoint with a commit after them: the log cannot tell which files it names"
            )
        paths |= snapshot_files(table_dir, oldest)
    return paths


def _metadata_from_checkpoint(action: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's metaData or protocol struct as the commit files spell it: maps (a list of
    pairs in Arrow) as objects, no nulls."""
    document: dict[str, Any] = {}
    for key, value in action.items():
        if value is None:
            continue
        if key in ("configuration", "options") and isinstance(value, list):
            value = dict(value)
        elif isinstance(value, dict):
            value = _metadata_from_checkpoint(value)
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


def _json_metadata(path: str) -> dict[str, Any] | None:
    """The metaData action of a log file in JSON (a commit, a V2 checkpoint), if it has one."""
    for line in _lines(path):
        if '"metaData"' in line and "metaData" in (action := json.loads(line)):
            return action["metaData"]
    return None


def _checkpoint_metadata(path: str) -> dict[str, Any] | None:
    """The metaData action of a checkpoint file (a V2 checkpoint's may be JSON), if it has it."""
    if path.endswith(".json"):
        return _json_metadata(path)
    rows = _checkpoint_table(path, ["metaData"]).to_pylist()
    found = [r["metaData"] for r in rows if r.get("metaData") is not None]
    return _metadata_from_checkpoint(found[0]) if found else None


def _checkpoint_table(path: str, columns: list[str]) -> Any:  # a pyarrow Table
    """Those of ``columns`` a checkpoint file in Parquet has; FileNotFoundError when it is gone."""
    import pyarrow.parquet as pq

    filesystem, scheme = storage_for(path).arrow_filesystem()
    try:
        if filesystem is None:
            file = pq.ParquetFile(path)
        else:
            file = pq.ParquetFile(path.removeprefix(scheme), filesystem=filesystem)
        return file.read(columns=[c for c in columns if c in file.schema_arrow.names])
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        if "not found" in str(exc).lower() or "does not exist" in str(exc).lower():
            raise FileNotFoundError(path) from exc
        raise
