"""One table, two engines: each reads, replaces, restores and reads the history of what the other
wrote, and publishes what the other staged."""

from __future__ import annotations

import datetime as dt
import os
import sys
from decimal import Decimal

import pytest
from deltalake import DeltaTable
from pyspark.sql.types import (
    DateType,
    DecimalType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from backfill_assets.lake import CommitInfo
from backfill_assets.lake.delta_spark_jvm import protocol

D1, D2 = dt.date(2024, 1, 1), dt.date(2024, 1, 2)
# staging/orders' kinds of column: the TIMESTAMPs are what delta-rs#2882 was about.
SCHEMA = StructType(
    [
        StructField("order_id", StringType()),
        StructField("event_time", TimestampType()),
        StructField("event_date", DateType()),
        StructField("amount", DecimalType(18, 2)),
        StructField("orders", LongType()),
    ]
)
TABLE = "staging/orders"
# What each engine writes when it creates a table, pinned: a change here is a change in who
# can read the lake. Plain reader 1 / writer 2, no table features (so no timestampNtz).
PROTOCOL = {"min_reader_version": 1, "min_writer_version": 2, "features": []}


def rows(tag: str, day: dt.date, n: int = 2):
    stamp = dt.datetime.combine(day, dt.time(12, 30, 15, 250000), tzinfo=dt.UTC)
    return [(f"{tag}-{i}", stamp, day, Decimal(f"{i}.25"), i) for i in range(1, n + 1)]


def write(lake, data, partitions, run_id):
    frame = lake.spark.createDataFrame(data, SCHEMA)
    return lake.replace_partitions(
        TABLE,
        frame,
        "event_date",
        partitions,
        CommitInfo(run_id=run_id, code_version="x", input_versions={"raw/orders": 3}),
    )


def content(lake, version=None):
    """Rows with their timestamps as UTC instants (PySpark hands back naive local times)."""
    frame, _ = lake.read_table(TABLE, version)
    return sorted(
        tuple(v.astimezone(dt.UTC) if isinstance(v, dt.datetime) else v for v in row)
        for row in frame.collect()
    )


def rs_protocol(lake) -> dict:
    found = DeltaTable(str(lake.path(TABLE))).protocol()
    features = set(found.reader_features or []) | set(found.writer_features or [])
    return {
        "min_reader_version": found.min_reader_version,
        "min_writer_version": found.min_writer_version,
        "features": sorted(features),
    }


def check_round_trip(writer, other):
    """``writer`` creates the table; ``other`` reads, replaces, restores; both see the same."""
    write(writer, rows("a", D1) + rows("b", D2), [D1, D2], "first")
    assert rs_protocol(writer) == PROTOCOL
    assert protocol(other.spark, str(other.path(TABLE)), 0) == PROTOCOL
    assert content(other) == content(writer) == sorted(rows("a", D1) + rows("b", D2))
    assert other.row_counts(TABLE, "event_date") == {D1: 2, D2: 2}

    replaced = write(other, rows("c", D1, 3), [D1], "second")
    assert (replaced.version, replaced.rows_by_partition) == (1, {D1: 3})
    restored = other.restore_partitions(TABLE, "event_date", [D1], 0, CommitInfo("back", "x"))
    assert restored.version == 2
    write(writer, rows("d", D2, 1), [D2], "third")

    expected = sorted(rows("a", D1) + rows("d", D2, 1))
    for lake in (writer, other):
        assert content(lake) == expected
        assert content(lake, version=1) == sorted(rows("c", D1, 3) + rows("b", D2))
        assert lake.row_counts(TABLE, "event_date", version=1) == {D1: 3, D2: 2}
        history = lake.history(TABLE)
        assert [h["version"] for h in history] == [3, 2, 1, 0]
        assert [h["metadata"]["run_id"] for h in history] == ["third", "back", "second", "first"]
        assert [h["metadata"]["engine"] for h in history] == [
            writer.engine.name,
            other.engine.name,
            other.engine.name,
            writer.engine.name,
        ]
        assert history[1]["metadata"]["restored_from_version"] == 0
        assert history[3]["metadata"]["input_versions"] == {"raw/orders": 3}
        assert [
            (p.partition, p.rows, p.last_written_version)
            for p in lake.partitions(TABLE, "event_date")
        ] == [(D1, 2, 2), (D2, 1, 3)]
    # Neither engine's commits raised the protocol the other one reads.
    assert rs_protocol(writer) == PROTOCOL
    assert protocol(other.spark, str(other.path(TABLE)), 3) == PROTOCOL


def test_engines_delta_rs_writes_delta_spark_reads_replaces_restores(two_engines):
    delta_rs, delta_spark = two_engines
    check_round_trip(delta_rs, delta_spark)


def test_engines_delta_spark_writes_delta_rs_reads_replaces_restores(two_engines):
    delta_rs, delta_spark = two_engines
    check_round_trip(delta_spark, delta_rs)


@pytest.mark.parametrize("stager", ["delta-rs", "delta-spark"])
def test_engines_one_stages_the_other_publishes_the_same_files(two_engines, stager):
    delta_rs, delta_spark = two_engines
    stages, publishes = (delta_rs, delta_spark) if stager == "delta-rs" else (delta_spark, delta_rs)
    write(stages, rows("a", D1) + rows("b", D2), [D1, D2], "first")
    staged = stages.staging.stage(
        TABLE,
        stages.spark.createDataFrame(rows("c", D1, 3), SCHEMA),
        "event_date",
        [D1],
        CommitInfo(run_id="second", code_version="x"),
    )
    result = publishes.staging.publish(staged)
    assert (result.version, result.rows_by_partition) == (1, {D1: 3})
    root = str(stages.path(TABLE))
    live = {os.path.relpath(u.removeprefix("file://"), root) for u in DeltaTable(root).file_uris()}
    assert {f.path for f in staged.files} <= live  # swapped in, not copied
    assert publishes.history(TABLE)[0]["metadata"]["engine"] == publishes.engine.name
    for lake in (stages, publishes):
        assert content(lake) == sorted(rows("c", D1, 3) + rows("b", D2))
        assert lake.staging.versions(TABLE)[0].published == {D1: 1}


def test_auto_takes_delta_spark_when_the_session_has_delta(two_engines, tmp_path):
    from backfill_assets.lake import Lake

    delta_rs, _ = two_engines
    assert Lake(tmp_path / "auto", delta_rs.spark).engine.name == "delta-spark"


def test_the_delta_spark_engine_without_its_python_package_names_the_extra(
    spark, tmp_path, monkeypatch
):
    """As on a machine set up without the ``native`` extra: the engine refuses at once, naming
    it, instead of an ImportError at the first history or merge."""
    from backfill_assets.lake import Lake, LakeError

    monkeypatch.setitem(sys.modules, "delta", None)  # `import delta` fails, as when not installed
    with pytest.raises(LakeError, match=r"delta-spark's Python package.*`native` extra"):
        Lake(tmp_path / "lake", spark, engine="delta-spark")
