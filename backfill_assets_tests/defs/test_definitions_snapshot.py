"""A snapshot of the Definitions' wiring: assets, checks, jobs, sensors and schedules.

After dagster-open-platform's ``test_defs.py::test_assets_snapshot``: the definitions Dagster
loads are rendered as plain sorted JSON (asset keys with their groups, partitions and
dependencies; checks with ``blocking``; jobs with what they select; sensors and schedules
with their default status and targets; resource keys) and compared with the committed
``definitions_snapshot.json``. A change of wiring fails here in seconds, with a diff, and
the reviewer sees it in the snapshot's diff. No Spark is started: definitions load lazily.

The environment is fixed (every ``BACKFILL_*`` variable cleared, then a first partition of
2023-03-15 and a lateness of 5 days, so the daily and monthly starts differ and the raw
orders' window is told apart from the rates' 7 days). Only names and declared values are
rendered, never module paths, so moving a module changes nothing here.

After an intended change, regenerate the file and review its diff before committing it::

    UPDATE_SNAPSHOT=1 .venv/bin/python -m pytest \\
        backfill_assets_tests/defs/test_definitions_snapshot.py -p no:cacheprovider
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path

import dagster as dg

from backfill_assets.definitions import defs

SNAPSHOT = Path(__file__).with_name("definitions_snapshot.json")
ENV = {"BACKFILL_START_DATE": "2023-03-15", "BACKFILL_MAX_LATENESS_DAYS": "5"}


def _call(kind: object, **fields: object) -> str:
    """``Type(field=value, ...)`` on one line, so a snapshot line says all about one thing."""
    return f"{type(kind).__name__}({', '.join(f'{k}={v}' for k, v in fields.items())})"


def _partitions(partitions_def) -> str | None:
    if partitions_def is None:
        return None
    if isinstance(partitions_def, dg.TimeWindowPartitionsDefinition):
        fmt = partitions_def.fmt
        return _call(
            partitions_def,
            start=partitions_def.start.strftime(fmt),
            end=partitions_def.end.strftime(fmt) if partitions_def.end else None,
            timezone=partitions_def.timezone,
            fmt=fmt,
            cron_schedule=partitions_def.cron_schedule,
            end_offset=partitions_def.end_offset,
        )
    return _call(partitions_def)  # no other kind is used; named should one come


def _mapping(mapping) -> str:
    if isinstance(mapping, dg.TimeWindowPartitionMapping):
        return _call(
            mapping,
            start_offset=mapping.start_offset,
            end_offset=mapping.end_offset,
            allow_nonexistent_upstream_partitions=mapping.allow_nonexistent_upstream_partitions,
        )
    return _call(mapping)


def _check_name(key: dg.AssetCheckKey) -> str:
    return f"{key.asset_key.to_user_string()}:{key.name}"


def render(definitions: dg.Definitions) -> str:
    """The wiring of ``definitions`` as sorted, indented JSON."""
    graph = definitions.resolve_asset_graph()
    assets = {}
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        assets[key.to_user_string()] = {
            "group": node.group_name,
            "partitions": _partitions(node.partitions_def),
            "deps": {
                parent.to_user_string(): _mapping(graph.get_partition_mapping(key, parent))
                for parent in node.parent_keys
            },
        }
    checks = {_check_name(k): {"blocking": graph.get(k).blocking} for k in graph.asset_check_keys}
    jobs = {}
    for job in definitions.resolve_all_job_defs():
        if job.name.startswith("__"):  # Dagster's implicit job of every asset
            continue
        selected = job.asset_layer.selected_asset_keys
        jobs[job.name] = {
            "assets": sorted(k.to_user_string() for k in selected),
            "checks": sorted(_check_name(k) for k in job.asset_layer.asset_graph.asset_check_keys),
            "ops": [] if selected else sorted(node.name for node in job.nodes),
            "partitions": _partitions(job.partitions_def),
        }
    sensors = {
        s.name: {
            "default_status": s.default_status.name,
            "jobs": sorted(t.job_name for t in s.targets),
            "minimum_interval_seconds": s.minimum_interval_seconds,
        }
        for s in definitions.sensors or ()
    }
    schedules = {
        s.name: {
            "default_status": s.default_status.name,
            "cron_schedule": s.cron_schedule,
            "execution_timezone": s.execution_timezone,
            "job": s.job_name,
        }
        for s in (definitions.resolve_schedule_def(d.name) for d in definitions.schedules or ())
    }
    snapshot = {
        "assets": assets,
        "asset_checks": checks,
        "jobs": jobs,
        "sensors": sensors,
        "schedules": schedules,
        "resources": sorted(definitions.resources or {}),
    }
    return json.dumps(snapshot, indent=2, sort_keys=True) + "\n"


def test_definitions_snapshot(monkeypatch):
    for name in [n for n in os.environ if n.startswith("BACKFILL_")]:
        monkeypatch.delenv(name)
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    actual = render(defs())
    if os.environ.get("UPDATE_SNAPSHOT") == "1":
        SNAPSHOT.write_text(actual)
    expected = SNAPSHOT.read_text() if SNAPSHOT.exists() else ""
    diff = "".join(
        difflib.unified_diff(
            expected.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            fromfile=f"{SNAPSHOT.name} (committed)",
            tofile="definitions as loaded",
        )
    )
    assert actual == expected, (
        "the definitions' wiring changed; if intended, regenerate with UPDATE_SNAPSHOT=1 "
        f"(see this module's docstring) and review the diff:\n{diff}"
    )


def test_the_definitions_are_built_once_per_environment(monkeypatch):
    """A process executes many runs: each reconstructs its job from ``defs()``, which builds the
    definitions again only when the environment they are read from changed."""
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    first = defs()
    assert defs() is first
    monkeypatch.setenv("BACKFILL_MAX_LATENESS_DAYS", "6")
    changed = defs()
    assert changed.resources is not None and first.resources is not None
    assert changed.resources["pipeline"].max_lateness_days == 6
    assert first.resources["pipeline"].max_lateness_days == 5
    monkeypatch.setenv("BACKFILL_MAX_LATENESS_DAYS", ENV["BACKFILL_MAX_LATENESS_DAYS"])
    assert defs() is first
