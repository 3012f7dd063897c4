"""The e2e lane: the ``e2e`` tests in one child pytest, beside the rest of the suite.

When the selection holds ``e2e`` tests and others, the ``e2e`` ones run in one child pytest
(``BACKFILL_E2E_LANE=1``), started as soon as the parent has collected. They spend most of
their time waiting on a daemon, a webserver, a browser or the runs these start, so the rest of
the suite runs beside them. In the parent they are moved to the end, and none of their fixtures
is set up there: the first waits for the child, and each reports the outcome and the time it had
there (``child_pytest.py``). A selection of only ``e2e`` tests runs them in the parent.
"""

from __future__ import annotations

import os
from typing import Literal

import pytest
from _pytest.reports import TestReport

from backfill_assets_testkit.child_pytest import ChildPytest, Outcome, Status

E2E_LANE_ENV = "BACKFILL_E2E_LANE"
E2E_LANE_TIMEOUT = 3600  # seconds for the one child run of every selected e2e test
_e2e_lane: list[ChildPytest] = []


def _in_e2e_lane(item) -> bool:
    return item.get_closest_marker("e2e") is not None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Start the e2e lane when the selection holds e2e tests and others; move them to the end."""
    if os.environ.get(E2E_LANE_ENV) == "1" or config.option.collectonly:
        return
    lane = [item for item in items if _in_e2e_lane(item)]
    if not lane or len(lane) == len(items):
        return  # nothing to run beside them: they run here
    items[:] = [item for item in items if not _in_e2e_lane(item)] + lane
    for item in lane:  # the first waits for the whole child run
        item.add_marker(pytest.mark.timeout(E2E_LANE_TIMEOUT + 120))
    node_ids = [item.nodeid for item in lane]
    _e2e_lane.append(
        ChildPytest.start(
            "e2e", node_ids, {E2E_LANE_ENV: "1"}, E2E_LANE_TIMEOUT, cwd=config.rootpath
        )
    )


def pytest_unconfigure(config) -> None:
    for child in _e2e_lane:
        child.stop()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """In the parent, an e2e test takes its outcome and time from the lane's child run, with no
    fixture of its own set up here."""
    if not _e2e_lane or not _in_e2e_lane(item):
        return None
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for report in _reports(item, _e2e_lane[0].result().of(item.nodeid)):
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def _reports(item, outcome: Outcome) -> list[TestReport]:
    """The set-up, call and teardown reports of a case that ran in the child."""
    keywords: dict[str, Literal[1]] = {name: 1 for name in item.keywords}

    def report(
        when: Literal["setup", "call", "teardown"],
        status: Status,
        longrepr=None,
        seconds: float = 0.0,
    ) -> TestReport:
        return TestReport(
            item.nodeid, item.location, keywords, status, longrepr, when, duration=seconds
        )

    if outcome.status == "skipped":
        path, line, _ = item.location
        where = (str(path), (line or 0) + 1, outcome.text)
        return [report("setup", "skipped", where), report("teardown", "passed")]
    failure = f"in the e2e lane's child:\n{outcome.text}" if outcome.status == "failed" else None
    return [
        report("setup", "passed"),
        report("call", outcome.status, failure, outcome.seconds),
        report("teardown", "passed"),
    ]
