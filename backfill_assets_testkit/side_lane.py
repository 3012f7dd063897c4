"""The side lane: the ``e2e`` and ``beside`` tests in one child pytest, beside the rest of the
suite.

When the selection holds such tests and others, they run in one child pytest
(``BACKFILL_SIDE_LANE=1``), started as soon as the parent has collected. They spend most of
their time waiting: the ``e2e`` ones on a daemon, a webserver, a browser or the runs these
start; the ``beside`` ones on processes of their own (a race of a fixed length, a cluster, a
server's start). So the rest of the suite runs beside them. In the parent they are moved to the
end, and none of their fixtures is set up there: the first waits for the child, and each reports
the outcome and the time it had there (``child_pytest.py``). A selection of only such tests runs
them in the parent, and so does each of pytest-xdist's workers (``-n``): the workers are the
lanes then.
"""

from __future__ import annotations

import os
from typing import Literal

import pytest
from _pytest.reports import TestReport

from backfill_assets_testkit.child_pytest import ChildPytest, Outcome, Status

SIDE_LANE_ENV = "BACKFILL_SIDE_LANE"
SIDE_LANE_TIMEOUT = 3600  # seconds for the one child run of every selected test of the lane
LANE_MARKERS = ("e2e", "beside")
_side_lane: list[ChildPytest] = []


def _in_side_lane(item) -> bool:
    return any(item.get_closest_marker(name) is not None for name in LANE_MARKERS)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Start the side lane when the selection holds its tests and others; move them to the end."""
    if os.environ.get(SIDE_LANE_ENV) == "1" or config.option.collectonly:
        return
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # each worker collects every test: a child of each would run the lane once more
    lane = [item for item in items if _in_side_lane(item)]
    if not lane or len(lane) == len(items):
        return  # nothing to run beside them: they run here
    items[:] = [item for item in items if not _in_side_lane(item)] + lane
    for item in lane:  # the first waits for the whole child run
        item.add_marker(pytest.mark.timeout(SIDE_LANE_TIMEOUT + 120))
    node_ids = [item.nodeid for item in lane]
    _side_lane.append(
        ChildPytest.start(
            "side", node_ids, {SIDE_LANE_ENV: "1"}, SIDE_LANE_TIMEOUT, cwd=config.rootpath
        )
    )


def pytest_unconfigure(config) -> None:
    for child in _side_lane:
        child.stop()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """In the parent, a test of the side lane takes its outcome and time from the lane's child
    run, with no fixture of its own set up here."""
    if not _side_lane or not _in_side_lane(item):
        return None
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for report in _reports(item, _side_lane[0].result().of(item.nodeid)):
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
    failure = f"in the side lane's child:\n{outcome.text}" if outcome.status == "failed" else None
    return [
        report("setup", "passed"),
        report("call", outcome.status, failure, outcome.seconds),
        report("teardown", "passed"),
    ]
