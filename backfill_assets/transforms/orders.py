"""Order records: validation with the contract's rejection reasons, quarantine, dedupe.

The contract's fields of a line are read as strings: a JSON string's text, a number's or a
literal's JSON text, NULL for null or absent. A plain line (``PLAIN_LINE``: compact, the eight
fields and at most one more, no escapes, no nesting), nearly every line a producer writes, is
judged by that pattern and those fields alone: a JVM function judges the shape and takes the
fields in one pass where the session has it (``plain_line_jar``), the pattern and ``from_json``
elsewhere. Any other line is read by ``from_json`` and parsed as a variant to judge it (one
JSON object, nothing after it; again, without Jackson's limits, where that parse fails), and its
top-level keys are listed to find a repeated one. Most rules are patterns that only a JSON
string's text can match (a time, a status, a currency code), so they need no JSON type; the
type is asked (of the shape on a plain line, of the variant on another) only for the fields whose
rule another value's text could pass: the ids (``123`` is no string) and the amount (a number is
judged by its text as written): typing every field out of the variant would build a ``Cast``
per row and field. Judging the plain shape costs less than the parse and the key listing it
spares.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import date

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from backfill_assets.day_blocks import BLOCK, by_day_blocks
from backfill_assets.spark import plain_line_jar
from backfill_assets.transforms.schemas import (
    MONEY,
    QUARANTINE_ORDERS,
    RAW_ORDERS,
    RAW_ORDERS_PARSED,
    STATUSES,
    UTF8_COLUMN,
)

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

# `\z`, not `$`: Java's `$` also matches before a final line terminator ("USD\n").
AMOUNT_TEXT = r"^\d{1,12}(\.\d{1,2})?\z"
CURRENCY = r"^[A-Z]{3}\z"
COUNTRY = r"^[A-Z]{2}\z"
# Seconds (and a 1-9 digit fraction) are optional; the zone is required.
TIMESTAMP_TEXT = r"^(?!0000)\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})\z"
# Spark's parser needs the seconds: 2024-01-01T10:00Z -> 2024-01-01T10:00:00Z.
_MINUTE_PRECISION = r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2})(Z|[+-])"
MAX_ORDER_ID_LENGTH = 64
# Instants outside years 1-9999 in UTC are not date-times a calendar can hold
# (Python's datetime, for one, cannot): 0001-01-01T00:00Z .. 9999-12-31T23:59:59.999999Z.
_MIN_MICROS = -62_135_596_800_000_000
_MAX_MICROS = 253_402_300_799_999_999

ALLOW_DUPLICATE_KEYS = "spark.sql.variant.allowDuplicateKeys"
# parse_json accepts trailing text after the first value ('{"a":1}x'). Parsing the
# line as the first element of an array that ends with a sentinel string makes any
# trailing text either a syntax error or a visible extra/missing element. The sentinel is the
# line's own SHA-256, which no line can hold: a line that closed the array itself with the
# sentinel string and went on would hide its trailing text again.
# A number's text as written, read where variant cannot give it (variant normalises 12.500 to
# 12.5, and JSON's -0 to 0): each occurrence of the key is marked with a character no JSON line
# holds raw, every string blanked, and the occurrence whose nesting depth is 1 is the field's.
# ``[{,]`` before the key's quote: within a string a quote is escaped, so only a key matches.
_KEY_AT = r'([{{,]\s*)"{key}"(\s*:)'
_KEY_MARK = "\u0001"
_STRING_TOKEN = r'"(?:[^"\\]|\\.)*+"'
_NUMBER_AFTER_MARK = r"^\s*:\s*(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)"


# The common line, which needs no parse to be judged an object: one compact JSON object of the
# contract's eight fields, in any order, then perhaps one field beyond them; every value a
# string without an escape, the amount a string or a number the amount rule accepts, the other
# field's a string, a number or a literal. Each such line is valid JSON, and ``from_json``
# finding all eight fields proves that no name repeats.
_PLAIN_STRING = r'"[^"\\\x00-\x1f]*+"'
_CONTRACT_NAME = "(?:" + "|".join(FIELDS) + ")"
_STRING_FIELDS = "(?:" + "|".join(f for f in FIELDS if f != "amount") + ")"
_PLAIN_AMOUNT = r"(?:0|[1-9]\d{0,11})(?:\.\d{1,2})?"  # JSON numbers that AMOUNT_TEXT accepts
_PLAIN_FIELD = rf'"{_STRING_FIELDS}":{_PLAIN_STRING}|"amount":(?:{_PLAIN_STRING}|{_PLAIN_AMOUNT})'
# A name of at most 50,000 characters: Jackson's limit, which the listing of another line's names
# has (``PlainLineFields.java`` keeps the same).
MAX_NAME_LENGTH = 50_000
_PLAIN_OTHER = (
    rf'"(?!{_CONTRACT_NAME}")[^"\\\x00-\x1f]{{0,{MAX_NAME_LENGTH}}}+":'
    + rf"(?:{_PLAIN_STRING}|-?(?:0|[1-9]\d*+)(?:\.\d++)?(?:[eE][+-]?\d++)?|true|false|null)"
)
PLAIN_LINE = (
    rf"^\{{(?:{_PLAIN_FIELD})(?:,(?:{_PLAIN_FIELD})){{{len(FIELDS) - 1}}}(?:,{_PLAIN_OTHER})?\}}\z"
)
# On a plain line ``"amount":`` is the amount's key (no value holds a quote): a number's text
# follows it, or a string's opening quote.
_PLAIN_AMOUNT_NUMBER = r'"amount":([0-9.]+)'


def _key_pattern(name: str) -> str:
    """A regular expression for ``name`` as a JSON key may spell it: each character as itself
    or as a ``\\u`` escape (hex digits in either case). For names of letters, digits and ``_``,
    which need no other escape."""
    return "".join(f"(?:{c}|\\\\u(?i:{ord(c):04x}))" for c in name)


VALIDATED_TYPED_COLUMNS = (
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


# Strict JSON, as long as the line: Spark's JSON reader takes single quotes, NaN and Infinity
# by default, and Jackson's stops at numbers of 1,000 digits and strings of 20 M characters.
_STRICT_JSON = {
    "allowSingleQuotes": "false",
    "allowNonNumericNumbers": "false",
    "maxNumLen": str(2**31 - 1),
    "maxStringLen": str(2**31 - 1),
}
# A string (kept whole, as group 1), or a run of digits longer than Jackson's default limit,
# which json_object_keys keeps, outside a string (its first digit, group 2, is kept).
_LONG_DIGITS = r'("(?:[^"\\]|\\.)*+")|([0-9])[0-9]{999,}'


def _sentinel(payload: Column) -> Column:
    return F.sha2(payload, 256)


def _wrapped(payload: Column, sentinel: Column) -> Column:
    """The line parsed as the first element of an array that ends with the ``sentinel`` string
    (``_sentinel(payload)``). Where ``parse_json`` fails (its parser has Jackson's limits),
    ``from_json`` into a variant tries again without them: slower, so only there."""
    text = F.concat(F.lit("["), payload, F.lit(',"'), sentinel, F.lit('"]'))
    return F.coalesce(F.try_parse_json(text), F.from_json(text, "variant", _STRICT_JSON))


def _top_level_keys(payload: Column) -> Column:
    """The names of the line's top-level object, unescaped, repeats included. Where Jackson's
    limit on a number's digits stops ``json_object_keys``, the names of the line with each long
    number's runs of digits cut to their first digit (the names, strings, are left as written)."""
    return F.coalesce(
        F.json_object_keys(payload),
        F.json_object_keys(F.regexp_replace(payload, _LONG_DIGITS, "$1$2")),
    )


def _is_object(wrapped: Column, keys: Column, sentinel: Column, payload: Column) -> Column:
    """Whether the line is one JSON object (UTF-8 aside): one value, an object, no key repeated
    in it (a key repeated deeper down is allowed: the contract forbids it at the top only).
    ``keys``: ``_top_level_keys(payload)``; ``sentinel``: ``_sentinel(payload)``."""
    return (
        F.try_variant_get(wrapped, "$[1]", "string").eqNullSafe(sentinel)
        & F.try_variant_get(wrapped, "$[2]", "variant").isNull()
        # A JSON value that parsed is an object when its text opens with "{" (after JSON's
        # whitespace). Not schema_of_variant: it recurses through the whole value, and an
        # ignored field nested ~1,000 deep overflowed the task's stack, killing the JVM.
        & payload.rlike(r"^[ \t\r\n]*\{")
        # The top-level keys, unescaped, as Jackson reads them, repeats included.
        & F.coalesce(F.size(keys) == F.size(F.array_distinct(keys)), F.lit(False))
    )


FIELD_TEXTS = T.StructType([T.StructField(name, T.StringType()) for name in FIELDS])


def _fields_as_text(payload: Column) -> Column:
    """The contract's fields of a line known to be one JSON object, each as its text: a JSON
    string's own text, another value's JSON text, NULL for null or absent."""
    return F.from_json(payload, FIELD_TEXTS, _STRICT_JSON)


def _with_plain_fields(rows: DataFrame, in_jvm: bool | None) -> DataFrame:
    """``rows`` (with ``payload`` and ``_utf8``) and ``_plain_fields``: where the line has the
    plain shape (``PLAIN_LINE``), its eight fields as text (a number amount's as written), else
    NULL. Judged and read in one pass by ``plain_line_jar``'s JVM function where the session can
    load it (an error when ``in_jvm`` and it cannot); by the pattern and ``from_json`` elsewhere,
    or when ``in_jvm`` is False."""
    payload, utf8 = F.col("payload"), F.col("_utf8")
    if in_jvm is not False and plain_line_jar.register(rows.sparkSession, FIELD_TEXTS):
        read = F.call_function(plain_line_jar.FUNCTION, payload)
        return rows.withColumn("_plain_fields", F.when(utf8, read))
    if in_jvm:
        raise RuntimeError(
            f"this Spark session cannot load {plain_line_jar.CLASS_NAME}: "
            f"{plain_line_jar.jar_path()} is not on its class path (`make setup` builds it)"
        )
    # from_json gives a number's value as text (12.50 as 12.5): the amount as written instead,
    # in a projection of its own, or Spark would parse the line once per field read.
    shape = utf8 & payload.rlike(PLAIN_LINE)
    by_json = rows.withColumn("_plain_fields", F.when(shape, _fields_as_text(payload)))
    fields = F.col("_plain_fields")
    number = F.regexp_extract(payload, _PLAIN_AMOUNT_NUMBER, 1)
    amount = F.when(number == F.lit(""), fields["amount"]).otherwise(number)
    return by_json.withColumn("_plain_fields", fields.withField("amount", amount))


def _value(name: str) -> Column:
    """The field's JSON value as a variant (JSON null a variant null); NULL when absent."""
    return F.try_variant_get(F.col("_wrapped"), f"$[0].{name}", "variant")


def _is_plain_line(fields: Column) -> Column:
    """A line of ``PLAIN_LINE``'s shape whose eight fields were all found (``fields``: NULL where
    the line has not that shape): one JSON object without a repeated key (the shape has eight
    contract names), every field a string (the amount perhaps a number): judged without a parse
    into a variant."""
    plain = F.lit(True)
    for name in FIELDS:
        plain = plain & fields[name].isNotNull()
    return plain


def _json_type(name: str) -> Column:
    """STRING, BIGINT, DECIMAL(p,s), DOUBLE, BOOLEAN, VOID (JSON null), OBJECT or ARRAY; NULL
    when absent. schema_of_variant only for a scalar: on an object or array it recurses through
    the whole value (its stack overflow took the JVM down on a field nested ~1,000 deep)."""
    value = _value(name)
    # A cast to a map or array of booleans only looks one level down.
    is_object = F.try_variant_get(value, "$", "map<string,boolean>").isNotNull()
    is_array = F.try_variant_get(value, "$", "array<boolean>").isNotNull()
    return (
        F.when(is_object, F.lit("OBJECT"))
        .when(is_array, F.lit("ARRAY"))
        .otherwise(F.schema_of_variant(value))
    )


def _string(name: str) -> Column:
    """The field's text (``_fields_as_text``)."""
    return F.col("_strings")[name]


def _number_text(name: str) -> Column:
    """The text of the top-level JSON number field ``name`` as written in the line, when it has
    the value variant read (a nested object may hold the same key: its text is not the
    field's)."""
    marked = F.regexp_replace(
        F.col("payload"), F.lit(_KEY_AT.format(key=_key_pattern(name))), F.lit(f"$1{_KEY_MARK}$2")
    )
    parts = F.split(F.regexp_replace(marked, F.lit(_STRING_TOKEN), F.lit('""')), _KEY_MARK)

    def opened(text: Column) -> Column:  # objects and arrays opened in ``text``, less those closed
        return F.length(F.regexp_replace(text, r"[^\[{]", "")) - F.length(
            F.regexp_replace(text, r"[^\]}]", "")
        )

    def step(seen: Column, before: Column) -> Column:  # ``before``: the text before a mark
        depth, mark = seen["depth"] + opened(before), seen["mark"] + 1
        top = F.coalesce(seen["top"], F.when(depth == 1, mark))
        return F.struct(depth.alias("depth"), mark.alias("mark"), top.alias("top"))

    start = F.struct(
        F.lit(0).alias("depth"), F.lit(0).alias("mark"), F.lit(None).cast("int").alias("top")
    )
    top = F.aggregate(F.slice(parts, 1, F.size(parts) - 1), start, step)["top"]
    text = F.regexp_extract(F.try_element_at(parts, top + 1), _NUMBER_AFTER_MARK, 1)
    value = F.try_variant_get(_value(name), "$", "decimal(38,10)")
    return F.when(text.try_cast("decimal(38,10)") == value, text)


def _is_missing(name: str) -> Column:
    text = _string(name)
    return text.isNull() | (text == F.lit(""))


def _timestamp(name: str) -> Column:
    """A zoned ISO 8601 date-time string as a TIMESTAMP; NULL when the text breaks the rule."""
    text = _string(name)
    well_formed = text.rlike(TIMESTAMP_TEXT)
    # Only a text without seconds has no ":" as its 17th character (and needs the rewrite).
    with_seconds = F.when(F.substring(text, 17, 1) == F.lit(":"), text).otherwise(
        F.regexp_replace(text, _MINUTE_PRECISION, "$1:00$2")
    )
    parsed = F.try_to_timestamp(with_seconds)
    in_range = F.unix_micros(parsed).between(_MIN_MICROS, _MAX_MICROS)
    return F.when(well_formed & in_range, parsed)


def _amount_text() -> Column:
    """The amount's text: a JSON string's own, a JSON number's as written; else NULL. Its rule
    reads it twice: ``validate_orders`` gives it a projection of its own, or Spark would build it
    twice in every row. A plain line's fields hold a number amount's text as written."""
    json_type = _json_type("amount")
    is_exact_number = (json_type == F.lit("BIGINT")) | json_type.startswith("DECIMAL")
    return (
        F.when(F.col("_plain"), _string("amount"))
        .when(json_type == F.lit("STRING"), _string("amount"))
        .when(is_exact_number, _number_text("amount"))
    )


def _string_field(name: str, rule: Column | None = None) -> Column:
    """The field's string value when it is a JSON string obeying ``rule``; else NULL."""
    text = _string(name)
    valid = F.col("_plain") | (_json_type(name) == F.lit("STRING"))
    if rule is not None:
        valid = valid & rule
    return F.when(valid, text)


def _pattern_field(name: str, pattern: Column) -> Column:
    """The field's text when it obeys ``pattern``, which no other JSON value's text can."""
    return F.when(pattern, _string(name))


def _typed_fields() -> list[Column]:
    """Each contract field parsed to its type; NULL where the field is absent or breaks its rule."""
    order_id = _string("order_id")
    amount_text = F.col("_amount_text")
    return [
        _string_field("order_id", F.length(order_id) <= MAX_ORDER_ID_LENGTH).alias("order_id"),
        _string_field("customer_id").alias("customer_id"),
        _timestamp("event_time").alias("event_time"),
        _timestamp("updated_at").alias("updated_at"),
        _pattern_field("status", _string("status").isin(*STATUSES)).alias("status"),
        F.when(amount_text.rlike(AMOUNT_TEXT), amount_text.try_cast(MONEY)).alias("amount"),
        _pattern_field("currency", _string("currency").rlike(CURRENCY)).alias("currency"),
        _pattern_field("country", _string("country").rlike(COUNTRY)).alias("country"),
    ]


def _utc_date(ts: Column) -> Column:
    """The UTC calendar date of an instant, whatever the session time zone: its whole seconds
    (``unix_seconds`` rounds down, before 1970 too) divided by a day's. As doubles, which hold
    every second of years 1-9999 exactly and never round a quotient up to the next whole day:
    no decimal arithmetic in every row."""
    return F.date_from_unix_date(F.floor(F.unix_seconds(ts) / F.lit(86_400)).cast("int"))


def validate_orders(
    raw: DataFrame, max_lateness_days: int, plain_in_jvm: bool | None = None
) -> DataFrame:
    """raw/orders rows + ``reason`` (NULL when valid) + the typed fields of each record.

    ``raw`` may carry the landing reader's ``_utf8`` flag (False: the line's bytes are not UTF-8).
    ``plain_in_jvm``: how plain lines' fields are read (``_with_plain_fields``).
    """
    # Parse each line keeping a key repeated anywhere (the last value wins): the contract
    # forbids a repeat in the top-level object only, which ``_is_object`` finds. Spark reads this
    # setting when the plan below is built.
    raw.sparkSession.conf.set(ALLOW_DUPLICATE_KEYS, "true")
    raw_columns = [F.col(name) for name in RAW_ORDERS.fieldNames()]
    payload = F.col("payload")
    # JSON text is UTF-8: a line whose bytes are not (flagged by the landing reader) is no object.
    utf8 = F.col(UTF8_COLUMN) if UTF8_COLUMN in raw.columns else F.lit(True)
    # Each step its own projection: Spark would evaluate a costly expression that a later one
    # reads twice once per read, and the parse of a plain line not at all.
    texts = _with_plain_fields(raw.select(*raw_columns, utf8.alias("_utf8")), plain_in_jvm)
    plain = texts.select(
        *raw_columns,
        "_utf8",
        "_plain_fields",
        _is_plain_line(F.col("_plain_fields")).alias("_plain"),
    ).select(
        *raw_columns,
        "_utf8",
        "_plain",
        F.when(F.col("_plain"), F.col("_plain_fields"))
        .otherwise(_fields_as_text(payload))
        .alias("_strings"),
        # the line's hash, once: the parse and the judgement of a line that is not plain read it
        F.when(F.col("_utf8") & ~F.col("_plain"), _sentinel(payload)).alias("_sentinel"),
    )
    strict = F.col("_utf8") & ~F.col("_plain")
    wrapped = plain.select(
        *raw_columns,
        "_strings",
        "_plain",
        "_sentinel",
        F.when(strict, _wrapped(payload, F.col("_sentinel"))).alias("_wrapped"),
        F.when(strict, _top_level_keys(payload)).alias("_keys"),
    )
    is_object = F.col("_plain") | _is_object(
        F.col("_wrapped"), F.col("_keys"), F.col("_sentinel"), payload
    )
    parsed = wrapped.select(
        *raw_columns,
        "_plain",
        is_object.alias("_is_object"),
        "_wrapped",
        F.when(is_object, F.col("_strings")).alias("_strings"),
        F.when(is_object, _amount_text()).alias("_amount_text"),
    )
    missing = F.lit(False)
    for name in FIELDS:
        missing = missing | _is_missing(name)
    typed = parsed.select(
        *raw_columns,
        "_is_object",
        missing.alias("_missing"),
        *_typed_fields(),
    ).withColumn("event_date", _utc_date(F.col("event_time")))
    invalid = F.lit(False)
    for name in FIELDS:
        invalid = invalid | F.col(name).isNull()
    lateness = F.datediff(F.col("arrival_date"), F.col("event_date"))
    reason = (
        F.when(~F.col("_is_object"), F.lit("malformed_json"))
        .when(F.col("_missing"), F.lit("missing_field"))
        .when(invalid, F.lit("invalid_value"))
        .when(lateness < 0, F.lit("future_event"))
        .when(lateness > F.lit(max_lateness_days), F.lit("too_late"))
    )
    return typed.select(*raw_columns, reason.alias("reason"), *VALIDATED_TYPED_COLUMNS)


PARSED_NAMES = [f.name for f in RAW_ORDERS_PARSED]


def raw_rows(validated: DataFrame) -> DataFrame:
    """raw/orders rows as stored (RAW_ORDERS_STORED): the landed record verbatim, then its
    verdict, line checksum and typed fields under their ``_`` names, from ``validate_orders``
    rows that carry the checksum in a ``line_hash`` column."""
    parsed = [F.col(name.removeprefix("_")).alias(name) for name in PARSED_NAMES]
    return validated.select(*RAW_ORDERS.fieldNames(), *parsed)


def parsed_view(stored: DataFrame) -> DataFrame:
    """Stored raw/orders rows read back as ``validate_orders`` rows (plus ``line_hash``): what
    ``quarantine_rows`` and ``valid_orders`` split."""
    parsed = [F.col(name).alias(name.removeprefix("_")) for name in PARSED_NAMES]
    return stored.select(*RAW_ORDERS.fieldNames(), *parsed)


def quarantine_rows(validated: DataFrame) -> DataFrame:
    """quarantine/orders rows (QUARANTINE_ORDERS schema): the rejected records and why."""
    return validated.filter(F.col("reason").isNotNull()).select(*QUARANTINE_ORDERS.fieldNames())


def valid_orders(validated: DataFrame) -> DataFrame:
    """Valid records with lineage (arrival_date, source_file, line_number) and typed fields."""
    return validated.filter(F.col("reason").isNull()).select(
        "arrival_date", "source_file", "line_number", *VALIDATED_TYPED_COLUMNS
    )


def latest_wins(valid: DataFrame, days: Collection[date] | None = None) -> DataFrame:
    """One row per (event_date, order_id): the greatest by (updated_at, arrival_date, source_file,
    line_number).

    With ``days``, the rows go by blocks of those days (``day_blocks``) and each task sorts one
    block; without, by a hash of (event_date, order_id) into the session's shuffle partitions,
    which spreads a hot day's rows over every task."""
    keys = ["event_date", "order_id"]
    if days is not None:
        valid, keys = by_day_blocks(valid, "event_date", days), [BLOCK, *keys]
    newest_first = Window.partitionBy(*keys).orderBy(
        F.col("updated_at").desc(),
        F.col("arrival_date").desc(),
        F.col("source_file").desc(),
        F.col("line_number").desc(),
    )
    return (
        valid.withColumn("_rank", F.row_number().over(newest_first))
        .filter(F.col("_rank") == F.lit(1))
        .select("arrival_date", "source_file", "line_number", *VALIDATED_TYPED_COLUMNS)
    )
