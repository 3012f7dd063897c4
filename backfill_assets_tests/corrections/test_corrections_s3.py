"""The operator's commands with the landing zone and the lake on S3 (the session's SeaweedFS
server): plan (its listing and key shares as on disk), backfill, catch-up of a late folder, and a
correction built beside production, cut over, rolled back, the lake maintained and the
correction discarded; each table compared with the reference implementation on the landing as
it was at each step."""

from __future__ import annotations

import re
import shutil
from collections import Counter
from datetime import timedelta
from decimal import Decimal

import pytest

from backfill_assets.catalog import CORRECTION_DIFF_JOB
from backfill_assets.cli.catch_up import run_catch_up
from backfill_assets.cli.main import main, run_backfill
from backfill_assets.corrections import registry
from backfill_assets.demo.generate import generate_feed, restate_rates
from backfill_assets.settings import AutomationSettings, Settings
from backfill_assets.storage.stores import storage_for
from backfill_assets_testkit.pipeline_env import assert_matches_reference, pipeline_env
from backfill_assets_testkit.reference import Reference
from backfill_assets_testkit.s3_landing import upload
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

pytestmark = pytest.mark.slow


def test_plan_backfill_catch_up_and_a_correction_on_s3_match_the_reference_at_each_step(
    tmp_path, s3_server, s3_bucket, capsys
):
    local = tmp_path / "landing"
    generate_feed(local, FEED_START, FEED_END, orders_per_day=30, seed=3)
    shutil.copytree(local, tmp_path / "original")
    original = Reference(tmp_path / "original", 7)
    # One arrival folder lands late: first the rest, as it stood at the backfill.
    late = local / "orders" / f"arrival_date={START + timedelta(days=3)}"
    held = tmp_path / "held" / late.name
    shutil.move(late, held)
    shutil.copytree(local, tmp_path / "at_backfill")
    upload(local, s3_server, s3_bucket, "landing")
    command = ["plan", "--start", str(START), "--end", str(END)]
    shutil.copytree(local, tmp_path / "disk" / "landing")
    with pipeline_env(tmp_path / "disk", lateness=7):  # the same files on local disk
        assert main(command) == 0
        on_disk = capsys.readouterr().out.replace(str(tmp_path / "disk" / "landing"), "LANDING")
    landing, lake = f"s3://{s3_bucket}/landing", f"s3://{s3_bucket}/lake"
    with pipeline_env(tmp_path / "run", lateness=7, landing=landing, lake=lake) as env:
        assert main(command) == 0
        plan = capsys.readouterr().out
        days = (END - START).days + 1
        assert re.search(rf"stg_orders\+fct_daily_revenue\s+{START}\.\.{END} \({days}\)", plan)
        raw_files = re.search(r"raw_orders\s+\S+ \(\d+\)\s+(\d+)", plan)
        assert raw_files and int(raw_files[1]) > 0, plan  # the files listed on S3
        assert plan.replace(landing, "LANDING") == on_disk  # files, bytes and key shares
        assert run_backfill(env.settings, START, END) == 0
        assert_matches_reference(env, tmp_path / "at_backfill", _days(START, END))
        assert not (tmp_path / "run" / "lake").exists()

        # The late folder lands on S3; catch-up folds it in.
        shutil.move(held, late)
        upload(
            local,
            s3_server,
            s3_bucket,
            "landing",
            sorted(p for p in late.rglob("*") if p.is_file()),
        )
        quiet = AutomationSettings(settle_seconds=0)
        assert run_catch_up(Settings.from_env(), quiet) == 0, capsys.readouterr()
        assert f"orders/{late.name}/: never built" in capsys.readouterr().out
        assert_tables_equal(env, original, _days(START, END))  # staging and fact
        arrival = START + timedelta(days=3)
        assert Counter(
            (r["source_file"], r["line_number"], r["payload"])
            for r in env.rows("raw/orders")
            if r["arrival_date"] == arrival
        ) == Counter(
            (r.source_file, r.line_number, r.payload)
            for r in original.expected([arrival]).raw_orders
        )

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

        capsys.readouterr()
        assert main(["status", "--start", str(START), "--end", str(END)]) == 0
        status = [row.split() for row in capsys.readouterr().out.splitlines()]
        # every day of the range: raw, rates, staging and the fact "published <rows>"
        wanted = {str(d) for d in _days(START, END)}
        shown = {row[0]: row[1:9:2] for row in status if row and row[0] in wanted}
        assert shown == {day: ["published"] * 4 for day in wanted}, status
        assert main(["maintain"]) == 0, capsys.readouterr().err
        assert_tables_equal(env, original, _days(START, END))
        assert main(["corrections"]) == 0
        assert any(
            row.startswith(CID) and "rolled back" in row
            for row in capsys.readouterr().out.splitlines()
        )
        manifest = f"{lake}/staging/orders/_staged/{CID}.json"
        assert storage_for(manifest).exists(manifest)
        assert main(["discard", CID]) == 0, capsys.readouterr().err
        assert registry.get(lake, CID).state == registry.State.DISCARDED
        assert not storage_for(manifest).exists(manifest)
        assert_tables_equal(env, original, _days(START, END))
