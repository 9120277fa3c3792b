"""Comparison, best concurrency and time-to-finish-N on synthetic results with known answers."""

from __future__ import annotations

import math

import pytest

from sgltui.bench import compare


def entry(profile, conc, tok_s, repeat=0, ttft=10.0, tpot=5.0, steady=None):
    return {
        "profile": profile,
        "command_hash": f"h-{profile}",
        "server_version": "0.5.23",
        "concurrency": conc,
        "repeat": repeat,
        "error": None,
        "metrics": {
            "output_throughput": tok_s,
            "steady_state_output_throughput": steady if steady else tok_s,
            "request_throughput": tok_s / 100,
            "median_ttft_ms": ttft,
            "p99_ttft_ms": ttft * 3,
            "median_tpot_ms": tpot,
            "completed": 100,
            "failed": 0,
            "max_concurrent_requests": conc,
        },
    }


def test_best_concurrency_and_job_time_with_ci():
    results = []
    for k, (a, b) in enumerate([(900.0, 1900.0), (1000.0, 2000.0), (1100.0, 2100.0)]):
        results += [entry("mtp", 4, a, k), entry("mtp", 16, a * 0.9, k)]
        results += [entry("no-mtp", 4, b / 3, k), entry("no-mtp", 16, b, k)]
    cmp = compare.build(
        results, job_completions=1_000_000, job_output_len=1000, bench_output_len=1000
    )
    assert cmp["best"]["mtp"]["concurrency"] == 4
    assert cmp["best"]["no-mtp"]["concurrency"] == 16
    job = cmp["job"]
    first, second = job["estimates"]
    assert first["profile"] == "no-mtp"
    # 1e9 tokens at a mean of 2000 tok/s -> 500,000 s
    assert first["seconds"] == pytest.approx(500_000.0)
    half = 4.303 * 100.0 / math.sqrt(3)  # t(df=2) * sample std / sqrt(n)
    assert first["seconds_low"] == pytest.approx(1e9 / (2000 + half))
    assert first["seconds_high"] == pytest.approx(1e9 / (2000 - half))
    assert second["seconds"] == pytest.approx(1e6)
    rec = job["recommendation"]
    assert rec.startswith("Use no-mtp at concurrency 16")
    assert "2.00x faster than mtp" in rec and "95% CI" in rec and "tie" not in rec


def test_overlapping_intervals_are_called_a_tie():
    results = [entry("a", 8, v, k) for k, v in enumerate([1000.0, 1100.0, 1200.0])]
    results += [entry("b", 8, v, k) for k, v in enumerate([1050.0, 1150.0, 1250.0])]
    cmp = compare.build(results, job_completions=1000, job_output_len=100, bench_output_len=100)
    assert cmp["job"]["estimates"][0]["profile"] == "b"
    assert "tie within the 95% CIs" in cmp["job"]["recommendation"]


def test_single_runs_say_uncertainty_is_unknown_and_length_mismatch():
    results = [entry("a", 8, 1000.0), entry("b", 8, 500.0)]
    cmp = compare.build(results, job_completions=902_087, job_output_len=1000, bench_output_len=128)
    rec = cmp["job"]["recommendation"]
    assert "902,087 completions of ~1,000 output tokens" in rec
    assert "Uncertainty unknown" in rec and "--repeat 3" in rec
    assert "--output-len 1000" in rec
    assert "no CI" in compare.render_text(cmp)


def test_failed_profile_is_shown_not_ranked():
    results = [
        entry("a", 8, 1000.0),
        {
            "profile": "b",
            "concurrency": 8,
            "repeat": 0,
            "metrics": None,
            "error": "profile b did not come up: oom",
        },
    ]
    cmp = compare.build(results, job_completions=10, job_output_len=10)
    assert list(cmp["best"]) == ["a"]
    text = compare.render_text(cmp)
    assert "! b c=8: profile b did not come up: oom" in text
    assert [e["profile"] for e in cmp["job"]["estimates"]] == ["a"]


def test_markdown_and_csv_rows():
    results = [entry("a", 1, 100.0), entry("a", 4, 300.0)]
    cmp = compare.build(results)
    md = compare.render_markdown(cmp)
    assert "| a | 4 * | 300 |" in md  # three significant digits
    rows = compare.csv_rows(cmp)
    assert [r["concurrency"] for r in rows] == [1, 4]
    assert [r["best"] for r in rows] == [False, True]
    assert rows[1]["output_tok_s_ci_low"] == ""  # one run: no CI, not "nan"


def test_job_estimates_read_as_rough_durations():
    # the recommendation's durations come from core/units.estimate (tests/core/test_units.py)
    # its uncertainty as the table says it (issue 51 item 13: three formats for one comparison)
    ci = {"n": 3, "mean": 100.0, "ci_low": 90.0, "ci_high": 110.0}
    est = [{"profile": "a", "concurrency": 8, "seconds": 600.0, "seconds_low": 545.0,
            "seconds_high": 667.0, "ci": ci, "repeats": 3}]  # fmt: skip
    assert "take about 10 min (95% CI ±10%)" in compare.recommend(est, 100, 200, 200)


def test_one_ranking_metric_for_all_profiles():
    # a has no steady-state figure (run too short): every profile is ranked on output tok/s
    a = entry("a", 8, 1000.0)
    a["metrics"]["steady_state_output_throughput"] = None
    b = entry("b", 8, 900.0, steady=5000.0)
    cmp = compare.build([a, b], job_completions=100, job_output_len=10)
    assert {r["rank_metric"] for r in cmp["rows"]} == {"output_throughput"}
    assert cmp["job"]["estimates"][0]["profile"] == "a"


def test_narrow_interval_is_shown_as_percent():
    results = [entry("a", 8, v, k) for k, v in enumerate([1000.0, 1000.2, 1000.4])]
    cmp = compare.build(results, job_completions=10**6, job_output_len=1000)
    assert "95% CI ±0.05%" in cmp["job"]["recommendation"]


def test_steady_column_of_closed_loop_runs_reads_a_figure():
    # What `sgltui bench` prints for a closed loop at c=1 and c=2 (40 s each, 1 ms turnaround):
    # the steady column held "n/a" in every row, as the window ended at the first completion.
    from sgltui.bench.metrics import compute_metrics
    from sgltui.core import stats
    from tests.bench.test_stats import closed_loop

    results = []
    for conc in (1, 2):
        intervals = closed_loop(conc, 0.5, 0.001, 40.0)
        buckets = stats.TokenBuckets(origin=0.0)
        records = []
        for a, b in intervals:
            records.append({"t_send": a, "ok": True, "ttft": 0.01, "e2e": b - a, "out": 100,
                            "in": 10, "usage": "server"})  # fmt: skip
            for k in range(100):
                buckets.add(a + (b - a) * (k + 0.5) / 100, 1)
        m = compute_metrics(records, stats.LogHistogram(), buckets)
        results.append({"profile": "p", "concurrency": conc, "repeat": 0, "metrics": m})
    cmp = compare.build(results)
    steady = [float(row[3]) for row in compare.table_rows(cmp)]  # "n/a" raised here
    # c lanes of 100 tokens each 0.501 s
    assert steady == [pytest.approx(c * 100 / 0.501, rel=0.05) for c in (1, 2)]
    assert "by steady-state output tok/s" in compare.render_text(cmp)


def test_steady_column_shows_each_rows_figure_when_ranking_falls_back():
    a = entry("a", 8, 1000.0)
    a["metrics"]["steady_state_output_throughput"] = None
    b = entry("b", 8, 900.0, steady=950.0)
    rows = compare.table_rows(compare.build([a, b]))
    assert [r[3] for r in rows] == ["n/a", "950"]


def test_one_comparison_says_its_uncertainty_one_way():
    """Issue 51 item 13: the table said '1.23k ± 12.3', the job lines '95% CI 8.8 h-9.4 h' and
    a narrow one '95% CI ±0.05%'. Each is the 95% CI as a share of the mean now."""
    results = [entry(p, 8, v, k) for p, vals in (("a", (1000.0, 1040.0, 960.0)),
               ("b", (500.0, 510.0, 490.0))) for k, v in enumerate(vals)]  # fmt: skip
    cmp = compare.build(results, job_completions=10**6, job_output_len=1000)
    text = compare.render_text(cmp)
    assert [r[2] for r in compare.table_rows(cmp)] == ["1.00k ±9.9%", "500 ±5%"]
    job_lines = [line for line in text.splitlines() if " at c=8 " in line]
    assert [line.split("(")[-1] for line in job_lines] == ["95% CI ±9.9%)", "95% CI ±5%)"]
    assert "(95% CI ±9.9%)" in cmp["job"]["recommendation"]
    assert " - " not in text.split("Time to finish")[1] and "h-" not in text
