"""A landed file whose name is not UTF-8: Spark's reader does not see it, and no table's
``source_file`` could hold its name. Its day is held by raw's check, naming the file, and the
days around it publish; nothing is published without its records."""

from __future__ import annotations

import os
from datetime import date

import pytest

from backfill_assets.backfill_plan import RunPlan
from backfill_assets.catalog import RAW_FX_RATES, RAW_ORDERS
from backfill_assets.cli.runner import execute
from backfill_assets.demo.generate import generate_feed
from backfill_assets_testkit.pipeline_env import pipeline_env

# Runs the pipeline through Dagster on real Spark and Delta: `make test`, not `make test-fast`.
pytestmark = pytest.mark.slow

FIRST, LAST = date(2024, 1, 1), date(2024, 1, 3)
DAY = date(2024, 1, 2)
BAD_NAME = b"\xff\xfe-orders"  # bytes no UTF-8 text has


def test_a_file_named_in_bytes_that_are_not_utf8_holds_its_day_naming_the_file(tmp_path):
    with pipeline_env(tmp_path, start_date="2023-12-20") as env:
        landing = env.settings.landing_dir
        generate_feed(landing, FIRST, LAST, orders_per_day=8, seed=4)
        order = (
            '{"order_id":"bad-name-1","customer_id":"c","event_time":"2024-01-02T10:00:00Z",'
            '"updated_at":"2024-01-02T10:00:00Z","status":"paid","amount":"10.00",'
            '"currency":"USD","country":"US"}\n'
        )
        for folder, suffix, text in (
            (f"orders/arrival_date={DAY}", b".jsonl", order),
            (f"fx_rates/rate_date={DAY}", b".csv", "currency,usd_per_unit\nEUR,2\n"),
        ):
            path = os.path.join(os.fsencode(landing), os.fsencode(folder), BAD_NAME + suffix)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)

        outcome = execute(RunPlan((RAW_ORDERS, RAW_FX_RATES), FIRST, LAST), env.instance)

        assert not outcome.success
        assert set(outcome.failed_checks[RAW_ORDERS]) == {DAY}
        assert "raw_matches_landing" in outcome.failed_checks[RAW_ORDERS][DAY]
        assert set(outcome.failed_checks[RAW_FX_RATES]) == {DAY}
        assert "rates_match_landing" in outcome.failed_checks[RAW_FX_RATES][DAY]
        assert set(outcome.published[RAW_ORDERS]) == {FIRST, LAST}
        assert set(outcome.published[RAW_FX_RATES]) == {FIRST, LAST}
        assert {r["arrival_date"] for r in env.rows("raw/orders")} == {FIRST, LAST}
        assert {r["rate_date"] for r in env.rows("raw/fx_rates")} == {FIRST, LAST}
