"""A short feed with one held day, backfilled by `backfill-assets backfill` in a child process
against a remote Spark (a standalone cluster or a Spark Connect server), and the comparison of
what it published with the reference implementation."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path

from backfill_assets.demo.generate import generate_feed, remove_rates
from backfill_assets_testkit.pipeline_env import PipelineEnv
from backfill_assets_testkit.reference import Reference

PROJECT = Path(__file__).resolve().parents[1]
FEED_START, FEED_END = date(2024, 1, 1), date(2024, 1, 5)
START, END = date(2024, 1, 2), date(2024, 1, 4)
# Every EUR rate up to this day is removed: it (and Jan 1) finds none within seven days back,
# Jan 3 and 4 have their own. The reference, not the pipeline, confirms it.
HELD = date(2024, 1, 2)
DAYS = [START + timedelta(days=i) for i in range((END - START).days + 1)]
GOOD = [d for d in DAYS if d != HELD]


def write_held_day_feed(landing: Path) -> Reference:
    generate_feed(landing, FEED_START, FEED_END, orders_per_day=15, seed=4)
    remove_rates(landing, "EUR", FEED_START - timedelta(days=30), HELD)
    reference = Reference(landing, 7)
    assert reference.staging(DAYS)[1] == {HELD}
    return reference


def backfill_in_child(
    spark_env: dict[str, str], timeout: float = 600
) -> subprocess.CompletedProcess:
    """The CLI's backfill of [START, END] in its own process, on the Spark ``spark_env`` selects."""
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "BACKFILL_SPARK_DRIVER_MEMORY": "1g",
        "BACKFILL_SPARK_SHUFFLE_PARTITIONS": "2",
        **spark_env,
    }
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "backfill_assets.cli",
            "backfill",
            "--start",
            START.isoformat(),
            "--end",
            END.isoformat(),
        ],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def assert_held_day_backfill_matches_reference(
    env: PipelineEnv, reference: Reference, proc: subprocess.CompletedProcess
) -> None:
    output = proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.returncode == 1, output
    assert f"stg_orders {HELD}: fx_rate_present" in proc.stdout, output

    staging, _ = reference.staging(GOOD)
    assert (
        sorted(
            (r["event_date"], r["order_id"], r["amount_usd"]) for r in env.rows("staging/orders")
        )
        == sorted((s.event_date, s.order_id, s.amount_usd) for s in staging)
        and staging
    )
    expected = {
        (f.event_date, f.country): (f.orders, f.paid_orders, f.revenue_usd)
        for f in reference.fact(GOOD)
    }
    actual = {
        (r["event_date"], r["country"]): (r["orders"], r["paid_orders"], r["revenue_usd"])
        for r in env.rows("fact/daily_revenue")
    }
    assert actual == expected and {k[0] for k in expected} == set(GOOD)
