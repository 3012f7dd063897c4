"""The contract's order pipeline in bare PySpark, written from docs/contract.md alone.

    .venv/bin/python backfill_assets_testkit/spark_contract.py LANDING OUT \\
        --start 2024-01-01 --end 2024-01-20

What a competent engineer writes with Spark and the contract, and nothing of the pipeline: no
Dagster, no Delta, no checks, none of ``backfill_assets``' transforms or readers. From the same
landing files (chosen by the project's ``list_landing_files``), in a session with the project's
Spark settings (``spark_config``), to the same tables as ``duckdb_contract.py`` writes, as
Parquet: ``OUT/staging`` and ``OUT/fact`` by event date, ``OUT/quarantine`` by arrival date.
Read every file once, split it into numbered lines, parse and validate each record with the
contract's reasons, dedupe latest wins, FX at the rate of the event's own day, the daily
aggregate. A day with an order that has no rate, or whose ``amount_usd`` does not fit
DECIMAL(18,2), is held: none of its rows are written. One session, DataFrame functions only:
no Python UDF.

Where Spark's JSON reader (Jackson) and Python's ``json`` (the reference) disagree, the code says
so next to the rule it adds. Known gaps, none in generated or adversarial feeds: a string escaping
a lone surrogate (``"\\ud800"``) is valid for both, but Spark keeps it as ``?``; a key longer
than 50,000 characters is malformed here (Jackson's limit on names, which no option of Spark's
lifts) and valid for the reference; and a line nested a little under 1,000 levels deep is
malformed for the reference when its own call stack is deep enough to reach Python's recursion
limit (here the limit is Jackson's, 1,000 levels).
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from backfill_assets.days import days_between
from backfill_assets.landing.layout import LandingFile, list_landing_files
from backfill_assets_testkit.duckdb_contract import Summary

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

RATE_LOOKBACK_DAYS = 7  # the contract's D - R <= 7
RATE_HEADER = "currency,usd_per_unit"
STATUSES = ("placed", "paid", "cancelled")
FIELDS = (
    "order_id",
    "customer_id",
    "event_time",
    "updated_at",
    "status",
    "amount",
    "currency",
    "country",
)
# Python's json refuses NaN and Infinity (the reference's parse_constant) and single quotes;
# Spark's JSON options allow both by default. Python has no limit on a number's or a string's
# length; Jackson's defaults (1,000 digits, 20 M characters) are lifted.
JSON_OPTIONS = {
    "allowNonNumericNumbers": "false",
    "allowSingleQuotes": "false",
    "maxNumLen": str(2**31 - 1),
    "maxStringLen": str(2**31 - 1),
    "mode": "PERMISSIVE",
    "columnNameOfCorruptRecord": "_corrupt",
}
# Session settings for the run: UTC dates, and timestamps in Parquet as microseconds marked UTC
# (Spark's default INT96 reads back without a zone), as DuckDB's TIMESTAMPTZ columns are.
RUN_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
}

# Java regexes. `$` also matches before a final line break in Java (and Python): `\z` instead,
# so that "EUR\n" is no currency, as the reference's fullmatch has it.
_AMOUNT = r"\A\d{1,12}(?:\.\d{1,2})?\z"
_RATE = r"\A\d{1,6}(?:\.\d{1,8})?\z"
_CURRENCY = r"\A[A-Z]{3}\z"
_COUNTRY = r"\A[A-Z]{2}\z"
_TIMESTAMP = r"\A\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2})\z"
# Python's str.isspace(): categories Zs/Zl/Zp (\p{Z}) and the bidi classes B, S and WS.
_BLANK = r"\A[\p{Z}\t\n\x0B\f\r\x1C-\x1F\x{85}]*\z"
# A line whose only braces are its object's own and that has no brackets: nothing can follow
# the object but JSON whitespace.
_FLAT_OBJECT = r"\A[ \t\r\n]*\{[^{}\[\]]*\}[ \t\r\n]*\z"
# Spark reads a JSON number into a string column re-serialized: 12.500 as 12.5, 1e3 as 1000.0,
# -0 as 0, 12345678.5 as 1.23456785E7; the contract judges the number's text as written. So
# every number of the line is quoted as written before it is parsed (strings are matched to be
# skipped, and kept). A number followed by ":" stays as it is: quoted, a number used as a key
# would make a line valid that is not. Quoting changes no line's validity otherwise, lifts
# Jackson's 1,000-digit limit (Python has none), and turns no value into a key.
_NUMBERS = r'"((?:[^"\\]++|\\.)*+)"|(-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?)(?!\s*:)'
# ... which makes a string "12" and a number 12 read alike. An id whose text could be a number's
# (or true, false, an array's or an object's) is asked its type once more, in the line with
# every string value emptied (keys, followed by ":", kept): a string reads as "".
_STRING_VALUES = r'"((?:[^"\\]++|\\.)*+)"(?=\s*:)|"(?:[^"\\]++|\\.)*+"'
_NOT_A_STRING_TEXT = r"\A(?:-?\d|[\[{]|true\z|false\z)"
_MIN_MICROS, _MAX_MICROS = -62_135_596_800_000_000, 253_402_300_799_999_999  # years 1..9999
_LINES_SCHEMA = "day date, source_file string, line_number bigint, payload string, utf8 boolean"


def _glob_escaped(path: str) -> str:
    """Spark globs the paths it loads: a landed name may hold ``*?[]{}`` or a backslash."""
    return "".join(f"\\{c}" if c in "\\*?[]{}" else c for c in path)


def _lines(spark: SparkSession, root: Path, files: list[LandingFile]) -> DataFrame:
    """(day, source_file, line_number, payload, utf8) of every record of ``files``: split on LF,
    one trailing CR dropped, blank lines numbered but skipped. A line that is not UTF-8 has
    ``utf8`` false, and its bad bytes show as U+FFFD, one for each maximal bad sequence, as
    Python's ``errors="replace"`` has it."""
    from pyspark.sql import functions as F

    files = [f for f in files if f.size_bytes > 0]  # Spark does not scan empty files: no lines
    if not files:
        return spark.createDataFrame([], _LINES_SCHEMA)
    # Hadoop's paths take a ":" in a name for a URI's scheme and cannot name such a file: its
    # bytes are read here and handed to Spark. Every other file Spark reads itself.
    by_spark = [f for f in files if ":" not in f.relative_path]
    by_driver = [f for f in files if ":" in f.relative_path]
    contents = spark.createDataFrame(
        [(f.relative_path, (root / f.relative_path).read_bytes()) for f in by_driver],
        "source_file string, content binary",
    )
    if by_spark:
        blobs = spark.read.format("binaryFile").load(
            [_glob_escaped(str(root / f.relative_path)) for f in by_spark]
        )
        # Spark names a local file "file:" + its path: the file relative to the root follows. A
        # file named otherwise stops the job rather than be misread.
        prefix = f"file:{root}/"
        relative = F.substr("path", F.lit(len(prefix) + 1), F.length("path"))
        source_file = F.when(
            F.col("path").startswith(prefix) & relative.isin([f.relative_path for f in by_spark]),
            relative,
        ).otherwise(F.raise_error(F.concat(F.lit("not a landed file as listed: "), F.col("path"))))
        contents = blobs.select(source_file.alias("source_file"), "content").unionByName(contents)
    # the partition folder is the file's second part: orders/arrival_date=YYYY-MM-DD/...
    day = F.to_date(F.substring_index(F.substring_index("source_file", "/", 2), "=", -1))
    text = F.col("content").cast("string")
    # Spark's split decodes the text to Java's UTF-16 and back: bad bytes would turn into
    # U+FFFD before a line could be judged. A file that is not UTF-8 is split as Latin-1, one
    # character per byte, and each line's bytes taken back as they were.
    lines = F.when(F.col("utf8_file"), F.split(text, "\n", -1)).otherwise(
        F.transform(
            F.split(F.decode("content", "ISO-8859-1"), "\n", -1),
            lambda line: F.encode(line, "ISO-8859-1").cast("string"),
        )
    )
    exploded = (
        contents.select("source_file", "content", F.is_valid_utf8(text).alias("utf8_file"))
        .select(
            day.alias("day"), "source_file", "utf8_file", F.posexplode(lines).alias("pos", "line")
        )
        .select(
            "day",
            "source_file",
            (F.col("pos") + 1).cast("bigint").alias("line_number"),
            "line",
            (F.col("utf8_file") | F.is_valid_utf8("line")).alias("utf8"),
        )
        .withColumn(
            "line", F.when(F.col("utf8"), F.col("line")).otherwise(F.make_valid_utf8("line"))
        )
    )
    line = F.col("line")
    payload = F.when(line.endswith("\r"), F.expr("left(line, length(line) - 1)")).otherwise(line)
    return exploded.select(
        "day", "source_file", "line_number", payload.alias("payload"), "utf8"
    ).where(
        (F.col("payload") != "")
        & (F.col("payload").startswith("{") | ~F.col("payload").rlike(_BLANK))
    )


def _timestamp(text: Column) -> Column:
    """The TIMESTAMP (to the microsecond) a contract timestamp text names, NULL when the text is
    not one: ``YYYY-MM-DDTHH:MM[:SS[.f]]`` and ``Z`` or ``+-HH:MM``. It is rewritten to one full
    form (seconds, six fraction digits: further digits dropped, not rounded) and cast; Spark's
    cast checks the calendar, the clock and offsets up to 18:00. See ``_in_years``."""
    from pyspark.sql import functions as F

    zone = F.when(text.endswith("Z"), F.lit("Z")).otherwise(F.substr(text, F.lit(-6), F.lit(6)))
    rest = F.substr(text, F.lit(17), F.length(text) - 16 - F.length(zone))  # "", :SS, :SS.f..
    seconds = F.when(rest == "", F.lit(":00")).otherwise(F.substr(rest, F.lit(1), F.lit(3)))
    fraction = F.rpad(F.substr(rest, F.lit(5), F.lit(6)), 6, "0")
    full = F.concat(F.substr(text, F.lit(1), F.lit(16)), seconds, F.lit("."), fraction, zone)
    return F.when(text.rlike(_TIMESTAMP) & ~text.startswith("0000"), full.try_cast("timestamp"))


def _in_years(ts: Column) -> Column:
    """``ts`` when it lies in the years 1..9999, else NULL: Spark's timestamps reach past the
    years Python's datetime holds, and an offset may move an instant out of them."""
    from pyspark.sql import functions as F

    return F.when(F.unix_micros(ts).between(_MIN_MICROS, _MAX_MICROS), ts)


def _records(lines: DataFrame, max_lateness_days: int) -> DataFrame:
    """Every order record with its reason and, when valid, its typed fields (a valid record's
    payload is not kept: nothing writes it)."""
    from pyspark.sql import functions as F

    fields = ", ".join(f"{name} string" for name in FIELDS)
    t, p = F.col("t"), F.col("p")
    quoted = lines.select(
        F.col("day").alias("arrival_date"),
        "source_file",
        "line_number",
        "payload",
        "utf8",  # a line that is not UTF-8 is malformed, wherever the bad bytes sit
        F.when(F.col("utf8"), F.regexp_replace("payload", _NUMBERS, '"$1$2"')).alias("q"),
    )
    parsed = quoted.select(
        "*", F.from_json("q", f"{fields}, _corrupt string", JSON_OPTIONS).alias("t")
    ).withColumn("parsed", F.col("utf8") & t.isNotNull() & t["_corrupt"].isNull())
    ambiguous = t["order_id"].rlike(_NOT_A_STRING_TEXT) | t["customer_id"].rlike(_NOT_A_STRING_TEXT)
    asked = parsed.select(
        "*",
        F.when(F.col("parsed"), F.json_object_keys("q")).alias("keys"),
        F.when(
            F.col("parsed") & ambiguous,
            F.from_json(
                F.regexp_replace("payload", _STRING_VALUES, '"$1"'),
                "order_id string, customer_id string",
                JSON_OPTIONS,
            ),
        ).alias("p"),
        _timestamp(t["event_time"]).alias("event_ts"),
        _timestamp(t["updated_at"]).alias("updated_ts"),
    )
    q = F.col("q")
    # Jackson reads the first value and ignores what follows it; Python's json refuses anything
    # but whitespace after it. A line that is not a flat object is parsed twice more, as the one
    # element of an array and as the value of an object's key: whatever follows the object
    # breaks one of the two (a "]" ends the array early but breaks the object, a "}" the other
    # way round, a "," adds an element but breaks the object).
    in_array = F.from_json(F.concat(F.lit("["), q, F.lit("]")), "array<string>", JSON_OPTIONS)
    in_object = F.from_json(
        F.concat(F.lit('{"a":'), q, F.lit("}")), "a string, _corrupt string", JSON_OPTIONS
    )
    whole = F.when(q.rlike(_FLAT_OBJECT), F.lit(True)).otherwise(
        (F.size(in_array) == 1) & in_object["_corrupt"].isNull()
    )
    # Python's json takes a repeated key's last value (so does Spark); the contract makes the
    # line malformed. Only the object's own keys count: a repeat deeper down is valid.
    is_object = F.coalesce(
        F.col("parsed") & (F.size("keys") == F.size(F.array_distinct("keys"))) & whole,
        F.lit(False),
    )
    missing = F.lit(False)
    for name in FIELDS:
        missing = missing | (F.coalesce(t[name], F.lit("")) == "")

    def string_id(name: str) -> Column:
        """The id when it is a JSON string: one whose text could be another value's has ``p``."""
        return F.when(~t[name].rlike(_NOT_A_STRING_TEXT) | (p[name] == ""), t[name])

    checked = asked.select(
        "arrival_date",
        "source_file",
        "line_number",
        "payload",
        is_object.alias("is_object"),
        missing.alias("missing"),
        F.when(F.length(t["order_id"]) <= 64, string_id("order_id")).alias("order_id"),
        string_id("customer_id").alias("customer_id"),
        _in_years(F.col("event_ts")).alias("event_time"),
        _in_years(F.col("updated_ts")).alias("updated_at"),
        F.when(t["status"].isin(*STATUSES), t["status"]).alias("status"),
        F.when(t["amount"].rlike(_AMOUNT), t["amount"].cast("decimal(18,2)")).alias("amount"),
        F.when(t["currency"].rlike(_CURRENCY), t["currency"]).alias("currency"),
        F.when(t["country"].rlike(_COUNTRY), t["country"]).alias("country"),
    ).withColumn("event_date", F.to_date("event_time"))
    invalid = F.lit(False)
    for name in (*FIELDS, "event_date"):
        invalid = invalid | F.col(name).isNull()
    reason = (
        F.when(~F.col("is_object"), F.lit("malformed_json"))
        .when(F.col("missing"), F.lit("missing_field"))
        .when(invalid, F.lit("invalid_value"))
        .when(F.col("event_date") > F.col("arrival_date"), F.lit("future_event"))
        .when(F.datediff("arrival_date", "event_date") > int(max_lateness_days), F.lit("too_late"))
    )
    return checked.withColumn("reason", reason).select(
        "arrival_date",
        "source_file",
        "line_number",
        "reason",
        F.when(F.col("reason").isNotNull(), F.col("payload")).alias("payload"),
        "order_id",
        "customer_id",
        "event_time",
        "event_date",
        "updated_at",
        "status",
        "amount",
        "currency",
        "country",
    )


def _day_rates(rate_lines: DataFrame, start: date, end: date) -> DataFrame:
    """(day, currency, usd_per_unit) for the days [start, end]: the rate of the latest rate date
    R <= day, day - R <= 7, that lists the currency; of one rate date, the file whose name sorts
    last, the later line within a file. A file whose first line is not the header lists
    nothing, nor does a line that breaks a rule."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    first = Window.partitionBy("source_file").orderBy("line_number")
    parts = F.split("payload", ",", -1)
    rate = parts[1].try_cast("decimal(18,8)")
    listed = (
        rate_lines.withColumn("header", F.first("payload").over(first))
        .withColumn("header_line", F.min("line_number").over(first))
        .where((F.col("header") == RATE_HEADER) & (F.col("line_number") > F.col("header_line")))
        .where(
            (F.size(parts) == 2) & parts[0].rlike(_CURRENCY) & parts[1].rlike(_RATE) & (rate > 0)
        )
    )
    lookback = F.sequence("day", F.date_add("day", RATE_LOOKBACK_DAYS))  # the days it may serve
    return (
        listed.select(
            F.explode(lookback).alias("rate_day"),
            parts[0].alias("currency"),
            rate.alias("usd_per_unit"),
            F.struct("day", "source_file", "line_number").alias("precedence"),
        )
        .where(F.col("rate_day").between(F.lit(start), F.lit(end)))
        .groupBy(F.col("rate_day").alias("day"), "currency")
        .agg(F.max_by("usd_per_unit", "precedence").alias("usd_per_unit"))
    )


def _staged(records: DataFrame, day_rates: DataFrame, start: date, end: date) -> DataFrame:
    """The latest version of each order of each event day in [start, end], greatest by
    (updated_at, arrival date, source_file, line_number), with the rate of its currency on
    that day (NULL: none) and ``amount_usd`` (NULL: no rate, or it does not fit
    DECIMAL(18,2)). Partitioned by event date: each day is written as one file, and the
    daily aggregate needs no shuffle of its own."""
    from pyspark.sql import functions as F

    kept = ("customer_id", "event_time", "status", "amount", "currency", "country")
    latest = (
        records.where(
            F.col("reason").isNull() & F.col("event_date").between(F.lit(start), F.lit(end))
        )
        .repartition("event_date")
        .groupBy("event_date", "order_id")
        .agg(
            F.max(
                F.struct("updated_at", "arrival_date", "source_file", "line_number", *kept)
            ).alias("v")
        )
        .select("order_id", "event_date", "v.updated_at", *(f"v.{c}" for c in kept))
    )
    rates = day_rates.select(
        F.col("day").alias("event_date"), "currency", F.col("usd_per_unit").alias("rate")
    )
    usd_per_unit = F.when(F.col("currency") == "USD", F.lit(1).cast("decimal(18,8)")).otherwise(
        F.col("rate")
    )
    return (
        latest.join(F.broadcast(rates), ["event_date", "currency"], "left")
        .withColumn("usd_per_unit", usd_per_unit)
        .select(
            "order_id",
            "customer_id",
            "event_time",
            "event_date",
            "updated_at",
            "status",
            "amount",
            "currency",
            "country",
            "usd_per_unit",
            F.round(F.col("amount") * F.col("usd_per_unit"), 2)
            .try_cast("decimal(18,2)")
            .alias("amount_usd"),
        )
    )


def _fact(staging: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    status = F.col("status")
    return staging.groupBy("event_date", "country").agg(
        F.count("*").alias("orders"),
        F.count_if(status == "placed").alias("placed_orders"),
        F.count_if(status == "paid").alias("paid_orders"),
        F.count_if(status == "cancelled").alias("cancelled_orders"),
        F.coalesce(F.sum(F.when(status == "paid", F.col("amount_usd"))), F.lit(0))
        .cast("decimal(18,2)")
        .alias("revenue_usd"),
    )


def _write(frame: DataFrame, out: Path, partition: str) -> None:
    """``frame``'s rows as Parquet under ``out``, one folder per ``partition`` value (and one
    file: each frame comes partitioned by that column)."""
    frame.write.mode("overwrite").partitionBy(partition).parquet(str(out))


def run(
    landing_dir: str | Path,
    out_dir: str | Path,
    start: date,
    end: date,
    max_lateness_days: int = 7,
    spark: SparkSession | None = None,
) -> Summary:
    """The contract's staging, fact and quarantine tables of [start, end] as Parquet under
    ``out_dir``: staging and fact of event days start..end (arrivals up to end + lateness),
    quarantine of arrival days start..end. In ``spark``, or a session of the project's Spark
    settings started (and stopped) here."""
    from pyspark.sql import functions as F

    from backfill_assets.spark.session import build_session, spark_config

    began = time.monotonic()
    landing, out = Path(landing_dir).resolve(), Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    arrivals = days_between(start, end + timedelta(days=max_lateness_days))
    rate_days = days_between(start - timedelta(days=RATE_LOOKBACK_DAYS), end)
    session = spark or build_session(spark_config())
    before = {key: session.conf.get(key, None) for key in RUN_CONF}
    for key, value in RUN_CONF.items():
        session.conf.set(key, value)
    cached: list[DataFrame] = []
    try:
        order_lines = _lines(session, landing, list_landing_files(landing, "orders", arrivals))
        rate_lines = _lines(session, landing, list_landing_files(landing, "fx_rates", rate_days))
        records = _records(order_lines, max_lateness_days).cache()
        cached.append(records)
        quarantine = F.col("reason").isNotNull() & F.col("arrival_date").between(
            F.lit(start), F.lit(end)
        )
        # the first action: it reads every file and parses every line, once (then cached)
        counted = records.agg(F.count("*"), F.count_if(quarantine)).first()
        assert counted is not None  # an aggregate without grouping has one row
        total, quarantined = counted
        staged = _staged(records, _day_rates(rate_lines, start, end), start, end).cache()
        cached.append(staged)
        days = (
            staged.groupBy("event_date")
            .agg(
                F.count("*").alias("rows"),
                F.count_if(F.col("amount_usd").isNull()).alias("unpriced"),
                F.count_distinct("country").alias("countries"),
            )
            .collect()
        )
        held = sorted(d.event_date for d in days if d.unpriced)
        staging = staged.where(~F.col("event_date").isin(held)) if held else staged
        _write(staging, out / "staging", "event_date")
        _write(_fact(staging).repartition("event_date"), out / "fact", "event_date")
        rejected = records.where(quarantine).select(
            "arrival_date", "source_file", "line_number", "reason", "payload"
        )
        _write(rejected.repartition("arrival_date"), out / "quarantine", "arrival_date")
    finally:
        for frame in cached:
            frame.unpersist()
        for key, was in before.items():
            if was is None:
                session.conf.unset(key)
            else:
                session.conf.set(key, was)
        if spark is None:
            session.stop()
    return Summary(
        total,
        quarantined,
        sum(d.rows for d in days if not d.unpriced),
        sum(d.countries for d in days if not d.unpriced),
        held,
        time.monotonic() - began,
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("landing", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--start", type=date.fromisoformat, required=True)
    p.add_argument("--end", type=date.fromisoformat, required=True)
    p.add_argument("--max-lateness-days", type=int, default=7)
    args = p.parse_args(argv)
    s = run(args.landing, args.out, args.start, args.end, args.max_lateness_days)
    held = ", ".join(map(str, s.held)) or "none"
    print(
        f"spark: {s.records} records read, {s.quarantined} quarantined, "
        f"{s.staging_rows} staging rows, {s.fact_rows} fact rows, held days: {held}; "
        f"{s.seconds:.1f}s"
    )


if __name__ == "__main__":
    main()
