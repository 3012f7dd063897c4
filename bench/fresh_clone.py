"""A fresh clone to its demo, as README's first command runs it: `git clone` of this checkout's
HEAD into a new folder, then `make demo` there, timed.

    .venv/bin/python bench/fresh_clone.py [--keep]

The clone has no ``.venv``, no ``.jars`` and no Dagster home: set-up builds them all (uv's
package cache and the machine's Java are what stays warm). The variables that would point the
clone at another lake, landing zone or instance (``BACKFILL_*``, ``DAGSTER_HOME``) are dropped.

Prints the set-up's own summary line (each step's time: the locked environment, the bytecode,
Delta's jars, the plain-line reader; `make demo` builds no class archive), then::

    FRESH_CLONE clone_s=<s> setup_s=<s> published_s=<s> demo_end_s=<s> <step>=<s> ...

``published_s`` runs from the clone's start to the demo's first "all N requested partitions
published" line (the backfill of its 60 days and what depends on them); ``demo_end_s`` to the
end of `make demo`, which goes on with a correction of its own (correct, diff, cutover).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parents[1]
SETUP_LINE = re.compile(r"bootstrap: set-up ([\d.]+) s \((.*)\)")
PUBLISHED_LINE = re.compile(r"^all \d+ requested partitions published")
SETUP_DONE = "dagster instance:"  # make's set-up target ends with the instance's line


def clean_env() -> dict[str, str]:
    """This environment without what would point the clone elsewhere."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("BACKFILL_") and k not in ("DAGSTER_HOME", "VIRTUAL_ENV")
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the clone (its path printed)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="fresh-clone-"))
    clone = root / "backfill_assets"
    started = time.monotonic()
    marks: dict[str, float] = {}
    steps = ""
    try:
        subprocess.run(["git", "clone", "-q", str(PROJECT_DIR), str(clone)], check=True)
        marks["clone"] = time.monotonic() - started
        demo = subprocess.Popen(
            ["make", "demo"],
            cwd=clone,
            env=clean_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert demo.stdout is not None
        for line in demo.stdout:
            now = time.monotonic() - started
            if match := SETUP_LINE.search(line):
                steps = match.group(2)
                print(line.rstrip(), flush=True)
            elif line.startswith(SETUP_DONE):
                marks.setdefault("setup", now)
            elif PUBLISHED_LINE.match(line):
                marks.setdefault("published", now)
                print(f"{now:.1f} s: {line.rstrip()}", flush=True)
        code = demo.wait()
        marks["demo_end"] = time.monotonic() - started
        if code != 0 or "published" not in marks:
            print(f"make demo exited {code} before all its partitions were published")
            return 1
    finally:
        if args.keep:
            print(f"kept: {clone}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    figures = " ".join(f"{k}_s={v:.1f}" for k, v in marks.items())
    print(f"FRESH_CLONE {figures} {steps}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
