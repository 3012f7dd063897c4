"""The task that fetches landed objects on S3 inside Spark, for ``spark_reader``'s S3 path.

Apart from the reader so that a Python worker, which imports the module of each task it runs,
imports no more than the task needs: pyarrow and the S3 settings, not the catalog's Dagster.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from backfill_assets.settings import S3Settings
from backfill_assets.spark.python_workers import freeze_worker_heap
from backfill_assets.storage.stores import S3_SCHEME, arrow_s3

if TYPE_CHECKING:
    import pyarrow as pa

TEXTS_SCHEMA = "source_file string, value binary"


class FetchTexts:
    """The mapInArrow function: the bytes of the objects its rows name (``source_file``,
    relative to ``root``), one row each."""

    def __init__(self, root: str, s3: S3Settings) -> None:
        self.root, self.s3 = root, s3

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        freeze_worker_heap()
        filesystem = arrow_s3(self.s3)
        base = self.root.removeprefix(S3_SCHEME).rstrip("/")
        for listing in batches:
            for relative in listing.column("source_file").to_pylist():
                with filesystem.open_input_stream(f"{base}/{relative}") as source:
                    data = source.read()
                yield pa.RecordBatch.from_arrays(
                    [pa.array([relative]), pa.array([data], pa.binary())],
                    names=["source_file", "value"],
                )
