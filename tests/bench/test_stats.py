"""core/stats.py on synthetic timestamp sets whose answers are known by construction."""

from __future__ import annotations

import math
import random

import pytest

from sgltui.core import stats


def test_percentile_interpolates_like_numpy():
    data = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
    # numpy.percentile(data, [50, 90, 99]) == [5.5, 9.1, 9.91]
    assert stats.percentile(data, 50) == pytest.approx(5.5)
    assert stats.percentile(data, 90) == pytest.approx(9.1)
    assert stats.percentile(data, 99) == pytest.approx(9.91)
    assert stats.percentile(data, 0) == 1.0 and stats.percentile(data, 100) == 10.0
    assert math.isnan(stats.percentile([], 50))


def test_summarize_population_std_and_order_independence():
    values = [4.0, 2.0, 8.0, 6.0]
    s = stats.summarize(values)
    assert s["mean"] == 5.0
    assert s["median"] == 5.0
    assert s["std"] == pytest.approx(math.sqrt(5.0))  # ddof=0: ((1+9+9+1)/4)
    assert s["max"] == 8.0 and s["min"] == 2.0 and s["count"] == 4


def test_mean_ci_uses_t_quantile():
    # n=3, mean 10, sample std 1 -> half width 4.303 * 1/sqrt(3)
    ci = stats.mean_ci([9.0, 10.0, 11.0])
    half = 4.303 / math.sqrt(3)
    assert ci["mean"] == pytest.approx(10.0)
    assert ci["std"] == pytest.approx(1.0)
    assert ci["ci_low"] == pytest.approx(10.0 - half)
    assert ci["ci_high"] == pytest.approx(10.0 + half)
    assert ci["cv"] == pytest.approx(0.1)
    # n=5 -> t=2.776 (df=4)
    ci5 = stats.mean_ci([1.0, 2.0, 3.0, 4.0, 5.0])
    assert ci5["ci_high"] - ci5["mean"] == pytest.approx(2.776 * math.sqrt(2.5) / math.sqrt(5))
    single = stats.mean_ci([7.0])
    assert single["mean"] == 7.0 and math.isnan(single["ci_low"])


def test_ci_overlap_is_a_tie():
    a = stats.mean_ci([10.0, 11.0, 12.0])
    b = stats.mean_ci([11.5, 12.5, 13.5])
    c = stats.mean_ci([30.0, 31.0, 32.0])
    assert stats.intervals_overlap(a, b)
    assert not stats.intervals_overlap(a, c)
    assert not stats.intervals_overlap(a, stats.mean_ci([11.0]))


def test_littles_law_average_concurrency():
    # 4 requests of 2 s each, back to back on 2 lanes over 4 s: always 2 in flight.
    intervals = [(0, 2), (2, 4), (0, 2), (2, 4)]
    e2e = [b - a for a, b in intervals]
    assert stats.avg_concurrency(e2e, 4.0) == pytest.approx(2.0)
    # back-to-back on one lane is never counted as two in flight
    assert stats.peak_concurrency(intervals) == 2


def test_peak_concurrency_sweep():
    intervals = [(0, 10), (1, 3), (2, 4), (2.5, 2.6), (5, 6)]
    assert stats.peak_concurrency(intervals) == 4  # at t=2.5: 0-10, 1-3, 2-4, 2.5-2.6
    assert stats.peak_concurrency([]) == 0


def test_steady_state_window_excludes_ramp_and_drain():
    # Ramp: one new request per second for 4 s, then 4 in flight from t=3 to t=20, then drain.
    intervals = [(0, 20), (1, 21), (2, 22), (3, 23)]
    # in flight: 1@0,2@1,3@2,4@3..20,3@20,2@21,1@22,0@23; r=0.8 -> need >= 3.2 -> [3, 20)
    assert stats.steady_state_window(intervals, 0.8) == (3, 20)
    # r=0.5 -> need >= 2 -> [1, 22)
    assert stats.steady_state_window(intervals, 0.5) == (1, 22)
    assert stats.steady_state_window([], 0.8) is None


def test_steady_state_throughput_counts_tokens_in_window_only():
    intervals = [(0, 20), (1, 21), (2, 22), (3, 23)]
    buckets = stats.TokenBuckets(origin=0.0, width=0.5)
    # 100 tokens/s during the window, 1000 tokens/s (a burst) outside it
    for k in range(46):
        t = k * 0.5 + 0.25
        buckets.add(t, 50.0 if 3 <= t < 20 else 500.0)
    ss, window = stats.steady_state_throughput(intervals, buckets, 0.8)
    assert window == (3, 20)
    assert ss == pytest.approx(100.0)


def test_token_buckets_peak_per_second_weights_tokens():
    b = stats.TokenBuckets(origin=100.0, width=0.1)
    # second 0: 10 chunks of 1 token; second 1: 3 chunks of 4 tokens (speculative) = 12 tokens
    for k in range(10):
        b.add(100.0 + k * 0.1 + 0.01, 1)
    for k in range(3):
        b.add(101.0 + k * 0.2 + 0.01, 4)
    assert b.peak_rate(1.0) == pytest.approx(12.0)
    assert b.total() == pytest.approx(22.0)
    # half of second 1's first bucket... prorated at the edges
    assert b.tokens_between(100.0, 101.0) == pytest.approx(10.0)
    assert b.tokens_between(100.05, 100.15) == pytest.approx(1.0)


def test_log_histogram_percentiles_close_to_exact():
    rng = random.Random(1)
    values = [rng.lognormvariate(-4, 1) for _ in range(20000)]
    h = stats.LogHistogram()
    for v in values:
        h.add(v)
    exact = sorted(values)
    for q in (50, 90, 99):
        assert h.percentile(q) == pytest.approx(stats.percentile(exact, q), rel=0.004)
    assert h.max == max(values)
    assert h.sum / h.count == pytest.approx(sum(values) / len(values))
    # weighted adds: one chunk of 4 tokens after 40 ms -> four 10 ms gaps
    w = stats.LogHistogram()
    w.add(0.040 / 4, 4)
    assert w.count == 4 and w.percentile(50) == pytest.approx(0.010, rel=0.002)


def closed_loop(lanes: int, per_request: float, turnaround: float, until: float):
    """Intervals of a closed loop: each lane sends its next request `turnaround` s after its last
    one ended, as the load generator does (the in-flight count dips at every completion)."""
    out = []
    for lane in range(lanes):
        t = lane * 0.01
        while t + per_request <= until:
            out.append((t, t + per_request))
            t += per_request + turnaround
    return out


def test_steady_state_window_bridges_the_loops_turnaround_but_not_a_stall():
    # Two lanes of 0.5 s requests, 1 ms between a lane's requests, for 40 s: the in-flight count
    # dips to 1 at every completion; the steady state is the whole run, not one request long
    # (it was: `steady tok/s` read n/a in every bench row).
    intervals = closed_loop(2, 0.5, 0.001, 40.0)
    start, end = stats.steady_state_window(intervals, 0.8)
    assert start == pytest.approx(0.01) and end > 39.0
    # a stall of a second in the middle is a real break: the longer half wins
    stalled = [(a, b) for a, b in intervals if b <= 15.0] + [
        (a + 1.0, b + 1.0) for a, b in intervals if a >= 15.0
    ]
    start, end = stats.steady_state_window(stalled, 0.8)
    assert start > 15.0 and end > 39.0
