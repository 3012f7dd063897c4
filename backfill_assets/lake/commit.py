"""Who wrote a commit and from what: ``CommitInfo`` and its encoding in a Delta commit.

Both engines store the same JSON document in the commit's ``userMetadata``
field (the one field Delta readers everywhere show), so the history of a table
answers "which run wrote this partition, from which input versions" whichever
engine wrote it. Every write also records a unique ``write_id`` there
(``new_write_id``), so that a writer whose commit call raised can look for its
own commit in the log (``log.commit_of_write``) before taking the error for a
lost race, and as the app id of Delta's transaction id (``txn_version``), which
the table's snapshot keeps after log cleanup deleted the commit file.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from backfill_assets.lake.errors import LakeError
from backfill_assets.lake.keys import date_text

METADATA_FORMAT = "backfill_assets.lake/1"


@dataclass(frozen=True)
class CommitInfo:
    """The identity of a write: run id, code version, input versions read, free-form extras."""

    run_id: str
    code_version: str
    input_versions: dict[str, int] = field(default_factory=dict)
    extra: dict[str, str] = field(default_factory=dict)
    # Set by a caller that records its intent before the commit (a journal), so that it can find
    # the commit in the log afterwards (``log.commit_of_write``); None: the engine picks one.
    write_id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.run_id, str) or not self.run_id:
            raise LakeError(f"CommitInfo.run_id must be a non-empty string, got {self.run_id!r}")
        if not isinstance(self.code_version, str) or not self.code_version:
            raise LakeError(
                f"CommitInfo.code_version must be a non-empty string, got {self.code_version!r}"
            )
        for name, version in self.input_versions.items():
            if (
                not isinstance(name, str)
                or isinstance(version, bool)
                or not isinstance(version, int)
            ):
                raise LakeError(
                    f"input_versions must map table names to ints, got {name!r}: {version!r}"
                )
        for key, value in self.extra.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise LakeError(f"extra must map strings to strings, got {key!r}: {value!r}")
        if self.write_id is not None and not (
            isinstance(self.write_id, str)
            and 1 <= len(self.write_id) <= 64
            and all(c.isalnum() or c in "-_:" for c in self.write_id)
        ):
            raise LakeError(
                f"CommitInfo.write_id must be 1-64 letters, digits, '-', '_' or ':', "
                f"got {self.write_id!r}"
            )


@dataclass(frozen=True)
class WriteResult:
    """What one commit did: the version it created and the rows it left in each partition."""

    table: str
    version: int
    rows_by_partition: dict[dt.date, int]
    files_added: int
    attempts: int


@dataclass(frozen=True)
class Compaction:
    """What one compaction did: its commit (None when no partition had small files to join),
    the files it took out of the table and the fewer files holding the same rows it put in."""

    table: str
    version: int | None
    files_removed: int
    files_added: int
    attempts: int


@dataclass(frozen=True)
class PartitionInfo:
    """One non-empty partition: its rows and the version of the commit that last changed it."""

    partition: dt.date
    rows: int
    last_written_version: int


def check_commit(commit: object) -> CommitInfo:
    """``commit``, when it is a CommitInfo; LakeError otherwise."""
    if not isinstance(commit, CommitInfo):
        raise LakeError(f"commit must be a CommitInfo, got {type(commit).__name__}")
    return commit


def new_write_id() -> str:
    return uuid.uuid4().hex


def txn_version(floor: int | None) -> int:
    """The version a write's Delta transaction id (its ``txn`` action, app id the write id)
    records: the table version the write expects to create, the one after ``floor`` (the newest
    it read; 0 for a new table). Exact while nothing commits between the read and the commit,
    which the commit lock every writer of the lake holds ensures; Delta's JVM may rebase a
    commit past another writer's, and then it is a lower bound. Whether the write landed is
    whether the txn is there: a checkpoint keeps it when log cleanup deletes the commit."""
    return 0 if floor is None else floor + 1


def write_id_of(commit: CommitInfo) -> str:
    """The write id a commit records: the caller's (``CommitInfo.write_id``), else a new one."""
    return commit.write_id or new_write_id()


def encode_metadata(
    commit: CommitInfo,
    engine: str,
    operation: str,
    rows_by_partition: dict[dt.date, int],
    restored_from_version: int | None = None,
    write_id: str | None = None,
) -> str:
    """The JSON document stored as the commit's userMetadata."""
    document: dict[str, Any] = {
        "format": METADATA_FORMAT,
        "operation": operation,
        "run_id": commit.run_id,
        "code_version": commit.code_version,
        "partitions": [date_text(day) for day in sorted(rows_by_partition)],
        "rows_by_partition": {
            date_text(day): rows for day, rows in sorted(rows_by_partition.items())
        },
        "input_versions": dict(sorted(commit.input_versions.items())),
        "extra": dict(sorted(commit.extra.items())),
        "engine": engine,
    }
    if restored_from_version is not None:
        document["restored_from_version"] = restored_from_version
    if write_id is not None:
        # Unique per write: finds the write's commit in the log, whether to learn its version
        # or to tell a landed commit whose post-commit step failed from a lost race.
        document["write_id"] = write_id
    return json.dumps(document, sort_keys=True)


def decode_metadata(user_metadata: object) -> dict[str, Any]:
    """The CommitInfo document of a commit, or {} for commits this layer did not write."""
    if not isinstance(user_metadata, str):
        return {}
    try:
        document = json.loads(user_metadata)
    except ValueError:
        return {}
    if not isinstance(document, dict) or document.get("format") != METADATA_FORMAT:
        return {}
    return document
