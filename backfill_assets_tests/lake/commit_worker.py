"""A committing process for the commit-race test: restores one day of a table again and again.

Usage: ``python -m backfill_assets_tests.lake.commit_worker spec.json``. The spec names the lake
``root``, the ``engine``, the ``table``, the ``day`` to restore to version 0, and ``out``: a
file whose first line (``{}``) says the process is ready, and then
one JSON line per commit the lake reported landed (its write id and version). Commits start when
``<out>.go`` exists, ``between`` seconds apart, and stop ``seconds`` later.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid


def main(spec_path: str) -> None:
    from backfill_assets.lake import CommitInfo, Lake

    with open(spec_path) as handle:
        spec = json.load(handle)
    spark = None
    if spec["engine"] == "delta-spark":
        from backfill_assets.spark.session import build_session
        from backfill_assets_tests.lake.lake_support import FAST_JVM_OPTION, native_spark_conf

        conf = native_spark_conf("local[1]")
        conf["spark.driver.extraJavaOptions"] += f" {FAST_JVM_OPTION}"
        spark = build_session(conf)
        spark.sparkContext.setLogLevel("ERROR")
    lake = Lake(spec["root"], spark, engine=spec["engine"])
    out = spec["out"]
    with open(out, "a") as handle:
        handle.write("{}\n")
    while not os.path.exists(f"{out}.go"):
        time.sleep(0.05)
    deadline = time.monotonic() + spec["seconds"]
    while time.monotonic() < deadline:
        write_id = uuid.uuid4().hex
        commit = CommitInfo(run_id=f"race-{spec['engine']}", code_version="t", write_id=write_id)
        result = lake.restore_partitions(spec["table"], "d", [spec["day"]], 0, commit)
        with open(out, "a") as handle:
            handle.write(json.dumps({"write_id": write_id, "version": result.version}) + "\n")
        time.sleep(spec.get("between", 0))
    if spark is not None:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
