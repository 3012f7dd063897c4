"""The landing layout's pure helpers without Spark: dataset names, folder names, file names,
whether a file holds a record, and links that lead outside the root."""

from __future__ import annotations

from datetime import date

import pytest

from backfill_assets.landing.layout import (
    dataset,
    folder_day,
    has_records,
    is_complete,
    leads_outside,
)

ORDERS, RATES = dataset("orders"), dataset("fx_rates")


def test_the_two_datasets_by_name_and_an_unknown_name_refused():
    assert (ORDERS.name, ORDERS.partition_prefix, ORDERS.suffix) == (
        "orders",
        "arrival_date",
        ".jsonl",
    )
    assert (RATES.name, RATES.partition_prefix, RATES.suffix) == ("fx_rates", "rate_date", ".csv")
    with pytest.raises(ValueError, match=r"unknown landing dataset 'order'.*'fx_rates', 'orders'"):
        dataset("order")


@pytest.mark.parametrize(
    "name, day",
    [
        ("arrival_date=2024-02-29", date(2024, 2, 29)),
        ("arrival_date=2023-02-29", None),  # no such day
        ("arrival_date=2024-2-29", None),
        ("arrival_date=2024-02-29x", None),
        ("arrival_date=", None),
        ("xarrival_date=2024-02-29", None),
        ("rate_date=2024-02-29", None),  # the other dataset's folder
        ("2024-02-29", None),
    ],
)
def test_folder_day_reads_only_the_datasets_own_well_formed_folder_names(name, day):
    assert folder_day(name, ORDERS) == day


@pytest.mark.parametrize(
    "name, complete",
    [
        ("a.jsonl", True),
        ("_a.jsonl", False),  # still being written
        (".a.jsonl", False),
        ("a.csv", False),  # not this dataset's suffix
        ("a.jsonl.tmp", False),
    ],
)
def test_is_complete_by_name(name, complete):
    assert is_complete(name, ORDERS) is complete


@pytest.mark.parametrize(
    "text, records",
    [
        ("", False),
        (" \r\n\t\n\r", False),
        ("currency,usd_per_unit\r\n\n", False),  # the header alone lists no rate
        ("\n currency,usd_per_unit\n", True),  # not exactly the header: a record
        ("currency,usd_per_unit\ncurrency,usd_per_unit\n", True),  # the header once only
        ("currency,usd_per_unit\nEUR,1.1", True),
        ("EUR,1.1\n", True),
    ],
)
def test_has_records_of_a_rate_file(tmp_path, text, records):
    path = tmp_path / "r.csv"
    path.write_bytes(text.encode())
    assert has_records(path, RATES) is records


def test_the_rate_header_is_a_record_in_an_order_file(tmp_path):
    path = tmp_path / "o.jsonl"
    path.write_bytes(b"\ncurrency,usd_per_unit\n")
    assert has_records(path, ORDERS) is True


def test_leads_outside_only_for_a_link_whose_target_is_not_under_the_root(tmp_path):
    root, outside = tmp_path / "landing", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "real.jsonl").write_text("{}\n")
    (outside / "secret.jsonl").write_text("{}\n")
    (root / "in.jsonl").symlink_to(root / "real.jsonl")
    (root / "out.jsonl").symlink_to(outside / "secret.jsonl")
    (root / "out_folder").symlink_to(outside)
    (root / "up.jsonl").symlink_to("../outside/secret.jsonl")  # relative, climbing out
    names = ["real.jsonl", "in.jsonl", "out.jsonl", "out_folder", "up.jsonl"]
    assert {name: leads_outside(root / name, root) for name in names} == {
        "real.jsonl": False,
        "in.jsonl": False,
        "out.jsonl": True,
        "out_folder": True,
        "up.jsonl": True,
    }
    assert leads_outside(outside / "secret.jsonl", root) is False  # not a link: not its business
