"""Delta's log cleanup, run on a table as time would: every file of its log made older than any
retention, a checkpoint of the latest version, then the cleanup, which deletes the commit files
the checkpoint makes unneeded. Done with delta-rs whichever engine wrote the table, so that no
engine of the project is asked to do it."""

from __future__ import annotations

import os
import time
from pathlib import Path

AGE_DAYS = 400  # older than any retention the lake sets (at least Delta's 30 days)


def clean_up_log(table_dir: Path) -> list[int]:
    """Checkpoint the table at ``table_dir`` and clean up its log as if every commit were
    ``AGE_DAYS`` old; the versions whose commit files are left."""
    from deltalake import DeltaTable

    stamp = time.time() - AGE_DAYS * 86400
    log = table_dir / "_delta_log"
    for path in log.rglob("*"):
        if path.is_file():
            os.utime(path, (stamp, stamp))
    table = DeltaTable(str(table_dir))
    table.create_checkpoint()
    table.cleanup_metadata()
    return sorted(int(p.name.split(".")[0]) for p in log.glob("*.json"))
