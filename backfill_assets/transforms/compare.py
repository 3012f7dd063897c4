"""Two versions of a partitioned table compared row by row, by key: one Spark pass."""

from __future__ import annotations

from datetime import date

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

CHANGE_FIELDS = ("rows_before", "rows_after", "added", "removed", "changed")


def row_changes(
    before: DataFrame, after: DataFrame, partition_column: str, keys: tuple[str, ...]
) -> dict[date, dict]:
    """Per partition: rows before and after, and the keys added, removed, and present in both
    with any other column different (NULLs compare equal). Both sides have ``after``'s columns."""
    on = [partition_column, *keys]
    values = [c for c in after.columns if c not in on]
    old = before.select(*on, F.struct(*values).alias("_old"))
    new = after.select(*on, F.struct(*values).alias("_new"))
    both = F.col("_old").isNotNull() & F.col("_new").isNotNull()
    rows = (
        old.join(new, on, "full_outer")
        .groupBy(partition_column)
        .agg(
            F.count("_old").alias("rows_before"),
            F.count("_new").alias("rows_after"),
            F.sum(F.when(F.col("_old").isNull(), 1).otherwise(0)).alias("added"),
            F.sum(F.when(F.col("_new").isNull(), 1).otherwise(0)).alias("removed"),
            F.sum(F.when(both & ~F.col("_old").eqNullSafe(F.col("_new")), 1).otherwise(0)).alias(
                "changed"
            ),
        )
        .collect()
    )
    return {r[partition_column]: {k: int(r[k]) for k in CHANGE_FIELDS} for r in rows}
