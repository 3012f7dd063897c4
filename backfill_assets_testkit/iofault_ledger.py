"""The ledger of the I/O-fault sweep (``bench/iofault.py --ledger FILE``): one JSON line per
finished path (an engine, a path, its modes), so that a sweep of hours can run in parts.

A line holds the path's counts and problems, the commit it ran on, and the code it exercised:
``files``, every file of the project the sweep's process had loaded when the path finished (its
modules under ``backfill_assets/``, ``backfill_assets_tests/`` and ``bench/``, and ``uv.lock``,
which pins the engines), and ``code``, a hash of their contents as they were when the path
started. A line counts only while those files still hash to ``code``: a change to any of them
(the lake, publishing, corrections, the harness, the engines' versions) makes the path run
again, and a line without a hash is never taken. The figures a sweep prints name the commits
their lines ran on.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CODE_FOLDERS = ("backfill_assets", "backfill_assets_testkit", "backfill_assets_tests", "bench")
PINS = ("uv.lock",)
PROBLEMS = ("unreadable", "torn", "lost_files", "orphans", "record_mismatch", "unconverged")


def loaded_files() -> list[str]:
    """The project's files this process has loaded, relative to the repository, and ``PINS``."""
    found = set(PINS)
    for module in list(sys.modules.values()):
        name = getattr(module, "__file__", None)
        if not name:
            continue
        path = Path(name).resolve()
        if path.is_relative_to(REPO) and path.relative_to(REPO).parts[0] in CODE_FOLDERS:
            found.add(path.relative_to(REPO).as_posix())
    return sorted(found)


def file_digests(root: Path = REPO) -> dict[str, str]:
    """The sha256 of every file of ``CODE_FOLDERS`` and ``PINS`` under ``root``, by name."""
    names = [*PINS]
    for folder in CODE_FOLDERS:
        names += [p.relative_to(root).as_posix() for p in (root / folder).rglob("*.py")]
    return {
        name: hashlib.sha256((root / name).read_bytes()).hexdigest()
        for name in names
        if (root / name).is_file()
    }


def code_hash(files: list[str], digests: dict[str, str]) -> str | None:
    """One hash of ``files``' contents (``digests``: name -> sha256); None when one is missing."""
    if any(name not in digests for name in files):
        return None
    joined = "".join(f"{name}\0{digests[name]}\n" for name in sorted(files))
    return hashlib.sha256(joined.encode()).hexdigest()[:16]


def head_commit(root: Path = REPO) -> str:
    """The checkout's commit, ``-dirty`` when its code (not its docs, nor the ledger) differs."""

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, check=False
        )
        return done.stdout.strip()

    code = [*PINS, *(f"{folder}/*.py" for folder in CODE_FOLDERS)]
    changed = git("status", "--porcelain", "--", *code)
    return git("rev-parse", "--short", "HEAD") + ("-dirty" if changed else "")


class Ledger:
    """The finished paths of a sweep run in parts; without a file, only the one line per path.

    ``take`` adds a path's recorded figures to a tally only when its line's code is the code of
    ``root`` now; ``path`` runs one path and records its line. (``root``: the checkout whose
    code is hashed; a test passes a copy of the project.)"""

    def __init__(self, file: Path | None, modes: list[str], root: Path = REPO) -> None:
        self.file, self.modes, self.root = file, sorted(modes), root
        self.entries: dict[tuple[str, str, tuple[str, ...]], dict] = {}
        if file is not None and file.exists():
            for line in file.read_text().splitlines():
                if line.strip():
                    e = json.loads(line)
                    self.entries[(e["engine"], e["path"], tuple(e["modes"]))] = e
        self.commit = head_commit(root)
        self.digests = file_digests(root)
        self.commits: set[str] = set()  # the commits the figures taken or run come from

    def current(self, engine: str, path: str) -> dict | None:
        """The path's line when it was recorded on the code of ``root`` now, else None."""
        e = self.entries.get((engine, path, tuple(self.modes)))
        if e is None or "code" not in e or "files" not in e:
            return None
        return e if code_hash(e["files"], self.digests) == e["code"] else None

    def take(self, tally, engine: str, path: str) -> bool:
        """Add ``path``'s recorded figures to ``tally``; False when the ledger has no line of
        it on the current code (the path must run)."""
        e = self.current(engine, path)
        if e is None:
            old = self.entries.get((engine, path, tuple(self.modes)))
            if old is not None:
                print(
                    f"{engine:12} {path:24} ledger line of {old['commit']} is stale (the code "
                    "it exercised changed, or it has no hash): run again",
                    flush=True,
                )
            return False
        tally.paths.add(path)
        tally.points += e["points"]
        tally.faults["kill"] += e["crashes"]
        tally.faults["error"] += e["errors"]
        for kind in PROBLEMS:
            tally.problems[kind] += e[kind]
        tally.details.extend(e["details"])
        self.commits.add(e["commit"])
        print(
            f"{engine:12} {path:24} operations={e['operations']:3} problems="
            f"{sum(e[k] for k in PROBLEMS)} (ledger: {e['finished_at']} on {e['commit']}, "
            f"code {e['code']} unchanged)",
            flush=True,
        )
        return True

    @contextmanager
    def path(self, tally, engine: str, path: str) -> Iterator[Callable[[int], None]]:
        """Run one path's points inside; ``done(operations)`` prints its line and records it."""
        started = time.monotonic()
        digests = file_digests(self.root)  # the code as the path starts
        before = (tally.points, dict(tally.faults), dict(tally.problems), len(tally.details))

        def done(operations: int) -> None:
            points, faults, problems, details = before
            files = loaded_files()
            e = {
                "engine": engine,
                "path": path,
                "modes": self.modes,
                "operations": operations,
                "points": tally.points - points,
                "crashes": tally.faults["kill"] - faults.get("kill", 0),
                "errors": tally.faults["error"] - faults.get("error", 0),
                **{k: tally.problems[k] - problems.get(k, 0) for k in PROBLEMS},
                "details": tally.details[details:],
                "commit": self.commit,
                "code": code_hash(files, digests),
                "files": files,
                "finished_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "seconds": round(time.monotonic() - started, 1),
            }
            self.commits.add(self.commit)
            found = sum(e[k] for k in PROBLEMS)
            print(
                f"{engine:12} {path:24} operations={operations:3} problems={found} "
                f"({e['seconds']} s, on {self.commit})",
                flush=True,
            )
            if self.file is not None:
                with self.file.open("a") as out:
                    out.write(json.dumps(e, sort_keys=True) + "\n")
                    out.flush()
                    os.fsync(out.fileno())

        yield done

    def provenance(self) -> str:
        """The line printed under the figures: the commits they ran on, and the code now."""
        return f"IOFAULT_ON ran_on={','.join(sorted(self.commits))} head={self.commit}"
