"""The I/O-fault harness (``iofault_harness.py``) on a sample of points of every lake path, on
both engines: on delta-rs an I/O error at the first, a middle and the last operation of each
path and a SIGKILL at a middle one of each path that writes no data; on delta-spark an I/O
error at a middle one; on a lake in S3 (``delta-rs-s3``: the lakes under a prefix of the
test's bucket) as on delta-rs. ``bench/iofault.py`` sweeps every point, on both engines.

On delta-spark only the paths that call the engine's own code (its version, publish, vacuum and
compaction) are sampled here; the others (discard, ``keep_staged``, expiry) run the lake's shared
code alone on either engine, sampled here on delta-rs and swept on delta-spark by the bench. A
test here runs each of those on delta-spark and checks that it calls no function of the
engine's modules."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

import backfill_assets.lake
from backfill_assets.lake import Lake
from backfill_assets_testkit import iofault_harness as h

ON_S3 = True  # conftest.py: each case runs on a lake in S3 too


# The paths that call code of delta-spark's own on that engine (``left_to_bench`` the others).
DELTA_SPARK_OWN = {"stage", "publish_all", "publish_some", "vacuum", "compact"}
assert DELTA_SPARK_OWN <= {path.name for path in h.PATHS}, "a path was renamed: name it here"
LEFT_TO_BENCH = [path for path in h.PATHS if path.name not in DELTA_SPARK_OWN]
# delta-spark's own code: the engine and the modules only it calls
DELTA_SPARK_CODE = frozenset(
    str(p) for p in Path(backfill_assets.lake.__file__).parent.glob("delta_spark*.py")
)


def paths() -> list:
    return [
        pytest.param(
            path,
            marks=[]
            if path.name in DELTA_SPARK_OWN
            else [pytest.mark.left_to_bench("delta-spark", "bench/iofault.py")],
        )
        for path in h.PATHS
    ]


def sample(count: int) -> list[int]:
    return sorted({1, max(1, count // 2), count})


@pytest.mark.parametrize("path", paths(), ids=lambda p: p.name)
def test_a_fault_at_any_sampled_point_loses_nothing_and_exposes_nothing(lake, tmp_path, path):
    def make(root):
        return Lake(root, lake.spark, engine=lake.engine.name)

    work = tmp_path if lake.storage.is_local else f"{lake.location}-iofault"
    template = h.build_template(make, work, path)
    count = h.operations(make, template, work, path)
    assert count >= 1, f"{path.name} never passes the I/O seam"
    tally = h.Tally()
    # delta-spark's cases run in a child with its own JVM, each point a Spark job: one point.
    points = sample(count) if lake.engine.name == "delta-rs" else [max(1, count // 2)]
    for n in points:
        h.run_point(make, template, work, path, "error", n, tally, lake.engine.name)
    if lake.engine.name == "delta-rs" and not path.needs_spark:
        h.run_point(make, template, work, path, "kill", max(1, count // 2), tally, "delta-rs")
    assert not tally.details, "\n".join(tally.details)
    assert tally.points == len(points) + tally.faults["kill"]


def engine_calls(run: Callable[[], object]) -> list[str]:
    """The functions of delta-spark's modules (``DELTA_SPARK_CODE``) that ``run()`` calls, in
    this thread or in a thread it starts."""
    calls: list[str] = []

    def profile(frame, event: str, arg: object) -> None:
        if event == "call" and frame.f_code.co_filename in DELTA_SPARK_CODE:
            calls.append(frame.f_code.co_qualname)

    previous = sys.getprofile(), threading.getprofile()
    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(previous[0])
        threading.setprofile(previous[1])
    return calls


@pytest.mark.parametrize("path", LEFT_TO_BENCH, ids=lambda p: p.name)
def test_a_path_left_to_the_bench_on_delta_spark_calls_none_of_its_code(
    two_engines, tmp_path, path
):
    """The ``left_to_bench`` mark's claim, checked: on delta-spark the path, where the sweep
    fails its I/O, runs the lake's shared code only (its recovery, ``maintain``, is the vacuum
    case's)."""
    spark = two_engines[1].spark

    def make(root):
        return Lake(root, spark, engine="delta-spark")

    lake = make(h.build_template(make, tmp_path, path))
    assert "DeltaSparkEngine.version" in engine_calls(lambda: lake.version(h.TABLE))
    assert engine_calls(lambda: path.run(lake)) == [], f"{path.name} runs delta-spark's code"
