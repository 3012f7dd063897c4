"""Two overlapping backfills launched together, in two real processes: the tables stay exact."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from datetime import date

import pytest

from backfill_assets.demo.generate import generate_feed
from backfill_assets_testkit.pipeline_env import pipeline_env
from backfill_assets_testkit.reference import Reference

pytestmark = pytest.mark.slow


def test_concurrent_overlapping_backfills_leave_one_clean_copy(tmp_path):
    with pipeline_env(tmp_path) as env:
        landing = env.settings.landing_dir
        generate_feed(landing, date(2024, 1, 1), date(2024, 1, 6), orders_per_day=15, seed=9)
        child_env = {
            **os.environ,
            "BACKFILL_SPARK_MASTER": "local[1]",
            "BACKFILL_SPARK_DRIVER_MEMORY": "1g",
            "BACKFILL_SPARK_SHUFFLE_PARTITIONS": "2",
        }
        ranges = [("2024-01-01", "2024-01-04"), ("2024-01-03", "2024-01-06")]
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "backfill_assets.cli", "backfill", "--start", a, "--end", b],
                env=child_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for a, b in ranges
        ]
        outputs = [p.communicate(timeout=600)[0] for p in procs]
        codes = [p.returncode for p in procs]
        assert codes == [0, 0], "\n\n".join(o[-3000:] for o in outputs)

        days = [date(2024, 1, d) for d in range(1, 7)]
        ref = Reference(landing, env.settings.max_lateness_days)
        expected = ref.expected(days)
        raw = Counter(
            (r["arrival_date"], r["source_file"], r["line_number"]) for r in env.rows("raw/orders")
        )
        assert all(n == 1 for n in raw.values()), "a raw record was written twice"
        assert sorted(raw) == sorted(
            (r.arrival_date, r.source_file, r.line_number)
            for r in ref.raw_orders([d for d in ref.arrival_dates if d <= date(2024, 1, 13)])
        )
        staging = Counter((r["event_date"], r["order_id"]) for r in env.rows("staging/orders"))
        assert staging == Counter((s.event_date, s.order_id) for s in expected.staging)
        fact = {
            (r["event_date"], r["country"]): (r["orders"], r["revenue_usd"])
            for r in env.rows("fact/daily_revenue")
        }
        assert fact == {(f.event_date, f.country): (f.orders, f.revenue_usd) for f in expected.fact}
