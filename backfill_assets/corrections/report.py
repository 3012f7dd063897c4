"""The correction report, in markdown, for the people who consume the numbers: the affected
period, the reason, per day the figures before and after and the change, the totals, and the
guardrail's verdict on a cutover."""

from __future__ import annotations

from backfill_assets.corrections.diff import CORRECTED, Diff, held_days, pct_change
from backfill_assets.corrections.lifecycle import DEFAULT_MAX_REVENUE_CHANGE_PCT


def _pct(value: float | None) -> str:
    return "new" if value is None else f"{value:+.2f}%"


def verdict(diff: Diff, max_pct: float = DEFAULT_MAX_REVENUE_CHANGE_PCT) -> str:
    """What the cutover's guardrail says of these days: it passes, or the days it refuses."""
    breaches = [d for d in diff.days if d.revenue_pct is None or abs(d.revenue_pct) > max_pct]
    if not breaches:
        return f"passes: no day's revenue moves more than {max_pct:g}%"
    return (
        f"refuses {len(breaches)} day(s) moving more than {max_pct:g}%: "
        + ", ".join(f"{d.day} ({_pct(d.revenue_pct)})" for d in breaches)
        + "; a cutover needs force (or a higher limit)"
    )


def render(diff: Diff) -> str:
    c = diff.correction
    before, after = diff.totals("before"), diff.totals("after")
    lines = [
        f"# Correction {c.id}",
        "",
        f"- **Reason:** {c.reason}",
        (
            f"- **Affected period:** {c.start} .. {c.end} "
            f"({len(diff.changed_days)} of {len(diff.days)} day(s) change)"
        ),
        f"- **Made by:** {c.created_by} at {c.created_at}; code version {c.code_version}",
        f"- **State:** {c.state}",
        "- **Compared with production versions:** "
        + ", ".join(f"{t} v{v}" for t, v in diff.versions.items()),
        "",
        (
            "| day | orders before | orders after | paid before | paid after | revenue before "
            "(USD) "
            "| revenue after (USD) | delta (USD) | change | staging rows +/-/~ "
            "| fact rows +/-/~ |"
        ),
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for d in diff.days:
        b, a = d.fact_before, d.fact_after
        rows = " | ".join(
            f"+{r['added']} / -{r['removed']} / ~{r['changed']}"
            for r in (d.rows[t.path] for t in CORRECTED)
        )
        lines.append(
            f"| {d.day} | {b['orders']} | {a['orders']} | {b['paid_orders']} | {a['paid_orders']} "
            f"| {b['revenue_usd']} | {a['revenue_usd']} | {a['revenue_usd'] - b['revenue_usd']} "
            f"| {_pct(d.revenue_pct)} | {rows} |"
        )
    lines.append(
        f"| **total** | {before['orders']} | {after['orders']} | {before['paid_orders']} "
        f"| {after['paid_orders']} | {before['revenue_usd']} | {after['revenue_usd']} "
        f"| {after['revenue_usd'] - before['revenue_usd']} "
        f"| {_pct(pct_change(before['revenue_usd'], after['revenue_usd']))} | | |"
    )
    lines += ["", f"**Guardrail:** {verdict(diff)}"]
    held = held_days(c)
    if held:
        lines += [
            "",
            "**Held by checks (never cut over):** "
            + "; ".join(f"{day}: {', '.join(checks)}" for day, checks in held.items()),
        ]
    for table, days in diff.rebuilt.items():
        lines += [
            "",
            f"**Rebuilt in production after the correction was staged ({table}):** "
            + ", ".join(str(d) for d in days)
            + ". A cutover leaves these days to production "
            "only with --skip-rebuilt; otherwise stage the correction again.",
        ]
    return "\n".join(lines) + "\n"
