"""The I/O-fault harness (``iofault_harness.py``) on a sample of points of every lake path, on
both engines: on delta-rs an I/O error at the first, a middle and the last operation of each
path and a SIGKILL at a middle one of each path that writes no data; on delta-spark an I/O
error at a middle one; on a lake in S3 (``delta-rs-s3``: the lakes under a prefix of the
test's bucket) as on delta-rs. ``bench/iofault.py`` sweeps every point, on both engines.

On delta-spark only the paths that run the engine's own code (its publish, vacuum and
compaction) are sampled here; the others (stage, discard, ``keep_staged``, expiry) run the lake's
shared code on either engine, sampled here on delta-rs and swept on delta-spark by the bench."""

from __future__ import annotations

import pytest

from backfill_assets.lake import Lake
from backfill_assets_tests import iofault_harness as h

ON_S3 = True  # conftest.py: each case runs on a lake in S3 too


# The paths whose I/O on delta-spark goes through code of delta-spark's own.
DELTA_SPARK_OWN = {"publish_all", "vacuum", "compact"}
assert DELTA_SPARK_OWN <= {path.name for path in h.PATHS}, "a path was renamed: name it here"


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
        return Lake(root, lake.spark, engine=lake.engine_name)

    work = tmp_path if lake.storage.is_local else f"{lake.location}-iofault"
    template = h.build_template(make, work, path)
    count = h.operations(make, template, work, path)
    assert count >= 1, f"{path.name} never passes the I/O seam"
    tally = h.Tally()
    # delta-spark's cases run in a child with its own JVM, each point a Spark job: one point.
    points = sample(count) if lake.engine_name == "delta-rs" else [max(1, count // 2)]
    for n in points:
        h.run_point(make, template, work, path, "error", n, tally, lake.engine_name)
    if lake.engine_name == "delta-rs" and not path.needs_spark:
        h.run_point(make, template, work, path, "kill", max(1, count // 2), tally, "delta-rs")
    assert not tally.details, "\n".join(tally.details)
    assert tally.points == len(points) + tally.faults["kill"]
