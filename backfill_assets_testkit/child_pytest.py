"""A child pytest that runs some of the selected tests beside the parent, and their outcomes.

Two lanes use it: the lake's delta-spark cases, which need a session with Delta's jars
(``lake/conftest.py``), and the end-to-end tests, which spend most of their time waiting on a
daemon, a webserver or a browser (``conftest.py``). Each child is started when the parent has
collected; the parent's stand-in for one of its tests waits for the whole child run, then takes
that test's outcome from the child's JUnit report.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from backfill_assets_testkit.processes import REPO, kill_group, start, subprocess_env


def case_key(nodeid: str) -> tuple[str, str]:
    """(classname, name) as the JUnit report of the child names the case ``nodeid``."""
    path, *scopes, name = nodeid.split("::")
    dotted = path.removesuffix(".py").replace("/", ".")
    return ".".join([dotted, *scopes]), name


Status = Literal["passed", "failed", "skipped"]


@dataclass(frozen=True)
class Outcome:
    """One case's outcome in the child: ``passed``, ``failed`` or ``skipped``, its text, and
    the seconds it took there (set-up, call and teardown)."""

    status: Status
    text: str = ""
    seconds: float = 0.0


class Outcomes:
    """Every case's outcome in a finished child run, and the tail of its log."""

    def __init__(self, cases: dict[tuple[str, str], Outcome], log: str, name: str) -> None:
        self.cases, self.log, self.name = cases, log, name

    def of(self, nodeid: str) -> Outcome:
        """The outcome of the case ``nodeid``; a failure saying so when the child did not run
        it (the child crashed, ran out of time, or could not collect it)."""
        missing = Outcome("failed", f"test did not run in the {self.name} child:\n{self.log}")
        return self.cases.get(case_key(nodeid), missing)


class ChildPytest:
    """One child pytest over ``node_ids``, started in the background in its own process group."""

    def __init__(self, proc: subprocess.Popen, folder: Path, name: str, timeout: float) -> None:
        self.proc, self.folder, self.name, self.timeout = proc, folder, name, timeout
        self.started = time.monotonic()
        self.outcomes: Outcomes | None = None

    @classmethod
    def start(
        cls,
        name: str,
        node_ids: list[str],
        env: dict[str, str],
        timeout: float,
        nice: int = 0,
        cwd: Path = REPO,
    ) -> ChildPytest:
        """``env`` is added to the parent's; ``nice`` lowers the child's priority (0: none);
        ``cwd``: the parent's root folder, which its node ids are relative to."""
        folder = Path(tempfile.mkdtemp(prefix=f"backfill-{name}-child-"))
        args = [sys.executable, "-m", "pytest", *node_ids, "-p", "no:cacheprovider", "-q"]
        args.append(f"--junitxml={folder / 'report.xml'}")
        if nice:
            args = ["nice", "-n", str(nice), *args]
        proc = start(args, subprocess_env(**env), folder / "log", cwd=cwd)
        return cls(proc, folder, name, timeout)

    def result(self) -> Outcomes:
        """Wait for the child (at most ``timeout`` from its start); its outcomes by case."""
        if self.outcomes is None:
            left = self.timeout - (time.monotonic() - self.started)
            try:
                self.proc.wait(timeout=max(left, 1))
                note = ""
            except subprocess.TimeoutExpired:
                kill_group(self.proc)
                note = f"the {self.name} child ran out of its {self.timeout:.0f} s\n"
            log = note + (self.folder / "log").read_text(errors="replace")
            tail = "\n".join(log.splitlines()[-30:])
            self.outcomes = Outcomes(_read_report(self.folder / "report.xml"), tail, self.name)
        return self.outcomes

    def stop(self) -> None:
        """Kill the child if it still runs (the parent was interrupted); remove its folder."""
        if self.proc.poll() is None:
            kill_group(self.proc)
        shutil.rmtree(self.folder, ignore_errors=True)


def _read_report(report: Path) -> dict[tuple[str, str], Outcome]:
    cases: dict[tuple[str, str], Outcome] = {}
    if not report.exists():
        return cases
    for case in ET.parse(report).getroot().iter("testcase"):
        key = (case.attrib["classname"], case.attrib["name"])  # as case_key spells it
        seconds = float(case.attrib.get("time", 0) or 0)
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        skipped = case.find("skipped")
        if bad is not None:
            cases[key] = Outcome("failed", bad.get("message", "") + (bad.text or ""), seconds)
        elif skipped is not None:
            cases[key] = Outcome("skipped", skipped.get("message", ""), seconds)
        else:
            cases[key] = Outcome("passed", "", seconds)
    return cases
