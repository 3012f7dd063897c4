"""Read landed files' lines with Spark, as raw rows: the only Spark code that touches the landing
zone.

Lines are split on ``\\n``, one trailing ``\\r`` is dropped, whitespace-only
lines are skipped but still counted, so ``line_number`` is the 1-based
position of the line in its file. Which files exist is ``layout``'s business.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from datetime import date
from pathlib import Path, PurePosixPath

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from backfill_assets.catalog import FX_RATES_DATASET, ORDERS_DATASET
from backfill_assets.day_blocks import BLOCK, by_day_blocks
from backfill_assets.landing.layout import DATASETS, FX_HEADER, LandingFile
from backfill_assets.landing.s3_texts import TEXTS_SCHEMA, FetchTexts
from backfill_assets.spark.session import listing_on_driver
from backfill_assets.storage.stores import S3Storage, is_s3, storage_for
from backfill_assets.transforms.schemas import RAW_FX_RATES, RAW_ORDERS, UTF8_COLUMN

# Whitespace as Python's str.isspace() knows it (Java's \s alone misses NBSP and friends).
_BLANK_LINE = (
    r"^[\s\x{1c}-\x{1f}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}"
    r"\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]*\z"
)
# The landing zone through Hadoop's raw local file system, for this read only: its default one
# checks each file against a ``.<name>.crc`` beside it, a path it cannot make of a name holding
# ":" (``orders-10:00.jsonl`` failed the read of every file of the run). The landing has no
# checksum files to check: it is read, never written.
_RAW_LOCAL_FILES = {
    "fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "fs.file.impl.disable.cache": "true",
}


def _relative_path_of_input(root: str) -> Column:
    """The path of the file a row was read from relative to ``root`` (a local folder, absolute
    and normalised), when it is directly in a partition folder: dataset / partition folder /
    file name. NULL for a file deeper down, which the read of a folder sees too, and whose path
    may end like a landed file's (``arrival_date=D/sub/orders/arrival_date=D/a.jsonl``).

    Spark reports a percent-encoded URI; ``+`` is protected before decoding
    because URL decoding would turn it into a space.
    """
    decoded = F.try_url_decode(F.replace(F.col("_metadata.file_path"), F.lit("+"), F.lit("%2B")))
    path = F.regexp_replace(decoded, r"^file:/*", "/")
    prefix = root.rstrip("/") + "/"
    relative = F.substr(path, F.lit(len(prefix) + 1))
    landed = path.startswith(F.lit(prefix)) & (F.size(F.split(relative, "/")) == 3)
    return F.when(landed, relative)


def _not_utf8_positions(text: Column) -> Column:
    """The 0-based positions of the lines of ``text`` (split on ``\\n``) whose bytes are not UTF-8.

    Spark's text reader keeps a file's bytes as they are, but the lines are split from the text
    made valid, bad bytes turned into U+FFFD. So a file that is not valid UTF-8 as a whole
    (rare; the check is cheap) is split a second time, as hex digits: every byte as two digits
    and a comma, so a ``0A,`` is always a whole byte (a line feed), and each piece is checked as
    the bytes it was.
    """
    pieces = F.split(F.regexp_replace(F.hex(text.cast("binary")), "(..)", "$1,"), "0A,", -1)
    valid = F.transform(
        pieces,
        lambda hexed: F.is_valid_utf8(
            F.unhex(F.replace(hexed, F.lit(","), F.lit(""))).cast("string")
        ),
    )
    # Each line's position where it is not valid, then the positions alone: ``valid`` is read
    # once. (Reading ``valid[i]`` in a lambda over the positions built ``valid`` again for each
    # line, a time quadratic in the file's lines: hours for 20,000 lines with one bad byte.)
    flagged = F.transform(valid, lambda ok, i: F.when(~ok, i))
    return F.when(F.is_valid_utf8(text), F.array().cast("array<int>")).otherwise(
        F.filter(flagged, lambda i: i.isNotNull())
    )


def _read_texts(
    spark: SparkSession, landing_root: str | Path, files: list[LandingFile], suffix: str
) -> DataFrame:
    """(source_file, value): the whole text of each file's folder's ``*suffix`` files, with the
    path of each relative to the landing root.

    Spark is given the partition folders, not the files, and lists them on the driver
    (``listing_on_driver``): a distributed listing job of thousands of paths, or of a year's
    folders, is far slower than the listing itself. Files the listing did not select, and the
    files of sub-folders (``source_file`` NULL), are dropped later by a join.
    """
    if is_s3(landing_root):
        return _read_s3_texts(spark, os.fspath(landing_root), files)
    root = os.path.normpath(Path(landing_root).absolute())  # as Hadoop normalises the paths
    folders = sorted({os.path.join(root, PurePosixPath(f.relative_path).parent) for f in files})
    # recursiveFileLookup: a stray sub-folder named like `x=1` must not turn into a
    # partition column (or a "conflicting directory structures" failure).
    # __globPaths__: each folder as it is named, not as a glob pattern (escaping the pattern's
    # characters left a root like ``a[1]:b`` to be taken for a URI with a scheme).
    with listing_on_driver(spark, len(folders)):
        texts = spark.read.options(**_RAW_LOCAL_FILES, __globPaths__="false").text(
            folders, wholetext=True, pathGlobFilter=f"*{suffix}", recursiveFileLookup=True
        )
    return texts.select(_relative_path_of_input(root).alias("source_file"), "value")


def _read_s3_texts(spark: SparkSession, root: str, files: list[LandingFile]) -> DataFrame:
    """``_read_texts`` on S3, without Hadoop's s3a jars: each task fetches its files' objects
    with pyarrow (``s3_texts``, as ``lake/s3_files.py`` reads the lake's), one row per file. The
    bytes become the text as Spark's text reader gives them: cast, not decoded, so bytes that
    are not UTF-8 stay as they landed for ``_not_utf8_positions``."""
    storage = storage_for(root)
    if not isinstance(storage, S3Storage):
        raise ValueError(f"{root} is not on S3")
    tasks = max(1, min(len(files), int(spark.conf.get("spark.sql.shuffle.partitions") or 8)))
    listing = spark.createDataFrame([(f.relative_path,) for f in files], "source_file string")
    texts = listing.repartition(tasks).mapInArrow(FetchTexts(root, storage.settings), TEXTS_SCHEMA)
    return texts.select("source_file", F.col("value").cast("string").alias("value"))


def _without_final_cr(line: Column) -> Column:
    """The line without one trailing ``\\r``: a byte compared, the pattern only where it ends so."""
    return F.when(line.endswith("\r"), F.regexp_replace(line, r"\r\z", "")).otherwise(line)


def _is_blank(line: Column) -> Column:
    """Whether the line is whitespace only, as Python's ``str.isspace`` knows it. A line opening
    with a printable ASCII character (every record a producer writes) is not: one character
    read, the pattern only for the others."""
    return F.when(F.ascii(line).between(33, 126), F.lit(False)).otherwise(line.rlike(_BLANK_LINE))


def _read_lines(
    spark: SparkSession,
    landing_root: str | Path,
    files: list[LandingFile],
    suffix: str,
    first_line: bool = False,
    day_blocks: Collection[date] | None = None,
) -> DataFrame:
    """Every non-blank line of ``files``: (partition, source_file, line_number, line, utf8), and
    with ``first_line`` (is_first, first_line), about the file's first non-blank line. ``utf8``
    is False for a line whose bytes are not UTF-8: ``line`` shows them as U+FFFD.

    With ``day_blocks`` (the range's days) the files, one row each, are sent by blocks of
    their partitions' days (``by_day_blocks``) and sorted by partition within each task before
    they are split into lines: the lines then arrive as a writer of day partitions wants them,
    and no shuffle of the lines, each far wider than its share of a file row, is needed.

    Each line is cleaned and judged after the explode, where Spark generates the code; inside a
    lambda over a file's lines it is interpreted, line by line. The first non-blank line, which
    only a rate file's header needs, is found by such a lambda."""
    catalog = spark.createDataFrame(
        [(f.relative_path, f.partition) for f in files],
        "source_file string, partition date",
    )
    # One row per file: the listing's join costs a lookup per file, not per line.
    listed = _read_texts(spark, landing_root, files, suffix).join(
        F.broadcast(catalog), on="source_file", how="inner"
    )
    if day_blocks is not None:
        listed = (
            by_day_blocks(listed, "partition", day_blocks)
            .sortWithinPartitions("partition", "source_file")
            .drop(BLOCK)
        )
    texts = listed.select(
        "partition",
        "source_file",
        # Bad bytes as U+FFFD, one per maximal ill-formed subsequence, as Unicode recommends
        # (and Python's decoder does): splitting alone would decode them by Java's rules, one
        # for a whole encoded surrogate. No such subsequence holds a "\n".
        F.split(F.make_valid_utf8(F.col("value")), "\n", -1).alias("lines"),
        _not_utf8_positions(F.col("value")).alias("not_utf8"),
    )
    firsts: list[Column] = []
    if first_line:
        cleaned = F.transform(F.col("lines"), _without_final_cr)
        first_record = F.array_position(F.transform(cleaned, _is_blank), F.lit(False))
        firsts = [
            first_record.alias("first_record"),
            F.when(first_record > 0, F.get(cleaned, first_record.cast("int") - 1)).alias(
                "first_line"
            ),
        ]
    exploded = texts.select(
        "partition",
        "source_file",
        "not_utf8",
        *firsts,
        F.posexplode(F.col("lines")).alias("pos", "line"),
    )
    position = F.col("pos") + F.lit(1)
    about_first = [(position == F.col("first_record")).alias("is_first"), F.col("first_line")]
    lines = exploded.select(
        F.col("partition"),
        F.col("source_file"),
        position.cast("bigint").alias("line_number"),
        _without_final_cr(F.col("line")).alias("line"),
        (~F.array_contains(F.col("not_utf8"), F.col("pos"))).alias("utf8"),
        *(about_first if first_line else []),
    )
    return lines.filter(~_is_blank(F.col("line")))


def read_order_lines(
    spark: SparkSession,
    landing_root: str | Path,
    files: list[LandingFile],
    day_blocks: Collection[date] | None = None,
) -> DataFrame:
    """raw/orders rows (RAW_ORDERS schema) and ``_utf8``: one row per record of the given .jsonl
    files. ``_utf8`` is False where the line's bytes are not UTF-8 (its payload shows them as
    U+FFFD, a table's strings being UTF-8): validation rejects those as malformed JSON. It is
    not a column of raw/orders. With ``day_blocks`` (the range's days) each task holds whole
    blocks of arrival dates, its rows in date order: ``write_files(..., in_day_blocks=True)``
    writes them without a shuffle."""
    if not files:
        return spark.createDataFrame([], RAW_ORDERS).withColumn(UTF8_COLUMN, F.lit(True))
    lines = _read_lines(
        spark, landing_root, files, DATASETS[ORDERS_DATASET].suffix, day_blocks=day_blocks
    )
    return lines.select(
        F.col("partition").alias("arrival_date"),
        F.col("source_file"),
        F.col("line_number"),
        F.col("line").alias("payload"),
        F.col("utf8").alias(UTF8_COLUMN),
    )


def read_rate_lines(
    spark: SparkSession, landing_root: str | Path, files: list[LandingFile]
) -> DataFrame:
    """raw/fx_rates rows (RAW_FX_RATES schema): one row per non-blank, non-header .csv line.

    ``currency`` is the text before the first comma and ``usd_per_unit`` the text
    after it (NULL without one), as landed: validation happens later. A file whose first line is
    not exactly the header lists no rates: its lines are kept, with both NULL.
    """
    if not files:
        return spark.createDataFrame([], RAW_FX_RATES)
    lines = _read_lines(
        spark, landing_root, files, DATASETS[FX_RATES_DATASET].suffix, first_line=True
    )
    has_header = F.col("first_line") == F.lit(FX_HEADER)
    comma = F.instr(F.col("line"), ",")

    return lines.filter(~(F.col("is_first") & has_header)).select(
        F.col("partition").alias("rate_date"),
        F.col("source_file"),
        F.col("line_number"),
        F.when(has_header, F.substring_index(F.col("line"), ",", 1)).alias("currency"),
        F.when(has_header & (comma > 0), F.substr(F.col("line"), comma + F.lit(1))).alias(
            "usd_per_unit"
        ),
        F.col("line").alias("payload"),
    )
