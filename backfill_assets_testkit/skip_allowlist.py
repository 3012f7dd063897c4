"""The skips a run may have: with ``--skip-allowlist=FILE`` (``make test`` passes
``.ci/skip-allowlist.txt``), a run in which a test was skipped fails, listing each such test
and its reason, unless the test stands on the list.

A skip hides a case from the count: a missing dependency must fail naming the set-up step
instead, so the list holds only the cases that legitimately do not apply. Each line of the file
is a node id, or a pattern of node ids in which ``*`` stands for any text (brackets and all
else are literal), then ``#`` and the reason it may be skipped;
blank lines and lines that start with ``#`` are comments. A line with no reason is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

OPTION = "--skip-allowlist"


@dataclass(frozen=True)
class Entry:
    pattern: str  # a node id, or a pattern of node ids in which `*` stands for any text
    reason: str  # why such a skip is legitimate


def read_allowlist(path: Path) -> list[Entry]:
    """The list's entries; pytest.UsageError naming the line when one has no reason."""
    entries = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        pattern, _, reason = (part.strip() for part in text.partition("#"))
        if not pattern or not reason:
            raise pytest.UsageError(
                f"{path}:{number}: each line is `<node id or pattern>  # <reason>`: {line!r}"
            )
        entries.append(Entry(pattern, reason))
    return entries


def allowed(nodeid: str, entries: list[Entry]) -> bool:
    """Whether an entry names ``nodeid``, or is a pattern it matches."""
    return any(
        re.fullmatch(".*".join(map(re.escape, entry.pattern.split("*"))), nodeid, re.DOTALL)
        for entry in entries
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        OPTION,
        metavar="FILE",
        default=None,
        help="fail the run when a test was skipped that FILE does not list (one node id or "
        "pattern per line, `# reason` after it)",
    )


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption(OPTION)
    if path is not None:
        config.pluginmanager.register(SkipCheck(Path(path)), "skip_allowlist_check")


class SkipCheck:
    """The run's skips against the list: a plugin of one run."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries = read_allowlist(path)
        self.skipped: dict[str, str] = {}  # node id -> skip reason
        self.refused: dict[str, str] = {}  # the skipped ones the list does not allow

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not report.skipped or hasattr(report, "wasxfail"):
            return
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        self.skipped[report.nodeid] = reason.removeprefix("Skipped: ")

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """A run whose tests otherwise passed fails when one was skipped that is not listed."""
        self.refused = {
            nodeid: reason
            for nodeid, reason in self.skipped.items()
            if not allowed(nodeid, self.entries)
        }
        if self.refused and session.exitstatus in (
            pytest.ExitCode.OK,
            pytest.ExitCode.NO_TESTS_COLLECTED,
        ):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.refused:
            return
        terminalreporter.section(f"skipped, and not on {self.path}: the run fails", red=True)
        for nodeid, reason in sorted(self.refused.items()):
            terminalreporter.line(f"SKIPPED {nodeid}: {reason}")
        terminalreporter.line(
            "A missing dependency must fail naming its set-up step; a case that does not "
            f"apply goes on {self.path} with the reason."
        )
