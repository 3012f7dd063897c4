"""Spark aggregations shared by the layers' checks: one pass per side, collected small.

Each function returns per-partition figures as plain Python values so the checks
can compare an expected side with an actual side and show both in Dagster.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date
from decimal import Decimal

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

FileKey = tuple[date, str]


def line_hash():
    """A record's hash: its line number and payload (summed per file, order-independent)."""
    return F.xxhash64(F.col("line_number"), F.col("payload")).cast("decimal(20,0)")


def line_fingerprints(df: DataFrame, partition_column: str) -> dict[FileKey, tuple[int, Decimal]]:
    """(partition, source_file) -> (records, order-independent checksum of line numbers + payloads)."""
    rows = (
        df.groupBy(F.col(partition_column).alias("partition"), F.col("source_file"))
        .agg(F.count(F.lit(1)).alias("records"), F.sum(line_hash()).alias("checksum"))
        .collect()
    )
    return {(r["partition"], r["source_file"]): (r["records"], r["checksum"]) for r in rows}


def fingerprints_and_counts(
    df: DataFrame, partition_column: str, column: str
) -> tuple[dict[FileKey, tuple[int, Decimal]], dict[date, dict]]:
    """``line_fingerprints`` and ``counts_by(column)`` of ``df`` in one pass over it; ``df``
    carries each record's ``line_hash()`` in a column of that name, not the payload."""
    rows = (
        df.groupBy(F.col(partition_column).alias("partition"), "source_file", column)
        .agg(F.count(F.lit(1)).alias("records"), F.sum("line_hash").alias("checksum"))
        .collect()
    )
    fingerprints: dict[FileKey, tuple[int, Decimal]] = {}
    counts: dict[date, dict] = defaultdict(lambda: defaultdict(int))
    for r in rows:
        key = (r["partition"], r["source_file"])
        records, checksum = fingerprints.get(key, (0, 0))
        fingerprints[key] = (records + r["records"], checksum + int(r["checksum"]))  # exact ints
        counts[r["partition"]][r[column]] += r["records"]
    return fingerprints, {day: dict(by_value) for day, by_value in counts.items()}


def counts_by(df: DataFrame, partition_column: str, column: str) -> dict[date, dict[str, int]]:
    """partition -> {value of ``column``: rows}."""
    out: dict[date, dict[str, int]] = defaultdict(dict)
    for r in df.groupBy(partition_column, column).count().collect():
        out[r[partition_column]][r[column]] = r["count"]
    return out


def rows_per_partition(fingerprints: dict[FileKey, tuple[int, Decimal]]) -> dict[date, int]:
    totals: dict[date, int] = defaultdict(int)
    for (partition, _), (records, _) in fingerprints.items():
        totals[partition] += records
    return totals


def compare_files(
    day: date,
    listed_files: set[str],
    expected: dict[FileKey, tuple[int, Decimal]],
    actual: dict[FileKey, tuple[int, Decimal]],
) -> tuple[bool, dict]:
    """Raw[day] against the landing files of ``day``: same files, same counts, same payloads."""
    exp = {f: v for (d, f), v in expected.items() if d == day}
    act = {f: v for (d, f), v in actual.items() if d == day}
    unknown = sorted(set(act) - listed_files)
    mismatched = sorted(f for f in listed_files if exp.get(f, (0, None)) != act.get(f, (0, None)))
    metadata = {
        "landing_files": len(listed_files),
        "expected_records": sum(v[0] for v in exp.values()),
        "actual_records": sum(v[0] for v in act.values()),
        "files_not_in_landing": unknown[:10],
        "mismatched_files": mismatched[:10],
    }
    return (not unknown and not mismatched), metadata
