"""The concurrency harness, in the manner of Jepsen: several processes drive one lake at once
through the project's public functions, each logging what it was told succeeded, and a
checker then reads the whole history, the lake's own Delta log and its final rows.

The processes (``lake/concurrency_worker.py``), each with its engine: the live lane
publishing one of the newest days at a time (stage, audit, publish, discard), a range
backfill over overlapping days, a correction's cycle (rebuild kept into the correction,
diff, cutover, rollback, discard: ``corrections.lifecycle``) and maintenance
(``expire_staged``, ``vacuum``, ``checkpoint``). Random pauses between their steps, and for
delta-spark processes every rename of the JVM delayed with strace (a GC pause between Delta's
"is N.json absent?" and its rename), open the races.

Every write's rows carry one tag (``rows_for``): a day's content says which write put it
there. The checker (``check``), from the workers' logs and the table's commit files read here:

- ``lost_commits``: an acknowledged commit whose version's commit file does not record it;
- ``dangling``: a file the latest snapshot references that is missing from storage;
- ``reverted``: a commit that gave a day content it had before a newer write replaced it,
  other than a correction's rollback right after its own cutover (or its cutover again
  right after that rollback);
- ``unaudited``: a file a commit added that no audit saw, or an acknowledged publish (or
  cutover) whose files of a day are not exactly those its audit (or diff) saw;
- ``mismatch``: a (table, day) whose rows in the final lake differ from the reference, the
  acknowledged writes replayed in plain Python in the order of the versions they reported.

``run`` starts the workers, waits for them and checks; ``bench/concurrency.py`` is its
command line and prints ``line``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from backfill_assets.catalog import FACT_TABLE, STAGING_TABLE

TABLES = (STAGING_TABLE.path, FACT_TABLE.path)  # a cutover's order
COLUMN = STAGING_TABLE.partition_column
assert FACT_TABLE.partition_column == COLUMN
# What the diff needs: staging keyed by order_id; the fact by country, with its totals.
SCHEMAS = {
    STAGING_TABLE.path: f"{COLUMN} date, order_id string, tag string",
    FACT_TABLE.path: f"{COLUMN} date, country string, orders bigint, placed_orders bigint, "
    "paid_orders bigint, cancelled_orders bigint, revenue_usd decimal(18,2), tag string",
}
ROLES = ("live", "backfill", "maintenance", "correction")
COUNTS = ("lost_commits", "dangling", "reverted", "unaudited", "mismatch")
NO_STRACE = (
    "strace is not installed: `make test` installs it (scripts/test-deps.sh), "
    "or `apt-get install strace`; or run without rename delays (--strace-delay-ms 0)"
)
WRITES = ("seed", "publish")  # the operations that commit one table's days, with a write id


def rows_for(table: str, day: dt.date, tag: str) -> list[tuple]:
    """The rows a write tagged ``tag`` gives ``day`` of ``table``: content that names its
    writer, so that the checker can tell whose rows a day holds."""
    if table == STAGING_TABLE.path:
        return [(day, f"{day.isoformat()}-{n}", tag) for n in (1, 2)]
    revenue = Decimal(int(tag[:6], 16) % 100_000 + 100) / 100
    return [(day, country, 2, 2, 1, 1, revenue, tag) for country in ("FR", "US")]


def file_key(path: str) -> str:
    """A data file's path relative to its table, as the commit files and manifests name it."""
    return os.path.normpath(unquote(path))


# Storage, read directly (not through the lake layer) ---------------------------------------


class Store:
    """The lake's files, local or on S3 (the standard AWS variables of ``env``)."""

    def __init__(self, root: str, env: dict[str, str] | None = None) -> None:
        self.root = root.rstrip("/")
        self.s3: Any = None
        if self.root.startswith("s3://"):
            import boto3

            env = env or dict(os.environ)
            self.s3 = boto3.client(
                "s3",
                endpoint_url=env.get("AWS_ENDPOINT_URL"),
                aws_access_key_id=env.get("AWS_ACCESS_KEY_ID"),
                aws_secret_access_key=env.get("AWS_SECRET_ACCESS_KEY"),
                region_name=env.get("AWS_REGION", "us-east-1"),
            )
            parsed = urlparse(self.root)
            self.bucket, self.prefix = parsed.netloc, parsed.path.strip("/")
        self.env = env

    def _key(self, relative: str) -> str:
        return f"{self.prefix}/{relative}" if self.prefix else relative

    def list(self, relative: str) -> list[str]:
        """Names of the files directly in the folder ``relative`` ([] when absent)."""
        if self.s3 is None:
            folder = Path(self.root) / relative
            return (
                sorted(p.name for p in folder.iterdir() if p.is_file()) if folder.exists() else []
            )
        prefix = self._key(relative).rstrip("/") + "/"
        names = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix, Delimiter="/"
        ):
            names += [o["Key"][len(prefix) :] for o in page.get("Contents", [])]
        return sorted(names)

    def read(self, relative: str) -> str:
        if self.s3 is None:
            return (Path(self.root) / relative).read_text()
        body = self.s3.get_object(Bucket=self.bucket, Key=self._key(relative))["Body"]
        return str(body.read().decode())

    def exists(self, relative: str) -> bool:
        if self.s3 is None:
            return (Path(self.root) / relative).exists()
        try:
            self.s3.head_object(Bucket=self.bucket, Key=self._key(relative))
        except self.s3.exceptions.ClientError:
            return False
        return True

    def delete(self, relative: str) -> None:
        if self.s3 is None:
            (Path(self.root) / relative).unlink()
        else:
            self.s3.delete_object(Bucket=self.bucket, Key=self._key(relative))

    def write(self, relative: str, text: str) -> None:
        if self.s3 is None:
            (Path(self.root) / relative).write_text(text)
        else:
            self.s3.put_object(Bucket=self.bucket, Key=self._key(relative), Body=text.encode())

    def delta_options(self) -> dict[str, str]:
        if self.s3 is None:
            return {}
        assert self.env is not None
        return {
            "AWS_ENDPOINT_URL": self.env["AWS_ENDPOINT_URL"],
            "AWS_ACCESS_KEY_ID": self.env["AWS_ACCESS_KEY_ID"],
            "AWS_SECRET_ACCESS_KEY": self.env["AWS_SECRET_ACCESS_KEY"],
            "AWS_REGION": self.env.get("AWS_REGION", "us-east-1"),
            "AWS_ALLOW_HTTP": "true",
        }


@dataclass
class Commit:
    """One commit file: its data files added and removed ({path: day}) and its metadata."""

    version: int
    adds: dict[str, str | None]
    removes: dict[str, str | None]
    metadata: dict

    def added_by_day(self) -> dict[str | None, set[str]]:
        found: dict[str | None, set[str]] = defaultdict(set)
        for path, day in self.adds.items():
            found[day].add(path)
        return found


def read_log(store: Store, table: str) -> dict[int, Commit]:
    """Every commit file of ``table``, by version, parsed here from its JSON lines."""
    commits = {}
    for name in store.list(f"{table}/_delta_log"):
        stem, _, ext = name.partition(".")
        if ext != "json" or not stem.isdigit():
            continue
        adds: dict[str, str | None] = {}
        removes: dict[str, str | None] = {}
        metadata: dict = {}
        for line in store.read(f"{table}/_delta_log/{name}").splitlines():
            if not line.strip():
                continue
            action = json.loads(line)
            if "add" in action:
                adds[file_key(action["add"]["path"])] = action["add"]["partitionValues"].get(COLUMN)
            elif "remove" in action:
                values = action["remove"].get("partitionValues") or {}
                removes[file_key(action["remove"]["path"])] = values.get(COLUMN)
            elif "commitInfo" in action:
                text = action["commitInfo"].get("userMetadata")
                try:
                    metadata = json.loads(text) if isinstance(text, str) else {}
                except ValueError:
                    metadata = {}
        commits[int(stem)] = Commit(int(stem), adds, removes, metadata)
    return commits


# The checker -------------------------------------------------------------------------------


@dataclass
class Report:
    ops: int = 0
    races: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTS, 0))
    problems: list[str] = field(default_factory=list)
    refused: dict[str, int] = field(default_factory=dict)  # op: errors the code raised
    unexpected: list[str] = field(default_factory=list)  # errors of other kinds
    ambiguous: int = 0  # failed writes whose commit landed all the same

    def found(self, kind: str, text: str) -> None:
        self.counts[kind] += 1
        self.problems.append(f"{kind}: {text}")

    @property
    def ok(self) -> bool:
        return not any(self.counts.values())


def load_ops(logs: Iterable[Path]) -> list[dict]:
    ops = []
    for path in logs:
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            if not entry.get("ready"):
                ops.append(entry)
    return ops


def _tables_of(op: dict) -> set[str]:
    return {op["table"]} if "table" in op else set(TABLES)


def count_races(ops: list[dict]) -> int:
    """Operations under way while another worker's operation on one of their tables was."""
    raced = 0
    for op in ops:
        if any(
            other["worker"] != op["worker"]
            and other["start"] < op["end"]
            and op["start"] < other["end"]
            and _tables_of(op) & _tables_of(other)
            for other in ops
        ):
            raced += 1
    return raced


def check(store: Store, ops: list[dict]) -> Report:
    """The checks of the module's docstring over the workers' ``ops`` and the lake in
    ``store``."""
    report = Report(ops=sum(1 for o in ops if o["ok"]), races=count_races(ops))
    for o in ops:
        if not o["ok"]:
            key = o["op"] if o.get("expected") else f"{o['op']} (unexpected)"
            report.refused[key] = report.refused.get(key, 0) + 1
            if not o.get("expected"):
                report.unexpected.append(f"{o['worker']} {o['op']}: {o['error']}")
    logs = {table: read_log(store, table) for table in TABLES}
    tag_of = {}  # file -> the tag of the write whose audit saw it
    for o in ops:
        for files in (o.get("files") or {}).values():
            if "tag" in o and isinstance(files, list):
                tag_of.update(dict.fromkeys(files, o["tag"]))
    diffs = {o["correction"]: o for o in ops if o["op"] == "diff" and o["ok"]}
    kept = {(o["correction"], o["table"]): o["tag"] for o in ops if o["op"] == "keep" and o["ok"]}
    _check_lost(report, logs, ops)
    _check_unaudited(report, logs, ops, tag_of, diffs)
    _check_dangling(report, store, logs)
    _check_reverted(report, logs, tag_of)
    _check_final(report, store, logs, ops, kept)
    return report


def _landed(commit: Commit | None, op: dict, table: str) -> bool:
    if commit is None:
        return False
    if op["op"] in WRITES:
        return commit.metadata.get("write_id") == op["write_id"]
    extra = commit.metadata.get("extra", {})
    return extra.get("correction") == op["correction"] and extra.get("action") == op["op"]


def _versions(op: dict) -> dict[str, int]:
    """The versions an acknowledged commit reported, per table."""
    if op["op"] in WRITES:
        return {op["table"]: op["version"]}
    if op["op"] in ("cutover", "rollback"):
        return dict(op["versions"])
    return {}


def _check_lost(report: Report, logs: dict[str, dict[int, Commit]], ops: list[dict]) -> None:
    for op in ops:
        if not op["ok"]:
            continue
        for table, version in _versions(op).items():
            if not _landed(logs[table].get(version), op, table):
                report.found(
                    "lost_commits",
                    f"{op['worker']}'s {op['op']} of {table} {op.get('days')} was acknowledged at "
                    f"version {version}, which does not record it",
                )


def _check_unaudited(
    report: Report,
    logs: dict[str, dict[int, Commit]],
    ops: list[dict],
    tag_of: dict[str, str],
    diffs: dict[str, dict],
) -> None:
    for table, commits in logs.items():
        for commit in commits.values():
            unseen = sorted(p for p in commit.adds if p not in tag_of)
            if unseen:
                report.found(
                    "unaudited", f"{table} version {commit.version} added {unseen}, never audited"
                )
    for op in ops:
        if not op["ok"]:
            continue
        for table, version in _versions(op).items():
            found = logs[table].get(version)
            if found is None or not _landed(found, op, table):
                continue  # counted lost
            if op["op"] in WRITES:
                audited = op["files"]
            elif op["op"] == "cutover":
                audited = diffs[op["correction"]]["files"][table]
            else:
                continue  # a rollback puts back files published before
            added = found.added_by_day()
            for day in op["days"]:
                if added.get(day, set()) != set(audited[day]):
                    report.found(
                        "unaudited",
                        f"{table} version {version} ({op['worker']}'s {op['op']}) published "
                        f"{sorted(added.get(day, set()))} for {day}; its audit saw "
                        f"{sorted(audited[day])}",
                    )


def snapshot(commits: dict[int, Commit], upto: int | None = None) -> dict[str, str | None]:
    """{file: day} of the table at version ``upto`` (the latest when None), replayed here."""
    live: dict[str, str | None] = {}
    for version in sorted(commits):
        if upto is not None and version > upto:
            break
        commit = commits[version]
        for path in commit.removes:
            live.pop(path, None)
        live.update(commit.adds)
    return live


def _check_dangling(report: Report, store: Store, logs: dict[str, dict[int, Commit]]) -> None:
    for table, commits in logs.items():
        versions = sorted(commits)
        if versions != list(range(len(versions))):
            report.found("dangling", f"{table}: the log's versions have gaps: {versions}")
        for path in sorted(snapshot(commits)):
            if not store.exists(f"{table}/{path}"):
                report.found("dangling", f"{table} references {path}, missing from storage")


def _check_reverted(
    report: Report, logs: dict[str, dict[int, Commit]], tag_of: dict[str, str]
) -> None:
    for table, commits in logs.items():
        live: dict[str, str | None] = {}
        # per day: the content after each change, with the commit that made it
        changes: dict[str, list[tuple[frozenset, Commit]]] = defaultdict(list)
        for version in sorted(commits):
            commit = commits[version]
            touched = set()
            for path, day in commit.removes.items():
                touched.add(day if day is not None else live.get(path))
                live.pop(path, None)
            live.update(commit.adds)
            touched |= set(commit.adds.values())
            for day in touched - {None}:
                assert day is not None
                content = frozenset(tag_of.get(p, "?") for p, d in live.items() if d == day)
                if changes[day] and changes[day][-1][0] == content:
                    continue  # the same files again, or a commit that left the day as it was
                older = [c for c, _ in changes[day][:-1]]
                if content in older and not _undoes_previous(changes[day], content, commit):
                    report.found(
                        "reverted",
                        f"{table} version {version} put {day} back to content replaced since "
                        f"({sorted(content)}), over version {changes[day][-1][1].version}",
                    )
                changes[day].append((content, commit))


# A correction's commit that puts a day back as it was before another of its commits: the
# actions it may undo (a rollback or an undone cutover: the cutover; a cutover again: the
# rollback; an undone rollback: the rollback).
UNDOES = {
    "rollback": ("cutover", "rollback undone"),
    "cutover undone": ("cutover",),
    "rollback undone": ("rollback",),
    "cutover": ("rollback", "cutover undone"),
}


def _undoes_previous(
    history: list[tuple[frozenset, Commit]], content: frozenset, commit: Commit
) -> bool:
    """True when ``commit`` is a correction's commit undoing exactly the change before it,
    that correction's own (``UNDOES``), back to the content before that change."""
    extra = commit.metadata.get("extra", {})
    action = extra.get("action")
    if action not in UNDOES or len(history) < 2:
        return False
    previous = history[-1][1].metadata.get("extra", {})
    return (
        previous.get("correction") == extra.get("correction")
        and previous.get("action") in UNDOES[action]
        and history[-2][0] == content
    )


@dataclass(frozen=True)
class Event:
    """A commit the reference replays: a write's (``tag``) or a correction's (``action``)."""

    version: int
    days: tuple[str, ...]
    tag: str | None = None
    correction: str | None = None
    action: str | None = None


def _events(
    report: Report, table: str, logs: dict[str, dict[int, Commit]], ops: list[dict]
) -> list[Event]:
    """The acknowledged commits of ``table``, at the versions they reported; then the failed
    writes whose commit landed all the same and the correction commits no acknowledged
    operation reported (a recovery's, or a command's that raised after it committed): their
    outcome was unknown to their caller, so the reference takes them as the log has them."""
    events: dict[int, Event] = {}
    for op in ops:
        version = _versions(op).get(table) if op["ok"] else _found_anyway(op, table, logs)
        if version is None:
            continue
        if not op["ok"]:
            report.ambiguous += 1
        if op["op"] in WRITES:
            events[version] = Event(version, tuple(op["days"]), tag=op["tag"])
        else:
            events[version] = Event(
                version, tuple(op["days"]), correction=op["correction"], action=op["op"]
            )
    for version, commit in logs[table].items():
        extra = commit.metadata.get("extra", {})
        if version not in events and extra.get("action") in UNDOES:
            report.ambiguous += 1
            days = tuple(commit.metadata.get("partitions", []))
            events[version] = Event(
                version, days, correction=extra["correction"], action=extra["action"]
            )
    return [events[v] for v in sorted(events)]


def _check_final(
    report: Report,
    store: Store,
    logs: dict[str, dict[int, Commit]],
    ops: list[dict],
    kept: dict[tuple[str, str], str],
) -> None:
    """The final rows against the reference: the commits of ``_events`` replayed in version
    order, in plain Python."""
    from deltalake import DeltaTable

    for table in TABLES:
        state: dict[str, str | None] = {}
        # per correction and action: the state before its latest commit
        before: dict[tuple[str | None, str | None], dict[str, str | None]] = {}
        for event in _events(report, table, logs, ops):
            if event.tag is not None:
                state.update(dict.fromkeys(event.days, event.tag))
                continue
            key = (event.correction, event.action)
            if event.action == "cutover":
                before[key] = dict(state)
                state.update(dict.fromkeys(event.days, kept.get((event.correction or "", table))))
                continue
            # back as it was before the correction's latest cutover (an undone rollback: its
            # latest rollback)
            target = "rollback" if event.action == "rollback undone" else "cutover"
            earlier = before.get((event.correction, target))
            before[key] = dict(state)
            if earlier is None:
                report.found("mismatch", f"{table} version {event.version} undoes nothing: {event}")
                continue
            state.update({d: earlier.get(d) for d in event.days})
        try:
            found = DeltaTable(
                f"{store.root}/{table}", storage_options=store.delta_options()
            ).to_pyarrow_table()
        except Exception as exc:  # a dangling file: nothing of the table can be compared
            for day in state:
                report.found("mismatch", f"{table} {day}: unreadable ({exc})")
            continue
        names = [n.split()[0] for n in SCHEMAS[table].split(", ")]
        actual: dict[str, list[tuple]] = defaultdict(list)
        for row in found.select(names).to_pylist():
            actual[row[COLUMN].isoformat()].append(tuple(row[n] for n in names))
        for day in sorted(set(state) | set(actual)):
            tag = state.get(day)
            expected = [] if tag is None else rows_for(table, dt.date.fromisoformat(day), tag)
            if sorted(actual.get(day, [])) != sorted(expected):
                tags = sorted({r[-1] for r in actual.get(day, [])})
                report.found(
                    "mismatch", f"{table} {day}: holds rows of {tags}, the reference {tag}"
                )


def _found_anyway(op: dict, table: str, logs: dict[str, dict[int, Commit]]) -> int | None:
    """The version of a failed write's commit, when it landed all the same."""
    if op["op"] not in WRITES or op.get("table") != table or "write_id" not in op:
        return None
    for version, commit in logs[table].items():
        if commit.metadata.get("write_id") == op["write_id"]:
            return version
    return None


def line(report: Report, engines: list[str], store: str) -> str:
    counts = " ".join(f"{k}={v}" for k, v in report.counts.items())
    return (
        f"CONCURRENCY engines={','.join(engines)} store={store} ops={report.ops} "
        f"races={report.races} {counts}"
    )


# Running the workers -----------------------------------------------------------------------


@dataclass
class Setup:
    """What ``run`` starts: one worker per role, with the engine given (``assign``)."""

    root: str
    workdir: Path
    roles: list[tuple[str, str]]  # (role, engine)
    seconds: float = 10.0
    delay: float = 0.3
    strace_delay_ms: int = 200  # every rename of a delta-spark worker's JVM; 0: none
    expire_after: float = 20.0  # seconds: maintenance expires staged versions older
    stall: float = 0.15  # the chance that a publish waits about that age before publishing
    seed: int = 0
    env: dict[str, str] = field(default_factory=dict)  # added to the workers' environment


def assign(engines: list[str], roles: Iterable[str] = ROLES) -> list[tuple[str, str]]:
    """Each role with an engine, the engines taken in turn."""
    return [(role, engines[i % len(engines)]) for i, role in enumerate(roles)]


def run(setup: Setup) -> Report:
    """Start the workers, release them together, wait for their end, then check the lake."""
    from backfill_assets_testkit.processes import kill_group, log_tail, start, subprocess_env

    setup.workdir.mkdir(parents=True, exist_ok=True)
    if setup.strace_delay_ms and any(e == "delta-spark" for _, e in setup.roles):
        if shutil.which("strace") is None:
            raise RuntimeError(NO_STRACE)
    lake_days = [(dt.date(2024, 1, 1) + dt.timedelta(days=n)).isoformat() for n in range(6)]
    procs: dict[str, subprocess.Popen] = {}
    outs: dict[str, Path] = {}
    try:
        for n, (role, engine) in enumerate(setup.roles):
            name = f"{role}-{n}"
            outs[name] = setup.workdir / f"{name}.jsonl"
            spec = setup.workdir / f"{name}.json"
            spec.write_text(
                json.dumps(
                    {
                        "name": name,
                        "root": setup.root,
                        "engine": engine,
                        "role": role,
                        "days": lake_days,
                        "seconds": setup.seconds,
                        "seed": setup.seed * 100 + n,
                        "delay": setup.delay,
                        "expire_after": setup.expire_after,
                        "stall": setup.stall,
                        "seed_lake": n == 0,
                        "out": str(outs[name]),
                    }
                )
            )
            command = [sys.executable, "-m", "backfill_assets_tests.lake.concurrency_worker"]
            if engine == "delta-spark" and setup.strace_delay_ms:
                calls = "rename,renameat,renameat2"
                delay_us = setup.strace_delay_ms * 1000
                command = [
                    *("strace", "-f", "-qq", "--seccomp-bpf", "-o", "/dev/null"),
                    *("-e", f"trace={calls}", "-e", f"inject={calls}:delay_enter={delay_us}"),
                    *command,
                ]
            procs[name] = start(
                [*command, str(spec)],
                subprocess_env(**setup.env),
                setup.workdir / f"{name}.log",
            )
        for name, out in outs.items():
            _wait_ready(out, procs[name], setup.workdir / f"{name}.log")
        started = time.monotonic()
        for out in outs.values():
            Path(f"{out}.go").touch()
        for name, proc in procs.items():
            left = setup.seconds + 600 - (time.monotonic() - started)
            code = proc.wait(timeout=max(left, 1))
            if code != 0:
                raise RuntimeError(
                    f"worker {name} exited with {code}:\n" + log_tail(setup.workdir / f"{name}.log")
                )
    finally:
        for proc in procs.values():
            kill_group(proc)
    return check(Store(setup.root, {**os.environ, **setup.env}), load_ops(outs.values()))


def _wait_ready(out: Path, proc: subprocess.Popen, log: Path, timeout: float = 600) -> None:
    from backfill_assets_testkit.processes import log_tail

    deadline = time.monotonic() + timeout
    while not (out.exists() and '"ready": true' in out.read_text()):
        if proc.poll() is not None:
            raise RuntimeError(f"worker {out.stem} exited with {proc.returncode}:\n{log_tail(log)}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"worker {out.stem} not ready after {timeout} s:\n{log_tail(log)}")
        time.sleep(0.1)
