"""FX rates: valid rate lines, the as-of rule (weekends, 7-day cut-off, corrections, USD) and USD
conversion."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

from backfill_assets.transforms.fx import convert_to_usd, rates_on, valid_rates
from backfill_assets.transforms.schemas import RAW_FX_RATES, STAGING_ORDERS

FRI, MON, TUE = date(2024, 1, 5), date(2024, 1, 8), date(2024, 1, 9)
RATE_MAX_AGE_DAYS = 7  # the contract's as-of window


def _rate(rate_date: date, file: str, line: int, currency, usd_per_unit):
    path = f"fx_rates/rate_date={rate_date.isoformat()}/{file}"
    payload = f"{currency},{usd_per_unit}" if usd_per_unit is not None else str(currency)
    return (rate_date, path, line, currency, usd_per_unit, payload)


RAW_RATES = [
    # EUR: Friday's rate carries over the weekend; Tuesday's second file corrects it
    _rate(FRI, "fx-1.csv", 2, "EUR", "1.10"),
    _rate(TUE, "fx-1.csv", 2, "EUR", "1.20"),
    _rate(TUE, "fx-2.csv", 2, "EUR", "1.25"),
    # GBP: a later line of the same file wins; fx-2 does not list GBP
    _rate(TUE, "fx-1.csv", 3, "GBP", "1.30"),
    _rate(TUE, "fx-1.csv", 4, "GBP", "1.31"),
    # JPY: 7 days old still counts on Monday, 8 days old on Tuesday does not
    _rate(date(2024, 1, 1), "fx-1.csv", 2, "JPY", "0.0067"),
    # BRL: a rate from after D is never used
    _rate(date(2024, 1, 10), "fx-1.csv", 2, "BRL", "0.20"),
    # INR: invalid lines list nothing, so the older valid line is the rate
    _rate(date(2024, 1, 6), "fx-1.csv", 2, "INR", "0.012"),
    _rate(date(2024, 1, 7), "fx-1.csv", 2, "INR", "0"),
    _rate(MON, "fx-1.csv", 2, "INR", "abc"),
    _rate(MON, "fx-1.csv", 3, "INR", "0.123456789"),
    _rate(MON, "fx-1.csv", 4, "INR", "1234567"),
    _rate(MON, "fx-1.csv", 5, "INR", " 0.02"),
    _rate(MON, "fx-1.csv", 6, "INR", "0.02\n"),
    _rate(MON, "fx-1.csv", 10, "INR", "\u0660.\u0660\u0662"),  # \d is 0-9 only
    _rate(MON, "fx-2.csv", 2, "INR", None),  # a line of a file without header
    # CAD: the later file's invalid line does not shadow the earlier file's valid one
    _rate(TUE, "fx-1.csv", 5, "CAD", "0.74"),
    _rate(TUE, "fx-2.csv", 3, "CAD", "-0.75"),
    # invalid currency codes are never rates
    _rate(MON, "fx-1.csv", 7, "chf", "1.15"),
    _rate(MON, "fx-1.csv", 8, "CHFX", "1.15"),
    # USD is 1 whatever a file says
    _rate(MON, "fx-1.csv", 9, "USD", "2.0"),
]


def test_valid_rates_keep_only_lines_obeying_the_contract(spark):
    valid = valid_rates(spark.createDataFrame(RAW_RATES, RAW_FX_RATES))
    assert valid.schema["usd_per_unit"].dataType.simpleString() == "decimal(18,8)"
    got = sorted((r["rate_date"], r["currency"], r["usd_per_unit"]) for r in valid.collect())
    assert got == sorted(
        [
            (FRI, "EUR", Decimal("1.10000000")),
            (TUE, "EUR", Decimal("1.20000000")),
            (TUE, "EUR", Decimal("1.25000000")),
            (TUE, "GBP", Decimal("1.30000000")),
            (TUE, "GBP", Decimal("1.31000000")),
            (date(2024, 1, 1), "JPY", Decimal("0.00670000")),
            (date(2024, 1, 10), "BRL", Decimal("0.20000000")),
            (date(2024, 1, 6), "INR", Decimal("0.01200000")),
            (TUE, "CAD", Decimal("0.74000000")),
            (MON, "USD", Decimal("2.00000000")),
        ]
    )


def test_rates_on_follows_the_as_of_rule(spark):
    rates = rates_on(spark.createDataFrame(RAW_RATES, RAW_FX_RATES), [MON, TUE], RATE_MAX_AGE_DAYS)
    assert [(f.name, f.dataType.simpleString()) for f in rates.schema] == [
        ("rate_on", "date"),
        ("currency", "string"),
        ("usd_per_unit", "decimal(18,8)"),
    ]
    got = {(r["rate_on"], r["currency"]): r["usd_per_unit"] for r in rates.collect()}
    assert got == {
        (MON, "EUR"): Decimal("1.10000000"),
        (MON, "JPY"): Decimal("0.00670000"),
        (MON, "INR"): Decimal("0.01200000"),
        (MON, "USD"): Decimal("1.00000000"),
        (TUE, "EUR"): Decimal("1.25000000"),
        (TUE, "GBP"): Decimal("1.31000000"),
        (TUE, "INR"): Decimal("0.01200000"),
        (TUE, "CAD"): Decimal("0.74000000"),
        (TUE, "USD"): Decimal("1.00000000"),
    }


def test_usd_has_rate_one_without_any_rate_file(spark):
    no_rates = spark.createDataFrame([], RAW_FX_RATES)
    got = [tuple(r) for r in rates_on(no_rates, [FRI], RATE_MAX_AGE_DAYS).collect()]
    assert got == [(FRI, "USD", Decimal("1.00000000"))]


def _order(order_id: str, amount: str, currency: str, event_date: date = MON):
    """A row shaped like latest_wins' output."""
    at = datetime(event_date.year, event_date.month, event_date.day, 9, 30)
    return (event_date, "orders/a.jsonl", 1, order_id, "c-1", at, event_date, at, "paid",
            Decimal(amount), currency, "DE")  # fmt: skip


ORDER_SCHEMA = (
    "arrival_date date, source_file string, line_number bigint, order_id string, "
    "customer_id string, event_time timestamp, event_date date, updated_at timestamp, "
    "status string, amount decimal(18,2), currency string, country string"
)


def test_convert_to_usd_rounds_half_up_in_decimal(spark):
    rates = spark.createDataFrame(
        [
            (MON, "AAA", Decimal("1.0005")),
            (MON, "BBB", Decimal("0.5")),
            (MON, "CCC", Decimal("0.00000001")),
            (MON, "DDD", Decimal("999999.99999999")),
            (MON, "USD", Decimal(1)),
            (TUE, "EEE", Decimal(2)),
        ],
        "rate_on date, currency string, usd_per_unit decimal(18,8)",
    )
    orders = spark.createDataFrame(
        [
            _order("half-up", "10.00", "AAA"),  # 10.005 -> 10.01 (half-even would give 10.00)
            _order("half-cent", "0.01", "BBB"),  # 0.005 -> 0.01
            _order("below-half", "0.09", "AAA"),  # 0.090045 -> 0.09
            _order("tiny", "999999.99", "CCC"),  # 0.0099999999 -> 0.01
            _order("usd", "12.34", "USD"),
            _order("overflow", "999999999999.99", "DDD"),  # > DECIMAL(18,2): NULL, no crash
            _order("no-rate", "5.00", "EEE"),  # EEE only has a rate on Tuesday
        ],
        ORDER_SCHEMA,
    )

    staging = convert_to_usd(orders, rates)

    assert staging.schema == STAGING_ORDERS
    got = {r["order_id"]: (r["usd_per_unit"], r["amount_usd"]) for r in staging.collect()}
    assert got == {
        "half-up": (Decimal("1.00050000"), Decimal("10.01")),
        "half-cent": (Decimal("0.50000000"), Decimal("0.01")),
        "below-half": (Decimal("1.00050000"), Decimal("0.09")),
        "tiny": (Decimal("0.00000001"), Decimal("0.01")),
        "usd": (Decimal("1.00000000"), Decimal("12.34")),
        "overflow": (Decimal("999999.99999999"), None),
        "no-rate": (None, None),
    }


def test_the_file_whose_name_sorts_last_wins_by_plain_text_order(spark):
    """ "The file whose name sorts last": fx-9.csv sorts after fx-10.csv as text (a natural sort
    would pick fx-10), and a lower-case name after an upper-case one."""
    raw = [
        _rate(TUE, "fx-10.csv", 2, "DKK", "0.140"),
        _rate(TUE, "fx-9.csv", 2, "DKK", "0.150"),
        _rate(TUE, "Zeta.csv", 2, "SEK", "0.090"),
        _rate(TUE, "alpha.csv", 2, "SEK", "0.095"),
    ]
    rates = rates_on(spark.createDataFrame(raw, RAW_FX_RATES), [TUE], RATE_MAX_AGE_DAYS)
    got = {r["currency"]: r["usd_per_unit"] for r in rates.collect() if r["currency"] != "USD"}
    assert got == {"DKK": Decimal("0.15000000"), "SEK": Decimal("0.09500000")}
