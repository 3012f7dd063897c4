"""The test oracle (reference.py) on small hand-written landing zones with hand-written answers."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

from backfill_assets_testkit.contract_feed import order
from backfill_assets_testkit.reference import (
    FactRow,
    QuarantineRow,
    RawRow,
    Reference,
    expected,
    parse_timestamp,
)

D1, D2, D3 = date(2024, 1, 1), date(2024, 1, 2), date(2024, 1, 3)
RATES = "currency,usd_per_unit\n"


def land(root, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))


def reasons(root, arrival=D1, max_lateness_days=7) -> list[tuple[int, str | None]]:
    return [
        (r.raw.line_number, r.reason) for r in Reference(root, max_lateness_days).records(arrival)
    ]


def test_lines_crlf_blanks_and_unfinished_files(tmp_path):
    good = order()
    land(tmp_path, "orders/arrival_date=2024-01-01/a.jsonl", f"{good}\r\n\r\n  \t\n{good}\r\r\n")
    land(tmp_path, "orders/arrival_date=2024-01-01/b.jsonl", "[1]")  # no final newline
    land(tmp_path, "orders/arrival_date=2024-01-01/_c.jsonl", f"{good}\n")
    land(tmp_path, "orders/arrival_date=2024-01-01/.d.jsonl", f"{good}\n")
    land(tmp_path, "orders/arrival_date=2024-01-02/e.jsonl", "\n\n")
    a, b = "orders/arrival_date=2024-01-01/a.jsonl", "orders/arrival_date=2024-01-01/b.jsonl"
    result = expected(tmp_path, [D1, D2])
    assert result.raw_orders == [
        RawRow(D1, a, 1, good),
        RawRow(D1, a, 4, good + "\r"),
        RawRow(D1, b, 1, "[1]"),
    ]
    assert result.quarantine == [QuarantineRow(D1, b, 1, "malformed_json", "[1]")]


def test_each_reason_in_precedence_order(tmp_path):
    lines = [
        '{"order_id": "O1", "order_id": "O2"}',  # duplicate key: not taken as an object
        '{"order_id":"O1",',  # broken
        '"placed"',
        order(customer='" ,"customer_id":"C2'),  # a second customer_id: duplicate key
        order(amount="NaN"),
        order(oid=""),  # missing wins over the invalid currency below
        order(oid="", currency="eur"),
        order(amount="null"),
        order(currency="eur", event="2024-01-09T00:00:00Z"),  # invalid wins over future
        order(event="2024-01-02T00:00:00Z"),
        order(event="2024-01-01T20:00:00-08:00"),  # 04:00 UTC on the 2nd: future
        order(event="2023-12-24T23:59:59Z"),  # 8 days before arrival
        order(event="2023-12-25T00:00:00Z"),  # 7 days: still valid
        order(event="2024-01-02T05:00:00+09:00"),  # 20:00 UTC on the 1st: valid
    ]
    land(tmp_path, "orders/arrival_date=2024-01-01/x.jsonl", "\n".join(lines))
    assert reasons(tmp_path) == [
        (1, "malformed_json"),
        (2, "malformed_json"),
        (3, "malformed_json"),
        (4, "malformed_json"),
        (5, "malformed_json"),
        (6, "missing_field"),
        (7, "missing_field"),
        (8, "missing_field"),
        (9, "invalid_value"),
        (10, "future_event"),
        (11, "future_event"),
        (12, "too_late"),
        (13, None),
        (14, None),
    ]
    assert reasons(tmp_path, max_lateness_days=0)[-2:] == [(13, "too_late"), (14, None)]


def test_missing_means_absent_null_or_empty(tmp_path):
    absent = order().replace(',"country":"DE"', "")
    lines = [
        absent,
        order(customer=""),
        order().replace('"status":"paid"', '"status":null'),
        order(customer=" "),
    ]
    land(tmp_path, "orders/arrival_date=2024-01-01/x.jsonl", "\n".join(lines))
    assert [r for _, r in reasons(tmp_path)] == [
        "missing_field",
        "missing_field",
        "missing_field",
        None,
    ]


def test_field_rules(tmp_path):
    cases = {
        order(amount="12.5"): None,
        order(amount='"12.5"'): None,
        order(amount="7"): None,
        order(amount='"007"'): None,
        order(amount='"999999999999.99"'): None,
        order(amount="1e3"): "invalid_value",
        order(amount='"1e3"'): "invalid_value",
        order(amount="1.234"): "invalid_value",
        order(amount='"1.234"'): "invalid_value",
        order(amount='"-5.00"'): "invalid_value",
        order(amount="-5"): "invalid_value",
        order(amount='"1000000000000"'): "invalid_value",
        order(amount='"12."'): "invalid_value",
        order(amount='" 12"'): "invalid_value",
        order(amount="true"): "invalid_value",
        order(amount='"\u0661\u0662"'): "invalid_value",  # Arabic-Indic digits are not \d
        order(oid="X" * 64): None,
        order(oid="X" * 65): "invalid_value",
        order(status="shipped"): "invalid_value",
        order(status="Paid"): "invalid_value",
        order(currency="usd"): "invalid_value",
        order(currency="EURO"): "invalid_value",
        order(country="DEU"): "invalid_value",
        order().replace('"C1"', "12345"): "invalid_value",  # customer_id is a number
        order().replace('"H1"', '["H1"]'): "invalid_value",
    }
    land(tmp_path, "orders/arrival_date=2024-01-01/x.jsonl", "\n".join(cases))
    assert [r for _, r in reasons(tmp_path)] == list(cases.values())


def test_timestamp_forms():
    def utc(*a):
        return datetime(*a, tzinfo=UTC)

    assert parse_timestamp("2024-01-01T10:05Z") == utc(2024, 1, 1, 10, 5)
    assert parse_timestamp("2024-01-01T10:05:07.5+05:30") == utc(2024, 1, 1, 4, 35, 7, 500000)
    assert parse_timestamp("2024-01-01T23:30:00-08:00") == utc(2024, 1, 2, 7, 30)
    assert parse_timestamp("2024-01-01T00:00:00.1234567Z") == utc(2024, 1, 1, 0, 0, 0, 123456)
    for bad in (
        "2024-01-01T10:00:00",
        "2024-01-01 10:00:00Z",
        "2024-01-01T10:00:00z",
        "2024-02-30T10:00:00Z",
        "2024-01-01T24:00:00Z",
        "2024-01-01T10:00:00+0530",
        "2024-01-01",
        "2024-01-01T10:00:00+19:00",
        "2024-01-01T10:00:00Z\n",
    ):
        assert parse_timestamp(bad) is None, bad


def test_dedupe_latest_wins_with_ties(tmp_path):
    o = "orders/arrival_date="
    land(
        tmp_path,
        f"{o}2024-01-01/a.jsonl",
        "\n".join(
            [
                order("A", status="placed"),
                order("A", status="paid", updated="2024-01-01T11:00:00Z"),
                order("B", status="paid", updated="2024-01-01T11:00:00Z"),
                order("C", status="paid", updated="2024-01-01T12:00:00Z"),
                order("D", status="paid", updated="2024-01-01T12:00:00Z"),
                order(
                    "D", status="cancelled", updated="2024-01-01T12:00:00Z"
                ),  # same file, later line
                order("E", status="placed", updated="2024-01-01T10:00:00Z"),
            ]
        ),
    )
    land(
        tmp_path,
        f"{o}2024-01-01/b.jsonl",
        order("C", status="cancelled", updated="2024-01-01T12:00:00Z"),
    )
    land(
        tmp_path,
        f"{o}2024-01-02/a.jsonl",
        "\n".join(
            [
                order("A", status="placed", updated="2024-01-01T10:59:59Z"),  # later arrival, older
                order("B", status="cancelled", updated="2024-01-01T16:30:00+05:30"),  # same instant
                order(
                    "E", status="paid", updated="2024-01-01T12:00:00+05:30"
                ),  # reads later, is not
            ]
        ),
    )
    land(tmp_path, "fx_rates/rate_date=2024-01-01/r.csv", RATES + "EUR,1\n")
    rows, held = Reference(tmp_path).staging([D1])
    assert held == set()
    assert [(r.order_id, r.status) for r in rows] == [
        ("A", "paid"),
        ("B", "cancelled"),
        ("C", "cancelled"),
        ("D", "cancelled"),
        ("E", "placed"),
    ]
    assert rows[1].updated_at == datetime(2024, 1, 1, 11, tzinfo=UTC)


def test_fx_as_of_cutoff_and_corrections(tmp_path):
    r = "fx_rates/rate_date="
    land(tmp_path, f"{r}2023-12-25/a.csv", RATES + "GBP,1.25\nJPY,0.007\n")
    land(tmp_path, f"{r}2023-12-29/a.csv", RATES + "EUR,1.10\nEUR,1.11\nBRL,0\n")
    land(tmp_path, f"{r}2023-12-29/b.csv", RATES + "BRL,0.2x\n")
    land(tmp_path, f"{r}2024-01-01/a.csv", RATES + "EUR,1.20\nGBP,1.30\n")
    land(tmp_path, f"{r}2024-01-01/b.csv", RATES + "EUR,1.21\n")  # sorts last: corrects EUR
    land(tmp_path, f"{r}2024-01-01/_c.csv", RATES + "EUR,9\n")  # still being written
    land(tmp_path, f"{r}2024-01-02/a.csv", "currency,rate\nEUR,5\n")  # wrong header
    land(tmp_path, f"{r}2024-01-03/a.csv", RATES + "INR,0.012\n")  # after D1 and D2
    ref = Reference(tmp_path)
    assert ref.rate("EUR", D1) == Decimal("1.21")
    assert ref.rate("EUR", D2) == Decimal("1.21")
    assert ref.rate("GBP", D1) == Decimal("1.30")
    assert ref.rate("EUR", date(2023, 12, 31)) == Decimal("1.11")  # later line in the file
    assert ref.rate("JPY", D1) == Decimal("0.007")  # 7 days back: still a rate
    assert ref.rate("JPY", D2) is None  # 8 days back: none
    assert ref.rate("BRL", D1) is None  # only invalid lines list BRL
    assert ref.rate("INR", D2) is None and ref.rate("INR", D3) == Decimal("0.012")
    assert ref.rate("USD", D2) == Decimal(1)


def test_rounding_fact_and_held_dates(tmp_path):
    o = "orders/arrival_date="
    land(
        tmp_path,
        f"{o}2024-01-01/a.jsonl",
        "\n".join(
            [
                order("P1", amount='"0.05"'),  # 0.025 USD: half-up gives 0.03, half-even 0.02
                order("P2", amount="10.01", country="FR"),  # 5.005: half-up 5.01
                order("P6", amount="1500", currency="JPY", country="JP"),  # 10.06851: 10.07
                order("P3", amount='"3.00"', currency="USD", country="US"),
                order("P4", amount='"4.00"', status="placed"),
                order("P5", amount='"5.00"', status="cancelled"),
            ]
        ),
    )
    land(
        tmp_path,
        f"{o}2024-01-02/a.jsonl",
        "\n".join(
            [
                order("Q1", event="2024-01-02T01:00:00Z", currency="GBP"),  # no GBP rate: D2 held
                order("Q2", event="2024-01-02T01:00:00Z"),
            ]
        ),
    )
    land(tmp_path, "fx_rates/rate_date=2024-01-01/a.csv", RATES + "EUR,0.5\nJPY,0.00671234\n")
    ref = Reference(tmp_path)
    rows, held = ref.staging([D1, D2])
    assert held == {D2}
    assert [(r.order_id, r.amount, r.usd_per_unit, r.amount_usd) for r in rows] == [
        ("P1", Decimal("0.05"), Decimal("0.5"), Decimal("0.03")),
        ("P2", Decimal("10.01"), Decimal("0.5"), Decimal("5.01")),
        ("P3", Decimal("3.00"), Decimal(1), Decimal("3.00")),
        ("P4", Decimal("4.00"), Decimal("0.5"), Decimal("2.00")),
        ("P5", Decimal("5.00"), Decimal("0.5"), Decimal("2.50")),
        ("P6", Decimal("1500.00"), Decimal("0.00671234"), Decimal("10.07")),
    ]
    assert ref.fact([D1, D2]) == [
        FactRow(D1, "DE", 3, 1, 1, 1, Decimal("0.03")),
        FactRow(D1, "FR", 1, 0, 1, 0, Decimal("5.01")),
        FactRow(D1, "JP", 1, 0, 1, 0, Decimal("10.07")),
        FactRow(D1, "US", 1, 0, 1, 0, Decimal("3.00")),
    ]
