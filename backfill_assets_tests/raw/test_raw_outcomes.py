"""Raw's check against the landing zone, as plain data: every file listed that gives rows must
be in the read; a file the reader did not see is a mismatch, never a file of zero records."""

from __future__ import annotations

from datetime import date

from backfill_assets.catalog import RAW_ORDERS
from backfill_assets.raw.raw_outcomes import RAW_MATCHES_LANDING, landing_outcomes

DAY, OTHER = date(2024, 1, 3), date(2024, 1, 4)
SEEN, EMPTY = "orders/arrival_date=2024-01-03/a.jsonl", "orders/arrival_date=2024-01-03/e.jsonl"
UNSEEN = "orders/arrival_date=2024-01-03/é.jsonl"  # what a reader in the C locale missed


def outcomes(listed: set[str], with_rows: set[str]):
    read = {(DAY, SEEN): (2, 77)}  # the same on both sides: (records, checksum)
    done = landing_outcomes(
        RAW_ORDERS,
        RAW_MATCHES_LANDING,
        [DAY, OTHER],
        {DAY: listed},
        read,
        dict(read),
        gives_rows=lambda relative: relative in with_rows,
    )
    return {o.partition: (o.passed, o.metadata["mismatched_files"]) for o in done}


def test_a_listed_file_with_records_that_the_read_did_not_see_holds_its_day_naming_it():
    assert outcomes({SEEN, UNSEEN, EMPTY}, with_rows={SEEN, UNSEEN}) == {
        DAY: (False, [UNSEEN]),
        OTHER: (True, []),
    }


def test_a_listed_file_of_no_records_is_no_mismatch():
    assert outcomes({SEEN, EMPTY}, with_rows={SEEN}) == {DAY: (True, []), OTHER: (True, [])}


def test_a_file_named_in_bytes_that_are_not_utf8_never_matches_when_it_gives_rows():
    odd = "orders/arrival_date=2024-01-03/bad\udcff.jsonl"  # the listing's surrogate escape
    assert outcomes({SEEN, odd}, with_rows={SEEN, odd}) == {
        DAY: (False, ["orders/arrival_date=2024-01-03/bad\\xff.jsonl"]),
        OTHER: (True, []),
    }
