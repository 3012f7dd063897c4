"""No commit is lost on a local lake written by two processes at once: a delta-spark process whose
JVM's renames are each delayed 400 ms (a GC pause between Delta's "is N.json absent?" and its
rename over N.json) and either a delta-rs process or a second delta-spark process, its JVM's
renames delayed too, commit to one table in a loop, and every commit either reported landed is
in the log, at its version, read from the commit files here."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from backfill_assets.lake import CommitInfo, Lake
from backfill_assets.spark.delta_jars import jars_present
from backfill_assets_testkit.processes import kill_group, log_tail, start, subprocess_env
from backfill_assets_tests.lake.lake_support import NO_JARS, wait_for

# a race of a fixed length, its renames delayed: the side lane
pytestmark = [pytest.mark.slow, pytest.mark.beside, pytest.mark.timeout(900)]
TABLE = "t/race"
SECONDS = 60  # of committing, both processes at once
DELAY_US = 400_000
NO_STRACE = (
    "strace is not installed: `make test` installs it (scripts/test-deps.sh), "
    "or `apt-get install strace`"
)


def landed_write_ids(table_dir: Path) -> dict[int, str | None]:
    """Version -> the write id its commit file records (None: not one of this layer's)."""
    found: dict[int, str | None] = {}
    for path in sorted((table_dir / "_delta_log").glob("*.json")):
        found[int(path.name.split(".")[0])] = None
        for line in path.read_text().splitlines():
            info = json.loads(line).get("commitInfo")
            if info and info.get("userMetadata"):
                found[int(path.name.split(".")[0])] = json.loads(info["userMetadata"]).get(
                    "write_id"
                )
    return found


# the second committer: its engine, the seconds between its commits, whether its renames are
# delayed (delta-rs commits in milliseconds: paced, so that the JVM lands commits too)
SECOND = {
    "delta-rs": ("delta-rs", 1.0, False),
    "a second delta-spark JVM": ("delta-spark", 0, True),
}


@pytest.mark.parametrize("second", sorted(SECOND))
def test_no_commit_is_lost_when_two_processes_commit_to_one_local_table(spark, tmp_path, second):
    if not jars_present():
        pytest.fail(NO_JARS)
    if shutil.which("strace") is None:
        pytest.fail(NO_STRACE)
    root = tmp_path / "lake"
    old = spark.createDataFrame(
        [(d, i, "old") for d in ("2024-01-01", "2024-01-02") for i in (1, 2)],
        "d string, id bigint, tag string",
    ).selectExpr("CAST(d AS DATE) AS d", "id", "tag")
    Lake(root, spark, engine="delta-rs").replace_partitions(
        TABLE, old, "d", ["2024-01-01", "2024-01-02"], CommitInfo("setup", "t")
    )
    syscalls = "rename,renameat,renameat2"
    # a delta-spark process and its JVM run under strace, each rename delayed
    delayed = ["strace", "-f", "-qq", "--seccomp-bpf", "-o", "/dev/null"]
    delayed += ["-e", f"trace={syscalls}", "-e", f"inject={syscalls}:delay_enter={DELAY_US}"]
    workers: dict[str, subprocess.Popen] = {}
    outs = {}
    try:
        other, pace, slowed = SECOND[second]
        for name, engine, day, between, command in (
            ("first", "delta-spark", "2024-01-01", 0, delayed),
            ("second", other, "2024-01-02", pace, delayed if slowed else []),
        ):
            outs[name] = tmp_path / f"{name}.out"
            spec = tmp_path / f"{name}.json"
            spec.write_text(
                json.dumps(
                    {
                        "root": str(root),
                        "engine": engine,
                        "table": TABLE,
                        "day": day,
                        "out": str(outs[name]),
                        "seconds": SECONDS,
                        "between": between,
                    }
                )
            )
            workers[name] = start(
                [
                    *command,
                    sys.executable,
                    "-m",
                    "backfill_assets_tests.lake.commit_worker",
                    str(spec),
                ],
                subprocess_env(),
                tmp_path / f"{name}.log",
            )
        for out in outs.values():
            wait_for(out, list(workers.values()), timeout=300)
        for out in outs.values():
            Path(f"{out}.go").touch()
        for name, proc in workers.items():
            assert proc.wait(timeout=SECONDS + 300) == 0, log_tail(tmp_path / f"{name}.log")
    finally:
        for proc in workers.values():
            kill_group(proc)

    in_log = landed_write_ids(root / TABLE)
    for name, out in outs.items():
        reported = [json.loads(line) for line in out.read_text().splitlines()[1:]]
        # not a vacuous run: each side committed several times while the other did
        assert len(reported) >= 3, f"the {name} committed only {len(reported)} times"
        lost = [r for r in reported if in_log.get(r["version"]) != r["write_id"]]
        assert not lost, (
            f"{len(lost)} of {len(reported)} commits the {name} reported are not in the log"
        )
