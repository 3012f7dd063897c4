"""Every table keeps removed files and its log for the retention: created with both retention
properties on every engine, brought up to them before a vacuum or a checkpoint, and a restore
of a day replaced ten days ago works after a checkpoint and a vacuum at 14 days."""

from __future__ import annotations

import json
import os
import time

import pytest

from backfill_assets.lake import LakeError
from backfill_assets_tests.lake.lake_support import THINGS, commit, content, log_files
from backfill_assets_tests.lake.test_lake_staged import D1, D2, frame

TABLE, PUBLISHED = THINGS, "staging/published"
DAY_S = 24 * 3600
KEEP = {
    "delta.deletedFileRetentionDuration": "interval 14 days",
    "delta.logRetentionDuration": "interval 30 days",
}


def log_dir(lake, table: str = TABLE):
    return lake.path(table) / "_delta_log"


def configuration(lake, table: str = TABLE) -> tuple[int, dict]:
    """(version, configuration) of the newest metaData action in the table's commit files."""
    found: tuple[int, dict] = (-1, {})
    for path in sorted(log_dir(lake, table).glob("*.json")):
        for line in path.read_text().splitlines():
            action = json.loads(line)
            if "metaData" in action:
                found = (int(path.name.split(".")[0]), action["metaData"].get("configuration", {}))
    return found


def set_by_hand(lake, properties: dict[str, str], table: str = TABLE) -> None:
    """Set table properties with the engine's own API, not the lake's."""
    location = str(lake.path(table))
    if lake.engine.name == "delta-rs":
        from deltalake import DeltaTable

        DeltaTable(location).alter.set_table_properties(properties)
    else:
        pairs = ", ".join(f"'{k}' = '{v}'" for k, v in properties.items())
        lake.spark.sql(f"ALTER TABLE delta.`{location}` SET TBLPROPERTIES ({pairs})")


def forget_cached_state(lake) -> None:
    """Drop the JVM's cached table states after the log was edited by hand (delta-rs keeps none)."""
    if lake.engine.name == "delta-spark":
        lake.spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()


def test_a_new_table_keeps_removed_files_and_log_for_the_retention(lake):
    assert lake.retention_hours == 14 * 24  # BACKFILL_RETENTION_DAYS's default
    lake.replace_partitions(TABLE, frame(lake, [(D1, 1, "a")]), "d", [D1], commit("w"))
    staged = lake.staging.stage(PUBLISHED, frame(lake, [(D2, 2, "b")]), "d", [D2], commit("s"))
    lake.staging.publish(staged)
    for table in (TABLE, PUBLISHED):
        version, found = configuration(lake, table)
        assert version == 0 and found == KEEP, table
    assert lake.keep_retention(TABLE, 14 * 24) == {}  # nothing to bring up: no commit
    assert lake.version(TABLE) == 0


def test_vacuum_and_checkpoint_bring_a_short_retention_up_first(lake):
    lake.replace_partitions(TABLE, frame(lake, [(D1, 1, "a")]), "d", [D1], commit("w"))
    set_by_hand(lake, {"delta.deletedFileRetentionDuration": "interval 7 days"})
    short = lake.version(TABLE)
    lake.vacuum(TABLE, 14 * 24)
    version, found = configuration(lake, TABLE)
    assert version == short + 1  # the vacuum's own commits (delta-rs's) come after it
    assert found["delta.deletedFileRetentionDuration"] == "interval 14 days"
    set_by_hand(lake, {"delta.logRetentionDuration": "interval 10 days"})
    short = lake.version(TABLE)
    assert lake.checkpoint(TABLE) == short + 1
    assert configuration(lake, TABLE)[1] == KEEP
    # a longer retention than the lake's: brought up to it
    lake.vacuum(TABLE, 40 * 24)
    assert configuration(lake, TABLE)[1] == {
        "delta.deletedFileRetentionDuration": "interval 40 days",
        "delta.logRetentionDuration": "interval 40 days",
    }
    if lake.engine.name == "delta-rs":  # delta-spark refuses to set what it cannot read
        set_by_hand(lake, {"delta.deletedFileRetentionDuration": "interval 3 fortnights"})
        with pytest.raises(LakeError, match="cannot read its table property"):
            lake.vacuum(TABLE, 14 * 24)


def test_a_restore_ten_days_after_a_replace_finds_its_files(lake):
    """The day's old file was written 20 days ago and replaced 10 days ago (its tombstone's
    time, set in the log by hand): within the 14-day retention a restore needs it, through a
    checkpoint (which keeps tombstones only as long as the table's property says) and a
    vacuum (which deletes a file no tombstone names by its age)."""
    old = [(D1, 1, "old")]
    lake.replace_partitions(TABLE, frame(lake, old), "d", [D1], commit("old"))
    old_files = log_files(lake)
    lake.replace_partitions(TABLE, frame(lake, [(D1, 2, "new")]), "d", [D1], commit("new"))
    stamp = time.time()
    for path in old_files:
        os.utime(lake.path(TABLE) / path, (stamp - 20 * DAY_S, stamp - 20 * DAY_S))
    replaced = log_dir(lake) / f"{1:020d}.json"
    lines = []
    for line in replaced.read_text().splitlines():
        action = json.loads(line)
        if "remove" in action:
            action["remove"]["deletionTimestamp"] = int((stamp - 10 * DAY_S) * 1000)
        lines.append(json.dumps(action))
    replaced.write_text("\n".join(lines) + "\n")
    for checksum in (f".{replaced.name}.crc", f"{1:020d}.crc"):  # Hadoop's and Delta's
        (log_dir(lake) / checksum).unlink(missing_ok=True)
    forget_cached_state(lake)

    lake.checkpoint(TABLE)
    lake.vacuum(TABLE, 14 * 24)
    assert all((lake.path(TABLE) / p).exists() for p in old_files)
    lake.restore_partitions(TABLE, "d", [D1], 0, commit("rollback"))
    assert content(lake) == sorted(old)
