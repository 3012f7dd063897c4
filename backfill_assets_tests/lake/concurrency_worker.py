"""One process of the concurrency harness (``backfill_assets_testkit/concurrency_harness.py``):
drives one role on a shared lake until its time is up and logs every operation.

Usage: ``python -m backfill_assets_tests.lake.concurrency_worker spec.json``. The spec names the
lake ``root``, the ``engine``, the ``role`` (``live``, ``backfill``, ``correction``,
``maintenance``), the ``days`` the lake holds, the ``seconds`` to run, a ``seed``, ``delay``
(the longest random pause between two steps, in seconds), ``expire_after`` (maintenance: the
age in seconds past which a staged version is expired), ``stall`` (the chance that a publish
waits about that age between its audit and its publish) and ``out``: a JSON-lines file whose
first line (``{"ready": ...}``) says the process is ready; the clock starts once
``<out>.go`` exists. A ``live`` worker with ``seed`` set first publishes every day of both
tables, so the others find production there.

Each later line is one operation: what it was (``op``), its table, days and the ``tag`` its
rows carry (``concurrency_harness.rows_for``), the ``write_id`` its commit records, the files
its audit saw per day, ``start`` and ``end`` times, and ``ok`` with the ``version`` the lake
reported, or the ``error`` it raised. Only the project's public functions are called.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import sys
import time
import traceback
import uuid
from collections.abc import Callable
from typing import Any

from backfill_assets_testkit.concurrency_harness import (
    COLUMN,
    SCHEMAS,
    TABLES,
    file_key,
    rows_for,
)


class Worker:
    def __init__(self, spec: dict) -> None:
        self.spec = spec
        self.name: str = spec["name"]
        self.rng = random.Random(spec["seed"])
        self.days = [dt.date.fromisoformat(d) for d in spec["days"]]
        self.out = spec["out"]
        self.spark: Any = None
        self.lake: Any = None

    # the log ---------------------------------------------------------------------------------

    def log(self, entry: dict) -> None:
        entry = {"worker": self.name, "engine": self.spec["engine"], **entry}
        with open(self.out, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry, sort_keys=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def attempt(self, op: str, fields: dict, action: Callable[[dict], None]) -> bool:
        """Run ``action`` (which fills in ``fields``) and log it: ok, or the error it raised."""
        from backfill_assets.corrections.registry import CorrectionError
        from backfill_assets.lake import LakeError

        entry = {"op": op, **fields, "start": time.time()}
        try:
            action(entry)
        except (LakeError, CorrectionError) as exc:
            entry.update(ok=False, error=f"{type(exc).__name__}: {exc}", expected=True)
        except Exception as exc:  # logged for the harness to report; the worker goes on
            entry.update(
                ok=False,
                error=f"{type(exc).__name__}: {exc}",
                expected=False,
                trace=traceback.format_exc()[-2000:],
            )
        else:
            entry["ok"] = True
        entry["end"] = time.time()
        self.log(entry)
        return bool(entry["ok"])

    def pause(self) -> None:
        """A random pause between two steps: where another worker gets in."""
        time.sleep(self.rng.uniform(0, self.spec["delay"]))

    # set-up ----------------------------------------------------------------------------------

    def open_lake(self) -> None:
        from backfill_assets.lake import Lake

        engine = self.spec["engine"]
        if self.spec["role"] != "maintenance" or engine == "delta-spark":
            from backfill_assets.spark.session import build_session, spark_config
            from backfill_assets_tests.lake.lake_support import FAST_JVM_OPTION, native_spark_conf

            if engine == "delta-spark":
                conf = native_spark_conf("local[1]")
            else:
                conf = spark_config(
                    master="local[1]",
                    shuffle_partitions=1,
                    driver_memory="512m",
                    lake_engine=engine,
                )
            conf["spark.driver.extraJavaOptions"] += f" {FAST_JVM_OPTION}"
            conf["spark.ui.enabled"] = "false"
            self.spark = build_session(conf)
            self.spark.sparkContext.setLogLevel("ERROR")
        self.lake = Lake(self.spec["root"], self.spark, engine=engine)

    # write-audit-publish ---------------------------------------------------------------------

    def stage_audited(self, table: str, days: list[dt.date], tag: str, entry: dict) -> Any:
        """Stage ``tag``'s rows of ``days``, then audit them: the staged rows must be exactly
        the rows written. Records the files the audit saw, per day, in ``entry``."""
        from backfill_assets.lake import CommitInfo

        rows = [r for d in days for r in rows_for(table, d, tag)]
        frame = self.spark.createDataFrame(rows, SCHEMAS[table])
        commit = CommitInfo(run_id=f"{self.name}:{tag}", code_version="concurrency", write_id=tag)
        staged = self.lake.staging.stage(table, frame, COLUMN, days, commit)
        entry["stage_id"] = staged.id
        self.pause()
        seen = sorted(tuple(r) for r in self.lake.staging.read(staged).collect())
        expected = sorted(rows)
        if seen != expected:
            entry["audit"] = "failed"
            raise AssertionError(f"audit of {table} {tag}: staged rows differ from those written")
        entry["files"] = {
            d.isoformat(): sorted(file_key(f.path) for f in staged.files_of([d])) for d in days
        }
        return staged

    def publish_days(self, op: str, days: list[dt.date]) -> None:
        """Stage, audit and publish ``days`` of each table in turn (staging, then the fact),
        then discard the staged version."""
        for table in TABLES:
            staged = self.publish_table(op, table, days)
            if staged is not None:
                self.attempt("discard", {"table": table}, self._discard_staged(staged))

    def publish_table(self, op: str, table: str, days: list[dt.date]) -> Any:
        """One write-audit-publish of ``days`` of ``table``, logged; its staged version (None
        when the stage failed)."""
        tag = uuid.uuid4().hex
        fields = {"table": table, "days": [d.isoformat() for d in days], "tag": tag}
        fields["write_id"] = tag
        staged_ref: list = []

        def run(entry: dict) -> None:
            staged = self.stage_audited(table, days, tag, entry)
            staged_ref.append(staged)
            if self.rng.random() < self.spec["stall"]:
                # a run that stalls between its audit and its publish about as long as the
                # expiry age: maintenance expires its staged version before or while it publishes
                entry["stalled"] = True
                time.sleep(self.rng.uniform(0.8, 1.5) * self.spec["expire_after"])
            else:
                self.pause()
            result = self.lake.staging.publish(staged)
            entry["version"] = result.version
            entry["attempts"] = result.attempts

        self.attempt(op, fields, run)
        return staged_ref[0] if staged_ref else None

    def _discard_staged(self, staged: Any) -> Callable[[dict], None]:
        def discard(entry: dict) -> None:
            entry.update(stage_id=staged.id, deleted=self.lake.staging.discard(staged))

        return discard

    # roles -----------------------------------------------------------------------------------

    def live(self) -> None:
        """The live lane: one of the newest days at a time."""
        self.publish_days("publish", [self.rng.choice(self.days[-3:])])
        self.pause()

    def backfill(self) -> None:
        """A range backfill: three consecutive days at a time, overlapping the live lane's."""
        first = self.rng.randrange(0, len(self.days) - 2)
        self.publish_days("publish", self.days[first : first + 3])
        self.pause()

    def correction(self) -> None:
        """A correction's cycle: rebuild two days into it (keep), diff, cut over, and most
        times roll back, then discard it."""
        from backfill_assets.corrections import diff, keeping, lifecycle, registry

        cid = f"c-{self.name}-{uuid.uuid4().hex[:8]}"
        # two days of history, before the live lane's: the backfill's range overlaps them
        first = self.rng.randrange(0, len(self.days) - 4)
        days = self.days[first : first + 2]
        texts = [d.isoformat() for d in days]
        kept_all = True
        for table in TABLES:
            tag = uuid.uuid4().hex

            def keep(entry: dict, table: str = table, tag: str = tag) -> None:
                staged = self.stage_audited(table, days, tag, entry)
                self.pause()
                correction = registry.open_correction(
                    self.lake.location, cid, "concurrency harness", days[0], days[-1], "concur"
                )
                keeping.keep(self.lake, correction, staged, days, f"run-{tag[:8]}")
                self.lake.staging.discard(staged)  # as a run's step closes what it staged

            fields = {"table": table, "days": texts, "tag": tag, "correction": cid}
            kept_all = self.attempt("keep", fields, keep) and kept_all
        if not kept_all:
            self.attempt("discard_correction", {"correction": cid}, self._discard(cid))
            return
        self.pause()

        def diffed(entry: dict) -> None:
            correction = registry.get(self.lake.location, cid)
            result = diff.compute(self.lake, correction)
            # what the diff compared: the correction's files of each day, per table
            entry["files"] = {
                table: {
                    d: sorted(file_key(f.path) for f in staged.files_of([dt.date.fromisoformat(d)]))
                    for d in texts
                }
                for table in TABLES
                if (staged := self.lake.staging.version(table, cid)) is not None
            }
            entry["versions"] = result.versions
            diff.record(self.lake, result)

        if not self.attempt("diff", {"correction": cid, "days": texts}, diffed):
            self.attempt("discard_correction", {"correction": cid}, self._discard(cid))
            return
        self.pause()

        def cut(entry: dict) -> None:
            outcome = lifecycle.cutover(self.lake, cid, force=True, skip_rebuilt=True)
            entry["days"] = [d.isoformat() for d in outcome.days]
            entry["versions"] = {t: w.version for t, w in outcome.writes.items()}

        if self.attempt("cutover", {"correction": cid}, cut) and self.rng.random() < 0.7:
            self.pause()

            def roll(entry: dict) -> None:
                outcome = lifecycle.rollback(self.lake, cid)
                entry["days"] = [d.isoformat() for d in outcome.days]
                entry["versions"] = {t: w.version for t, w in outcome.writes.items()}

            self.attempt("rollback", {"correction": cid}, roll)
        self.pause()
        self.attempt("discard_correction", {"correction": cid}, self._discard(cid))

    def _discard(self, cid: str) -> Callable[[dict], None]:
        from backfill_assets.corrections import lifecycle

        def discard(entry: dict) -> None:
            entry["deleted"] = lifecycle.discard(self.lake, cid)

        return discard

    def maintenance(self) -> None:
        """Vacuum at the lake's retention and checkpoint, each table in turn, and before each
        of those steps expire every table's staged versions older than ``expire_after``
        seconds (a vacuum can take long: expiry keeps its pace)."""
        hours = self.spec["expire_after"] / 3600
        steps: dict[str, Callable[[str], dict]] = {
            "vacuum": lambda t: {"deleted": len(self.lake.vacuum(t, self.lake.retention_hours))},
            "checkpoint": lambda t: {"version": self.lake.checkpoint(t)},
        }
        for table in TABLES:
            for op, step in steps.items():
                for expired in TABLES:
                    self.attempt(
                        "expire",
                        {"table": expired},
                        self._filled(
                            lambda t: {"expired": self.lake.staging.expire(t, hours)}, expired
                        ),
                    )
                self.pause()
                self.attempt(op, {"table": table}, self._filled(step, table))
                self.pause()

    @staticmethod
    def _filled(step: Callable[[str], dict], table: str) -> Callable[[dict], None]:
        def action(entry: dict) -> None:
            entry.update(step(table))

        return action

    # the loop --------------------------------------------------------------------------------

    def run(self) -> None:
        self.open_lake()
        if self.spec.get("seed_lake"):
            self.publish_days("seed", self.days)
        self.log({"ready": True})
        go = f"{self.out}.go"
        while not os.path.exists(go):
            time.sleep(0.05)
        role = getattr(self, self.spec["role"])
        deadline = time.monotonic() + self.spec["seconds"]
        while time.monotonic() < deadline:
            role()
        if self.spark is not None:
            self.spark.stop()


def main(spec_path: str) -> None:
    with open(spec_path, encoding="utf-8") as handle:
        Worker(json.load(handle)).run()


if __name__ == "__main__":
    main(sys.argv[1])
