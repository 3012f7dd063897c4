"""The "correction pending" marker: which assets and partitions each pending correction names,
and that no job runs its check (a backfill gains no step for it)."""

from __future__ import annotations

import dagster as dg
import pytest

from backfill_assets.catalog import (
    FCT_CUSTOMER_LTV,
    FCT_DAILY_REVENUE,
    RPT_MONTHLY_REVENUE,
    STG_ORDERS,
    STG_ORDERS_ENRICHED,
)
from backfill_assets.corrections import pending, registry
from backfill_assets.corrections.registry import Correction, State, TableRecord
from backfill_assets.definitions import defs

# What a correction of staging and fact changes, as this test spells it (not pending.MARKED).
CHANGED_ASSETS = (
    STG_ORDERS,
    FCT_DAILY_REVENUE,
    STG_ORDERS_ENRICHED,
    FCT_CUSTOMER_LTV,
    RPT_MONTHLY_REVENUE,
)


def correction(cid: str, state: str, staged: list[str], held: dict | None = None) -> Correction:
    c = Correction(cid, f"why {cid}", "ann", "2026-11-01T00:00:00+00:00", "", "", "v1", state)
    for table in ("staging/orders", "fact/daily_revenue"):
        c.tables[table] = TableRecord({d: "run" for d in staged}, dict(held or {}))
    return c


def marks(corrections) -> dict[dg.AssetKey, tuple[bool, str | None]]:
    return {e.asset_key: (e.passed, e.description) for e in pending.evaluations(corrections)}


def test_nothing_pending_passes_on_every_changed_asset():
    done = [
        correction("a", State.CUT_OVER, ["2024-01-02"]),
        correction("b", State.DISCARDED, ["2024-01-02"]),
        correction("c", State.DECOMMISSIONED, ["2024-01-02"]),
        correction("d", State.STAGED, ["2024-01-02"], held={"2024-01-02": ["row_count_band"]}),
    ]
    assert marks(done) == {asset: (True, "no correction pending") for asset in CHANGED_ASSETS}


@pytest.mark.parametrize("state", [State.STAGED, State.DIFFED, State.ROLLED_BACK])
def test_a_pending_correction_names_its_partitions_on_each_asset(state):
    staged = ["2024-01-30", "2024-01-31", "2024-02-01", "2024-02-05", "2024-02-07"]
    c = correction("fix-1", state, staged, held={"2024-02-07": ["fx_rate_present"]})
    days = "2024-01-30..2024-02-01, 2024-02-05"  # the held day is never cut over
    expected = {
        STG_ORDERS: days,
        FCT_DAILY_REVENUE: days,
        STG_ORDERS_ENRICHED: days,
        FCT_CUSTOMER_LTV: "2024-01-30 onward",
        RPT_MONTHLY_REVENUE: "2024-01, 2024-02",
    }
    assert marks([c]) == {
        asset: (False, f"correction pending: fix-1 will change {parts}")
        for asset, parts in expected.items()
    }
    [staging] = [e for e in pending.evaluations([c]) if e.asset_key == STG_ORDERS]
    assert staging.severity == dg.AssetCheckSeverity.WARN  # a warning, never a blocked run
    assert staging.metadata["correction fix-1"].value == f"{state}; {days}; why fix-1"


def test_no_job_runs_the_pending_check():
    definitions = defs()
    marked = {dg.AssetCheckKey(a, "correction_pending") for a in CHANGED_ASSETS}
    assert marked <= definitions.resolve_asset_graph().asset_check_keys  # declared: the UI shows it
    for job in definitions.jobs or ():
        selected = definitions.resolve_job_def(job.name).asset_layer.asset_graph.asset_check_keys
        assert not marked & selected, job.name
        if job.name == "backfill_job":  # the pipeline's own checks stay in its runs
            assert dg.AssetCheckKey(STG_ORDERS, "unique_order_ids") in selected


def marked_partitions(corrections, changed, ltv_built=()) -> dict[dg.AssetKey, dict[str, str]]:
    """Per asset, each partition marked when ``changed`` changed: its ``correction_pending``."""
    marks: dict[dg.AssetKey, dict[str, str]] = {}
    for obs in pending.partition_marks(corrections, changed, {FCT_CUSTOMER_LTV: set(ltv_built)}):
        marks.setdefault(obs.asset_key, {})[str(obs.partition)] = str(
            obs.metadata["correction_pending"].value
        )
    return marks


def test_each_partition_a_correction_changes_names_the_corrections_pending_on_it():
    fix1 = correction(
        "fix-1",
        State.STAGED,
        ["2024-01-30", "2024-01-31", "2024-02-01", "2024-02-07"],
        held={"2024-02-07": ["fx_rate_present"]},
    )
    fix2 = correction("fix-2", State.DIFFED, ["2024-02-01", "2024-02-02"])
    ltv_built = [f"2024-01-{d}" for d in range(20, 32)] + [f"2024-02-0{d}" for d in range(1, 10)]
    both = "fix-1, fix-2"
    days = {"2024-01-30": "fix-1", "2024-01-31": "fix-1", "2024-02-01": both}  # 02-07 is held
    ltv = {"2024-01-30": "fix-1", "2024-01-31": "fix-1"}
    ltv |= {f"2024-02-0{d}": both for d in range(1, 10)}  # fix-2 changes LTV from Feb 1 on
    assert marked_partitions([fix1, fix2], fix1, ltv_built) == {
        STG_ORDERS: days,
        FCT_DAILY_REVENUE: days,
        STG_ORDERS_ENRICHED: days,
        FCT_CUSTOMER_LTV: ltv,
        RPT_MONTHLY_REVENUE: {"2024-01-01": "fix-1", "2024-02-01": both},
    }
    # fix-1 cut over: its partitions say what is still pending on them, fix-2's alone.
    fix1.state = State.CUT_OVER
    days = {"2024-01-30": "none", "2024-01-31": "none", "2024-02-01": "fix-2"}
    ltv = {"2024-01-30": "none", "2024-01-31": "none"}
    ltv |= {f"2024-02-0{d}": "fix-2" for d in range(1, 10)}
    assert marked_partitions([fix1, fix2], fix1, ltv_built) == {
        STG_ORDERS: days,
        FCT_DAILY_REVENUE: days,
        STG_ORDERS_ENRICHED: days,
        FCT_CUSTOMER_LTV: ltv,
        RPT_MONTHLY_REVENUE: {"2024-01-01": "none", "2024-02-01": "fix-2"},
    }


def test_a_correction_with_nothing_ready_marks_no_partition():
    held = correction("h", State.STAGED, ["2024-01-02"], held={"2024-01-02": ["row_count_band"]})
    assert marked_partitions([held], held, ["2024-01-02"]) == {}


def test_each_marker_a_correction_reports_is_an_event_of_its_own_on_the_events_page(tmp_path):
    """The UI's Events page takes two events of one kind, from one run, stored in one
    millisecond, for one event (it keys them by run id, millisecond and kind): runless markers
    reported one after the other must each be stored at a millisecond of their own, or a day's
    latest marker goes missing from its page."""
    days = [f"2024-03-{d:02d}" for d in range(1, 31)]
    fix = correction("fix-30", State.STAGED, days)
    registry.save(tmp_path, fix, create=True)
    with dg.DagsterInstance.ephemeral() as instance:
        pending.report(instance, tmp_path, fix)
        for asset in (STG_ORDERS, FCT_DAILY_REVENUE, STG_ORDERS_ENRICHED):
            records = instance.fetch_observations(asset, limit=1000).records
            assert sorted(str(r.partition_key) for r in records) == days
            page_keys = {
                (r.event_log_entry.run_id, int(r.timestamp * 1000)) for r in records
            }  # as the page keys them: run id and millisecond (one kind here)
            assert len(page_keys) == len(records), f"{asset}: markers share a millisecond"
