"""A writer process for the multi-process lake tests: runs jobs from a JSON spec, reports results.

Usage: ``python -m backfill_assets_tests.lake.lake_worker spec.json``. Each job
replaces a partition set with inline rows ``[date, id, tag]`` (with ``"wap": true``, by
staging, then publishing, then discarding the staged version); one JSON line per
job goes to ``spec["results"]``, with the table's content when ``read_back`` is set.
"""

from __future__ import annotations

import datetime as dt
import json
import sys


def main(spec_path: str) -> None:
    from backfill_assets.lake import CommitInfo, Lake
    from backfill_assets.spark.session import build_session, spark_config
    from backfill_assets_tests.lake.lake_support import FAST_JVM_OPTION

    with open(spec_path) as handle:
        spec = json.load(handle)
    engine = spec.get("engine", "delta-rs")
    conf = spark_config(
        master=spec.get("master", "local[1]"),
        shuffle_partitions=2,
        driver_memory="768m",
        lake_engine=engine,
    )
    conf["spark.driver.extraJavaOptions"] += f" {FAST_JVM_OPTION}"
    conf.update(spec.get("conf", {}))
    spark = build_session(conf)
    spark.sparkContext.setLogLevel("ERROR")
    lake = Lake(spec["root"], spark, engine=engine)
    for job in spec["jobs"]:
        rows = [(dt.date.fromisoformat(d), i, tag) for d, i, tag in job["rows"]]
        df = spark.createDataFrame(rows, "d date, id bigint, tag string")
        commit = CommitInfo(run_id=job["run_id"], code_version="test")
        if job.get("wap"):
            staged = lake.staging.stage(job["table"], df, "d", job["partitions"], commit)
            result = lake.staging.publish(staged)
            lake.staging.discard(staged)
        else:
            result = lake.replace_partitions(job["table"], df, "d", job["partitions"], commit)
        report = {
            "run_id": job["run_id"],
            "version": result.version,
            "attempts": result.attempts,
            "files_added": result.files_added,
            "rows_by_partition": {str(k): v for k, v in result.rows_by_partition.items()},
        }
        if job.get("read_back"):
            frame, version = lake.read_partitions(job["table"], "d", job["partitions"])
            report["read_version"] = version
            report["read"] = sorted([str(r["d"]), r["id"], r["tag"]] for r in frame.collect())
        with open(spec["results"], "a") as out:
            out.write(json.dumps(report) + "\n")
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
