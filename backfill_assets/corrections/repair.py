"""``forget``: the repair of a correction whose record cannot be read (``registry.BrokenRecord``).

Without its record nothing can cut the correction over, roll it back or recover an operation
of it, so the record is moved aside (``<id>.json.broken``, kept for whoever wants to read what
is left of it) and the correction's staged versions are closed: their unpublished files are
deleted (files the Delta log names stay, as in every discard), so the id can be used again
without inheriting them. Before anything, the lake is checked: the correction's own commits in
the corrected tables (each names the correction and its action) must agree, every table
holding its cutover of the same days or none; a half-done cutover or rollback, which only the
lost record could recover, is refused with what to repair by hand. What production holds of
the correction is reported: those days keep its rows until they are built again.
"""

from __future__ import annotations

from dataclasses import dataclass

from backfill_assets.corrections import registry
from backfill_assets.corrections.diff import CORRECTED
from backfill_assets.corrections.registry import BrokenRecord, CorrectionError
from backfill_assets.lake import Lake

CUT_OVER_BY = ("cutover", "rollback undone")  # the actions after which a table holds the cutover


@dataclass
class Forgotten:
    path: str  # where the broken record was moved
    deleted: int  # staged files deleted
    in_production: dict[str, tuple[int, tuple[str, ...]]]  # table -> (version, days) cut over


def forget(lake: Lake, correction_id: str) -> Forgotten:
    """Set aside the broken record of ``correction_id``; see the module docstring."""
    try:
        found = registry.load(lake.location, correction_id)
    except BrokenRecord:
        pass
    else:
        if found is None:
            raise CorrectionError(
                f"no correction {correction_id!r} under {registry.folder(lake.location)}"
            )
        raise CorrectionError(
            f"the record of correction {correction_id} is readable: forget only sets aside a "
            f"broken one. backfill-assets discard {correction_id} closes a correction"
        )
    held = {t.path: cut_over_in(lake, t.path, correction_id) for t in CORRECTED}
    if len({h[1] if h else None for h in held.values()}) > 1:
        raise CorrectionError(
            f"refusing: the tables disagree about correction {correction_id}, a cutover or "
            "rollback interrupted half-way that only its lost record could recover: "
            + "; ".join(
                f"{t} v{h[0]} holds its cutover of {', '.join(h[1])}"
                if h
                else f"{t}: does not hold it"
                for t, h in held.items()
            )
            + ". Make them agree first (restore the cut-over days from the version before that "
            f"commit with Lake.restore_partitions), then run backfill-assets forget "
            f"{correction_id} again; nothing was changed"
        )
    deleted = 0
    for table in CORRECTED:
        staged = lake.staging.version(table.path, correction_id)
        if staged is not None:
            deleted += lake.staging.discard(staged)
    aside = registry.set_aside(lake.location, correction_id)
    return Forgotten(aside, deleted, {t: h for t, h in held.items() if h})


def cut_over_in(lake: Lake, table: str, correction_id: str) -> tuple[int, tuple[str, ...]] | None:
    """(version, days) of the correction's cutover that ``table`` holds, from its newest commit
    naming the correction; None when it holds none."""
    if not lake.exists(table):
        return None
    for entry in lake.history(table):  # newest first
        extra = entry["metadata"].get("extra", {})
        if extra.get("correction") == correction_id:
            if extra.get("action") in CUT_OVER_BY:
                return entry["version"], tuple(entry["metadata"].get("partitions", []))
            return None
    return None
