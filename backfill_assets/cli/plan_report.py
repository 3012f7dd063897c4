"""``backfill-assets plan``: what a backfill's runs (``backfill_plan``) would build, from what,
and how long they should take.

The plan is a dry run: it lists files and reads Delta logs, and changes nothing. Time is
estimated from the throughput of real runs on this machine, recorded under
``DAGSTER_HOME`` by every run the CLI executes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from backfill_assets.backfill_plan import (
    RunPlan,
    gone_raw_partitions,
    input_files,
    plan_backfill,
    reads_landing,
)
from backfill_assets.cli.key_distribution import SkewReport, key_distribution, render_skew
from backfill_assets.days import rate_partition
from backfill_assets.settings import Settings, dagster_home

# Until a run has been measured on this machine: the time to start a run and its Spark session,
# then the throughput of landed JSON through all checks.
DEFAULT_RUN_OVERHEAD_S = 10.0
DEFAULT_BYTES_PER_S = 2_000_000.0


@dataclass
class LayerPlan:
    run: RunPlan
    input_files: int = 0
    input_bytes: int = 0
    missing_inputs: list[date] = field(default_factory=list)
    estimate_s: float = 0.0


@dataclass
class BackfillPlan:
    layers: list[LayerPlan]
    gone: dict[date, int]  # raw partitions with rows whose landing folder is now empty
    measured: bool
    skew: SkewReport | None = None  # the heavy stages' key distribution

    @property
    def estimate_s(self) -> float:
        return sum(layer.estimate_s for layer in self.layers)


def throughput_file() -> Path:
    return dagster_home() / "backfill_assets_throughput.json"


def record_throughput(input_bytes: int, seconds: float) -> None:
    path = throughput_file()
    data = (
        json.loads(path.read_text()) if path.exists() else {"bytes": 0, "seconds": 0.0, "runs": 0}
    )
    data = {
        "bytes": data["bytes"] + input_bytes,
        "seconds": data["seconds"] + seconds,
        "runs": data["runs"] + 1,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def _rate() -> tuple[float, float, bool]:
    path = throughput_file()
    if path.exists():
        data = json.loads(path.read_text())
        work = data["seconds"] - DEFAULT_RUN_OVERHEAD_S * data["runs"]
        if data["bytes"] > 0 and work > 0:
            return DEFAULT_RUN_OVERHEAD_S, data["bytes"] / work, True
    return DEFAULT_RUN_OVERHEAD_S, DEFAULT_BYTES_PER_S, False


def make_plan(settings: Settings, start: date, end: date) -> BackfillPlan:
    runs = plan_backfill(settings, start, end)
    overhead, rate, measured = _rate()
    layers = []
    for run in runs:
        files = input_files(settings, run)
        present = {rate_partition(f.partition, settings.start_date) for f in files}
        size = sum(f.size_bytes for f in files)
        missing = [d for d in run.days if d not in present] if reads_landing(run) else []
        layers.append(LayerPlan(run, len(files), size, missing, overhead + size / rate))
    return BackfillPlan(
        layers,
        gone_raw_partitions(settings, start, end),
        measured,
        key_distribution(settings, start, end),
    )


def render_plan(plan: BackfillPlan) -> str:
    lines = [f"{'layer':<34}{'partitions':<26}{'files':>7}{'MB':>9}{'no input':>10}{'est. s':>8}"]
    for layer in plan.layers:
        run = layer.run
        names = "+".join(k.to_user_string() for k in run.assets)
        lines.append(
            f"{names:<34}{f'{run.start}..{run.end} ({len(run.days)})':<26}{layer.input_files:>7}"
            f"{layer.input_bytes / 1e6:>9.2f}{len(layer.missing_inputs):>10}"
            f"{layer.estimate_s:>8.0f}"
        )
        if layer.missing_inputs:
            shown = ", ".join(d.isoformat() for d in layer.missing_inputs[:8])
            more = (
                f" (+{len(layer.missing_inputs) - 8} more)" if len(layer.missing_inputs) > 8 else ""
            )
            lines.append(f"{'':<34}without landing files: {shown}{more}")
    basis = "measured on this machine" if plan.measured else "default rate, no run measured yet"
    lines.append(f"estimated total: {plan.estimate_s:.0f} s ({basis})")
    if plan.skew is not None:
        lines += render_skew(plan.skew)
    for day, rows in sorted(plan.gone.items()):
        lines.append(
            f"WARNING raw_orders {day}: {rows} rows in the lake but its landing files are gone "
            "(backfill will not overwrite them with emptiness unless --allow-empty-overwrite)"
        )
    return "\n".join(lines)
