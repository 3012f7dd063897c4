"""A correction with the landing zone and the lake on S3 (the session's SeaweedFS server): built
beside production, cut over, rolled back and the lake maintained, each table compared with the
reference implementation on the original and on the restated landing."""

from __future__ import annotations

import re
import shutil
from decimal import Decimal

import pytest

from backfill_assets.catalog import CORRECTION_DIFF_JOB
from backfill_assets.cli.main import main, run_backfill
from backfill_assets.corrections import registry
from backfill_assets.generate import generate_feed, restate_rates
from backfill_assets_tests.corrections.test_corrections import (
    CID,
    END,
    FEED_END,
    FEED_START,
    FIX_END,
    FIX_START,
    RESTATED,
    START,
    _days,
    assert_tables_equal,
    expected_rows,
    run_action,
)
from backfill_assets_tests.pipeline_env import assert_matches_reference, pipeline_env
from backfill_assets_tests.reference import Reference
from backfill_assets_tests.s3_landing import upload

pytestmark = pytest.mark.slow


def test_a_correction_on_s3_cuts_over_and_rolls_back_to_the_references_tables(
    tmp_path, s3_server, s3_bucket, capsys
):
    local = tmp_path / "landing"
    generate_feed(local, FEED_START, FEED_END, orders_per_day=30, seed=3)
    upload(local, s3_server, s3_bucket, "landing")
    shutil.copytree(local, tmp_path / "original")
    original = Reference(tmp_path / "original", 7)
    landing, lake = f"s3://{s3_bucket}/landing", f"s3://{s3_bucket}/lake"
    with pipeline_env(tmp_path / "run", lateness=7, landing=landing, lake=lake) as env:
        assert main(["plan", "--start", str(START), "--end", str(END)]) == 0
        plan = capsys.readouterr().out
        days = (END - START).days + 1
        assert re.search(rf"stg_orders\+fct_daily_revenue\s+{START}\.\.{END} \({days}\)", plan)
        raw_files = re.search(r"raw_orders\s+\S+ \(\d+\)\s+(\d+)", plan)
        assert raw_files and int(raw_files[1]) > 0, plan  # the files listed on S3
        assert run_backfill(env.settings, START, END) == 0
        assert_matches_reference(env, tmp_path / "original", _days(START, END))
        assert not (tmp_path / "run" / "lake").exists()

        before = {p for p in local.rglob("*") if p.is_file()}
        assert restate_rates(local, "EUR", RESTATED[0], RESTATED[-1], Decimal("1.03")) == 2
        new = [p for p in local.rglob("*") if p.is_file() and p not in before]
        assert len(new) == 2
        upload(local, s3_server, s3_bucket, "landing", new)
        restated = Reference(local, 7)

        command = ["correct", "--start", str(FIX_START), "--end", str(FIX_END)]
        assert main([*command, "--reason", "EUR restated", "--id", CID]) == 0
        assert_tables_equal(env, original, _days(START, END))  # production untouched
        assert registry.get(lake, CID).state == registry.State.STAGED
        # the diff from the UI's job: the days it reports changed are the reference's
        diffed, _ = run_action(env, CORRECTION_DIFF_JOB, correction_id=CID)
        assert diffed.success
        [output] = [e for e in diffed.all_events if e.event_type_value == "STEP_OUTPUT"]
        changed = [
            d
            for d in _days(FIX_START, FIX_END)
            if expected_rows(original, [d]) != expected_rows(restated, [d])
        ]
        shown = output.event_specific_data.metadata["changed_days"].value
        assert shown == ", ".join(map(str, changed)) and changed, shown
        assert main(["cutover", CID, "--skip-rebuilt"]) == 0, capsys.readouterr().err
        assert_tables_equal(env, restated, _days(START, END))
        assert main(["rollback", CID]) == 0, capsys.readouterr().err
        assert_tables_equal(env, original, _days(START, END))
        assert registry.get(lake, CID).state == registry.State.ROLLED_BACK

        assert main(["status"]) == 0
        status = capsys.readouterr().out
        assert str(START) in status and str(END) in status, status
        assert main(["maintain"]) == 0, capsys.readouterr().err
        assert_tables_equal(env, original, _days(START, END))
        assert main(["corrections"]) == 0
        assert any(
            row.startswith(CID) and "rolled back" in row
            for row in capsys.readouterr().out.splitlines()
        )
