"""The `backfill-assets` command: plan (a dry run), the landing-gone guard, argument errors."""

from __future__ import annotations

import os
import shutil
from datetime import date

import pytest

from backfill_assets.backfill_plan import RunPlan
from backfill_assets.catalog import RAW_ORDERS
from backfill_assets.cli.main import main, run_backfill
from backfill_assets.cli.runner import execute
from backfill_assets.demo.generate import generate_feed
from backfill_assets_testkit.pipeline_env import pipeline_env

# Runs the pipeline through Dagster on real Spark and Delta: `make test`, not `make test-fast`.
pytestmark = pytest.mark.slow


def _sizes(folder) -> int:
    return sum(e.stat().st_size for e in os.scandir(folder) if not e.name.startswith(("_", ".")))


def test_plan_lists_partitions_inputs_and_missing_days_and_changes_nothing(tmp_path, capsys):
    with pipeline_env(tmp_path) as env:
        landing = env.settings.landing_dir
        generate_feed(landing, date(2024, 1, 1), date(2024, 1, 6), orders_per_day=10, seed=2)
        shutil.rmtree(landing / "orders" / "arrival_date=2024-01-03")
        before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
        assert main(["plan", "--start", "2024-01-02", "--end", "2024-01-04"]) == 0
        out = capsys.readouterr().out
        after = sorted(
            p.relative_to(tmp_path) for p in tmp_path.rglob("*") if "dagster_home" not in str(p)
        )
        assert [p for p in before if "dagster_home" not in str(p)] == after
        assert not (env.settings.lake_dir).exists()
    raw_bytes_jan_2 = _sizes(landing / "orders" / "arrival_date=2024-01-02")
    assert raw_bytes_jan_2 > 0
    lines = out.splitlines()
    assert any(
        line.startswith("raw_orders") and "2024-01-02..2024-01-02" in line for line in lines
    ), out
    assert any(line.startswith("raw_orders") and "2024-01-04.." in line for line in lines), out
    assert any(
        line.startswith("stg_orders+fct_daily_revenue") and "2024-01-02..2024-01-04 (3)" in line
        for line in lines
    )
    assert any(
        line.startswith("raw_fx_rates") and "2023-12-26..2024-01-04 (10)" in line for line in lines
    )
    assert "without landing files:" in out and "estimated total" in out


def test_plan_counts_the_rates_landed_before_the_first_partition_as_its_input(tmp_path, capsys):
    with pipeline_env(tmp_path, start_date="2024-01-06") as env:  # a Saturday
        generate_feed(env.settings.landing_dir, date(2024, 1, 6), date(2024, 1, 8), seed=2)
        assert main(["plan", "--start", "2024-01-06", "--end", "2024-01-07"]) == 0
    [rates] = [
        line for line in capsys.readouterr().out.splitlines() if line.startswith("raw_fx_rates")
    ]
    # Wednesday's, Thursday's and Friday's files, read by the first partition; no day lacks input
    assert rates.split()[1:4] == ["2024-01-06..2024-01-07", "(2)", "3"], rates
    assert rates.split()[5] == "1", rates  # the Sunday: no rate of its own


def test_plan_flags_a_hot_customer_from_the_landing_lines(tmp_path, capsys):
    import json
    from collections import Counter

    with pipeline_env(tmp_path) as env:
        landing = env.settings.landing_dir
        generate_feed(
            landing,
            date(2024, 1, 1),
            date(2024, 1, 4),
            orders_per_day=100,
            seed=3,
            hot_customer_share=0.6,
        )
        assert main(["plan", "--start", "2024-01-01", "--end", "2024-01-04"]) == 0
    out = capsys.readouterr().out
    # Independently: the landed lines of those event days (every line is read at this size).
    customers = Counter()
    for path in (landing / "orders").rglob("orders-2024010[1-4]-*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and str(rec.get("order_id", "")).startswith("TWS-"):
                customers[rec["customer_id"]] += 1
    share = customers["C00000"] / customers.total()
    hot = [line for line in out.splitlines() if line.startswith("HOT KEY")]
    assert len(hot) == 1 and hot[0].startswith("HOT KEY customer_id=C00000: "), out
    reported = float(hot[0].split(": ")[1].split("%")[0]) / 100
    assert 0.5 < reported <= share + 0.001  # the NULL and BAD- lines of the sample dilute it
    assert "NULL" in next(
        line for line in out.splitlines() if line.strip().startswith("customer_id")
    )


def test_backfill_refuses_to_publish_emptiness_over_gone_landing_files(tmp_path, spark, capsys):
    day = date(2024, 1, 2)
    with pipeline_env(tmp_path) as env:
        landing = env.settings.landing_dir
        generate_feed(landing, date(2024, 1, 1), date(2024, 1, 3), orders_per_day=10, seed=5)
        assert execute(RunPlan((RAW_ORDERS,), day, day), env.instance).success
        rows_before = [r for r in env.rows("raw/orders") if r["arrival_date"] == day]
        assert rows_before
        folder = landing / "orders" / f"arrival_date={day}"
        for f in folder.iterdir():
            f.unlink()
        version_before = len(list((env.settings.lake_dir / "raw/orders/_delta_log").glob("*.json")))
        assert run_backfill(env.settings, day, day) == 1
        err = capsys.readouterr().err
        assert "refusing" in err and day.isoformat() in err
        assert (
            len(list((env.settings.lake_dir / "raw/orders/_delta_log").glob("*.json")))
            == version_before
        )
        assert [r for r in env.rows("raw/orders") if r["arrival_date"] == day] == rows_before


def test_an_impossible_date_is_rejected_by_the_parser(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["backfill", "--start", "2024-02-30", "--end", "2024-03-01"])
    assert exit_info.value.code == 2
    assert "not a date (YYYY-MM-DD): '2024-02-30'" in capsys.readouterr().err


def test_a_reversed_range_is_a_clear_error(tmp_path, capsys):
    with pipeline_env(tmp_path):
        assert main(["backfill", "--start", "2024-03-02", "--end", "2024-03-01"]) == 2
    assert "--start 2024-03-02 is after --end 2024-03-01" in capsys.readouterr().err


def test_reexecute_of_a_run_without_a_run_group_is_a_clear_error(monkeypatch):
    import argparse

    import dagster as dg

    import backfill_assets.cli.main as cli_main
    import backfill_assets.cli.runner as runner

    class NoGroupInstance:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def get_run_group(self, run_id):
            return None  # DagsterInstance.get_run_group's answer for a run it cannot group

    monkeypatch.setattr(cli_main, "ensure_dagster_home", lambda: None)
    monkeypatch.setattr(dg.DagsterInstance, "get", staticmethod(lambda: NoGroupInstance()))
    monkeypatch.setattr(runner, "reexecute_from_failure", lambda instance, run_id: object())
    with pytest.raises(ValueError, match=r"run-1.*no run group"):
        cli_main.cmd_reexecute(argparse.Namespace(run_id="run-1"), None)
