"""Which Spark jobs a block of a test started, from Spark's own status tracker."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

# What ``setJobGroup`` sets on the calling thread, cleared after the block so the shared
# session's later jobs carry no group.
_GROUP_PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")


@contextmanager
def jobs_started(spark: SparkSession) -> Iterator[list[int]]:
    """The ids of the jobs started in the block, in the list yielded (filled when it ends)."""
    group = f"probe-{uuid.uuid4().hex}"
    context = spark.sparkContext
    context.setJobGroup(group, "jobs a test counts")
    jobs: list[int] = []
    try:
        yield jobs
    finally:
        for name in _GROUP_PROPERTIES:
            context.setLocalProperty(name, None)  # type: ignore[arg-type]  # None: unset
        jobs.extend(context.statusTracker().getJobIdsForGroup(group))
