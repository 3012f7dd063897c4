"""The landing zone on S3 (the session's SeaweedFS server): the folder settings, the listing, the
reader and the late-data detection give what the same files give on the local disk. Whole runs
on S3: ``corrections/test_corrections_s3.py``, ``test_cluster_backfill.py``, ``test_demo.py``."""

from __future__ import annotations

import time
from datetime import date, timedelta
from pathlib import Path

import pytest

from backfill_assets.landing.layout import (
    DATASETS,
    has_records,
    join,
    landed_partitions,
    list_landing_files,
)
from backfill_assets.landing.spark_reader import read_order_lines, read_rate_lines
from backfill_assets.settings import Settings
from backfill_assets_testkit.s3_landing import upload
from backfill_assets_tests.automation.landing_files import (
    arrival_folder,
    order,
    write_orders,
    write_rates,
)
from backfill_assets_tests.automation.test_late_data import D, raw, tick

ORDER = '{"order_id":"o%d","customer_id":"c","status":"placed","amount":"1.00","currency":"EUR"}'
# Every way a landed file's bytes can be odd, and names the listing must skip or read literally.
FILES: dict[str, bytes] = {
    "orders/arrival_date=2024-01-02/a.jsonl": (ORDER % 1 + "\r\n\n  \r\n" + ORDER % 2).encode(),
    "orders/arrival_date=2024-01-02/b [1]+x.jsonl": (ORDER % 3 + "\n").encode(),
    "orders/arrival_date=2024-01-02/c.jsonl": b'{"order_id":"o\xff"}\n' + (ORDER % 4).encode(),
    "orders/arrival_date=2024-01-02/blank.jsonl": b"\n \n",
    "orders/arrival_date=2024-01-02/_inflight.jsonl": (ORDER % 5).encode(),
    "orders/arrival_date=2024-01-02/.hidden.jsonl": (ORDER % 6).encode(),
    "orders/arrival_date=2024-01-02/notes.txt": b"not a landed file",
    "orders/arrival_date=2024-01-02/deeper/d.jsonl": (ORDER % 7).encode(),
    "orders/arrival_date=2024-01-05/e.jsonl": (ORDER % 8).encode(),
    "orders/arrival_date=2024-13-01/f.jsonl": (ORDER % 9).encode(),
    "orders/other/g.jsonl": (ORDER % 10).encode(),
    "fx_rates/rate_date=2024-01-02/r.csv": b"currency,usd_per_unit\r\nEUR,1.1\nGBP\n",
    "fx_rates/rate_date=2024-01-02/header_only.csv": b"currency,usd_per_unit\n",
    "fx_rates/rate_date=2024-01-03/no_header.csv": b"EUR,1.2\n",
}
DAYS = [date(2024, 1, 2), date(2024, 1, 3), date(2024, 1, 5)]


def land(local: Path, server, bucket: str, prefix: str, files: dict[str, bytes]) -> str:
    """The same files in the local folder and under ``s3://bucket/prefix``; that location."""
    for relative, data in files.items():
        (local / relative).parent.mkdir(parents=True, exist_ok=True)
        (local / relative).write_bytes(data)
    return upload(local, server, bucket, prefix)


@pytest.fixture
def both(tmp_path, s3_server, s3_bucket) -> tuple[Path, str]:
    local = tmp_path / "landing"
    return local, land(local, s3_server, s3_bucket, "zone/landing", FILES)


def test_the_listing_on_s3_equals_the_local_one(both):
    local, remote = both
    for name in DATASETS:
        assert landed_partitions(remote, name) == landed_partitions(local, name)
        assert list_landing_files(remote, name, DAYS) == list_landing_files(local, name, DAYS)
    # the files as the contract names them, written out by hand
    assert [f.relative_path for f in list_landing_files(remote, "orders", DAYS)] == [
        "orders/arrival_date=2024-01-02/a.jsonl",
        "orders/arrival_date=2024-01-02/b [1]+x.jsonl",
        "orders/arrival_date=2024-01-02/blank.jsonl",
        "orders/arrival_date=2024-01-02/c.jsonl",
        "orders/arrival_date=2024-01-05/e.jsonl",
    ]
    assert landed_partitions(remote, "fx_rates") == [date(2024, 1, 2), date(2024, 1, 3)]


def test_has_records_on_s3_agrees_with_the_local_file(both):
    local, remote = both
    for name, ds in DATASETS.items():
        for f in list_landing_files(local, name, DAYS):
            expected = has_records(local / f.relative_path, ds)
            assert has_records(join(remote, f.relative_path), ds) is expected, f
    assert not has_records(
        join(remote, "orders/arrival_date=2024-01-02/blank.jsonl"), DATASETS["orders"]
    )


def test_the_reader_gives_the_same_rows_from_s3_as_from_disk(spark, both):
    local, remote = both
    for name, read in (("orders", read_order_lines), ("fx_rates", read_rate_lines)):
        from_disk = read(spark, local, list_landing_files(local, name, DAYS)).collect()
        from_s3 = read(spark, remote, list_landing_files(remote, name, DAYS)).collect()
        assert sorted(from_s3) == sorted(from_disk)
        assert len(from_disk) >= 3, name
    # the line that is not UTF-8 is flagged from S3 as it is from disk
    flagged = read_order_lines(spark, remote, list_landing_files(remote, "orders", DAYS))
    assert [(r.source_file, r.line_number) for r in flagged.filter("not _utf8").collect()] == [
        ("orders/arrival_date=2024-01-02/c.jsonl", 1)
    ]


@pytest.mark.parametrize(
    "value, expected",
    [
        ("s3://bucket/a//b/", "s3://bucket/a/b"),
        ("s3://bucket", "s3://bucket"),
        ("  s3://bucket/x  ", "s3://bucket/x"),
    ],
)
def test_a_folder_setting_keeps_an_s3_location(value, expected):
    settings = Settings.from_env({"BACKFILL_LANDING_DIR": value, "BACKFILL_LAKE_DIR": value})
    assert settings.landing_dir == expected
    assert settings.lake_dir == expected


@pytest.mark.parametrize("value", ["s3://", "s3:///prefix", "gs://bucket/x", "https://host/x"])
def test_a_folder_setting_of_another_scheme_or_no_bucket_is_refused(value):
    with pytest.raises(ValueError, match=r"^BACKFILL_LAKE_DIR"):  # the setting's own error
        Settings.from_env({"BACKFILL_LAKE_DIR": value})


def test_late_data_detection_on_s3_requests_what_it_requests_on_disk(
    tmp_path, s3_server, s3_bucket
):
    """The sensor's detection, cold and then warm, over the same files on disk and on S3: the
    same raw runs and event days (S3 stamps files to the second, so the new files come a
    second after the first look)."""
    local, remote = tmp_path / "landing", f"s3://{s3_bucket}/landing"
    landed = [
        write_orders(local, D("2024-01-10"), "a.jsonl", [order("1", "2024-01-09T10:00:00Z")]),
        write_orders(local, D("2024-01-12"), "a.jsonl", [order("2", "2024-01-12T10:00:00Z")]),
        write_rates(local, D("2024-01-05"), "a.csv", {"EUR": "1.08"}),
        write_rates(local, D("2024-01-08"), "a.csv", {"EUR": "1.09"}),
    ]
    in_flight = arrival_folder(local, D("2024-01-12")) / "_b.jsonl"
    in_flight.write_text(order("9", "2024-01-03T10:00:00Z") + "\n")
    upload(local, s3_server, s3_bucket, "landing", [*landed, in_flight])

    def both(cursors, **kw):
        return [
            tick(root, cursor, **kw) for root, cursor in zip((local, remote), cursors, strict=True)
        ]

    def seen(detection):
        days = detection.group.days if detection.group else ()
        return raw(detection), days, detection.cursor.counts

    cold = both([None, None], built={D("2024-01-10")})
    assert seen(cold[1]) == seen(cold[0])
    assert raw(cold[1]) == [
        ("raw_orders", D("2024-01-12"), D("2024-01-12")),
        ("raw_fx_rates", D("2024-01-05"), D("2024-01-08")),
    ]
    time.sleep(1.1)
    new = [
        write_orders(local, D("2024-01-12"), "c.jsonl", [order("4", "2024-01-10T05:00:00Z")]),
        write_rates(local, D("2024-01-08"), "b.csv", {"GBP": "1.27"}),
    ]
    upload(local, s3_server, s3_bucket, "landing", new)
    warm = both([d.cursor for d in cold])
    assert seen(warm[1]) == seen(warm[0])
    # the rate sets GBP for its date and the 7 days after (no later GBP rate); the order's
    # event day is among them; the files seen at the first look are not read again
    assert warm[1].group is not None
    assert warm[1].group.days == tuple(D("2024-01-08") + timedelta(days=i) for i in range(8))
    assert "a.jsonl" not in warm[1].group.why and "a.csv" not in warm[1].group.why
    # a file landed within the settle time: neither taken nor lost, counted as settling
    time.sleep(1.1)
    late = write_orders(local, D("2024-01-12"), "d.jsonl", [order("5", "2024-01-11T05:00:00Z")])
    upload(local, s3_server, s3_bucket, "landing", [late])
    settling = both([d.cursor for d in warm], settle_ns=60 * 10**9)
    assert [(d.group, d.settling) for d in settling] == [(None, 1), (None, 1)]
