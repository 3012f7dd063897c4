"""Landing files drawn by hypothesis to hold the raw reader to the contract, and an independent
classifier of their records: what the fault harness's fuzz (``bench/chaos.py``) lands and the
contract's independent jobs are checked on (``contract_feed.py``).

The files are random bytes, invalid UTF-8, NUL bytes, very long lines, deeply nested JSON,
duplicate keys, amounts at the edges of DECIMAL(18,2), timestamps at zone and calendar extremes,
and names with spaces, unicode or ``..``."""

from __future__ import annotations

import json
from datetime import date

from backfill_assets.days import days_between
from backfill_assets_testkit.reference import judge

# the contract's max lateness the feeds are judged with
LATENESS = 7
FUZZ_ARRIVALS = days_between(date(2024, 1, 2), date(2024, 1, 6))
# Timestamps at the edges: zones up to +-18:00 (and past it), years 1 and 9999, leap days,
# 24:00, fractions of 1 to 10 digits, lower-case t/z, no zone.
EXTREME_TIMES = (
    "0001-01-01T00:00:00Z",
    "0001-01-01T00:00:00+00:01",
    "0001-01-01T00:00:00-18:00",
    "9999-12-31T23:59:59.999999999Z",
    "9999-12-31T23:59:59-00:01",
    "2024-01-03T00:00+18:00",
    "2024-01-03T00:00:00+18:01",
    "2024-01-02T23:59:59.9999999999Z",
    "2024-02-29T12:00:00Z",
    "2023-02-29T12:00:00Z",
    "2024-01-03T24:00:00Z",
    "2024-01-03t10:00:00z",
    "2024-01-03T10:00:00",
    "2024-01-03T10:00:00.Z",
    "2024-01-03 10:00:00Z",
    "2024-01-02T23:30:00-00:30",
    "2024-01-03T10:00:00+05:60",
    "+2024-01-03T10:00:00Z",
    "2024-1-3T10:00:00Z",
)
# Amounts at the edges of DECIMAL(18,2) and of the contract's pattern.
EDGE_AMOUNTS = (
    "999999999999.99",
    "999999999999",
    "9999999999999",
    "0",
    "0.00",
    "0.001",
    "1.5",
    "12.500",
    "1e3",
    "-1.00",
    "+1.00",
    " 1.00",
    "1.",
    ".5",
    "00000000001.10",
    "١٢٣",
)


def _fuzz_strategies():
    """Hypothesis strategies: a landing file (folder day, name, lines as bytes)."""
    from hypothesis import strategies as st

    text = st.text(max_size=12)
    when = st.one_of(
        st.sampled_from(EXTREME_TIMES),
        st.builds(
            lambda d, h, m, s, frac, zone: f"{d.isoformat()}T{h:02d}:{m:02d}:{s:02d}{frac}{zone}",
            st.dates(date(2023, 12, 20), date(2024, 1, 8)),
            st.integers(0, 23),
            st.integers(0, 59),
            st.integers(0, 59),
            st.sampled_from(("", ".5", ".123456789")),
            st.sampled_from(("Z", "+00:00", "-08:00", "+05:30", "+14:00", "-12:00")),
        ),
    )
    amount = st.one_of(
        st.sampled_from(EDGE_AMOUNTS),
        st.decimals(0, 10**12, places=2).map(str),
        st.integers(0, 10**13),
    )
    value = st.one_of(text, st.none(), st.integers(), st.booleans(), st.just([]), st.just({}))
    record = st.fixed_dictionaries(
        {
            "order_id": st.one_of(st.text(min_size=1, max_size=70), value),
            "customer_id": st.one_of(st.text(min_size=1, max_size=8), value),
            "event_time": st.one_of(when, value),
            "updated_at": st.one_of(when, value),
            "status": st.sampled_from(("placed", "paid", "cancelled", "PAID", "", "refunded")),
            "amount": amount,
            "currency": st.sampled_from(("USD", "EUR", "usd", "US", "", "€UR")),
            "country": st.sampled_from(("US", "DE", "us", "USA", "")),
        },
        optional={"extra": value},
    )

    @st.composite
    def line(draw) -> bytes:
        kind = draw(
            st.sampled_from(
                (
                    "record",
                    "record",
                    "bytes",
                    "not-utf8",
                    "nul",
                    "long",
                    "nested",
                    "duplicate-key",
                    "missing",
                )
            )
        )
        fields_ = dict(draw(record))
        if kind == "missing":
            fields_.pop(draw(st.sampled_from(sorted(fields_))))
        body = json.dumps(fields_, ensure_ascii=draw(st.booleans())).encode()
        if kind == "bytes":
            return draw(st.binary(max_size=80))
        if kind == "not-utf8":
            at = draw(st.integers(0, len(body)))
            return (
                body[:at]
                + draw(
                    st.sampled_from(
                        (
                            b"\xff",
                            b"\xc0\xaf",
                            b"\xed\xa0\x80",
                            b"\xe2\x82",
                            b"\xf4\x90\x80\x80",
                            b"\x80",
                        )
                    )
                )
                + body[at:]
            )
        if kind == "nul":
            at = draw(st.integers(0, len(body)))
            return body[:at] + b"\x00" + body[at:]
        if kind == "long":
            return body[:-1] + b',"pad":"' + b"x" * draw(st.integers(100_000, 1_500_000)) + b'"}'
        if kind == "nested":
            depth = draw(st.integers(100, 20_000))
            return body[:-1] + b',"deep":' + b'{"a":' * depth + b"1" + b"}" * depth + b"}"
        if kind == "duplicate-key":
            key = draw(st.sampled_from(sorted(fields_)))
            return (
                body[:-1] + b',"' + key.encode() + b'":' + json.dumps(fields_[key]).encode() + b"}"
            )
        return body

    name = st.builds(
        lambda stem, suffix: stem + suffix,
        st.one_of(
            st.sampled_from(
                (
                    "a b",
                    "été ☃",
                    "x..y",
                    "..",
                    "_inflight",
                    ".hidden",
                    "a%20b",
                    "a+b",
                    "#[{*?}]",
                    "日本",
                    "sp ace ",
                )
            ),
            st.text(
                st.characters(blacklist_characters="/\x00", blacklist_categories=("Cs",)),
                min_size=1,
                max_size=12,
            ),
        ),
        st.sampled_from((".jsonl", ".jsonl", ".jsonl", ".JSONL", ".jsonl.tmp", ".json")),
    )
    lines = st.lists(line(), min_size=0, max_size=12)
    separators = st.sampled_from((b"\n", b"\r\n", b"\n\n", b"\n \t\n"))
    return st.tuples(
        st.sampled_from(FUZZ_ARRIVALS),
        name,
        lines,
        separators,
        st.sampled_from((b"", b"\n", b"\r\n")),
    )


def draw_fuzz_cases(n: int, seed: int) -> list[tuple[date, str, bytes]]:
    """``n`` landing files drawn by hypothesis: (arrival date, file name, content)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as seeded

    drawn: list[tuple[date, str, bytes]] = []

    @seeded(seed)
    @settings(
        max_examples=n,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(_fuzz_strategies())
    def collect(case) -> None:
        day, name, lines, separator, ending = case
        drawn.append((day, name, separator.join(lines) + ending))

    collect()
    return drawn


def classify(content: bytes, arrival: date) -> list[tuple[int, str | None, str | None]]:
    """(line number, payload or None when not UTF-8, reason) of each record of a landed file,
    by the contract's rules: the reference's ``judge``, and ``malformed_json`` for a line that is
    not UTF-8 (JSON text is UTF-8). Independent of the pipeline's reader."""
    out: list[tuple[int, str | None, str | None]] = []
    for number, raw in enumerate(content.split(b"\n"), start=1):
        raw = raw.removesuffix(b"\r")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            out.append((number, None, "malformed_json"))
            continue
        if text and not text.isspace():
            out.append((number, text, judge(text, arrival, LATENESS)[0]))
    return out
