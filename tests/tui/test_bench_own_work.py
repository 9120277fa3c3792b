"""bench/bench_tui_idle.py's same-process measure of sgltui's own work (issue 49's budget):
the app alternates live and floor phases in one pseudo-terminal and reports each phase's CPU.
Run short here: the figures are the bench's; this checks that the measure runs to its end,
reports both phases and leaves no process behind."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import psutil
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_tui_idle.py"


@pytest.mark.slow
def test_the_same_process_measure_reports_a_live_and_a_floor_phase(monkeypatch):
    monkeypatch.setenv("SGLTUI_BENCH_AB_PHASE_S", "2")
    monkeypatch.setenv("SGLTUI_BENCH_AB_CYCLES", "1")
    monkeypatch.setenv("SGLTUI_BENCH_SLOTS", "8")
    spec = importlib.util.spec_from_file_location("bench_tui_idle_under_test", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    pairs = bench.measure_ab()
    # One cycle: CPU seconds per wall second of one process, a share of one core, each phase.
    assert len(pairs) == 1, pairs
    live, floor = pairs[0]
    assert 0.0 < live < 1.0 and 0.0 < floor < 1.0, (live, floor)
    # The budget's figure of those pairs: their mean and median of live less floor.
    assert bench.own_work([(0.3, 0.1), (0.2, 0.2), (0.5, 0.1)]) == pytest.approx((0.2, 0.2))
    left = {p.pid for p in psutil.Process().children(recursive=True)} - before
    assert not left, left
