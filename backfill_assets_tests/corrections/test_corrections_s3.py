"""A correction with the landing zone and the lake on S3 (the session's SeaweedFS server): built
beside production, cut over, rolled back and the lake maintained, each table compared with the
reference implementation on the original and on the restated landing."""

from __future__ import annotations

import shutil
from decimal import Decimal
from pathlib import Path

import pytest

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
)
from backfill_assets_tests.pipeline_env import pipeline_env
from backfill_assets_tests.reference import Reference

pytestmark = pytest.mark.slow


def put_new_files(local: Path, before: set[Path], server, bucket: str, prefix: str) -> int:
    """Puts the files of ``local`` that are not in ``before`` under ``s3://bucket/prefix``."""
    new = sorted(p for p in local.rglob("*") if p.is_file() and p not in before)
    for path in new:
        key = f"{prefix}/{path.relative_to(local).as_posix()}"
        server.client().put_object(Bucket=bucket, Key=key, Body=path.read_bytes())
    return len(new)


def test_a_correction_on_s3_cuts_over_and_rolls_back_to_the_references_tables(
    tmp_path, s3_server, s3_bucket, capsys
):
    local = tmp_path / "landing"
    generate_feed(local, FEED_START, FEED_END, orders_per_day=30, seed=3)
    put_new_files(local, set(), s3_server, s3_bucket, "landing")
    shutil.copytree(local, tmp_path / "original")
    original = Reference(tmp_path / "original", 7)
    landing, lake = f"s3://{s3_bucket}/landing", f"s3://{s3_bucket}/lake"
    with pipeline_env(tmp_path / "run", lateness=7, landing=landing, lake=lake) as env:
        assert run_backfill(env.settings, START, END) == 0
        assert_tables_equal(env, original, _days(START, END))

        before = {p for p in local.rglob("*") if p.is_file()}
        assert restate_rates(local, "EUR", RESTATED[0], RESTATED[-1], Decimal("1.03")) == 2
        assert put_new_files(local, before, s3_server, s3_bucket, "landing") == 2
        restated = Reference(local, 7)

        command = ["correct", "--start", str(FIX_START), "--end", str(FIX_END)]
        assert main([*command, "--reason", "EUR restated", "--id", CID]) == 0
        assert_tables_equal(env, original, _days(START, END))  # production untouched
        assert registry.get(lake, CID).state == registry.State.STAGED
        assert main(["diff", CID]) == 0
        assert main(["cutover", CID, "--skip-rebuilt"]) == 0, capsys.readouterr().err
        assert_tables_equal(env, restated, _days(START, END))
        assert main(["rollback", CID]) == 0, capsys.readouterr().err
        assert_tables_equal(env, original, _days(START, END))
        assert registry.get(lake, CID).state == registry.State.ROLLED_BACK

        assert main(["maintain"]) == 0, capsys.readouterr().err
        assert_tables_equal(env, original, _days(START, END))
        assert main(["corrections"]) == 0
        assert any(
            row.startswith(CID) and "rolled back" in row
            for row in capsys.readouterr().out.splitlines()
        )
