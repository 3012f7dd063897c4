"""Read landed files' lines with Spark, as raw rows: the only Spark code that touches the landing zone.

Lines are split on ``\\n``, one trailing ``\\r`` is dropped, whitespace-only
lines are skipped but still counted, so ``line_number`` is the 1-based
position of the line in its file. Which files exist is ``layout``'s business.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from backfill_assets.catalog import FX_RATES_DATASET, ORDERS_DATASET
from backfill_assets.landing.layout import DATASETS, FX_HEADER, LandingFile
from backfill_assets.transforms.schemas import RAW_FX_RATES, RAW_ORDERS

# Whitespace as Python's str.isspace() knows it (Java's \s alone misses NBSP and friends).
_BLANK_LINE = r"^[\s\x{1c}-\x{1f}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]*\z"
# Hadoop reads paths as globs: escape its metacharacters so odd file names are read literally.
_GLOB_CHARS = re.compile(r"([\\\[\]{}*?])")


def _relative_path_of_input() -> Column:
    """The landing-relative path of the file a row was read from.

    Spark reports a percent-encoded URI; ``+`` is protected before decoding
    because URL decoding would turn it into a space. The relative path is
    always the last three segments: dataset / partition folder / file name.
    """
    decoded = F.try_url_decode(F.replace(F.col("_metadata.file_path"), F.lit("+"), F.lit("%2B")))
    return F.regexp_extract(decoded, r"([^/]+/[^/]+/[^/]+)$", 1)


def _read_texts(
    spark: SparkSession, root: Path, files: list[LandingFile], suffix: str
) -> DataFrame:
    """The whole text of each file's folder's ``*suffix`` files, with the path of each.

    Spark is given the partition folders, not the files: listing thousands of
    file paths makes it start a distributed listing job far slower than the
    read itself. Files the listing did not select are dropped later by a join.
    """
    folders = sorted({str(root / PurePosixPath(f.relative_path).parent) for f in files})
    paths = [_GLOB_CHARS.sub(r"\\\1", folder) for folder in folders]
    # recursiveFileLookup: a stray sub-folder named like `x=1` must not turn into a
    # partition column (or a "conflicting directory structures" failure).
    return spark.read.text(
        paths, wholetext=True, pathGlobFilter=f"*{suffix}", recursiveFileLookup=True
    )


def _read_lines(
    spark: SparkSession, landing_root: str | Path, files: list[LandingFile], suffix: str
) -> DataFrame:
    """Every non-blank line of ``files``: (partition, source_file, line_number, line,
    is_first, first_line), the last two about the file's first non-blank line."""
    root = Path(landing_root).absolute()
    catalog = spark.createDataFrame(
        [(f.relative_path, f.partition) for f in files],
        "source_file string, partition date",
    )
    texts = _read_texts(spark, root, files, suffix).select(
        _relative_path_of_input().alias("source_file"),
        F.transform(
            F.split(F.col("value"), "\n", -1), lambda line: F.regexp_replace(line, r"\r\z", "")
        ).alias("lines"),
    )
    blank_flags = F.transform(F.col("lines"), lambda line: line.rlike(_BLANK_LINE))
    first_record = F.array_position(blank_flags, F.lit(False))
    lines = texts.select(
        "source_file",
        first_record.alias("first_record"),
        F.when(first_record > 0, F.get(F.col("lines"), first_record.cast("int") - 1)).alias(
            "first_line"
        ),
        F.posexplode(F.col("lines")).alias("pos", "line"),
    ).select(
        "source_file",
        (F.col("pos") + F.lit(1)).cast("bigint").alias("line_number"),
        "line",
        ((F.col("pos") + F.lit(1)) == F.col("first_record")).alias("is_first"),
        "first_line",
    )
    return (
        lines.filter(~F.col("line").rlike(_BLANK_LINE))
        .join(F.broadcast(catalog), on="source_file", how="inner")
        .select("partition", "source_file", "line_number", "line", "is_first", "first_line")
    )


def read_order_lines(
    spark: SparkSession, landing_root: str | Path, files: list[LandingFile]
) -> DataFrame:
    """raw/orders rows (RAW_ORDERS schema): one row per record of the given .jsonl files."""
    if not files:
        return spark.createDataFrame([], RAW_ORDERS)
    lines = _read_lines(spark, landing_root, files, DATASETS[ORDERS_DATASET].suffix)
    return lines.select(
        F.col("partition").alias("arrival_date"),
        F.col("source_file"),
        F.col("line_number"),
        F.col("line").alias("payload"),
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
    lines = _read_lines(spark, landing_root, files, DATASETS[FX_RATES_DATASET].suffix)
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
