"""A discard racing a publish, on every engine: the manifest is compare-and-swap, so a publish
whose staged version was discarded after it read it fails with a clear LakeError, commits
nothing, and the table names no file that is gone."""

from __future__ import annotations

import json
import os
import threading

import pytest

from backfill_assets.lake import LakeError
from backfill_assets_tests.lake.lake_support import THINGS, commit, content
from backfill_assets_tests.lake.test_lake_staged import D1, D2, D3, frame, write_old

# Where a publish stops for the discard: once it has read the manifest, and once it has saved
# its intent (the discard then settles that intent away: its commit has not landed).
POINTS = ["publish_read", "publish_intent"]


def live_files(table_dir: str) -> set[str]:
    """The files the table's latest version names, replayed here from its commit files."""
    live: set[str] = set()
    log = os.path.join(table_dir, "_delta_log")
    for name in sorted(n for n in os.listdir(log) if n.endswith(".json")):
        with open(os.path.join(log, name), encoding="utf-8") as commit_file:
            for line in commit_file:
                action = json.loads(line)
                if "add" in action:
                    live.add(action["add"]["path"])
                elif "remove" in action:
                    live.discard(action["remove"]["path"])
    return live


def publish_paused_at(lake, staged, point: str, pause_dir: str, monkeypatch) -> tuple:
    """Start ``lake.staging.publish(staged)`` in a thread that stops at ``point``; (thread,
    outcome)."""
    monkeypatch.setenv("BACKFILL_LAKE_PAUSE_DIR", pause_dir)
    monkeypatch.setenv("BACKFILL_LAKE_PAUSE_AT", point)
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["result"] = lake.staging.publish(staged)
        except Exception as exc:  # the assertion is on it, in the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    reached = os.path.join(pause_dir, f"{point}.1.reached")
    for _ in range(3000):
        if os.path.exists(reached) or not thread.is_alive():
            break
        thread.join(0.02)
    assert os.path.exists(reached), f"the publish never reached {point}: {outcome}"
    return thread, outcome


@pytest.mark.parametrize("point", POINTS)
def test_a_publish_whose_staged_version_was_discarded_meanwhile_commits_nothing(
    lake, tmp_path, monkeypatch, point
):
    write_old(lake)
    staged = lake.staging.stage(
        THINGS, frame(lake, [(D1, 10, "new"), (D2, 20, "new")]), "d", [D1, D2], commit("new")
    )
    pause_dir = str(tmp_path / "pause")
    os.makedirs(pause_dir)
    thread, outcome = publish_paused_at(lake, staged, point, pause_dir, monkeypatch)
    try:
        assert (
            lake.staging.discard(staged) == 2
        )  # a closer: an expiry, a run Dagster called finished
    finally:
        open(os.path.join(pause_dir, f"{point}.1.resume"), "w").close()
        thread.join(120)
    monkeypatch.delenv("BACKFILL_LAKE_PAUSE_DIR")
    assert "result" not in outcome, f"the publish committed version {outcome['result'].version}"
    assert isinstance(outcome.get("error"), LakeError), outcome
    assert "discarded" in str(outcome["error"]) and "nothing was committed" in str(outcome["error"])
    table_dir = lake.table_location(THINGS)
    missing = [p for p in live_files(table_dir) if not os.path.exists(os.path.join(table_dir, p))]
    assert missing == []
    assert lake.version(THINGS) == 0
    assert lake.staging.versions(THINGS) == []
    assert content(lake) == [(D1, 1, "old"), (D2, 2, "old"), (D3, 3, "old")]


def test_a_publish_whose_staged_files_are_gone_commits_nothing(lake):
    write_old(lake)
    staged = lake.staging.stage(
        THINGS, frame(lake, [(D1, 10, "new"), (D2, 20, "new")]), "d", [D1, D2], commit("new")
    )
    table_dir = lake.table_location(THINGS)
    os.remove(os.path.join(table_dir, staged.files_of([D2])[0].path))  # a hand, a bad clean-up
    with pytest.raises(LakeError, match="gone from storage: nothing was committed"):
        lake.staging.publish(staged)
    assert lake.version(THINGS) == 0
    assert content(lake) == [(D1, 1, "old"), (D2, 2, "old"), (D3, 3, "old")]
    reopened = lake.staging.version(THINGS, staged.id)
    assert reopened is not None and reopened.publishing is None and reopened.published == {}
