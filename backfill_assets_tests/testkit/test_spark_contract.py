"""``spark_contract.py``, the benchmark's independent bare-Spark job: its staging, fact and
quarantine equal the reference's, row for row, on the same cases as the DuckDB job's
(``contract_feed.py``), in the suite's Spark session."""

from __future__ import annotations

from pathlib import Path

import pytest

from backfill_assets_testkit import contract_feed as feed
from backfill_assets_testkit import spark_contract


@pytest.fixture(scope="module")
def job(spark) -> feed.Job:
    def run(landing, out, start, end, lateness) -> feed.Summary:
        return spark_contract.run(landing, out, start, end, lateness, spark=spark)

    return run


@pytest.fixture(scope="module")
def landing(tmp_path_factory) -> Path:
    return feed.build_landing(tmp_path_factory.mktemp("spark") / "landing")


@pytest.fixture(scope="module")
def ran(job, landing, tmp_path_factory) -> tuple[Path, feed.Summary]:
    return feed.run_on_landing(job, landing, tmp_path_factory.mktemp("spark-out"))


def test_staging_equals_the_reference_and_holds_the_same_days(landing, ran):
    feed.check_staging(landing, *ran)


def test_fact_equals_the_reference(landing, ran):
    feed.check_fact(landing, *ran)


def test_quarantine_equals_the_reference_with_every_reason(landing, ran):
    feed.check_quarantine(landing, ran[0])


def test_lines_that_are_not_utf8_are_malformed_json_shown_with_replacement_characters(
    job, tmp_path
):
    feed.check_lines_not_utf8(job, tmp_path)


def test_an_amount_usd_beyond_decimal_18_2_holds_its_day(job, tmp_path):
    feed.check_overflow_holds_its_day(job, tmp_path)


def test_fuzzed_landing_files_get_the_reasons_the_contract_gives(job, tmp_path):
    feed.check_fuzzed_files(job, tmp_path)


def test_an_adversarial_feed_equals_the_reference(job, tmp_path):
    feed.check_adversarial_feed(job, tmp_path)
