"""The checks' Spark aggregations on inline rows, against the figures counted in plain Python."""

from __future__ import annotations

from collections import Counter
from datetime import date, datetime
from decimal import Decimal

from pyspark.sql import functions as F

from backfill_assets.days import days_between
from backfill_assets.transforms.audit import (
    checksum_of,
    checksum_sums,
    counts_by,
    ids_per_day,
    line_fingerprints,
    line_hash,
    rows_per_partition,
    staging_stats,
    stored_fingerprints,
    valid_order_ids,
)
from backfill_assets.transforms.schemas import DAILY_REVENUE, STAGING_ORDERS
from backfill_assets.transforms.totals import fact_totals, staging_totals

A, B = date(2024, 1, 1), date(2024, 1, 2)
LINES = [
    (A, "orders/a/1.jsonl", 1, '{"x": 1}', None),
    (A, "orders/a/1.jsonl", 2, '{"x": 2}', "invalid_value"),
    (A, "orders/a/2.jsonl", 1, "not json", "malformed_json"),
    (B, "orders/b/1.jsonl", 3, '{"x": 3}', None),
]
SCHEMA = "arrival_date date, source_file string, line_number bigint, payload string, reason string"


def test_fingerprints_count_records_per_file_and_ignore_row_order(spark):
    forward = line_fingerprints(spark.createDataFrame(LINES, SCHEMA), "arrival_date")
    backward = line_fingerprints(spark.createDataFrame(LINES[::-1], SCHEMA), "arrival_date")
    assert forward == backward
    assert {k: v[0] for k, v in forward.items()} == dict(Counter((r[0], r[1]) for r in LINES))
    assert rows_per_partition(forward) == {A: 3, B: 1}


def test_checksums_are_the_exact_sums_of_the_hashes_at_the_edges_of_64_bits(spark):
    """The checksum is carried as two BIGINT sums; joined, it is the exact integer sum, however
    the hashes' signs and magnitudes mix (a sum of the extremes overflows 64 bits)."""
    edges = [-(2**63), 2**63 - 1, -1, 0, 1, 2**32, 2**32 - 1, -(2**32), 2**62 + 12345]
    groups = {"a": edges * 3, "b": [2**63 - 1] * 5, "c": [-(2**63)] * 5}
    rows = [(g, h) for g, hs in groups.items() for h in hs]
    sums = (
        spark.createDataFrame(rows, "g string, h bigint")
        .groupBy("g")
        .agg(*checksum_sums(F.col("h"), "sum"))
        .collect()
    )
    assert {r["g"]: checksum_of(r, "sum") for r in sums} == {g: sum(hs) for g, hs in groups.items()}


def test_fingerprints_sum_spark_hashes_of_the_lines_exactly(spark):
    df = spark.createDataFrame(LINES, SCHEMA)
    hashes = [int(r[0]) for r in df.select(line_hash()).collect()]
    prints = line_fingerprints(df, "arrival_date")
    assert sum(total for _, total in prints.values()) == sum(hashes)


def test_fingerprints_change_with_a_payload_or_a_line_number(spark):
    base = line_fingerprints(spark.createDataFrame(LINES, SCHEMA), "arrival_date")
    edited = [(*LINES[0][:3], '{"x": 9}', None), *LINES[1:]]
    moved = [(*LINES[0][:2], 7, *LINES[0][3:]), *LINES[1:]]
    for rows in (edited, moved):
        other = line_fingerprints(spark.createDataFrame(rows, SCHEMA), "arrival_date")
        key = (A, "orders/a/1.jsonl")
        assert other[key][0] == base[key][0] and other[key][1] != base[key][1]
        assert {k: v for k, v in other.items() if k != key} == {
            k: v for k, v in base.items() if k != key
        }


def test_one_pass_gives_the_lines_as_read_as_stored_and_the_counts_by_reason(spark):
    df = spark.createDataFrame(LINES, SCHEMA)
    # Each line's hash taken as it was read; then one stored payload is damaged.
    damaged = df.withColumn("line_hash", line_hash()).withColumn(
        "payload", F.when(F.col("line_number") == 3, F.lit('{"x": 4}')).otherwise(F.col("payload"))
    )
    as_read, reasons, as_stored = stored_fingerprints(damaged, "arrival_date", "reason")
    assert as_read == {
        k: (n, int(c)) for k, (n, c) in line_fingerprints(df, "arrival_date").items()
    }
    assert as_stored == {
        k: (n, int(c))
        for k, (n, c) in line_fingerprints(damaged.drop("line_hash"), "arrival_date").items()
    }
    assert as_stored[(B, "orders/b/1.jsonl")] != as_read[(B, "orders/b/1.jsonl")]
    assert {k: v for k, v in as_stored.items() if k[0] == A} == {
        k: v for k, v in as_read.items() if k[0] == A
    }
    expected = {}
    for day, _, _, _, reason in LINES:
        expected.setdefault(day, Counter())[reason] += 1
    assert reasons == {day: dict(c) for day, c in expected.items()}
    quarantined = counts_by(df.filter(F.col("reason").isNotNull()), "arrival_date", "reason")
    assert quarantined == {A: {"invalid_value": 1, "malformed_json": 1}}


def _order(order_id, day=A, status="paid", amount="10.00", rate="1.10000000", usd="11.00", **kw):
    ts = datetime(day.year, day.month, day.day, 12)
    return (
        order_id,
        kw.get("customer", "c-1"),
        ts,
        day,
        ts,
        status,
        Decimal(amount),
        kw.get("currency", "EUR"),
        kw.get("country", "DE"),
        None if rate is None else Decimal(rate),
        None if usd is None else Decimal(usd),
    )


ORDERS = [
    _order("o-1"),
    _order("o-2", status="placed", usd="22.00"),
    _order("o-3", status="cancelled"),
    _order("o-3", status="paid", usd="5.55"),  # a duplicate id: two rows, one distinct id
    _order("o-4", rate=None, usd=None),
    _order("o-5", day=B, usd="0.01"),
    _order("o-6", day=B, country="FR", usd="3.33"),
]


def test_staging_stats_count_rows_ids_and_orders_without_a_rate(spark):
    stats = staging_stats(spark.createDataFrame(ORDERS, STAGING_ORDERS), [A, B])
    for day in (A, B):
        rows = [o for o in ORDERS if o[3] == day]
        assert stats[day]["rows"] == len(rows)
        assert stats[day]["distinct_ids"] == len({o[0] for o in rows})
        assert stats[day]["without_rate"] == sum(1 for o in rows if o[9] is None)
    assert list(stats[A]["first_without_rate"]) == ["o-4:EUR"]


def test_the_first_orders_without_a_rate_are_the_days_smallest_across_statuses_and_currencies(
    spark,
):
    """Seven unpriced orders of one day in three (status, currency) groups: the five smallest
    "order_id:currency" of the day, and the rules broken by priced rows counted per rule, each
    row once per rule it breaks, however the rows share their groups."""
    unpriced = [
        _order(
            f"u-{n}",
            status=("paid", "placed")[n % 2],
            currency=("EUR", "GBP")[n % 3 == 0],
            rate=None,
            usd=None,
        )
        for n in (9, 3, 7, 1, 8, 2, 5)
    ]
    broken = [
        _order("b-1", country="de"),  # country pattern
        _order("b-2", country="de", status="lost"),  # country pattern and status
        _order("b-3", status="lost", currency="GBP"),  # status
    ]
    rows = [*unpriced, *broken, _order("ok-1"), _order("ok-2", day=B)]
    stats = staging_stats(spark.createDataFrame(rows, STAGING_ORDERS), [A, B])
    labels = sorted(f"{o[0]}:{o[7]}" for o in unpriced)
    assert list(stats[A]["first_without_rate"]) == labels[:5]
    assert stats[A]["without_rate"] == 7 and stats[B]["without_rate"] == 0
    assert list(stats[B]["first_without_rate"]) == []
    violations = {rule.split(":")[0]: n for rule, n in stats[A]["rule_violations"].items()}
    assert violations == {"country": 2, "status": 2}
    assert stats[B]["rule_violations"] == {}
    assert stats[A]["statuses"] == dict(Counter(o[5] for o in rows if o[3] == A))


def test_an_amount_usd_that_does_not_fit_is_counted_apart_from_an_order_without_a_rate(spark):
    """The contract: an order whose amount_usd does not fit DECIMAL(18,2) fails its partition,
    as one without a rate does (conversion leaves it NULL beside a rate that exists); each is
    counted and named for its own check."""
    rows = [
        _order("o-1"),
        _order("o-big", amount="999999999999.99", rate="999999.99999999", usd=None),
        _order("o-none", currency="JPY", rate=None, usd=None),
    ]
    stats = staging_stats(spark.createDataFrame(rows, STAGING_ORDERS), [A])
    assert (stats[A]["too_large"], stats[A]["without_rate"]) == (1, 1)
    assert list(stats[A]["first_too_large"]) == ["o-big:EUR"]
    assert list(stats[A]["first_without_rate"]) == ["o-none:JPY"]
    assert stats[A]["rule_violations"] == {}


def test_staging_stats_give_the_warning_checks_figures_of_the_days_built_and_their_history(spark):
    """Orders by status and by currency, paid orders and their USD revenue, per day, for the
    days built and for the trailing published days joined in (ids unique, as staging's are)."""
    built = [o for o in ORDERS if o[0] != "o-3"] + [_order("o-7", currency="GBP", usd="2.50")]
    history = [
        _order("h-1", day=date(2023, 12, 31), status="placed"),
        _order("h-2", day=date(2023, 12, 31), currency="JPY", usd="0.07"),
    ]
    stats = staging_stats(
        spark.createDataFrame(built, STAGING_ORDERS),
        [A, B],
        spark.createDataFrame(history, STAGING_ORDERS),
    )
    for day in (A, B, date(2023, 12, 31)):
        rows = [o for o in built + history if o[3] == day]
        paid = [o for o in rows if o[5] == "paid"]
        assert stats[day]["statuses"] == dict(Counter(o[5] for o in rows))
        assert stats[day]["currencies"] == dict(Counter(o[7] for o in rows))
        assert stats[day]["paid_orders"] == len(paid)
        assert stats[day]["paid_usd"] == sum((o[10] for o in paid if o[10] is not None), Decimal(0))
        assert stats[day]["rows"] == stats[day]["distinct_ids"] == len(rows)


def test_valid_order_ids_counts_distinct_ids_per_event_day(spark):
    valid = spark.createDataFrame(ORDERS, STAGING_ORDERS).select("event_date", "order_id")
    assert valid_order_ids(valid, [A, B]) == {A: 4, B: 2}


def test_ids_per_day_over_several_blocks_of_days_counts_each_day_apart(spark):
    """Twenty days go by three blocks of days (``day_blocks``); a day outside them (the warning
    checks' history) and NULL ids (one id, as the docstring says) are counted on their own day."""
    days = days_between(date(2024, 3, 1), date(2024, 3, 20))
    rows = [(day, f"o-{i % (1 + n % 5)}") for n, day in enumerate(days) for i in range(n + 1)]
    rows += [
        (date(2024, 2, 20), "h-1"),
        (date(2024, 2, 20), "h-1"),
        (days[9], None),
        (days[9], None),
    ]
    expected = {
        day: (len({o for d, o in rows if d == day}), sum(1 for d, _ in rows if d == day))
        for day in {d for d, _ in rows}
    }
    assert (
        ids_per_day(spark.createDataFrame(rows, "event_date date, order_id string"), days)
        == expected
    )


def test_staging_totals_and_fact_totals_agree_on_the_same_orders(spark):
    orders = [o for o in ORDERS if o[10] is not None]
    expected = {}
    for o in orders:
        t = expected.setdefault(
            o[3],
            {
                "orders": 0,
                "placed_orders": 0,
                "paid_orders": 0,
                "cancelled_orders": 0,
                "revenue_usd": Decimal("0.00"),
            },
        )
        t["orders"] += 1
        t[f"{o[5]}_orders"] += 1
        if o[5] == "paid":
            t["revenue_usd"] += o[10]
    assert staging_totals(spark.createDataFrame(orders, STAGING_ORDERS)) == expected

    fact_rows = [
        (
            day,
            "DE",
            t["orders"],
            t["placed_orders"],
            t["paid_orders"],
            t["cancelled_orders"],
            t["revenue_usd"],
        )
        for day, t in expected.items()
    ]
    assert fact_totals(spark.createDataFrame(fact_rows, DAILY_REVENUE)) == expected
