"""The immutable landing zone: list its files on the driver, read their lines with Spark.

Layout (docs/contract.md):
``<landing>/orders/arrival_date=YYYY-MM-DD/<name>.jsonl`` and
``<landing>/fx_rates/rate_date=YYYY-MM-DD/<name>.csv``. Files whose name starts
with ``_`` or ``.`` are still being written and are ignored.

Lines are split on ``\\n``, one trailing ``\\r`` is dropped, whitespace-only
lines are skipped but still counted, so ``line_number`` is the 1-based
position of the line in its file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from pathlib import Path, PurePosixPath

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from backfill_assets.transforms.schemas import RAW_FX_RATES, RAW_ORDERS

# dataset -> (partition folder prefix, file suffix)
DATASETS: dict[str, tuple[str, str]] = {
    "orders": ("arrival_date", ".jsonl"),
    "fx_rates": ("rate_date", ".csv"),
}
FX_HEADER = "currency,usd_per_unit"

_DATE_FOLDER = re.compile(r"(\d{4}-\d{2}-\d{2})")
# Whitespace as Python's str.isspace() knows it (Java's \s alone misses NBSP and friends).
_BLANK_LINE = r"^[\s\x{1c}-\x{1f}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]*\z"
# Hadoop reads paths as globs: escape its metacharacters so odd file names are read literally.
_GLOB_CHARS = re.compile(r"([\\\[\]{}*?])")


@dataclass(frozen=True)
class LandingFile:
    """One landed file: its partition date and its path relative to the landing root."""

    partition: date
    relative_path: str
    size_bytes: int


def _layout(dataset: str) -> tuple[str, str]:
    try:
        return DATASETS[dataset]
    except KeyError:
        raise ValueError(f"unknown landing dataset {dataset!r}; expected one of {sorted(DATASETS)}")


def _folder_date(name: str, prefix: str) -> date | None:
    if not name.startswith(f"{prefix}="):
        return None
    match = _DATE_FOLDER.fullmatch(name[len(prefix) + 1 :])
    if match is None:
        return None
    try:
        return date.fromisoformat(match.group(1))
    except ValueError:
        return None


def landed_partitions(landing_root: str | Path, dataset: str) -> list[date]:
    """Dates whose partition folder exists (an empty folder is a landed day with no data)."""
    prefix, _ = _layout(dataset)
    base = Path(landing_root) / dataset
    if not base.is_dir():
        return []
    found = {_folder_date(child.name, prefix) for child in base.iterdir() if child.is_dir()}
    return sorted(d for d in found if d is not None)


def list_landing_files(
    landing_root: str | Path, dataset: str, dates: Iterable[date]
) -> list[LandingFile]:
    """The complete files of ``dataset`` landed on ``dates``, sorted by (partition, path)."""
    prefix, suffix = _layout(dataset)
    root = Path(landing_root)
    files: list[LandingFile] = []
    for day in sorted(set(dates)):
        folder_name = f"{prefix}={day.isoformat()}"
        folder = root / dataset / folder_name
        if not folder.is_dir():
            continue
        for child in folder.iterdir():
            name = child.name
            if name.startswith(("_", ".")) or not name.endswith(suffix) or not child.is_file():
                continue
            relative = f"{dataset}/{folder_name}/{name}"
            files.append(LandingFile(day, relative, child.stat().st_size))
    return sorted(files, key=lambda f: (f.partition, f.relative_path))


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
    lines = _read_lines(spark, landing_root, files, DATASETS["orders"][1])
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
    lines = _read_lines(spark, landing_root, files, DATASETS["fx_rates"][1])
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
