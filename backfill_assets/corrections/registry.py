"""The record of each correction: one JSON file per id under ``<lake>/_corrections/``.

What it holds is what ``backfill-assets corrections`` lists and what every later step checks:
who made the correction, when and why; the code version and input versions it was built
from; per table, the days staged and the days its checks held; the production versions the
diff compared with; the versions a cutover replaced and wrote. Written atomically (a reader
sees the old record or the new one), by one writer at a time: a correction's runs, then the
commands an engineer gives it.
"""

from __future__ import annotations

import datetime as dt
import getpass
import json
import re
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from backfill_assets.lake import durable
from backfill_assets.settings import RunSettings

FOLDER = "_corrections"  # under the lake root; Delta readers skip names starting with "_"
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

    def table(self, path: str) -> TableRecord:
        return self.tables.setdefault(path, TableRecord())

    def note(self, action: str, detail: str = "") -> None:
        self.history.append({"at": now(), "by": user(), "action": action, "detail": detail})

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Correction:
        d = json.loads(text)
        d["tables"] = {k: TableRecord(**v) for k, v in d.get("tables", {}).items()}
        return cls(**d)


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


def _path(lake_root: Path, correction_id: str) -> Path:
    return Path(lake_root) / FOLDER / f"{check_id(correction_id)}.json"


def load(lake_root: Path, correction_id: str) -> Correction | None:
    try:
        return Correction.from_json(_path(lake_root, correction_id).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def get(lake_root: Path, correction_id: str) -> Correction:
    found = load(lake_root, correction_id)
    if found is None:
        raise CorrectionError(
            f"no correction {correction_id!r} under {Path(lake_root) / FOLDER} "
            "(backfill-assets corrections lists them)"
        )
    return found


def save(lake_root: Path, correction: Correction) -> None:
    durable.write_atomically(_path(lake_root, correction.id), correction.to_json(), "record")


def all_corrections(lake_root: Path) -> list[Correction]:
    folder = Path(lake_root) / FOLDER
    if not folder.is_dir():
        return []
    found = [load(lake_root, p.stem) for p in sorted(folder.glob("*.json"))]
    return sorted((c for c in found if c is not None), key=lambda c: c.created_at)


def open_correction(
    lake_root: Path,
    correction_id: str,
    reason: str,
    start: dt.date,
    end: dt.date,
    code_version: str,
) -> Correction:
    """The correction ``correction_id``, created when new. One correction is built by one code
    version: a run of another version is refused, so the diff and the cutover never mix two."""
    if not reason or not reason.strip():
        raise CorrectionError("a correction needs a reason: the people who read the numbers see it")
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
        save(lake_root, correction)
        return correction
    if existing.state in State.CLOSED:
        raise CorrectionError(f"correction {correction_id} is {existing.state}; start a new one")
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
