"""A correction's record is compare-and-swap: a copy read before another writer saved fails with
RecordChanged and saves nothing, whether the other writer is a cutover in another process, a
save that lands between the comparison and the write (local disk and S3), or many processes
saving at once; a record saved before generations existed loads as generation 0."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from backfill_assets.corrections import lifecycle, registry
from backfill_assets.corrections.registry import RecordChanged, State
from backfill_assets.storage.stores import storage_for
from backfill_assets.testing.faults import forget_visits
from backfill_assets_testkit.small_lake import (
    CID,
    TABLES,
    after_cutover,
    copy,
    production_rows,
    rows,
    start_child,
    start_cutover,
)

# Each saver adds its own notes, one per save, re-reading the record when its save is refused;
# it starts when the file ``go`` appears, so that the savers overlap.
SAVER = """
import os, sys, time
from backfill_assets.corrections import lifecycle, registry
root, name, saves, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
while not os.path.exists(go):
    time.sleep(0.005)
refused = 0
for n in range(saves):
    while True:
        c = registry.get(root, "fix-1")
        c.note("saver", f"{name}:{n}")
        try:
            registry.save(root, c)
            break
        except registry.RecordChanged:
            refused += 1
print(refused)
"""


def test_a_copy_read_before_a_cutover_in_another_process_cannot_write_diffed_over_it(
    template, tmp_path
):
    lake = copy(template, tmp_path / "lake")
    stale = registry.get(lake.root, CID)  # a diff, say, that read the record and ran long
    child = start_cutover(lake.root)
    _, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    stale.note("diffed", "2 of 2 day(s) changed")
    stale.state = State.DIFFED
    with pytest.raises(RecordChanged, match=rf"correction {CID} was saved again"):
        registry.save(lake.root, stale)
    kept = registry.get(lake.root, CID)
    assert kept.state == State.CUT_OVER and kept.cutover["versions"]  # the rollback's versions
    for table in TABLES:
        assert rows(lake.root, table) == after_cutover(table)
    lifecycle.rollback(lake, CID)
    for table in TABLES:
        assert rows(lake.root, table) == production_rows(table)


def saves_racing(root: str, pause_dir: Path, monkeypatch) -> tuple[dict, dict]:
    """Two copies of the record saved at once: the first stops once it compared the generation
    it read (``record_compared``), the second saves meanwhile, then the first goes on. Each
    copy's outcome: "saved" or the RecordChanged raised."""
    monkeypatch.setenv("BACKFILL_LAKE_PAUSE_DIR", str(pause_dir))
    monkeypatch.setenv("BACKFILL_LAKE_PAUSE_AT", "record_compared")
    forget_visits()
    (pause_dir / "record_compared.2.resume").touch()  # the second save does not stop
    first, second = registry.get(root, CID), registry.get(root, CID)
    first.note("first")
    second.note("second")
    outcome: dict = {}

    def save(name: str, c: registry.Correction) -> None:
        try:
            registry.save(root, c)
            outcome[name] = "saved"
        except Exception as exc:
            outcome[name] = exc

    one = threading.Thread(target=save, args=("first", first))
    one.start()
    reached = pause_dir / "record_compared.1.reached"
    for _ in range(1500):
        if reached.exists() or not one.is_alive():
            break
        one.join(0.02)
    assert reached.exists(), outcome
    two = threading.Thread(target=save, args=("second", second))
    two.start()
    two.join(1.0)  # on S3 it saves; on local disk it waits for the first's lock
    (pause_dir / "record_compared.1.resume").touch()
    one.join(30)
    two.join(30)
    forget_visits()
    return outcome, json.loads(storage_for(root).read_text(registry.record_path(root, CID)))


def assert_one_saved(outcome: dict, stored: dict, winner: str) -> None:
    loser = "second" if winner == "first" else "first"
    assert outcome[winner] == "saved", outcome
    assert isinstance(outcome[loser], RecordChanged), outcome
    assert stored["history"][-1]["action"] == winner
    assert [h["action"] for h in stored["history"]].count(loser) == 0
    assert stored["generation"] == 1


def test_a_save_landing_after_the_comparison_waits_on_local_disk_and_then_fails(
    template, tmp_path, monkeypatch
):
    lake = copy(template, tmp_path / "lake")
    (tmp_path / "pause").mkdir()
    outcome, stored = saves_racing(str(lake.root), tmp_path / "pause", monkeypatch)
    assert_one_saved(outcome, stored, "first")  # it held the lock: the second read it stale


def test_a_save_landing_after_the_comparison_on_s3_makes_the_other_fail_by_its_etag(
    template, tmp_path, monkeypatch, s3_bucket
):
    root = f"s3://{s3_bucket}/lake"
    source = registry.get(template, CID)
    registry.save(root, source, create=True)
    (tmp_path / "pause").mkdir()
    outcome, stored = saves_racing(root, tmp_path / "pause", monkeypatch)
    assert_one_saved(outcome, stored, "second")  # no lock on S3: If-Match refuses the first


def test_processes_saving_at_once_lose_no_save(template, tmp_path):
    lake = copy(template, tmp_path / "lake")
    go, saves = tmp_path / "go", 150
    savers = [start_child(SAVER, str(lake.root), name, str(saves), str(go)) for name in "ab"]
    go.touch()
    refused = 0
    for saver in savers:
        out, err = saver.communicate(timeout=120)
        assert saver.returncode == 0, err
        refused += int(out)
    c = registry.get(lake.root, CID)
    notes = [h["detail"] for h in c.history if h["action"] == "saver"]
    assert sorted(notes) == sorted(f"{name}:{n}" for name in "ab" for n in range(saves))
    assert c.generation == 2 * saves
    print(f"refused and retried: {refused}")


def test_a_record_saved_before_generations_loads_as_generation_0(template, tmp_path):
    lake = copy(template, tmp_path / "lake")
    path = Path(registry.record_path(lake.root, CID))
    document = json.loads(path.read_text())
    del document["generation"]
    path.write_text(json.dumps(document))
    c, stale = registry.get(lake.root, CID), registry.get(lake.root, CID)
    assert c.generation == 0
    c.note("checked")
    registry.save(lake.root, c)
    assert json.loads(path.read_text())["generation"] == 1
    with pytest.raises(RecordChanged):
        registry.save(lake.root, stale)


def test_a_record_set_aside_is_not_written_back_by_a_copy_read_before(template, tmp_path):
    lake = copy(template, tmp_path / "lake")
    stale = registry.get(lake.root, CID)
    aside = registry.set_aside(lake.root, CID)
    with pytest.raises(RecordChanged, match="set aside"):
        registry.save(lake.root, stale)
    assert registry.load(lake.root, CID) is None and os.path.exists(aside)
