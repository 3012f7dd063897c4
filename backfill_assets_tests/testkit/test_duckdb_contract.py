"""``duckdb_contract.py``, the benchmark's DuckDB job: its staging, fact and quarantine equal the
reference's, row for row, on a generated feed laced with adversarial records (``contract_feed.py``,
which holds the cases and their checks)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from backfill_assets_testkit import contract_feed as feed
from backfill_assets_testkit import duckdb_contract


def job(landing: Path, out: Path, start: date, end: date, lateness: int) -> feed.Summary:
    return duckdb_contract.run(landing, out, start, end, max_lateness_days=lateness)


@pytest.fixture(scope="module")
def landing(tmp_path_factory) -> Path:
    return feed.build_landing(tmp_path_factory.mktemp("duckdb") / "landing")


@pytest.fixture(scope="module")
def ran(landing, tmp_path_factory) -> tuple[Path, feed.Summary]:
    return feed.run_on_landing(job, landing, tmp_path_factory.mktemp("duckdb-out"))


def test_staging_equals_the_reference_and_holds_the_same_days(landing, ran):
    feed.check_staging(landing, *ran)


def test_fact_equals_the_reference(landing, ran):
    feed.check_fact(landing, *ran)


def test_quarantine_equals_the_reference_with_every_reason(landing, ran):
    feed.check_quarantine(landing, ran[0])


def test_lines_that_are_not_utf8_are_malformed_json_shown_with_replacement_characters(tmp_path):
    feed.check_lines_not_utf8(job, tmp_path)


def test_an_amount_usd_beyond_decimal_18_2_holds_its_day(tmp_path):
    feed.check_overflow_holds_its_day(job, tmp_path)


def test_fuzzed_landing_files_get_the_reasons_the_contract_gives(tmp_path):
    feed.check_fuzzed_files(job, tmp_path)


def test_a_file_whose_name_holds_backslashes_and_brackets_is_read(tmp_path):
    """DuckDB globs its paths, and a backslash in a name defeated the escaping of ``[``: the
    file was silently not read (found by the fuzzed files' names)."""
    name = f"{feed.ARRIVAL}2024-01-01/a (?![\\s\\S]) {{b}}.jsonl"
    feed.land(tmp_path, name, "not json\n")
    summary = duckdb_contract.run(tmp_path, tmp_path / "out", feed.D1, feed.D1)
    found = feed.rows(tmp_path / "out", "quarantine", "arrival_date")
    assert [(r["source_file"], r["line_number"], r["reason"]) for r in found] == [
        (name, 1, "malformed_json")
    ]
    assert summary.records == 1
