"""Nothing unchecked is ever visible: while a step runs, readers see only what was published, and a
raw day whose check fails after a transient retry keeps its previous content in every table."""

from __future__ import annotations

import re
import threading
import time
from datetime import date
from pathlib import Path

import pytest

from backfill_assets.backfill_plan import RunPlan
from backfill_assets.catalog import RAW_ORDERS
from backfill_assets.cli.runner import execute
from backfill_assets.demo.generate import generate_feed
from backfill_assets.lake import Lake
from backfill_assets.testing.faults import forget_visits
from backfill_assets_testkit.pipeline_env import pipeline_env

# Runs the pipeline through Dagster on real Spark and Delta: `make test`, not `make test-fast`.
pytestmark = pytest.mark.slow

FIRST, LAST = date(2024, 1, 1), date(2024, 1, 3)
DAY = date(2024, 1, 2)
TABLES = ("raw/orders", "quarantine/orders")


def wait_for(path: Path, thread: threading.Thread, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert thread.is_alive(), f"the run ended before {path.name}"
        assert time.monotonic() < deadline, f"timed out waiting for {path.name}"
        time.sleep(0.05)


def damage_staged_raw(lake: Lake, how: str) -> None:
    """Damage raw/orders' staged file before its check reads it: change one payload's order id
    (its length kept), or drop the file's last record."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (staged,) = lake.staging.versions("raw/orders")
    path = lake.path("raw/orders") / min(f.path for f in staged.files)
    table = pq.read_table(path)
    if how == "payload_changed":
        payloads = table.column("payload").to_pylist()
        found = re.search(r'"order_id": ?"', payloads[0])
        assert found is not None, payloads[0]
        at = found.end()
        payloads[0] = (
            payloads[0][:at] + ("Z" if payloads[0][at] != "Z" else "Y") + payloads[0][at + 1 :]
        )
        table = table.set_column(
            table.schema.get_field_index("payload"),
            "payload",
            pa.array(payloads, table.schema.field("payload").type),
        )
    else:
        table = table.slice(0, table.num_rows - 1)
    pq.write_table(table, path)


@pytest.mark.parametrize("damage", ["payload_changed", "record_dropped"])
def test_a_raw_day_failing_its_check_after_a_transient_retry_keeps_its_previous_content(
    tmp_path, spark, monkeypatch, damage
):
    with pipeline_env(tmp_path, start_date="2023-12-20") as env:
        landing = env.settings.landing_dir
        generate_feed(landing, FIRST, LAST, orders_per_day=8, seed=4)
        assert execute(RunPlan((RAW_ORDERS,), FIRST, LAST), env.instance).success
        before = {t: env.multiset(t) for t in TABLES}
        assert all(before.values())

        faults = tmp_path / "faults"
        faults.mkdir()
        forget_visits()  # the other parameter's run paused in this process too
        monkeypatch.setenv("BACKFILL_LAKE_PAUSE_DIR", str(faults))
        monkeypatch.setenv("BACKFILL_LAKE_FAIL_AT", "staged")  # the first attempt dies once staged
        monkeypatch.setenv("BACKFILL_LAKE_PAUSE_AT", "staged")  # the retry pauses once staged
        result: dict = {}
        run = threading.Thread(
            target=lambda: result.update(
                outcome=execute(RunPlan((RAW_ORDERS,), DAY, DAY), env.instance)
            )
        )
        run.start()
        try:
            wait_for(faults / "staged.1.reached", run)
            # The retry staged raw/orders: readers still see exactly the published rows.
            assert {t: env.multiset(t) for t in TABLES} == before
            assert len(Lake(env.settings.lake_dir, spark).staging.versions("raw/orders")) == 1
            damage_staged_raw(Lake(env.settings.lake_dir, spark), damage)
            for visit in (1, 2):  # raw, quarantine
                wait_for(faults / f"staged.{visit}.reached", run)
                (faults / f"staged.{visit}.resume").touch()
        finally:
            for visit in (1, 2):
                (faults / f"staged.{visit}.resume").touch()
            run.join(timeout=600)

        outcome = result["outcome"]
        assert (faults / "staged.failed.1").exists()  # the transient failure happened
        assert not outcome.success
        assert "raw_matches_landing" in outcome.failed_checks[RAW_ORDERS][DAY]
        assert outcome.published.get(RAW_ORDERS, {}) == {}
        assert {t: env.multiset(t) for t in TABLES} == before  # no table moved
        lake = Lake(env.settings.lake_dir, spark)
        assert [v for t in TABLES for v in lake.staging.versions(t)] == []  # nothing left staged
