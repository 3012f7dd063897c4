"""Two real writer processes committing at the same moment (on delta-spark, one after the other:
the commit lock is held around Delta's write): disjoint sets both land, overlapping ones
serialise."""

from __future__ import annotations

import datetime as dt
import json
import sys
import time

import pytest
from deltalake import DeltaTable

from backfill_assets.lake import CommitInfo, Lake
from backfill_assets_testkit.processes import kill_group, log_tail, start, subprocess_env
from backfill_assets_tests.lake.lake_support import wait_for

# The module's writer processes start in its first test's set-up (their waits are 300 s each).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
D1, D2, D3 = dt.date(2024, 1, 1), dt.date(2024, 1, 2), dt.date(2024, 1, 3)


def rows(tag, *days):
    return [[day, n, tag] for day in days for n in (1, 2)]


@pytest.fixture(scope="module")
def race(engine, spark, tmp_path_factory):
    """Writers A and B, each paused before its first commit attempt, released together, twice."""
    if not isinstance(engine, str):
        return engine  # delta-spark in the parent: the tests ran in the native child
    base = tmp_path_factory.mktemp("concurrent")
    lake = Lake(base / "lake", spark, engine=engine)
    old = spark.createDataFrame([(D1, 0, "old")], "d date, id bigint, tag string")
    for table in ("t/disjoint", "t/overlap"):
        lake.replace_partitions(table, old, "d", [D1], CommitInfo("setup", "test"))
    jobs = {
        "A": [
            {
                "table": "t/disjoint",
                "partitions": ["2024-01-02"],
                "rows": rows("A", "2024-01-02"),
                "run_id": "A-disjoint",
            },
            {
                "table": "t/overlap",
                "partitions": ["2024-01-01", "2024-01-02"],
                "rows": rows("A", "2024-01-01", "2024-01-02"),
                "run_id": "A-overlap",
            },
        ],
        "B": [
            {
                "table": "t/disjoint",
                "partitions": ["2024-01-03"],
                "rows": rows("B", "2024-01-03"),
                "run_id": "B-disjoint",
            },
            {
                "table": "t/overlap",
                "partitions": ["2024-01-02", "2024-01-03"],
                "rows": rows("B", "2024-01-02", "2024-01-03"),
                "run_id": "B-overlap",
            },
        ],
    }
    procs, pauses = {}, {}
    try:
        for who, who_jobs in jobs.items():
            pauses[who] = base / f"pause-{who}"
            pauses[who].mkdir()
            spec = base / f"{who}.json"
            spec.write_text(
                json.dumps(
                    {
                        "root": str(base / "lake"),
                        "engine": engine,
                        "jobs": who_jobs,
                        "results": str(base / f"{who}.out"),
                    }
                )
            )
            env = subprocess_env(
                BACKFILL_LAKE_PAUSE_DIR=str(pauses[who]), BACKFILL_LAKE_PAUSE_AT="before_commit"
            )
            procs[who] = start(
                [sys.executable, "-m", "backfill_assets_tests.lake.lake_worker", str(spec)],
                env,
                base / f"{who}.log",
            )
        for visit in (1, 2):
            if engine == "delta-spark":
                # Delta's writer writes and commits in one call, held under the table's commit
                # lock: a writer paused in it keeps the other out, so each goes on as it arrives.
                _resume_as_they_arrive(pauses, procs, visit)
                continue
            for who in procs:
                wait_for(pauses[who] / f"before_commit.{visit}.reached", list(procs.values()), 300)
            for who in procs:
                (pauses[who] / f"before_commit.{visit}.resume").touch()
        for who, proc in procs.items():
            assert proc.wait(timeout=300) == 0, log_tail(base / f"{who}.log")
    finally:
        for proc in procs.values():
            kill_group(proc)
    results = {}
    for who in procs:
        for line in (base / f"{who}.out").read_text().splitlines():
            report = json.loads(line)
            results[report["run_id"]] = report
    return lake, results


def _resume_as_they_arrive(pauses, procs, visit: int) -> None:
    waiting = set(procs)
    deadline = time.monotonic() + 300
    while waiting:
        for who in sorted(waiting):
            if (pauses[who] / f"before_commit.{visit}.reached").exists():
                (pauses[who] / f"before_commit.{visit}.resume").touch()
                waiting.discard(who)
        for who, proc in procs.items():
            assert proc.poll() is None or who not in waiting, f"writer {who} exited early"
        assert time.monotonic() < deadline, f"timed out waiting for {sorted(waiting)}"
        time.sleep(0.05)


def content(lake, table):
    df, _ = lake.read_table(table)
    return sorted((str(r["d"]), r["id"], r["tag"]) for r in df.collect())


def runs_by_version(lake, table):
    return {h["version"]: h["metadata"]["run_id"] for h in lake.history(table)}


def test_concurrent_disjoint_partition_sets_both_commit(race):
    lake, results = race
    a, b = results["A-disjoint"], results["B-disjoint"]
    assert sorted([a["version"], b["version"]]) == [1, 2]
    # delta-rs: both read version 0 before either committed, and it commits only at read
    # version + 1, so exactly one lost the race and retried. delta-spark: the commit lock held
    # around Delta's write lets one in after the other, neither retrying.
    expected = [1, 2] if lake.engine.name == "delta-rs" else [1, 1]
    assert sorted([a["attempts"], b["attempts"]]) == expected
    assert content(lake, "t/disjoint") == [
        ("2024-01-01", 0, "old"),
        ("2024-01-02", 1, "A"),
        ("2024-01-02", 2, "A"),
        ("2024-01-03", 1, "B"),
        ("2024-01-03", 2, "B"),
    ]
    assert runs_by_version(lake, "t/disjoint") == {
        0: "setup",
        a["version"]: "A-disjoint",
        b["version"]: "B-disjoint",
    }


def test_concurrent_overlapping_sets_serialise_without_duplicates(race):
    lake, results = race
    a, b = results["A-overlap"], results["B-overlap"]
    assert sorted([a["version"], b["version"]]) == [1, 2]
    # delta-spark: the second write began under the lock after the first committed: no conflict
    expected = [1, 2] if lake.engine.name == "delta-rs" else [1, 1]
    assert sorted([a["attempts"], b["attempts"]]) == expected
    a_rows = [("2024-01-01", 1, "A"), ("2024-01-01", 2, "A")]
    b_rows = [("2024-01-03", 1, "B"), ("2024-01-03", 2, "B")]
    # 2024-01-02 was empty at the version both read: it must hold one writer's rows, not both.
    last = "A" if a["version"] == 2 else "B"
    middle = [("2024-01-02", 1, last), ("2024-01-02", 2, last)]
    assert content(lake, "t/overlap") == sorted(a_rows + middle + b_rows)
    assert runs_by_version(lake, "t/overlap") == {
        0: "setup",
        a["version"]: "A-overlap",
        b["version"]: "B-overlap",
    }
    # Independent of the layer: the Delta snapshot lists one file for that partition.
    files = DeltaTable(str(lake.path("t/overlap"))).file_uris()
    assert sum("d=2024-01-02" in f for f in files) == 1
