"""The per-partition, per-layer outcome table that backfill, reexecute and catch-up print."""

from __future__ import annotations

from datetime import date

from backfill_assets.catalog import LAYERS
from backfill_assets.cli.runner import RunOutcome


def render(outcomes: list[RunOutcome]) -> tuple[str, list[str]]:
    """A table per partition and layer, and the list of held (layer, day, why) lines."""
    cells: dict[date, dict[str, str]] = {}
    problems: list[str] = []
    for outcome in outcomes:
        for key in outcome.plan.assets:
            for day in outcome.plan.days:
                rows = outcome.published.get(key, {}).get(day)
                failed = outcome.failed_checks.get(key, {}).get(day, [])
                if rows is not None:
                    cell = f"ok {rows}"
                else:
                    cell = "HELD " + ",".join(failed) if failed else "not published"
                    why = (
                        ", ".join(failed)
                        or "; ".join(outcome.held.get(day, []))
                        or (outcome.error or "step did not publish it").splitlines()[0]
                    )
                    problems.append(f"{key.to_user_string()} {day}: {why}")
                cells.setdefault(day, {})[key.to_user_string()] = cell
    names = [k.to_user_string() for k in LAYERS]
    lines = [f"{'partition':<12}" + "".join(f"{n:<28}" for n in names)]
    for day in sorted(cells):
        lines.append(
            f"{day.isoformat():<12}" + "".join(f"{cells[day].get(n, '-'):<28}" for n in names)
        )
    return "\n".join(lines), problems


def report_outcomes(outcomes: list[RunOutcome]) -> int:
    """Print the table and the held partitions; 0 when every partition was published."""
    table, problems = render(outcomes)
    print(table)
    warnings = [
        f"{key.to_user_string()} {day}: {', '.join(names)}"
        for o in outcomes
        for key, days in o.warnings.items()
        for day, names in sorted(days.items())
    ]
    if warnings:
        print(
            f"\n{len(warnings)} partition(s) published with warnings (a figure outside its band):"
        )
        print("\n".join(f"  {w}" for w in warnings))
    if problems:
        print(f"\n{len(problems)} partition(s) held or not published:")
        print("\n".join(f"  {p}" for p in problems))
        return 1
    total = sum(len(o.plan.days) * len(o.plan.assets) for o in outcomes)
    print(f"\nall {total} requested partitions published with passing checks")
    return 0
