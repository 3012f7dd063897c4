"""The lake's part of the foreign-writer matrix (``bench/foreign_writers.py`` runs the whole
pipeline's commands there): a table the lake wrote, then changed by another writer with Delta's
own SQL, then what a backfill and a correction do to it on delta-spark. A staged version of two
days is published (a backfill's replace), then one of them is restored to the version before
(a correction's rollback). After each, the table holds exactly the rows worked out here in plain
Python from what each writer did."""

from __future__ import annotations

from collections import Counter

import pytest

from backfill_assets_tests.lake.lake_support import THINGS, commit
from backfill_assets_tests.lake.test_lake_delta_spark_read import (
    ROWS,
    read,
    sql_path,
    write_rows,
)
from backfill_assets_tests.lake.test_lake_staged import D1, D2, D3, frame

NATIVE = pytest.mark.parametrize("lake", ["delta-spark"], indirect=True)
NEW = [(D1, 10, "new"), (D1, 11, "new"), (D2, 12, "new")]


def deletion_vectors(lake) -> set[int]:
    lake.spark.sql(
        f"ALTER TABLE {sql_path(lake)} SET TBLPROPERTIES ('delta.enableDeletionVectors' = true)"
    )
    lake.spark.sql(f"DELETE FROM {sql_path(lake)} WHERE id IN (1, 5)")
    return {1, 5}


def column_mapping(lake) -> set[int]:
    lake.spark.sql(
        f"ALTER TABLE {sql_path(lake)} SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name', "
        "'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5')"
    )
    return set()


def optimize_zorder(lake) -> set[int]:
    lake.spark.sql(f"OPTIMIZE {sql_path(lake)} ZORDER BY (id)")
    return set()


def v2_checkpoint(lake) -> set[int]:
    lake.spark.sql(
        f"ALTER TABLE {sql_path(lake)} SET TBLPROPERTIES ('delta.checkpointPolicy' = 'v2')"
    )
    lake.spark.sql(f"DELETE FROM {sql_path(lake)} WHERE id = 4")
    lake.checkpoint(THINGS)
    return {4}


CHANGES = {
    f.__name__: f for f in (deletion_vectors, column_mapping, optimize_zorder, v2_checkpoint)
}


@NATIVE
@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_backfill_and_a_rollback_on_a_table_another_writer_changed(lake, change):
    write_rows(lake, ROWS, [D1, D2, D3])
    deleted = CHANGES[change](lake)
    changed = [r for r in ROWS if r[1] not in deleted]
    assert read(lake) == sorted(changed)
    before = lake.version(THINGS)

    staged = lake.staging.stage(THINGS, frame(lake, NEW), "d", [D1, D2], commit("backfill"))
    lake.staging.publish(staged)
    backfilled = [*NEW, *(r for r in changed if r[0] == D3)]
    assert read(lake) == sorted(backfilled)

    lake.restore_partitions(THINGS, "d", [D1], before, commit("rollback"))
    rolled_back = [r for r in changed if r[0] == D1] + [r for r in backfilled if r[0] != D1]
    assert read(lake) == sorted(rolled_back)
    assert lake.row_counts(THINGS, "d") == Counter(day for day, *_ in rolled_back)
