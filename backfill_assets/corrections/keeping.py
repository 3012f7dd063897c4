"""A correction run's passing days kept into the correction: ``keep``.

A run of the correction's step keeps the files it staged for its passing days in the
correction's staged version of the table (``Staging.keep``) and records the days and the
run in the correction's record. Two stores, so the order matters: when the correction has been
diffed (or cut over and rolled back), the record is first saved back to ``staged``, with a note
of the run and its days, then the files are kept, then the days recorded. A run stopped between
the keep and the last save (a kill, an I/O error, a record saved by another writer meanwhile)
leaves a record that no cutover accepts before a new diff. A cutover also publishes only the
files its diff compared (``diff.files_since_diff``), so even a keep that no record names is
never cut over unseen.
"""

from __future__ import annotations

import datetime as dt

from backfill_assets.corrections import registry
from backfill_assets.corrections.registry import Correction, State
from backfill_assets.lake import Lake, StagedVersion


def keep(
    lake: Lake, c: Correction, staged: StagedVersion, days: list[dt.date], run_id: str
) -> StagedVersion:
    """Keep ``staged``'s files of ``days`` in the correction ``c`` and record them as staged by
    ``run_id`` (see the module docstring); the correction's staged version of the table.
    RecordChanged, from either save, when another writer saved the record after ``c`` was read."""
    shown = ", ".join(d.isoformat() for d in days)
    if c.state != State.STAGED:  # its diff no longer describes it
        c.state = State.STAGED
        c.note("staged again", f"{staged.table}: {shown} (run {run_id})")
        registry.save(lake.location, c)
    kept = lake.staging.keep(staged, days, into=c.id)
    record = c.table(staged.table)
    for d in days:
        record.staged[d.isoformat()] = run_id
        record.held.pop(d.isoformat(), None)
    c.runs.append(
        {
            "run_id": run_id,
            "table": staged.table,
            "code_version": staged.commit.code_version,
            "input_versions": dict(staged.commit.input_versions),
            "days": [d.isoformat() for d in days],
        }
    )
    c.start = min(c.start, days[0].isoformat())
    c.end = max(c.end, days[-1].isoformat())
    registry.save(lake.location, c)
    return kept
