"""A few columns of some partitions of a Delta table as Arrow, through delta-rs: no Spark, for
the command line's dry runs."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable


def read_columns(table_dir: Path, partition_column: str, partitions: list[date],
                 columns: list[str]) -> pa.Table | None:
    """``columns`` of the rows of ``partitions`` (latest version); None when no such table."""
    if not (table_dir / "_delta_log").is_dir():
        return None
    if not partitions:
        return pa.table({c: pa.array([], pa.null()) for c in columns})
    wanted = [(partition_column, "in", [d.isoformat() for d in partitions])]
    return DeltaTable(str(table_dir)).to_pyarrow_table(partitions=wanted, columns=columns)
