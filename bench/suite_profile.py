"""Where a command's CPU goes, by kind of process: what bounds the test suite on two cores.

    python3 bench/suite_profile.py [--every 1.0] -- bash .ci/run

Runs the command and, every ``--every`` seconds, reads every process's CPU time (user + system,
``/proc/<pid>/stat``) and command line. A process is counted once, at its last sample, under
its kind (the Spark driver JVMs, a cluster's daemons and executors, Dagster's daemon, webserver
and code servers, the run workers, pytest's lanes, Chromium, SeaweedFS, PostgreSQL, ...). The
machine's own counters (``/proc/stat``) give how busy it was. Only the standard library: it can
wrap ``.ci/run`` on a clean clone, before the virtual environment exists. A process that lives
less than one interval is missed; ``sampled_share`` says how much of the machine's busy time the
samples account for. Prints a table by kind, and last:

    SUITE_PROFILE wall_s=.. busy_cpu_s=.. busy_share=.. sampled_share=.. exit=..
    top=kind:cpu_s,...
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
CORES = os.cpu_count() or 1

# The first pattern a command line matches names its kind.
KINDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern))
    for kind, pattern in (
        ("spark cluster daemon (master, worker)", r"deploy\.(master\.Master|worker\.Worker)"),
        ("spark executor JVM", r"CoarseGrainedExecutorBackend"),
        ("spark connect server", r"connect\.service\.SparkConnectServer"),
        ("spark driver JVM", r"java .*(SparkSubmit|pyspark-shell)"),
        ("other JVM", r"^\S*java "),
        ("pyspark python worker", r"pyspark\.(daemon|worker)"),
        ("dagster daemon", r"dagster(\._daemon| daemon)"),
        ("dagster webserver", r"dagster_webserver|dagster-webserver"),
        ("dagster dev", r"dagster dev"),
        ("dagster code server", r"dagster (api grpc|code-server)"),
        ("dagster run worker", r"dagster api execute_run|spawn_main"),
        ("pytest child (the side lane, ...)", r"-m pytest .*-p no:cacheprovider -q"),
        ("pytest", r"pytest"),
        ("backfill-assets command", r"backfill_assets\.cli|backfill-assets"),
        ("chromium", r"chrom"),
        ("seaweedfs", r"\bweed\b"),
        ("postgresql", r"postgres"),
        ("set-up (pip, uv, make, git)", r"\b(pip|uv|apt|dpkg|make|bootstrap|git)\b"),
        ("strace", r"^\S*strace "),
        ("other python", r"python"),
    )
)


def kind_of(cmdline: str) -> str:
    for kind, pattern in KINDS:
        if pattern.search(cmdline):
            return kind
    return "other"


def sample(seen: dict[tuple[int, int], tuple[str, float]]) -> None:
    """Every live process's CPU seconds so far, keyed by (pid, start time)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            raw = Path(entry.path, "cmdline").read_bytes()
        except OSError:
            continue  # it ended between the listing and the read
        fields = stat[stat.rindex(")") + 2 :].split()
        cpu = (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime
        key = (int(entry.name), int(fields[19]))  # the pid and its start time: pids are reused
        previous = seen.get(key)
        cmdline = raw.replace(b"\0", b" ").decode(errors="replace").strip()
        if previous is None or cpu >= previous[1]:
            seen[key] = (cmdline or (previous[0] if previous else ""), cpu)


def busy_ticks() -> int:
    """The ticks every core has spent busy since boot (all but idle and iowait)."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return sum(values) - values[3] - values[4]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--every", type=float, default=1.0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to profile after --")
    seen: dict[tuple[int, int], tuple[str, float]] = {}
    sample(seen)
    before = dict(seen)  # what ran before the command: only its growth counts
    busy0 = busy_ticks()
    began = time.monotonic()
    proc = subprocess.Popen(command)
    while proc.poll() is None:
        time.sleep(args.every)
        sample(seen)
    sample(seen)
    wall = time.monotonic() - began
    busy = (busy_ticks() - busy0) / TICKS
    by_kind: dict[str, float] = {}
    count: Counter[str] = Counter()
    for key, (cmdline, cpu) in seen.items():
        grown = cpu - before.get(key, ("", 0.0))[1]
        if grown <= 0:
            continue
        kind = kind_of(cmdline)
        by_kind[kind] = by_kind.get(kind, 0.0) + grown
        count[kind] += 1
    sampled = sum(by_kind.values())
    print(f"\n{'kind':40} {'cpu s':>9} {'share':>6} {'processes':>9}")
    ranked = sorted(by_kind.items(), key=lambda item: -item[1])
    for kind, cpu in ranked:
        print(f"{kind:40} {cpu:9.0f} {cpu / max(sampled, 1):6.1%} {count[kind]:9d}")
    short = {kind: kind.split(" (")[0].replace(" ", "_") for kind in by_kind}
    top = ",".join(f"{short[kind]}:{cpu:.0f}" for kind, cpu in ranked[:6])
    print(
        f"SUITE_PROFILE wall_s={wall:.0f} busy_cpu_s={busy:.0f} "
        f"busy_share={busy / (wall * CORES):.2f} sampled_share={sampled / max(busy, 1):.2f} "
        f"exit={proc.returncode} top={top}"
    )
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
