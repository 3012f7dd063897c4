"""The pipeline on the native engine: BACKFILL_LAKE_ENGINE=delta-spark backfills a feed equal to the
contract."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import date

import pytest

from backfill_assets.demo.generate import generate_feed
from backfill_assets.lake.commit import decode_metadata
from backfill_assets.spark.delta_jars import jars_present
from backfill_assets_testkit.contract_feed import edge_orders, land_decoy
from backfill_assets_testkit.pipeline_env import assert_matches_reference, pipeline_env
from backfill_assets_tests.lake.lake_support import NO_JARS

pytestmark = pytest.mark.slow
START, END = date(2024, 1, 2), date(2024, 1, 3)
TABLES = ("raw/orders", "quarantine/orders", "raw/fx_rates", "staging/orders", "fact/daily_revenue")


def test_backfill_on_delta_spark_matches_the_contract_in_every_table(tmp_path):
    if not jars_present():
        pytest.fail(NO_JARS, pytrace=False)
    from deltalake import DeltaTable

    with pipeline_env(tmp_path) as env:
        landing = env.settings.landing_dir
        generate_feed(landing, date(2024, 1, 1), date(2024, 1, 4), orders_per_day=15, seed=4)
        edges = landing / "orders" / f"arrival_date={END}" / "zz-edges-10:00.jsonl"
        edges.write_text("\n".join(edge_orders(END)) + "\n")
        land_decoy(edges)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "backfill_assets.cli",
                "backfill",
                "--start",
                str(START),
                "--end",
                str(END),
            ],
            env={
                **os.environ,
                "BACKFILL_LAKE_ENGINE": "delta-spark",
                "BACKFILL_SPARK_MASTER": "local[2]",
                "BACKFILL_SPARK_SHUFFLE_PARTITIONS": "2",
                "BACKFILL_SPARK_DRIVER_MEMORY": "1g",
            },
            capture_output=True,
            text=True,
            timeout=1200,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        # Every commit of every table was made by the native engine.
        for table in TABLES:
            history = DeltaTable(str(env.settings.lake_dir / table)).history()
            engines = {
                decode_metadata(entry.get("userMetadata")).get("engine") for entry in history
            }
            assert engines == {"delta-spark"}, (table, engines)

        assert_matches_reference(env, landing, [START, END])
