"""What the e2e test asks Dagster's GraphQL API: the API a person's browser talks to."""

from __future__ import annotations

import time
from collections import defaultdict
from datetime import date, timedelta

from backfill_assets_testkit.dagster_dev import DagsterUI

TERMINAL = {"COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED"}

BACKFILL_STATUS = """query($id: String!) { partitionBackfillOrError(backfillId: $id) {
    __typename ... on PartitionBackfill { status } ... on PythonError { message } } }"""

BACKFILL_COUNTS = """query($id: String!) { partitionBackfillOrError(backfillId: $id) {
    ... on PartitionBackfill { status assetBackfillData { assetBackfillStatuses {
    ... on AssetPartitionsStatusCounts { assetKey { path } numPartitionsTargeted
    numPartitionsInProgress numPartitionsMaterialized numPartitionsFailed } } } } } }"""

ASSET_NODES = """{ assetNodes { assetKey { path } groupName kinds description isPartitioned
    hasAssetChecks } }"""

PARTITION_STATUSES = """query($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) {
    ... on AssetNode { assetPartitionStatuses { ... on TimePartitionStatuses {
    ranges { startKey endKey status } } } } } }"""

CHECK_EXECUTIONS = """query($key: AssetKeyInput!, $check: String!) {
    assetCheckExecutions(assetKey: $key, checkName: $check, limit: 100) { partition status } }"""

NUMERIC_METADATA = """query($key: AssetKeyInput!, $partitions: [String!]) {
    assetNodeOrError(assetKey: $key) { ... on AssetNode {
    latestMaterializationByPartition(partitions: $partitions) { partition metadataEntries {
    label ... on FloatMetadataEntry { floatValue } ... on IntMetadataEntry { intValue } } } } } }"""

AUTOMATION = """{ repositoriesOrError { ... on RepositoryConnection { nodes {
    schedules { name scheduleState { status } } sensors { name sensorState { status } } } } } }"""


def _until(ui: DagsterUI, what: str, fetch, done, timeout: float, every: float = 1):
    """``fetch()`` again every ``every`` seconds until ``done`` of it; then its last value."""
    deadline = time.monotonic() + timeout
    while not done(value := fetch()):
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{what}: {value} after {timeout:.0f}s; server log:\n{ui.log_tail()}"
            )
        time.sleep(every)
    return value


def wait_for_backfill(ui: DagsterUI, backfill_id: str, timeout: float) -> str:
    # one small query a second: the backfill's end is seen within a second
    return _until(
        ui,
        f"backfill {backfill_id}",
        lambda: ui.graphql(BACKFILL_STATUS, id=backfill_id)["partitionBackfillOrError"].get(
            "status"
        ),
        lambda status: status in TERMINAL,
        timeout,
    )


def backfill_counts(
    ui: DagsterUI, backfill_id: str
) -> tuple[str, dict[str, tuple[int, int, int, int]]]:
    """The backfill's status and, per asset: (targeted, in progress, materialized, failed)."""
    backfill = ui.graphql(BACKFILL_COUNTS, id=backfill_id)["partitionBackfillOrError"]
    counts = {
        s["assetKey"]["path"][-1]: (
            s["numPartitionsTargeted"],
            s["numPartitionsInProgress"],
            s["numPartitionsMaterialized"],
            s["numPartitionsFailed"],
        )
        for s in backfill["assetBackfillData"]["assetBackfillStatuses"]
    }
    return backfill["status"], counts


def asset_nodes(ui: DagsterUI) -> dict[str, dict]:
    return {n["assetKey"]["path"][-1]: n for n in ui.graphql(ASSET_NODES)["assetNodes"]}


def partition_days(ui: DagsterUI, asset: str) -> dict[str, set[date]]:
    """Days per partition status (MATERIALIZED, FAILED, MATERIALIZING) of a daily asset."""
    node = ui.graphql(PARTITION_STATUSES, key={"path": [asset]})["assetNodeOrError"]
    out: dict[str, set[date]] = defaultdict(set)
    for r in node["assetPartitionStatuses"]["ranges"]:
        day, end = date.fromisoformat(r["startKey"]), date.fromisoformat(r["endKey"])
        while day <= end:
            out[r["status"]].add(day)
            day += timedelta(days=1)
    return out


def check_results(ui: DagsterUI, asset: str, check: str) -> dict[date, list[str]]:
    """Every recorded execution status of one check, per partition."""
    out: dict[date, list[str]] = defaultdict(list)
    for ex in ui.graphql(CHECK_EXECUTIONS, key={"path": [asset]}, check=check)[
        "assetCheckExecutions"
    ]:
        out[date.fromisoformat(ex["partition"])].append(ex["status"])
    return dict(out)


def numeric_metadata(ui: DagsterUI, asset: str, days: list[date]) -> dict[date, dict[str, float]]:
    """The numbers of each day's latest materialization: what Dagster plots over partitions."""
    node = ui.graphql(
        NUMERIC_METADATA, key={"path": [asset]}, partitions=[d.isoformat() for d in days]
    )["assetNodeOrError"]
    return {
        date.fromisoformat(m["partition"]): {
            e["label"]: e.get("floatValue", e.get("intValue"))
            for e in m["metadataEntries"]
            if "floatValue" in e or "intValue" in e
        }
        for m in node["latestMaterializationByPartition"]
        if m
    }


def automation_states(ui: DagsterUI) -> dict[str, str]:
    """RUNNING or STOPPED, per schedule and sensor name."""
    repos = ui.graphql(AUTOMATION)["repositoriesOrError"]["nodes"]
    return {
        **{s["name"]: s["scheduleState"]["status"] for r in repos for s in r["schedules"]},
        **{s["name"]: s["sensorState"]["status"] for r in repos for s in r["sensors"]},
    }


def wait_for_state(ui: DagsterUI, name: str, expected: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while (state := automation_states(ui)[name]) != expected:
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{name} is {state}, not {expected}, {timeout:.0f}s after the switch"
            )
        time.sleep(0.5)


LOCATIONS = """{ workspaceOrError { ... on Workspace { locationEntries { name } } } }"""

RUN = """query($id: ID!) { runOrError(runId: $id) { __typename
    ... on Run { runId jobName status } ... on PythonError { message } } }"""

RUNS_TAGGED = """query($tags: [ExecutionTag!]) { runsOrError(filter: {tags: $tags}) {
    ... on Runs { results { runId jobName status } } } }"""

FINISHED_RUN = {"SUCCESS", "FAILURE", "CANCELED"}


def location_name(ui: DagsterUI) -> str:
    [entry] = ui.graphql(LOCATIONS)["workspaceOrError"]["locationEntries"]
    return entry["name"]


def wait_for_run(ui: DagsterUI, run_id: str, timeout: float) -> dict:
    """The run (id, job name, status) once it has finished."""
    return _until(
        ui,
        f"run {run_id}",
        lambda: ui.graphql(RUN, id=run_id)["runOrError"],
        lambda run: run.get("status") in FINISHED_RUN,
        timeout,
    )


def runs_tagged(ui: DagsterUI, **tags: str) -> list[dict]:
    """Every run carrying all of ``tags``: id, job name and status."""
    found = ui.graphql(RUNS_TAGGED, tags=[{"key": k, "value": v} for k, v in tags.items()])
    return found["runsOrError"]["results"]


def wait_for_runs(ui: DagsterUI, job: str, count: int, timeout: float, **tags: str) -> list[dict]:
    """``count`` runs of ``job`` carrying ``tags``, once every one of them has finished."""
    return _until(
        ui,
        f"{job} runs tagged {tags}",
        lambda: [r for r in runs_tagged(ui, **tags) if r["jobName"] == job],
        lambda runs: len(runs) >= count and all(r["status"] in FINISHED_RUN for r in runs),
        timeout,
        every=2,
    )
