"""The record of each correction: one JSON file per id under ``<lake>/_corrections/``.

What it holds is what ``backfill-assets corrections`` lists and what every later step checks:
who made the correction, when and why; the code version and input versions it was built
from; per table, the days staged and the days its checks held; the production versions the
diff compared with; the versions a cutover replaced and wrote; and, while a cutover, rollback
or discard is under way, its intent (``pending``, see ``journal.py``). Written atomically (a
reader sees the old record or the new one).

A record is compare-and-swap, as a staged manifest is (``lake/manifests.py``): it counts its saves
(``generation``; a record saved before it had one reads as generation 0), and a save names the
generation it read, so a writer holding an older copy (a correction run, a diff, a recovery
that read it before a cutover saved it) fails with RecordChanged, saving nothing, instead of
writing over a newer state. On S3 the save is a conditional PUT, ``If-Match`` the ETag of the
object whose generation was compared; on local disk the comparison and the write are made
holding the record's lock (``durable.exclusive``).

The records live beside the lake's tables, on its storage (``storage/stores.py``): a local folder
or an S3 prefix, so ``lake_root`` is a path or an ``s3://`` location. A new record is created
create-only, so that of two writers opening one correction id exactly one creates it.

A record that cannot be read (cut short, not JSON, keys missing: a disk fault or a hand edit)
is a ``BrokenRecord``: every command on it refuses, naming the file and ``backfill-assets
forget``, which moves it aside (``repair.py``); nothing deletes it.
"""

from __future__ import annotations

import datetime as dt
import getpass
import json
import os
import re
import uuid
from dataclasses import asdict, dataclass, field, fields

from backfill_assets import seam
from backfill_assets.lake import durable
from backfill_assets.settings import RunSettings
from backfill_assets.storage.stores import normalise, storage_for

FOLDER = "_corrections"  # under the lake root; Delta readers skip names starting with "_"
BROKEN_SUFFIX = ".broken"  # a broken record set aside by `forget`: kept, never read again
ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,47}")


class State:
    STAGED = "staged"
    DIFFED = "diffed"
    CUT_OVER = "cut over"
    ROLLED_BACK = "rolled back"
    DISCARDED = "discarded"
    DECOMMISSIONED = "decommissioned"
    CLOSED = (DISCARDED, DECOMMISSIONED)


class CorrectionError(ValueError):
    """A correction command that cannot be carried out; the message says why and what to do."""


class RecordChanged(CorrectionError):
    """A save of a correction's record that another writer saved (or set aside) after this one
    read it: nothing was saved."""


class BrokenRecord(CorrectionError):
    """A correction's record that cannot be read: its file, and the command that repairs it."""

    def __init__(self, correction_id: str, path: str, why: str) -> None:
        self.correction_id, self.path = correction_id, path
        super().__init__(
            f"the record of correction {correction_id}, {path}, is unreadable ({why}): cut "
            "short or edited by hand. Nothing reads or changes it until it is repaired: "
            f"backfill-assets forget {correction_id} checks the lake, closes the correction's "
            f"staged versions and moves the record aside to {os.path.basename(path)}{BROKEN_SUFFIX}"
        )


@dataclass
class TableRecord:
    """One table's part of a correction: the days staged (by run) and the days held."""

    staged: dict[str, str] = field(default_factory=dict)  # day -> run id that staged it
    held: dict[str, list[str]] = field(default_factory=dict)  # day -> failed checks

    def ready_days(self) -> list[dt.date]:
        """Days staged and passing every check: what a cutover may publish."""
        return sorted(dt.date.fromisoformat(d) for d in self.staged if d not in self.held)


@dataclass
class Correction:
    id: str
    reason: str
    created_by: str
    created_at: str  # ISO 8601, UTC
    start: str
    end: str
    code_version: str
    state: str = State.STAGED
    runs: list[dict] = field(default_factory=list)  # run id, code version, input versions, days
    tables: dict[str, TableRecord] = field(default_factory=dict)
    diff: dict = field(default_factory=dict)  # at, versions {table: v}, days, rebuilt
    cutover: dict = field(default_factory=dict)  # at, days, versions_before, versions
    rollback: dict = field(default_factory=dict)  # at, versions
    history: list[dict] = field(default_factory=list)  # at, by, action, detail
    pending: dict = field(default_factory=dict)  # the intent of an operation under way (journal)
    generation: int = 0  # the saves of the record so far: each save names the one it read

    def table(self, path: str) -> TableRecord:
        return self.tables.setdefault(path, TableRecord())

    def note(self, action: str, detail: str = "") -> None:
        self.history.append({"at": now(), "by": user(), "action": action, "detail": detail})

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Correction:
        """The record in ``text``; ValueError (or TypeError) saying what is wrong with it."""
        d = json.loads(text)
        if not isinstance(d, dict):
            raise ValueError(f"a JSON object expected, got {type(d).__name__}")
        missing = sorted(REQUIRED - d.keys())
        if missing:
            raise ValueError(f"keys missing: {', '.join(missing)}")
        unknown = sorted(d.keys() - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"unknown keys: {', '.join(unknown)}")
        for name in ("runs", "history"):
            if not isinstance(d.get(name, []), list):
                raise ValueError(f"{name} is not a list")
        for name in ("tables", "diff", "cutover", "rollback", "pending"):
            if not isinstance(d.get(name, {}), dict):
                raise ValueError(f"{name} is not an object")
        d["tables"] = {k: TableRecord(**v) for k, v in d.get("tables", {}).items()}
        return cls(**d)


REQUIRED = frozenset(
    ("id", "reason", "created_by", "created_at", "start", "end", "code_version", "state", "tables")
)


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def user() -> str:
    try:
        return RunSettings.from_env().user or getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        return "unknown"


def new_id(start: dt.date) -> str:
    return f"c{start:%Y%m%d}-{uuid.uuid4().hex[:6]}"


def check_id(correction_id: str) -> str:
    if not isinstance(correction_id, str) or not ID_PATTERN.fullmatch(correction_id):
        raise CorrectionError(
            f"a correction id is 1-48 letters, digits, '-' or '_', starting with a letter or "
            f"digit; got {correction_id!r}"
        )
    return correction_id


LakeRoot = str | os.PathLike  # a local folder, or an s3://bucket/prefix location


def folder(lake_root: LakeRoot) -> str:
    return os.path.join(normalise(lake_root), FOLDER)


def _path(lake_root: LakeRoot, correction_id: str) -> str:
    return os.path.join(folder(lake_root), f"{check_id(correction_id)}.json")


def record_path(lake_root: LakeRoot, correction_id: str) -> str:
    return _path(lake_root, correction_id)


def report_path(lake_root: LakeRoot, correction_id: str) -> str:
    """Where ``diff`` writes the correction's markdown report, beside its record."""
    return os.path.join(folder(lake_root), f"{check_id(correction_id)}.md")


def load_report(lake_root: LakeRoot, correction_id: str) -> str | None:
    """The report ``diff`` wrote beside the record, or None before the first diff."""
    path = report_path(lake_root, correction_id)
    try:
        return storage_for(path).read_text(path)
    except FileNotFoundError:
        return None


def save_report(path: str, markdown: str) -> None:
    """The report, written whole (on the lake's storage, local or S3, or a path given)."""
    durable.write_atomically(path, markdown, "report")


def load(lake_root: LakeRoot, correction_id: str) -> Correction | None:
    """The record, or None when there is none; BrokenRecord when it cannot be read."""
    path = _path(lake_root, correction_id)
    try:
        text = storage_for(path).read_text(path)
    except FileNotFoundError:
        return None
    return _parse(correction_id, path, text)


def _parse(correction_id: str, path: str, text: str) -> Correction:
    try:
        correction = Correction.from_json(text)
    except (ValueError, TypeError) as exc:  # JSONDecodeError and UnicodeDecodeError included
        raise BrokenRecord(correction_id, path, str(exc) or type(exc).__name__) from None
    if correction.id != correction_id:
        raise BrokenRecord(correction_id, path, f"it names correction {correction.id!r}")
    return correction


def get(lake_root: LakeRoot, correction_id: str) -> Correction:
    found = load(lake_root, correction_id)
    if found is None:
        raise CorrectionError(
            f"no correction {correction_id!r} under {folder(lake_root)} "
            "(backfill-assets corrections lists them)"
        )
    return found


def save(lake_root: LakeRoot, correction: Correction, create: bool = False) -> None:
    """Write the record atomically, as a compare-and-swap: only while the record in storage is
    at ``correction.generation``, the generation this copy was read at; RecordChanged, with
    nothing saved, when another writer saved it or set it aside meanwhile. Once saved,
    ``correction.generation`` is the saved record's, so the same copy can be saved again.
    ``create``: only when there is none yet (FileExistsError: another writer created it first);
    generation 0."""
    path = _path(lake_root, correction.id)
    if create:
        correction.generation = 0
        durable.write_atomically(path, correction.to_json(), "record", create=True)
        return
    read_at = correction.generation
    with durable.exclusive(path, "correction record"):
        try:
            text, tag = durable.read_tagged(path)
        except FileNotFoundError:
            raise _changed(correction, read_at, "set aside (forget) or never created") from None
        found = _parse(correction.id, path, text).generation
        if found != read_at:
            raise _changed(correction, read_at, f"saved again (generation {found})")
        seam.pause("record_compared")
        correction.generation = read_at + 1
        try:
            durable.write_atomically(path, correction.to_json(), "record", if_match=tag)
        except FileExistsError:  # S3's If-Match: replaced or deleted since it was read
            correction.generation = read_at
            raise _changed(correction, read_at, "saved or set aside") from None
        except BaseException:
            correction.generation = read_at
            raise


def _changed(correction: Correction, read_at: int, how: str) -> RecordChanged:
    return RecordChanged(
        f"the record of correction {correction.id} was {how} by another writer after this one "
        f"read it (generation {read_at}); this one saved nothing: run the command again, which "
        "reads the record as it is now"
    )


def scan(lake_root: LakeRoot) -> tuple[list[Correction], list[BrokenRecord]]:
    """Every record: the readable ones, oldest first, and the broken ones."""
    where = folder(lake_root)
    found, broken = [], []
    for name in sorted(storage_for(where).list_names(where)):
        if not name.endswith(".json"):
            continue
        try:
            correction = load(lake_root, check_id(name.removesuffix(".json")))
        except BrokenRecord as exc:
            broken.append(exc)
            continue
        except CorrectionError:
            continue  # not a record's name: nothing of this registry's
        if correction is not None:
            found.append(correction)
    return sorted(found, key=lambda c: c.created_at), broken


def all_corrections(lake_root: LakeRoot) -> list[Correction]:
    """The readable records, oldest first (``scan`` names the broken ones too)."""
    return scan(lake_root)[0]


def set_aside(lake_root: LakeRoot, correction_id: str) -> str:
    """Rename the record to ``<id>.json.broken`` (``.broken.<n>`` when taken): kept, not read."""
    path = _path(lake_root, correction_id)
    storage = storage_for(path)
    with durable.exclusive(path, "correction record"):  # a save waits, then finds it gone
        aside = path + BROKEN_SUFFIX
        n = 1
        while storage.exists(aside):
            aside = f"{path}{BROKEN_SUFFIX}.{n}"
            n += 1
        storage.rename(path, aside)
    return aside


def check_start(lake_root: LakeRoot, correction_id: str, rebuild: bool) -> None:
    """Before a correction's first run, from the form or ``correct``: a new id, or with
    ``rebuild`` an existing one whose days are built again (its held days, once their inputs are
    fixed). An id reused by mistake would otherwise mix two fixes in one correction."""
    check_id(correction_id)
    existing = load(lake_root, correction_id)
    if existing is None and rebuild:
        raise CorrectionError(
            f"there is no correction {correction_id!r} to rebuild: leave rebuild off to start it"
        )
    if existing is not None and not rebuild:
        raise CorrectionError(
            f"correction {correction_id} exists ({existing.state}, {existing.start}..{existing.end}"
            f", {existing.reason!r}): choose another id, or rebuild days of it (the form's "
            "rebuild box, or correct --rebuild)"
        )
    if existing is not None and existing.state in State.CLOSED:
        raise CorrectionError(f"correction {correction_id} is {existing.state}; start a new one")


def check_reason(reason: str) -> str:
    """The reason, stripped; a CorrectionError when there is none."""
    if not reason or not reason.strip():
        raise CorrectionError("a correction needs a reason: the people who read the numbers see it")
    return reason.strip()


def open_correction(
    lake_root: LakeRoot,
    correction_id: str,
    reason: str,
    start: dt.date,
    end: dt.date,
    code_version: str,
) -> Correction:
    """The correction ``correction_id``, created when new. One correction is built by one code
    version: a run of another version is refused, so the diff and the cutover never mix two."""
    check_reason(reason)
    existing = load(lake_root, correction_id)
    if existing is None:
        correction = Correction(
            check_id(correction_id),
            reason.strip(),
            user(),
            now(),
            start.isoformat(),
            end.isoformat(),
            code_version,
        )
        correction.note("created", reason.strip())
        try:
            save(lake_root, correction, create=True)
        except FileExistsError:
            raise CorrectionError(
                f"correction {correction_id} was created by another writer just now; run again "
                "to build on it"
            ) from None
        return correction
    if existing.state in State.CLOSED:
        raise CorrectionError(f"correction {correction_id} is {existing.state}; start a new one")
    if existing.pending:
        action = existing.pending.get("action", "operation")
        raise CorrectionError(
            f"correction {correction_id} has an interrupted {action}: run backfill-assets "
            f"{action} {correction_id} (or backfill-assets maintain) to complete or undo it first"
        )
    if existing.state == State.CUT_OVER:
        raise CorrectionError(
            f"correction {correction_id} is cut over: roll it back before "
            "building more of it, or start a new one"
        )
    if existing.code_version != code_version:
        raise CorrectionError(
            f"correction {correction_id} was built by code version {existing.code_version}; "
            f"this is {code_version}. One correction never mixes code versions: start a new "
            "correction (a new --id) for this code"
        )
    return existing
