"""Partition-key skew: the hot-key rule, the one aggregation that finds hot keys, and the salted
write (same rows, a heavy day split over several files)."""

from __future__ import annotations

from collections import Counter
from datetime import date

import pyarrow.parquet as pq

from backfill_assets.lake.parquet_writer import write_files
from backfill_assets.transforms.skew import is_hot, shares, staging_keys

D1, D2, D3 = date(2024, 1, 1), date(2024, 1, 2), date(2024, 1, 3)


def test_hot_means_above_the_share_and_well_above_an_even_share():
    assert is_hot(60, 100, 60_000, 0.2)
    assert not is_hot(19, 100, 60_000, 0.2)
    assert not is_hot(30, 100, 7, 0.2)  # a 30% country of seven: 3/7 = 43% is the bar
    assert is_hot(50, 100, 7, 0.2)
    assert not is_hot(50, 100, 2, 0.2)  # half of a two-day range is even
    assert is_hot(30, 100, None, 0.2)


def test_shares_rank_the_top_keys_and_always_show_the_null_bucket():
    counts = {"A": 6, "B": 2, "C": 1, None: 1}
    top, null = shares("customer_id", counts, 0.2, top=2, keys=None)
    assert [(s.value, s.rows, s.share, s.hot) for s in top] == [
        ("A", 6, 0.6, True),
        ("B", 2, 0.2, False),
    ]
    assert (null.value, null.rows, null.share, null.hot) == (None, 1, 0.1, False)
    top, _ = shares("customer_id", counts, 0.2)  # three customers: 60% is not 3 x an even share
    assert not top[0].hot
    _, empty = shares("country", {"US": 3}, 0.2)
    assert (empty.rows, empty.share) == (0, 0.0)


def test_staging_keys_counts_ids_and_records_per_day_and_finds_the_hot_customer(spark):
    rows = (
        [(D1, f"o{i}", "HOT") for i in range(6)]
        + [(D1, "o0", "HOT")]  # o0 twice: 2 versions
        + [(D2, f"p{i}", f"c{i}") for i in range(3)]
        + [(D3, "q0", "HOT"), (D3, "q1", "c9")]
    )
    keys = staging_keys(
        spark.createDataFrame(rows, "event_date date, order_id string, customer_id string"),
        [D1, D2, D3],
    )
    assert keys.valid_ids == {D1: 6, D2: 3, D3: 2}
    assert keys.rows_per_day == {D1: 7, D2: 3, D3: 2}
    assert keys.heavy_customers == {"HOT": 8}  # the others have fewer rows than days
    # 8 of 12 records; a day of three is never hot (7/12 < 3 x 1/3)
    assert keys.hot(0.2) == ["customer_id=HOT"]
    assert keys.hot(0.9) == []


def _read(table_dir, files) -> Counter[tuple]:
    out: Counter[tuple] = Counter()
    for f in files:
        for r in pq.read_table(f"{table_dir}/{f.path}").to_pylist():
            out[(f.partition, r["order_id"], r["amount"])] += 1
    return out


def test_a_salted_write_writes_the_same_rows_in_more_files(spark, tmp_path):
    rows = [(D1, f"o{i}", i) for i in range(400)] + [(D2, f"p{i}", i) for i in range(5)]
    df = spark.createDataFrame(rows, "event_date date, order_id string, amount int")
    plain = write_files(df, str(tmp_path / "plain"), "event_date", [D1, D2])
    salted = write_files(df, str(tmp_path / "salted"), "event_date", [D1, D2], spread=8)
    expected = Counter((d, o, a) for d, o, a in rows)
    assert _read(tmp_path / "plain", plain) == expected == _read(tmp_path / "salted", salted)
    assert sum(f.partition == D1 for f in plain) == 1
    assert sum(f.partition == D1 for f in salted) > 1
