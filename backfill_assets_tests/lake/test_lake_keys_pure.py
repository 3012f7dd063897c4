"""The lake's validation of table names, column names and date texts, called directly (no Spark)."""

from __future__ import annotations

import datetime as dt

import pytest

from backfill_assets.lake.errors import LakeError
from backfill_assets.lake.keys import check_column_name, check_table_name, date_text


@pytest.mark.parametrize("name", ["raw/orders", "fact/daily_revenue", "a_1/B2/c", "x"])
def test_a_table_name_of_word_segments_is_returned_as_given(name):
    assert check_table_name(name) == name


@pytest.mark.parametrize(
    "name", [None, "", 5, b"raw/orders", "../etc", "raw/../x", "/abs", "raw//x", "raw/", "raw/x y"]
)
def test_anything_else_is_no_table_name(name):
    with pytest.raises(LakeError, match="table name"):
        check_table_name(name)


@pytest.mark.parametrize("name", ["event_date", "_x", "A1"])
def test_a_plain_identifier_is_a_column_name(name):
    assert check_column_name(name) == name


@pytest.mark.parametrize("name", [None, "", "1a", "a b", "d = d OR 1=1", "a-b", "a\n"])
def test_anything_else_is_no_column_name(name):
    with pytest.raises(LakeError, match="column name"):
        check_column_name(name)


def test_date_text_is_the_iso_form_of_a_date_and_only_of_a_date():
    assert date_text(dt.date(2024, 2, 9)) == "2024-02-09"
    assert date_text(dt.date(1, 1, 1)) == "0001-01-01"
    for bad in (dt.datetime(2024, 2, 9), "2024-02-09", None, 20240209):
        with pytest.raises(LakeError, match="not a validated date"):
            date_text(bad)
