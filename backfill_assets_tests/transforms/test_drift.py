"""The warning checks' robust bands: median and MAD by hand, floors, shares, too little history."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

import pytest

from backfill_assets.transforms.drift import (
    DayFigures,
    history_of,
    revenue_per_order_verdict,
    robust_band,
    row_count_verdict,
    share_verdict,
)


def day(rows, currencies=None, paid=0, revenue="0"):
    return DayFigures(rows, {"placed": rows}, currencies or {"USD": rows}, paid, Decimal(revenue))


def test_band_is_median_plus_minus_k_robust_sigma():
    # median 10; deviations 0,1,1,2,2 -> MAD 1; sigma 1.4826; k 3 -> +-4.4478
    band = robust_band([8, 9, 10, 11, 12], k=3, floor=0.0)
    assert band.median == 10
    assert band.lower == pytest.approx(10 - 4.4478) and band.upper == pytest.approx(10 + 4.4478)
    assert band.history_days == 5


def test_constant_history_uses_the_floor_not_a_zero_width_band():
    band = robust_band([100.0] * 10, k=4, floor=5.0)
    assert (band.lower, band.upper) == (95.0, 105.0)
    history = [day(100)] * 10
    assert row_count_verdict(day(104), history, 4, 7).passed  # within 5% of 100
    assert not row_count_verdict(day(94), history, 4, 7).passed


def test_a_volume_drop_fails_and_an_outlier_in_history_does_not_widen_the_band():
    history = [day(n) for n in (100, 98, 103, 101, 99, 102, 100, 1000)]  # one spike in history
    assert row_count_verdict(day(100), history, 4, 7).passed
    drop = row_count_verdict(day(40), history, 4, 7)
    assert not drop.passed and drop.actual == 40 and drop.band.upper < 120


def test_too_little_history_passes_without_a_band():
    verdict = row_count_verdict(day(1), [day(100)] * 6, 4, 7)
    assert verdict.passed and verdict.band is None


def test_a_currency_spike_fails_the_share_check_and_names_the_currency():
    usual = [day(100, {"USD": 50 + i % 3, "EUR": 50 - i % 3}) for i in range(10)]
    ok = share_verdict(day(100, {"USD": 51, "EUR": 49}), usual, "currency", 4, 7)
    assert ok.passed
    spike = share_verdict(day(100, {"USD": 15, "EUR": 35, "BRL": 50}), usual, "currency", 4, 7)
    assert not spike.passed
    # USD ~0.51 +- 4 * sqrt(.51 * .49 / 100) = +-0.2: 0.15 is out, EUR's 0.35 (of ~0.49) is in;
    # BRL was 0 every trailing day (band +-0.02)
    assert set(spike.out_of_band) == {"USD", "BRL"}
    assert spike.worst_key == "BRL" and spike.actual == 0.5


def test_revenue_per_order_is_paid_revenue_over_paid_orders():
    history = [day(10, paid=4, revenue="100.00")] * 8  # 25.00 per paid order
    assert revenue_per_order_verdict(day(10, paid=2, revenue="50.00"), history, 4, 7).passed
    high = revenue_per_order_verdict(day(10, paid=2, revenue="80.00"), history, 4, 7)
    assert not high.passed and high.actual == 40.0
    assert revenue_per_order_verdict(day(10, paid=0), history, 4, 7).passed  # no paid order


def test_history_is_the_trailing_days_less_the_held():
    d0 = date(2024, 3, 1)
    figures = {d0 - timedelta(days=n): day(n) for n in range(1, 40)}
    hist = history_of([d0], figures, held={d0 - timedelta(days=1)}, trailing_days=28)[d0]
    assert sorted(f.rows for f in hist) == list(range(2, 29))


def test_a_share_on_a_day_of_few_orders_gets_its_sampling_noise_as_band():
    # shares 0.30 every day: MAD 0; on 10 orders sqrt(.3 * .7 / 10) = 0.1449, times k 4 = 0.58
    usual = [day(100, {"USD": 30, "EUR": 70}) for _ in range(10)]
    assert share_verdict(day(10, {"USD": 1, "EUR": 9}), usual, "currency", 4, 7).passed
    # on 1,000 orders the noise is 0.058: a share of 0.20 is outside 0.30 +- 0.058
    many = share_verdict(day(1000, {"USD": 200, "EUR": 800}), usual, "currency", 4, 7)
    assert not many.passed
    assert many.band.upper - many.band.median == pytest.approx(4 * (0.3 * 0.7 / 1000) ** 0.5)
