"""Staged versions: a partition set's files written into a table's storage, not yet in its log.

Write-audit-publish. ``Staging.stage`` has the executors write the files where the table keeps
its data (``<column>=<date>/part-*.parquet``) and records them in a manifest,
``<table>/_staged/<id>.json``. The Delta log does not change, so no reader of the table sees
them. ``Staging.read`` lets the checks read exactly what would be published;
``Staging.publish`` then makes one commit that removes the current files of the chosen partitions
and adds the staged ones (a metadata swap: no data is copied), and ``Staging.discard`` deletes
the files of partitions left unpublished and the manifest.

A manifest is written after its files and before anything can publish them; a writer killed
in between leaves files no manifest or log names, which vacuum removes like any orphan. An
open manifest protects its files: ``Lake.vacuum`` refuses a retention that could delete them,
and ``Staging.expire`` closes the versions older than a retention (a killed step's, an
abandoned correction's) so that maintenance can proceed.

A manifest can lag behind the log (a publish whose commit landed and whose manifest update
failed) or share files with another (a ``Staging.keep`` interrupted between its two saves).
So no path trusts one manifest alone: discard, expiry and ``Staging.keep`` delete through
``delete_files``, which asks the Delta log and the other open manifests right before deleting.

A manifest is compare-and-swap: it counts its saves (``generation``), and a save or a close
names the generation it read, so a writer that read it before another saved or closed it fails
with ManifestChanged instead of writing over it (on S3 a conditional PUT, ``If-Match`` the ETag
of the object whose generation was compared). On local disk every publish, discard, move and
settle also holds the manifest (``locked``: a ``flock`` the kernel drops when its holder dies)
from its last check to its last effect, so a discard can never delete files between a publish's
check that they exist and its commit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import os
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Protocol

import backfill_assets.lake.durable as durable
from backfill_assets import seam
from backfill_assets.lake.commit import CommitInfo
from backfill_assets.lake.errors import BrokenManifest, LakeError, ManifestChanged
from backfill_assets.lake.keys import date_text
from backfill_assets.lake.log import find_write, referenced_files
from backfill_assets.storage.stores import S3Storage, is_s3, storage_for

STAGED_DIR = "_staged"  # Delta readers and vacuum skip folders whose name starts with "_"


@dataclass(frozen=True)
class StagedFile:
    path: str  # relative to the table directory
    size: int
    partition: dt.date
    rows: int
    modification_time: int
    stats: str = ""  # the add action's statistics ("": a manifest older than them)


class EngineLog(Protocol):
    """What staged versions ask of the lake's engine (``engine.Engine`` has it): whether a
    write landed, by its Delta transaction id, and which files a version names."""

    def transaction_version(self, table_dir: str, app_id: str) -> int | None: ...

    def snapshot_files(self, table_dir: str, version: int) -> set[str]: ...


@dataclass(frozen=True)
class StagedVersion:
    """A partition set staged for one table: its files, and the version it was staged against."""

    table: str
    id: str
    column: str
    dates: tuple[dt.date, ...]
    files: tuple[StagedFile, ...]
    schema_json: str
    commit: CommitInfo
    base_version: int | None  # the table's version when staged (None: no table yet)
    created_ms: int
    published: dict[dt.date, int] = field(default_factory=dict)  # partition -> version
    # Intents, recorded before a multi-step operation and cleared when it is done (``settle``):
    # a publish's {"write_id", "dates", "after"}; a keep's {"into", "dates", "replaced"}.
    publishing: dict | None = None
    moving: dict | None = None
    moved: dict[dt.date, str] = field(default_factory=dict)  # partition -> version kept into
    # Counts the manifest's saves: each save names the one it read (``save``).
    generation: int = 0
    closing: bool = False  # a discard claimed it (``remove``): nothing may publish or move it

    @property
    def rows_by_partition(self) -> dict[dt.date, int]:
        rows = dict.fromkeys(self.dates, 0)
        for f in self.files:
            rows[f.partition] += f.rows
        return rows

    def files_of(self, dates: Iterable[dt.date]) -> list[StagedFile]:
        wanted = set(dates)
        return [f for f in self.files if f.partition in wanted]

    def to_json(self) -> str:
        document = asdict(self)
        document["dates"] = [date_text(d) for d in self.dates]
        document["files"] = [{**asdict(f), "partition": date_text(f.partition)} for f in self.files]
        document["published"] = {date_text(d): v for d, v in self.published.items()}
        document["moved"] = {date_text(d): into for d, into in self.moved.items()}
        return json.dumps(document, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> StagedVersion:
        """KeyError, TypeError or ValueError when ``text`` is not a whole manifest."""
        d = json.loads(text)
        return cls(
            table=d["table"],
            id=d["id"],
            column=d["column"],
            dates=tuple(dt.date.fromisoformat(x) for x in d["dates"]),
            files=tuple(
                StagedFile(
                    f["path"],
                    f["size"],
                    dt.date.fromisoformat(f["partition"]),
                    f["rows"],
                    f["modification_time"],
                    f.get("stats", ""),
                )
                for f in d["files"]
            ),
            schema_json=d["schema_json"],
            commit=CommitInfo(**d["commit"]),
            base_version=d["base_version"],
            created_ms=d["created_ms"],
            published={dt.date.fromisoformat(k): v for k, v in d["published"].items()},
            publishing=d.get("publishing"),
            moving=d.get("moving"),
            moved={dt.date.fromisoformat(k): v for k, v in d.get("moved", {}).items()},
            generation=d.get("generation", 0),
            closing=d.get("closing", False),
        )


def new_id() -> str:
    return uuid.uuid4().hex[:16]


def check_id(stage_id: str) -> str:
    if not stage_id or not all(c.isalnum() or c in "-_" for c in stage_id) or len(stage_id) > 64:
        raise LakeError(
            f"a staged version id is 1-64 letters, digits, '-' or '_', got {stage_id!r}"
        )
    return stage_id


def manifest_path(table_dir: str, stage_id: str) -> str:
    return os.path.join(table_dir, STAGED_DIR, f"{check_id(stage_id)}.json")


@contextlib.contextmanager
def locked(table_dir: str, *stage_ids: str) -> Iterator[None]:
    """Hold the manifests of ``stage_ids`` against every other process's publish, discard, move
    and settle while the block runs (on local disk: ``durable.exclusive``, taken in id order so
    that two holders of the same pair never wait on each other; nothing on S3)."""
    with contextlib.ExitStack() as stack:
        for stage_id in sorted(set(stage_ids)):
            stack.enter_context(
                durable.exclusive(manifest_path(table_dir, stage_id), "staged manifest")
            )
        yield


def save(table_dir: str, staged: StagedVersion, create: bool = False) -> StagedVersion:
    """Write the manifest atomically (a reader sees the old one or the new one, never half), as
    a compare-and-swap: only while the one in storage is still the one ``staged`` was made from
    (its ``generation``); ManifestChanged when another writer saved or closed it meanwhile. The
    saved manifest, a generation on. ``create``: only when there is none yet (FileExistsError:
    another writer opened it first); generation 0."""
    path = manifest_path(table_dir, staged.id)
    if create:
        saved = dataclasses.replace(staged, generation=0)
        durable.write_atomically(path, saved.to_json(), "manifest", create=True)
        return saved
    saved = dataclasses.replace(staged, generation=staged.generation + 1)
    with locked(table_dir, staged.id):
        tag = _check_generation(table_dir, staged)
        try:
            durable.write_atomically(path, saved.to_json(), "manifest", if_match=tag)
        except FileExistsError:  # S3's If-Match: replaced or deleted since it was read
            raise _changed(table_dir, staged, "saved or closed") from None
    return saved


def _check_generation(table_dir: str, staged: StagedVersion) -> str | None:
    """ManifestChanged unless the manifest in storage is at ``staged``'s generation; its ETag on
    S3 (the object the next conditional PUT must replace), None on local disk."""
    path = manifest_path(table_dir, staged.id)
    storage = storage_for(path)
    tag = None
    try:
        if isinstance(storage, S3Storage):
            data, tag = storage.read_tagged(path)
            text = data.decode("utf-8")
        else:
            text = storage.read_text(path)
    except FileNotFoundError:
        raise _changed(table_dir, staged, "closed (discarded or expired)") from None
    current = _parse(path, staged.id, text)
    if current.generation != staged.generation:
        raise _changed(table_dir, staged, f"saved again (generation {current.generation})")
    return tag


def _changed(table_dir: str, staged: StagedVersion, how: str) -> ManifestChanged:
    return ManifestChanged(
        f"{staged.table}: staged version {staged.id} was {how} by another writer after this one "
        f"read it (generation {staged.generation}); this one saved nothing"
    )


BROKEN_SUFFIX = ".broken"


def load(table_dir: str, stage_id: str) -> StagedVersion | None:
    """The manifest of ``stage_id``; None when there is none; BrokenManifest when it is corrupt:
    nothing that needs it (a publish, a discard, a vacuum) then goes ahead."""
    path = manifest_path(table_dir, stage_id)
    try:
        text = storage_for(path).read_text(path)
    except FileNotFoundError:
        return None
    return _parse(path, stage_id, text)


def _parse(path: str, stage_id: str, text: str) -> StagedVersion:
    try:
        staged = StagedVersion.from_json(text)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise BrokenManifest(
            f"the staged manifest {path} is corrupt ({type(exc).__name__}: {exc}); nothing was "
            f"published or deleted. Run `backfill-assets repair-manifest {path}` to set it "
            "aside: its files that no table version references are then left to vacuum"
        ) from exc
    if staged.id != stage_id:
        raise BrokenManifest(f"the staged manifest {path} names another id, {staged.id!r}")
    return staged


def set_aside_broken(path: str) -> str:
    """Rename the corrupt manifest at ``path`` to ``<id>.json.broken``, where it protects no
    file (its unpublished files become orphans, which vacuum deletes after the retention; its
    published ones are in the log, which vacuum keeps); the new path. Refused for a manifest
    that reads: that one is closed with ``Staging.discard``."""
    folder = os.path.dirname(path if is_s3(path) else os.path.abspath(path))
    name = os.path.basename(path)
    if os.path.basename(folder) != STAGED_DIR or not name.endswith(".json"):
        raise LakeError(f"{path} is not a staged manifest (<table>/{STAGED_DIR}/<id>.json)")
    try:
        load(os.path.dirname(folder), name[: -len(".json")])
    except BrokenManifest:
        seam.io("manifest.rename")
        storage_for(path).rename(path, path + BROKEN_SUFFIX)
        return path + BROKEN_SUFFIX
    raise LakeError(f"{path} is not corrupt (or is gone): nothing to repair; discard it instead")


def open_versions(table_dir: str) -> list[StagedVersion]:
    folder = os.path.join(table_dir, STAGED_DIR)
    found = []
    for name in sorted(storage_for(folder).list_names(folder)):
        if name.endswith(".json"):
            staged = load(table_dir, name[: -len(".json")])
            if staged is not None:
                found.append(staged)
    return found


def file_ages_ms(table_dir: str, staged: StagedVersion) -> list[int]:
    """The modification times (ms) of a staged version's unpublished files still on disk, as
    vacuum sees them (a published file is in the log: vacuum keeps it while a version needs it)."""
    storage = storage_for(table_dir)
    found = []
    for f in staged.files:
        if f.partition in staged.published:
            continue
        try:
            found.append(storage.modified_ms(os.path.join(table_dir, f.path)))
        except FileNotFoundError:
            pass
    return found


def merge(
    target: StagedVersion | None, source: StagedVersion, dates: Iterable[dt.date], target_id: str
) -> StagedVersion:
    """``target`` (None: a new version ``target_id``) with ``source``'s files of ``dates`` in
    place of its own. Its base is the older of the two: conflicts are checked from there."""
    wanted = set(dates)
    moved = tuple(f for f in source.files if f.partition in wanted)
    if target is None:
        return dataclasses.replace(
            source,
            id=target_id,
            dates=tuple(sorted(wanted)),
            files=moved,
            published={},
            publishing=None,
            moving=None,
            moved={},
        )
    if target.schema_json != source.schema_json:
        raise LakeError(
            f"{source.table}: staged version {source.id} has another schema than {target.id}"
        )
    bases = [b for b in (target.base_version, source.base_version) if b is not None]
    return dataclasses.replace(
        target,
        dates=tuple(sorted(set(target.dates) | wanted)),
        files=tuple(f for f in target.files if f.partition not in wanted) + moved,
        base_version=min(bases) if len(bases) == 2 else None,
        published={d: v for d, v in target.published.items() if d not in wanted},
    )


def delete_files(
    table_dir: str,
    paths: Iterable[str],
    since: int | None,
    engine: EngineLog,
    closing: str | None = None,
) -> int:
    """Delete the staged files at ``paths`` (relative to the table) that nothing needs any more;
    files deleted. The only way a staged file is deleted. Checked right before deleting, a file
    stays when the Delta log names it after version ``since`` (the current version or one within
    the retention references it: a publish whose manifest update failed; only vacuum deletes
    those) or when an open staged version other than ``closing`` owns it (a ``Staging.keep``
    interrupted between its saves)."""
    candidates = [os.path.normpath(p) for p in paths]
    if not candidates:
        return 0
    needed = referenced_files(table_dir, since, engine.snapshot_files)
    for other in open_versions(table_dir):
        if other.id != closing:
            needed |= {os.path.normpath(f.path) for f in other.files}
    deleted = 0
    for path in candidates:
        if path not in needed:
            deleted += durable.remove(os.path.join(table_dir, path), "file")
    return deleted


def remove(table_dir: str, staged: StagedVersion, engine: EngineLog) -> int:
    """Close a staged version: claim the manifest (``closing``, saved as a compare-and-swap:
    ManifestChanged, with nothing deleted, when another writer saved or closed it after
    ``staged`` was read), delete the files of its partitions never published that nothing else
    needs (``delete_files``), then the manifest; files deleted. Once claimed, no publish or move
    takes it, and a close stopped half-way is completed by the next one."""
    if not staged.closing:
        staged = save(table_dir, dataclasses.replace(staged, closing=True))
    deleted = delete_files(
        table_dir,
        [f.path for f in staged.files if f.partition not in staged.published],
        staged.base_version,
        engine,
        closing=staged.id,
    )
    with locked(table_dir, staged.id):
        _check_generation(table_dir, staged)
        durable.remove(manifest_path(table_dir, staged.id), "manifest")
    return deleted


def settle(table_dir: str, staged: StagedVersion, engine: EngineLog) -> StagedVersion:
    """Complete or drop the intent ``staged`` records, so that the manifest agrees with the log
    and with the other manifests again; saved when it changed. The recovery of a publish or a
    ``Staging.keep`` that stopped half-way (an error, a kill): run by every ``Staging`` method that
    opens a staged version, and so by discard, expiry and maintenance."""
    settled = staged
    if settled.publishing is not None:
        intent = settled.publishing
        version = find_write(
            table_dir, intent["write_id"], intent["after"], engine.transaction_version
        )
        published = dict(settled.published)
        if version is not None:  # it landed: record it; else nothing was published
            published.update(dict.fromkeys(_days(intent["dates"]), version))
        settled = dataclasses.replace(settled, published=published, publishing=None)
    if settled.moving is not None:
        settled = finish_move(table_dir, settled, engine)
    if settled is not staged:
        return save(table_dir, settled)
    return settled


def settled(table_dir: str, stage_id: str, engine: EngineLog) -> StagedVersion | None:
    """The manifest of ``stage_id`` (None: there is none), settled while holding it (``locked``):
    an intent is judged only when no publish or move that recorded it is still running here."""
    current = load(table_dir, stage_id)
    if current is None or (current.publishing is None and current.moving is None):
        return current  # nothing to judge: no need to wait for a holder
    with locked(table_dir, stage_id):
        current = load(table_dir, stage_id)
        return None if current is None else settle(table_dir, current, engine)


def finish_move(table_dir: str, source: StagedVersion, engine: EngineLog) -> StagedVersion:
    """``source`` after its ``moving`` intent (``Staging.keep``): when the target's manifest
    holds the moved files, the files the target held for those partitions before are deleted and
    the partitions leave ``source`` (recorded in ``moved``); otherwise the move never happened
    and only the intent goes. Not saved."""
    intent = source.moving
    assert intent is not None
    into, dates = intent["into"], set(_days(intent["dates"]))
    target = load(table_dir, into)
    moved = {f.path for f in source.files_of(dates)}
    if target is None or not dates <= set(target.dates):
        return dataclasses.replace(source, moving=None)
    if {f.path for f in target.files_of(dates)} != moved:
        return dataclasses.replace(source, moving=None)
    delete_files(table_dir, intent["replaced"], intent["since"], engine)
    return dataclasses.replace(
        source,
        dates=tuple(d for d in source.dates if d not in dates),
        files=tuple(f for f in source.files if f.partition not in dates),
        moved={**source.moved, **dict.fromkeys(dates, into)},
        moving=None,
    )


def _days(texts: Iterable[str]) -> list[dt.date]:
    return [dt.date.fromisoformat(t) for t in texts]
