"""Order validation (rejection reasons and their precedence), quarantine split and latest-wins
dedupe."""

from __future__ import annotations

import json
import random
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from pyspark.sql import functions as F

from backfill_assets.days import days_between
from backfill_assets.transforms.orders import (
    latest_wins,
    quarantine_rows,
    valid_orders,
    validate_orders,
)
from backfill_assets.transforms.schemas import QUARANTINE_ORDERS, RAW_ORDERS
from backfill_assets_testkit.reference import parse_timestamp

ARRIVAL = date(2024, 1, 10)
BASE = {
    "order_id": "o-1",
    "customer_id": "c-1",
    "event_time": "2024-01-09T10:00:00Z",
    "updated_at": "2024-01-09T10:05:00Z",
    "status": "paid",
    "amount": "12.50",
    "currency": "EUR",
    "country": "DE",
}
DROP = object()


def record(**changes) -> str:
    fields = {**BASE, **changes}
    return json.dumps({k: v for k, v in fields.items() if v is not DROP}, separators=(",", ":"))


def with_amount_literal(literal: str) -> str:
    """A record whose amount is the raw JSON literal given (json.dumps cannot write 1e3 as is)."""
    return record(amount="@@").replace('"@@"', literal)


# case -> (payload, expected reason); all land on ARRIVAL
CASES = {
    "valid": (record(), None),
    "valid_number_amount": (with_amount_literal("12.5"), None),
    "valid_integer_amount": (with_amount_literal("12"), None),
    "valid_two_decimals_number": (with_amount_literal("0.10"), None),
    # from_json gives 1.00000005E7 and 9.9999999999999E11: the text as written must be read
    "valid_eight_digit_number": (with_amount_literal("10000000.50"), None),
    "valid_largest_number": (with_amount_literal("999999999999.99"), None),
    "valid_minute_precision": (record(event_time="2024-01-09T10:00Z"), None),
    "valid_fraction_and_offset": (record(event_time="2024-01-09T10:00:00.123+05:30"), None),
    "valid_nine_fraction_digits": (
        record(
            event_time="2024-01-09T10:00:00.123456789Z", updated_at="2024-01-09T23:59:59.999999999Z"
        ),
        None,
    ),
    "valid_extra_fields": (record(channel="web", meta={"amount": 1.234}), None),
    "valid_number_beside_nested_amount": (
        '{"meta":{"amount":1.234},' + with_amount_literal("12.5")[1:],
        None,
    ),
    "valid_surrounding_spaces": ("  " + record() + "\t", None),
    "valid_order_id_64": (record(order_id="x" * 64), None),
    "valid_order_id_64_astral": (record(order_id="\U0001f600" * 64), None),
    "valid_escaped_key": (record().replace('"order_id"', '"order\\u005fid"'), None),
    "valid_escaped_amount_key_number": (
        record(amount="@@").replace('"amount":"@@"', '"am\\u006funt":12345678.5'),
        None,
    ),
    # Judged by its text as written, whatever escapes spell the key.
    "invalid_escaped_amount_key_number_text": (
        record(amount="@@").replace('"amount":"@@"', '"\\u0061m\\u006Funt":12.500'),
        "invalid_value",
    ),
    "valid_escapes_in_a_string": (record(customer_id='c\u00e9\n"x\\'), None),
    "valid_escaped_zone": (
        record().replace('"2024-01-09T10:00:00Z"', '"2024-01-09T10:00:00\\u005a"'),
        None,
    ),
    "valid_max_lateness": (record(event_time="2024-01-03T00:00:00Z"), None),
    "malformed_text": ("not json", "malformed_json"),
    "malformed_array": ('["20240109",12.5]', "malformed_json"),
    "malformed_number": ("12.5", "malformed_json"),
    "malformed_string": ('"placed"', "malformed_json"),
    "malformed_null": ("null", "malformed_json"),
    "malformed_truncated": (record()[:40], "malformed_json"),
    "malformed_trailing_text": (record() + "x", "malformed_json"),
    "malformed_trailing_brace": (record() + "}", "malformed_json"),
    "malformed_second_value": (record() + ' {"a":1}', "malformed_json"),
    "malformed_single_quotes": ("{'order_id': 'o-1'}", "malformed_json"),
    "malformed_nan": (with_amount_literal("NaN"), "malformed_json"),
    "malformed_duplicate_key": (record()[:-1] + ',"status":"placed"}', "malformed_json"),
    "malformed_duplicate_ignored_key": ('{"x":1,' + record()[1:-1] + ',"x":1}', "malformed_json"),
    # Eight plain fields, one of them twice: the shape validation reads without a parse.
    "malformed_eight_fields_one_twice": (
        record(currency=DROP)[:-1] + ',"status":"placed"}',
        "malformed_json",
    ),
    "malformed_amount_with_a_leading_zero": (with_amount_literal("012.5"), "malformed_json"),
    "valid_one_extra_number_field": (record()[:-1] + ',"n":-1.5e3}', None),
    "valid_one_extra_literal_field": (record()[:-1] + ',"gift":null}', None),
    "valid_extra_field_named_in_another_case": (record()[:-1] + ',"Status":"x"}', None),
    "malformed_duplicate_key_escaped": (
        record()[:-1] + ',"\\u0073tatus":"paid"}',
        "malformed_json",
    ),
    # The contract forbids a repeated key in the line's top-level object only.
    "valid_repeated_key_in_a_nested_object": (
        record()[:-1] + ',"meta":{"k":1,"k":2,"deeper":{"j":[],"j":{}}}}',
        None,
    ),
    "valid_repeated_key_in_an_array": (record()[:-1] + ',"items":[{"a":1,"a":"b"}]}', None),
    # Past Jackson's default limit of 1,000 digits: JSON has none.
    "valid_long_number_in_an_ignored_field": (record()[:-1] + ',"big":' + "9" * 1500 + "}", None),
    "valid_long_fraction_in_an_ignored_field": (
        record()[:-1] + ',"big":[0.' + "1" * 1500 + "]}",
        None,
    ),
    "invalid_long_number_amount": (with_amount_literal("1" * 1500), "invalid_value"),
    "invalid_long_number_order_id": (
        record(order_id="@@").replace('"@@"', "7" * 1200),
        "invalid_value",
    ),
    "invalid_repeated_key_inside_a_contract_field": (
        record(order_id="@@").replace('"@@"', '{"a":1,"a":2}'),
        "invalid_value",
    ),
    "malformed_raw_control_character": (
        record(customer_id="c@@").replace("@@", "\u0001"),
        "malformed_json",
    ),
    "malformed_byte_order_mark": ("\ufeff" + record(), "malformed_json"),
    # The line closes the array validation wraps it in, with that wrapper's own end-of-record
    # string, and carries on: trailing text the first value's parse would not see.
    "malformed_closing_the_wrapper": (
        record() + ',"\\u0000end-of-record"]garbage',
        "malformed_json",
    ),
    "malformed_closing_the_wrapper_with_a_second_object": (
        record() + ',"\\u0000end-of-record"],{"order_id":"x","order_id":"y"}',
        "malformed_json",
    ),
    # A name of up to 50,000 characters, Jackson's limit on a name that the listing of a line's
    # names has, whichever way the line is read (plain, or with one more field).
    "valid_a_name_of_50000_characters": (record()[:-1] + ',"' + "n" * 50_000 + '":1}', None),
    "malformed_a_name_of_50001_characters": (
        record()[:-1] + ',"' + "n" * 50_001 + '":1}',
        "malformed_json",
    ),
    "malformed_a_name_of_50001_characters_beside_another": (
        record()[:-1] + ',"' + "n" * 50_001 + '":1,"x":2}',
        "malformed_json",
    ),
    # Keys that differ only in a run of 1,000 digits, beside a number longer than Jackson's
    # default limit: two keys, not one repeated.
    "valid_keys_differing_in_long_digit_runs": (
        record()[:-1] + ',"x":' + "5" * 1500 + ',"k' + "1" * 1000 + '":1,"k' + "2" * 1000 + '":2}',
        None,
    ),
    "missing_absent": (record(order_id=DROP), "missing_field"),
    "missing_null": (record(customer_id=None), "missing_field"),
    "missing_empty": (record(status=""), "missing_field"),
    "missing_empty_amount": (record(amount=""), "missing_field"),
    "missing_key_in_other_case": (record().replace('"order_id"', '"Order_id"'), "missing_field"),
    "missing_beats_invalid": (record(currency=None, amount="1e3"), "missing_field"),
    "invalid_exponent_number": (with_amount_literal("1e3"), "invalid_value"),
    "invalid_exponent_string": (record(amount="1e3"), "invalid_value"),
    "invalid_three_decimals": (with_amount_literal("1.234"), "invalid_value"),
    "invalid_three_decimals_string": (record(amount="1.234"), "invalid_value"),
    "invalid_trailing_zero_number": (with_amount_literal("12.500"), "invalid_value"),
    # a nested "amount" of the same value, written otherwise: the order's own text is judged
    "invalid_number_beside_a_nested_one": (
        '{"meta":{"amount":12.5},' + with_amount_literal("12.500")[1:],
        "invalid_value",
    ),
    "valid_number_beside_a_nested_exponent": (
        '{"meta":{"amount":1e1},' + with_amount_literal("10")[1:],
        None,
    ),
    "valid_number_after_one_nested_in_an_array": (
        '{"x":[[{"amount":7.100}]],' + with_amount_literal("7.1")[1:],
        None,
    ),
    "valid_number_beside_its_key_in_a_string": (
        '{"note":"{\\"amount\\":5.000,",' + with_amount_literal("5")[1:],
        None,
    ),
    "invalid_negative": (with_amount_literal("-1"), "invalid_value"),
    "invalid_negative_zero": (with_amount_literal("-0"), "invalid_value"),
    "invalid_negative_string": (record(amount="-5.00"), "invalid_value"),
    "invalid_comma_decimal": (record(amount="12,50"), "invalid_value"),
    "invalid_13_digits": (record(amount="1234567890123"), "invalid_value"),
    "invalid_amount_bool": (record(amount=True), "invalid_value"),
    "invalid_amount_space": (record(amount=" "), "invalid_value"),
    "invalid_amount_newline": (record(amount="12\n"), "invalid_value"),  # $ is the text's end
    "invalid_amount_arabic_digits": (record(amount="\u0661\u0662"), "invalid_value"),  # \d: 0-9
    "invalid_fullwidth_year": (record(event_time="\uff12024-01-09T10:00:00Z"), "invalid_value"),
    "invalid_currency_lower": (record(currency="usd"), "invalid_value"),
    "invalid_currency_long": (record(currency="EURO"), "invalid_value"),
    "invalid_currency_newline": (record(currency="USD\n"), "invalid_value"),
    "invalid_currency_number": (record(currency=978), "invalid_value"),
    "invalid_country": (record(country="usa"), "invalid_value"),
    "invalid_country_newline": (record(country="DE\n"), "invalid_value"),
    "invalid_status": (record(status="shipped"), "invalid_value"),
    "invalid_status_case": (record(status="PAID"), "invalid_value"),
    "invalid_status_bool": (record(status=True), "invalid_value"),
    "invalid_status_array": (record(status=["paid"]), "invalid_value"),
    "invalid_country_object": (record(country={"DE": 1}), "invalid_value"),
    "invalid_event_time_array": (record(event_time=["2024-01-09T10:00:00Z"]), "invalid_value"),
    "invalid_order_id_65": (record(order_id="x" * 65), "invalid_value"),
    "invalid_order_id_65_astral": (record(order_id="\U0001f600" * 65), "invalid_value"),
    "invalid_order_id_number": (record(order_id=123), "invalid_value"),
    "invalid_customer_number": (record(customer_id=48213), "invalid_value"),
    "invalid_customer_object": (record(customer_id={"id": "c"}), "invalid_value"),
    "invalid_no_zone": (record(event_time="2024-01-09T10:00:00"), "invalid_value"),
    "invalid_date_only": (record(updated_at="2024-01-09"), "invalid_value"),
    "invalid_feb_30": (record(event_time="2024-02-30T10:00:00Z"), "invalid_value"),
    "invalid_hour_24": (record(event_time="2024-01-09T24:00:00Z"), "invalid_value"),
    "invalid_space_separator": (record(event_time="2024-01-09 10:00:00Z"), "invalid_value"),
    "invalid_lower_z": (record(event_time="2024-01-09T10:00:00z"), "invalid_value"),
    "invalid_compact_offset": (record(event_time="2024-01-09T10:00:00+0530"), "invalid_value"),
    "invalid_offset_beyond_18h": (record(updated_at="2024-01-09T10:00:00+18:01"), "invalid_value"),
    "invalid_ten_fraction_digits": (
        record(event_time="2024-01-09T10:00:00.1234567890Z"),
        "invalid_value",
    ),
    "invalid_year_zero": (record(updated_at="0000-06-01T00:00:00Z"), "invalid_value"),
    "invalid_utc_year_zero": (record(updated_at="0001-01-01T00:30:00+01:00"), "invalid_value"),
    "invalid_utc_year_10000": (record(updated_at="9999-12-31T23:30:00-01:00"), "invalid_value"),
    "valid_first_instant": (record(updated_at="0001-01-01T00:00:00Z"), None),
    "invalid_timestamp_number": (record(updated_at=1704794400), "invalid_value"),
    "invalid_beats_future": (
        record(event_time="2024-01-11T10:00:00Z", status="x"),
        "invalid_value",
    ),
    "future_event": (record(event_time="2024-01-11T00:00:00Z"), "future_event"),
    "future_by_utc_date": (record(event_time="2024-01-10T23:30:00-02:00"), "future_event"),
    "too_late": (record(event_time="2024-01-02T23:59:59Z"), "too_late"),
    "too_late_by_utc_date": (record(event_time="2024-01-03T01:00:00+02:00"), "too_late"),
}


# Plain lines' fields read by the JVM function set-up builds (plain_line_jar), and by from_json,
# which a session without it uses: the same verdicts and values either way.
@pytest.fixture(scope="module", params=[True, False], ids=["plain-in-jvm", "plain-by-json"])
def validated(spark, request):
    rows = [(ARRIVAL, case, 1, payload) for case, (payload, _) in CASES.items()]
    return validate_orders(
        spark.createDataFrame(rows, RAW_ORDERS), max_lateness_days=7, plain_in_jvm=request.param
    )


@pytest.fixture(scope="module")
def validated_rows(validated):
    # Timestamps come back as text: Python's datetime cannot hold every instant Spark can.
    as_text = validated.select(
        *[name for name in validated.columns if name not in ("event_time", "updated_at")],
        F.date_format("event_time", "yyyy-MM-dd HH:mm:ss.SSS").alias("event_time_text"),
        F.date_format("updated_at", "yyyy-MM-dd HH:mm:ss.SSS").alias("updated_at_text"),
    )
    return {row["source_file"]: row for row in as_text.collect()}


@pytest.mark.parametrize("case", sorted(CASES))
def test_reason(validated_rows, case):
    assert validated_rows[case]["reason"] == CASES[case][1]


def test_reasons_are_the_contract_set(validated_rows):
    reasons = {row["reason"] for row in validated_rows.values()} - {None}
    assert reasons == {
        "malformed_json",
        "missing_field",
        "invalid_value",
        "future_event",
        "too_late",
    }


def test_typed_columns_of_valid_records(validated_rows):
    number = validated_rows["valid_number_amount"]
    assert number["amount"] == Decimal("12.50")
    assert validated_rows["valid_integer_amount"]["amount"] == Decimal("12.00")
    assert validated_rows["valid_two_decimals_number"]["amount"] == Decimal("0.10")
    assert validated_rows["valid_eight_digit_number"]["amount"] == Decimal("10000000.50")
    assert validated_rows["valid_largest_number"]["amount"] == Decimal("999999999999.99")
    offset = validated_rows["valid_fraction_and_offset"]
    assert offset["event_time_text"] == "2024-01-09 04:30:00.123"
    assert offset["event_date"] == date(2024, 1, 9)
    minute = validated_rows["valid_minute_precision"]
    assert minute["event_time_text"] == "2024-01-09 10:00:00.000"
    assert validated_rows["valid_first_instant"]["updated_at_text"] == "0001-01-01 00:00:00.000"
    assert (minute["order_id"], minute["customer_id"], minute["status"]) == ("o-1", "c-1", "paid")
    assert (minute["currency"], minute["country"]) == ("EUR", "DE")


def test_fraction_digits_beyond_the_microsecond_are_dropped_not_rounded(validated):
    """The contract keeps a fraction to the microsecond, further digits dropped: .999999999 stays
    in its second (rounding would carry it into the next day)."""
    row = (
        validated.filter(F.col("source_file") == "valid_nine_fraction_digits")
        .select(
            F.date_format("event_time", "yyyy-MM-dd HH:mm:ss.SSSSSS").alias("event"),
            F.date_format("updated_at", "yyyy-MM-dd HH:mm:ss.SSSSSS").alias("updated"),
        )
        .collect()[0]
    )
    assert (row["event"], row["updated"]) == (
        "2024-01-09 10:00:00.123456",
        "2024-01-09 23:59:59.999999",
    )


def test_typed_columns_are_null_where_unparseable(validated_rows):
    assert validated_rows["invalid_currency_lower"]["currency"] is None
    assert validated_rows["invalid_currency_lower"]["amount"] == Decimal("12.50")
    assert validated_rows["invalid_feb_30"]["event_time_text"] is None
    assert validated_rows["invalid_utc_year_zero"]["updated_at_text"] is None
    assert validated_rows["malformed_text"]["order_id"] is None


def test_event_date_is_the_utc_date_of_event_time(spark):
    late_evening = record(event_time="2024-01-01T23:30:00-02:00")
    raw = spark.createDataFrame(
        [
            (date(2024, 1, 2), "a.jsonl", 1, late_evening),
            (date(2024, 1, 1), "a.jsonl", 1, late_evening),
        ],
        RAW_ORDERS,
    )
    rows = validate_orders(raw, max_lateness_days=7).collect()
    by_arrival = {row["arrival_date"]: row for row in rows}
    assert by_arrival[date(2024, 1, 2)]["event_date"] == date(2024, 1, 2)
    assert by_arrival[date(2024, 1, 2)]["reason"] is None
    assert by_arrival[date(2024, 1, 1)]["reason"] == "future_event"


def test_quarantine_and_valid_split_the_raw_rows(validated):
    quarantine = quarantine_rows(validated)
    valid = valid_orders(validated)
    assert quarantine.schema.fieldNames() == QUARANTINE_ORDERS.fieldNames()
    assert [f.dataType for f in quarantine.schema] == [f.dataType for f in QUARANTINE_ORDERS]
    expected_rejected = {case for case, (_, reason) in CASES.items() if reason}
    assert {row["source_file"] for row in quarantine.collect()} == expected_rejected
    assert {row["source_file"] for row in valid.select("source_file").collect()} == (
        set(CASES) - expected_rejected
    )
    assert valid.columns == [
        "arrival_date", "source_file", "line_number", "order_id", "customer_id", "event_time",
        "event_date", "updated_at", "status", "amount", "currency", "country",
    ]  # fmt: skip


def _version(order_id: str, updated_at: str, status: str, event_time: str = "2024-01-01T08:00:00Z"):
    return record(order_id=order_id, updated_at=updated_at, status=status, event_time=event_time)


def test_latest_wins_by_instant_then_arrival_file_line(spark):
    jan1, jan2, jan3 = date(2024, 1, 1), date(2024, 1, 2), date(2024, 1, 3)
    noon_paris = "2024-01-01T12:00:00+02:00"  # the same instant as 10:00Z
    rows = [
        # equal instants in different offsets: the later arrival wins
        (jan1, "a.jsonl", 9, _version("tie-arrival", noon_paris, "placed")),
        (jan2, "a.jsonl", 1, _version("tie-arrival", "2024-01-01T10:00:00Z", "paid")),
        # equal instant and arrival: the later source_file wins
        (
            jan2,
            "orders/arrival_date=2024-01-02/b.jsonl",
            1,
            _version("tie-file", noon_paris, "paid"),
        ),
        (
            jan2,
            "orders/arrival_date=2024-01-02/a.jsonl",
            5,
            _version("tie-file", noon_paris, "placed"),
        ),
        # equal instant, arrival and file: the later line wins
        (jan2, "a.jsonl", 7, _version("tie-line", noon_paris, "cancelled")),
        (jan2, "a.jsonl", 3, _version("tie-line", noon_paris, "paid")),
        # a later instant wins even from an earlier arrival, whatever the offsets spell
        (jan1, "a.jsonl", 1, _version("instant", "2024-01-01T09:00:00-05:00", "cancelled")),
        (jan3, "z.jsonl", 1, _version("instant", "2024-01-01T13:00:00Z", "paid")),
        # the same order_id on two event dates is two orders
        (jan1, "a.jsonl", 2, _version("two-days", noon_paris, "paid")),
        (jan2, "a.jsonl", 2, _version("two-days", noon_paris, "placed", "2024-01-02T08:00:00Z")),
    ]
    validated = validate_orders(spark.createDataFrame(rows, RAW_ORDERS), max_lateness_days=7)
    latest = latest_wins(valid_orders(validated))

    got = {
        (row["order_id"], row["event_date"]): (
            row["status"],
            row["arrival_date"],
            row["line_number"],
        )
        for row in latest.collect()
    }
    assert got == {
        ("tie-arrival", jan1): ("paid", jan2, 1),
        ("tie-file", jan1): ("paid", jan2, 1),
        ("tie-line", jan1): ("cancelled", jan2, 7),
        ("instant", jan1): ("cancelled", jan1, 1),
        ("two-days", jan1): ("paid", jan1, 2),
        ("two-days", jan2): ("placed", jan2, 2),
    }


def test_latest_wins_over_blocks_of_days_keeps_the_latest_version_of_each_order(spark):
    """Twenty days go by three blocks of days (``day_blocks``): per (event day, order id), the
    version with the latest updated_at, picked here in plain Python; an id on two days is two
    orders even when the days fall in different blocks."""
    days = days_between(date(2024, 3, 1), date(2024, 3, 20))
    pick = random.Random(7)
    rows, latest = [], {}
    for n, day in enumerate(days):
        for order in (f"o-{n % 3}", f"o-{n % 3 + 1}"):
            versions = [
                (minute, pick.choice(["placed", "paid", "cancelled"]))
                for minute in pick.sample(range(60), pick.randint(1, 3))
            ]
            for line, (minute, status) in enumerate(versions):
                rows.append(
                    (
                        day + timedelta(days=1),
                        f"{order}.jsonl",
                        line,
                        _version(
                            order,
                            f"{day}T12:{minute:02d}:00Z",
                            status,
                            event_time=f"{day}T08:00:00Z",
                        ),
                    )
                )
            latest[(order, day)] = max(versions)[1]
    validated = validate_orders(spark.createDataFrame(rows, RAW_ORDERS), max_lateness_days=7)
    kept = latest_wins(valid_orders(validated), days).collect()

    assert {(r["order_id"], r["event_date"]): r["status"] for r in kept} == latest
    assert len(kept) == len(latest)


@pytest.mark.parametrize("depth", [900, 990])
def test_a_deeply_nested_extra_field_is_judged_not_a_crash(spark, depth):
    """An ignored field nested ~1,000 deep once overflowed the executor's stack (a Spark task's
    StackOverflowError takes the local JVM down), found by the fault harness's fuzzing."""
    line = record()[:-1] + ',"deep":' + '{"a":' * depth + "1" + "}" * depth + "}"
    raw = spark.createDataFrame([(ARRIVAL, "deep", 1, line)], RAW_ORDERS)
    [row] = validate_orders(raw, 7).select("reason", "order_id").collect()
    assert (row["reason"], row["order_id"]) == (None, "o-1")


@pytest.mark.parametrize(("depth", "reason"), [(998, None), (999, "malformed_json")])
def test_a_line_nested_1000_levels_deep_is_malformed(spark, depth, reason):
    """The parser's limit, as contract.md states it: 1,000 levels, the line's own object counted."""
    line = record()[:-1] + ',"deep":' + "[" * depth + "1" + "]" * depth + "}"
    raw = spark.createDataFrame([(ARRIVAL, "deep", 1, line)], RAW_ORDERS)
    [row] = validate_orders(raw, 7).select("reason").collect()
    assert row["reason"] == reason


@pytest.mark.parametrize("field", ["order_id", "amount", "event_time"])
@pytest.mark.parametrize(("opener", "closer"), [('{"a":', "}"), ("[", "]")])
def test_a_deeply_nested_contract_field_is_an_invalid_value_not_a_crash(
    spark, field, opener, closer
):
    """A contract field holding an object or array nested ~1,000 deep is a value that breaks its
    rule: the record is quarantined as invalid_value, and no rule recurses through the value
    (schema_of_variant's did, and its StackOverflowError took the local JVM down)."""
    depth = 990
    line = record(**{field: "@@"}).replace('"@@"', opener * depth + "1" + closer * depth)
    raw = spark.createDataFrame([(ARRIVAL, "deep", 1, line)], RAW_ORDERS)
    [row] = validate_orders(raw, 7).select("reason", "order_id").collect()
    assert row["reason"] == "invalid_value"


EDGE_INSTANTS = (
    "1969-12-31T23:59:59.999999Z",
    "1970-01-01T00:00:00Z",
    "1969-12-31T22:00:00-02:00",
    "1969-12-31T23:00:00.5-01:00",
    "0001-01-01T00:00:00Z",
    "0001-01-01T23:59:59.999999Z",
    "9999-12-31T00:00:00Z",
    "9999-12-31T23:59:59.999999Z",
    "2024-02-29T23:59:59.999999+00:00",
)


def test_event_date_at_the_edges_of_days_and_calendars(spark):
    """The UTC date as Python's calendar gives it: on both sides of midnight, before 1970, at the
    first and the last instants a calendar holds."""
    raw = spark.createDataFrame(
        [
            (date(2024, 1, 1), "a.jsonl", n, record(event_time=text))
            for n, text in enumerate(EDGE_INSTANTS)
        ],
        RAW_ORDERS,
    )
    dates = {
        row["line_number"]: row["event_date"]
        for row in validate_orders(raw, max_lateness_days=7)
        .select("line_number", "event_date")
        .collect()
    }
    expected = {
        n: datetime.fromisoformat(text).astimezone(UTC).date()
        for n, text in enumerate(EDGE_INSTANTS)
    }
    assert dates == expected


def _timestamp_texts(count: int, seed: int) -> list[str]:
    """Texts of the timestamp's shape with each part drawn across and past its limits: months 0-13,
    days 0-32 (February's 29th in leap and other years), hours to 25, minutes and seconds to 61,
    seconds left out, fractions of 1-9 digits, offsets to 19:60 either way, and the years
    where the calendar and the epoch end."""
    draw = random.Random(seed)

    def two(top: int) -> str:
        return f"{draw.randint(0, top):02d}"

    texts = []
    for _ in range(count):
        year = draw.choice(["0001", "0002", "1900", "1969", "1970", "2000", "2023", "2024", "9999"])
        text = f"{year}-{two(13)}-{two(32)}T{two(25)}:{two(61)}"
        if draw.random() < 0.8:
            text += ":" + two(61)
            if draw.random() < 0.5:
                text += "." + "".join(draw.choices("0123456789", k=draw.randint(1, 9)))
        zone = draw.choice(["Z", "+", "-"])
        texts.append(text + (zone if zone == "Z" else f"{zone}{two(19)}:{two(60)}"))
    return texts


def test_timestamps_are_the_instants_the_reference_reads(spark):
    """Every drawn text's instant, to the microsecond, as the reference's parser (Python's
    calendar) reads it; NULL where the reference finds no instant in years 1-9999."""
    texts = _timestamp_texts(3000, seed=7)
    raw = spark.createDataFrame(
        [(date(2024, 1, 1), "a.jsonl", n, record(event_time=text)) for n, text in enumerate(texts)],
        RAW_ORDERS,
    )
    found = {
        row["line_number"]: row["micros"]
        for row in validate_orders(raw, max_lateness_days=7)
        .select("line_number", F.unix_micros("event_time").alias("micros"))
        .collect()
    }
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    expected = {}
    for n, text in enumerate(texts):
        instant = parse_timestamp(text)
        expected[n] = None if instant is None else (instant - epoch) // timedelta(microseconds=1)
    assert sum(value is not None for value in expected.values()) > 300  # both kinds well drawn
    assert found == expected
