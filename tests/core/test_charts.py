"""core.charts: the one block renderer (sparklines, the throughput plot) and the chart's axes,
legend and markers, without Textual."""

from __future__ import annotations

import math
import random
from collections import deque

import pytest

from sgltui.core import charts

T = 1764690000.0


def text(row: charts.Row) -> str:
    return "".join(t for t, _ in row)


def test_block_rows_scale_and_keep_missing_values_blank():
    assert charts.block_rows([0, 5, 10], 1, 0.0, 10.0) == ["▁▅█"]
    assert charts.block_rows([0, 5, 10], 2, 0.0, 10.0) == [" ▁█", "▁██"]  # 5 of 10: 9 of 16 eighths
    assert charts.block_rows([None, float("nan"), 1.0], 1, 0.0, 1.0) == ["  █"]
    assert charts.block_rows([0.01, 10], 1, 0.0, 10.0)[0][0] == "▁"  # small is still visible


def test_sparkline_buckets_by_index_with_min_max_scale():
    assert charts.index_buckets([1, 3, 5, 7], 2) == [2.0, 6.0]
    assert charts.sparkline([1, 2, 3, 4, 5, 6, 7, 8], 8) == "▁▂▃▄▅▆▇█"
    assert charts.sparkline([3, 3, 3], 3) == "▅▅▅"  # flat and positive: half height
    assert charts.sparkline([], 10) == ""


def test_time_columns_sit_on_absolute_time_so_a_new_sample_moves_only_the_last_column():
    points = [(T + t, float(t % 7)) for t in range(100)]
    before = charts.time_columns(points, 20, 5.0, T + 99)
    after = charts.time_columns([*points, (T + 100, 99.0)], 20, 5.0, T + 100)
    # T is a multiple of 5 s, so T+100 opens a new column: everything shifts by one.
    assert after[:-1] == before[1:] and after[-1] == 99.0
    same = charts.time_columns([*points, (T + 99.5, 50.0)], 20, 5.0, T + 99.5)
    assert same[:-1] == before[:-1] and same[-1] != before[-1]


def test_time_columns_fill_narrow_columns_but_not_real_gaps():
    dense = [(T + t, 1.0) for t in range(0, 20, 2)]  # a sample every 2 s, 1 s columns
    assert None not in charts.time_columns(dense, 18, 1.0, T + 18)[1:]
    gap = [(T, 1.0), (T + 1, 1.0), (T + 2, 1.0), (T + 15, 1.0)]
    assert charts.time_columns(gap, 16, 1.0, T + 15)[3:14] == [None] * 11


def test_y_ticks_are_round_and_sit_on_whole_rows():
    hi, labels = charts.y_ticks(240.0, 2)
    assert hi == 250 and labels == {0: "250", 2: "0"}
    hi, labels = charts.y_ticks(240.0, 9)
    assert hi == 240 and labels == {0: "240", 3: "160", 6: "80", 9: "0"}
    hi, labels = charts.y_ticks(1234.0, 4)
    assert hi >= 1234 and labels[0].endswith("k") and labels[4] == "0" and len(labels) >= 3
    assert charts.y_ticks(0.0, 3)[0] > 0  # an idle server still gets a scale


def test_time_axis_labels_fit_and_end_at_now():
    axis = charts.time_axis(80, 300.0)
    assert len(axis) == 80 and axis.startswith("-5m") and axis.endswith("now")
    assert "-4m" in axis and "-1m" in axis
    narrow = charts.time_axis(20, 300.0)
    assert len(narrow) == 20 and narrow.startswith("-5m") and narrow.endswith("now")


def chart(width: int, rows: int, markers=()):
    pts = [(T + t, 180 + 60 * math.sin(t / 7)) for t in range(300)]
    main = charts.ChartSeries("gen", "gen tok/s", "tok/s", pts, "189")
    others = [
        charts.ChartSeries("run", "running", "run", [(T + t, 4.0) for t in range(300)], "4"),
        charts.ChartSeries("kv", "KV usage", "KV", [(T + t, 0.3) for t in range(300)], "30%"),
    ]
    return charts.throughput_chart(main, others, list(markers), width, rows)


def test_chart_has_legend_scale_time_axis_and_one_row_per_other_series():
    rows = chart(60, 4)
    lines = [text(r) for r in rows]
    assert all(len(line) == 60 for line in lines[1:])
    assert lines[0] == "■ gen tok/s 189  ■ running 4  ■ KV usage 30%"
    assert lines[1].lstrip().startswith("240┤") or lines[1].lstrip()[0].isdigit()
    assert lines[5].strip().startswith("0└-5m") and lines[5].endswith("now")
    assert lines[6].lstrip().startswith("run┤") and lines[7].lstrip().startswith("KV┤")
    roles = {role for row in rows for _, role in row}
    assert {"gen", "run", "kv", charts.AXIS, charts.TEXT} <= roles


def test_legend_uses_short_names_then_wraps_when_narrow():
    lines = [text(r) for r in chart(30, 2)]
    assert lines[0].startswith("■ tok/s 189") and "■ run 4" in lines[0]
    assert "■ KV 30%" in lines[0] + lines[1]


def test_a_marker_is_a_line_across_the_rows_with_its_label_on_the_top_row():
    rows = chart(60, 4, [charts.ChartMarker(T + 150, "demo-no-mtp")])
    lines = [text(r) for r in rows]
    assert "│demo-no-mtp" in lines[1] or "demo-no-mtp│" in lines[1]
    marker_cols = {i for i, ch in enumerate(lines[1]) if ch == "│"}
    assert len(marker_cols) == 1
    col = marker_cols.pop()
    for row in rows[2:5] + rows[6:]:  # every plot and series row has the marker's colour there
        pos = 0
        for t, role in row:
            if pos <= col < pos + len(t):
                assert role == charts.MARKER
            pos += len(t)
    # outside the window: left out
    old = [text(r) for r in chart(60, 4, [charts.ChartMarker(T - 400, "gone")])]
    assert not any("gone" in line for line in old)


def test_filled_cells_one_rule_at_the_edges():
    """Rounded down, a non-zero value shows at least one cell, full only when full."""
    cells = charts.filled_cells
    assert cells(0, 20) == 0 and cells(0.0, 20) == 0
    assert cells(None, 20) == 0 and cells(float("nan"), 20) == 0 and cells(-0.5, 20) == 0
    assert cells(1e-9, 20) == 1  # tiny but not nothing
    assert cells(0.5, 20) == 10 and cells(0.5, 7) == 3  # 3.5 cells: rounded down
    assert cells(0.999, 20) == 19 and cells(0.9999999, 20) == 19  # not done: not full
    assert cells(1, 20) == 20 and cells(1.0, 20) == 20 and cells(7.5, 20) == 20
    assert cells(float("inf"), 20) == 0  # not a number of anything: nothing drawn
    assert cells(0.29, 100) == 29 and cells(0.7, 10) == 7  # float error never drops a cell
    assert cells(0.5, 0) == 0 and cells(0.5, 1) == 1 and cells(1.0, 1) == 1


def test_markers_close_together_never_run_their_labels_together():
    """Swaps a few seconds apart (a pool roll, issue 37): each label is whole, cut with an
    ellipsis, or left out, and a blank cell parts it from the next label. It read
    `a:demo-mtp││tp││tp│` (two labels cut to their last two letters)."""
    markers = [
        charts.ChartMarker(T + 240, "a:demo-mtp"),
        charts.ChartMarker(T + 250, "b:demo-mtp"),
        charts.ChartMarker(T + 260, "c:demo-mtp"),
    ]
    for width in (60, 80, 120):
        row = chart(width, 4, markers)[1]
        top = text(row)
        # the marker-coloured cells: lines and labels, a blank (no label) between lines
        marked = "".join(t if role == charts.MARKER else " " for t, role in row)
        words = marked.replace("│", " ").split()
        for w in words:
            assert w in {"a:demo-mtp", "b:demo-mtp", "c:demo-mtp"} or (
                w.endswith("…") and len(w) >= 4
            ), (width, top)
        assert any(w.startswith("c:de") for w in words), top  # the newest, whole or cut
        assert "mtpb" not in top and "mtp│tp" not in top and "││tp" not in top, top


@pytest.mark.parametrize("width", [40, 64, 150])
def test_a_newest_column_that_holds_means_the_same_layout(width):
    """NewestColumn stands in for the key on a sample that repeats every newest value: over a
    run of samples (idle at 0, a steady non-zero value, bursts, jitter, a gap, a series that
    flips between two values inside one column), whenever it says the column holds, the layout
    is the one worked out when it was taken; and on an idle stretch it mostly holds."""
    rng = random.Random(11)
    hist: dict[str, deque] = {n: deque(maxlen=600) for n in ("gen", "run", "kv")}
    newest = taken_layout = None
    held = idle_steps = 0
    t = T
    for step in range(700):
        t += 1.0 + rng.uniform(-0.2, 0.2)
        if 300 <= step < 320:
            continue  # a gap
        busy = 150 <= step < 250
        flip = 400 <= step < 450  # 0 and 5 in turn: a column of mixed values never holds
        for name in hist:
            value = rng.uniform(50, 200) if busy else (5.0 * (step % 2) if flip else 3.0)
            hist[name].append((t, value))
        # (the series themselves, as the widget passes the model's: holds() checks they are
        # the objects it was taken of)
        main, *others = [charts.ChartSeries(n, n, n, p, f"{p[-1][1]:.0f}") for n, p in hist.items()]
        chart = charts.ChartInput(main, others, [], width, 6)
        if newest is not None and newest.holds(lambda name: hist[name]):
            held += 1
            assert chart.layout() == taken_layout, f"step {step}: held, but the layout moved"
            continue
        newest, taken_layout = charts.NewestColumn.of(chart), chart.layout()
        if not busy and not flip and step > 60:
            idle_steps += 1
    assert held > 0 and held > idle_steps  # idle seconds mostly skip the key


@pytest.mark.parametrize("width", [12, 64, 150])
def test_columns_kept_between_layouts_are_the_columns_summed_afresh(width):
    """ColumnMemo re-sums only the columns new points fall in: over samples that arrive
    fast, slow, in bursts, with gaps longer than the window, a history short enough to lose
    points from inside the window, and a series replaced by another, its columns are
    exactly (the same floats) those time_columns sums from every point."""
    rng = random.Random(5)
    memo = charts.ColumnMemo()
    short: deque = deque(maxlen=40)  # loses points from inside a 300 s window
    long: deque = deque(maxlen=600)
    t, resummed = T, 0
    for step in range(1500):
        t += rng.choice([0.2, 1.0, 1.0, 1.0, 3.5, 9.0]) + (400.0 if step == 700 else 0.0)
        value = rng.choice([0.0, 0.1, 3.0, rng.uniform(0, 500), None, float("nan")])
        short.append((t, value))
        long.append((t, value))
        if step == 1000:  # another series object, same stamps (a history read again)
            long = deque([(ts, (v or 0.0) + 1.0) for ts, v in long], maxlen=600)
        if step in (1200, 1300):  # the same object read again: older points, other values
            again = [(ts - 0.5, (v or 0.0) + 2.0) for ts, v in long]
            long.clear()
            long.extend(again[-300:] if step == 1300 else again)
        spc = 300.0 / width
        for name, points in (("short", short), ("long", long)):
            gap = charts.fill_gap(points, spc, math.floor(t / spc) - width + 1)
            kept = memo.columns(name, points, width, spc, t, gap)
            assert kept == charts.time_columns(points, width, spc, t, gap), (step, name)
            resummed += 1
    assert resummed == 3000


@pytest.mark.parametrize("maxlen", [600, 120])
def test_a_chart_laid_out_with_kept_columns_is_the_one_laid_out_afresh(maxlen):
    """The throughput chart through a ColumnMemo: the same layout as without, sample after
    sample (the widget keeps one per chart), over idle stretches, bursts, a gap, a swap
    marker, and a history short enough to drop points inside the window."""
    rng = random.Random(8)
    memo = charts.ColumnMemo()
    hist: dict[str, deque] = {n: deque(maxlen=maxlen) for n in ("gen", "run", "kv")}
    marks: list[charts.ChartMarker] = []
    t = T
    for step in range(500):
        t += 1.0 + rng.uniform(-0.3, 0.3) + (60.0 if step == 300 else 0.0)
        busy = 100 <= step < 200
        if step == 250:
            marks.append(charts.ChartMarker(t, "demo-mtp"))
        for name in hist:
            value = rng.uniform(50, 200) if busy else rng.choice([0.0, 0.0, 0.1, 3.0])
            hist[name].append((t, value))
        main, *others = [charts.ChartSeries(n, n, n, p, "-") for n, p in hist.items()]
        fresh = charts.ChartInput(main, others, marks, 90, 6)
        kept = charts.ChartInput(main, others, marks, 90, 6, memo=memo)
        assert kept.layout() == fresh.layout(), step


def test_a_newest_column_does_not_hold_for_a_history_read_after_it():
    """Seen as a flaky snapshot: the chart drew the status's one sample, then the agent's
    history (older stamps, into new series) arrived, and the shortcut said "nothing new"
    because no point was newer than the one it held. A replaced series, or one emptied and
    filled again in place, does not hold."""
    one: deque = deque([(T + 300.0, 180.0)], maxlen=600)
    chart = charts.ChartInput(charts.ChartSeries("gen", "gen", "gen", one), [], [], 80, 6)
    newest = charts.NewestColumn.of(chart)
    assert newest is not None and newest.holds(lambda name: one)  # nothing new: holds
    history: deque = deque([(T + t, 270.0) for t in range(0, 300, 2)], maxlen=600)
    assert not newest.holds(lambda name: history)  # another object, older stamps
    one.clear()
    one.extend(history)
    assert not newest.holds(lambda name: one)  # the same object, read again
    one.append((T + 300.5, 180.0))
    assert not newest.holds(lambda name: one)


def test_a_sample_in_the_newest_column_redraws_that_column_only(monkeypatch):
    """Laid out through a ColumnMemo, a sample that lands in the column the last one did (most
    samples: a column holds several seconds) draws that column's block characters alone and
    scans its new points alone for the scale's top, not the whole window; the layout is the
    one laid out afresh."""
    drawn: list[int] = []
    scanned: list[int] = []
    block_rows, window_top = charts.block_rows, charts.window_top

    def counted_rows(columns, *args, **kwargs):
        drawn.append(len(columns))
        return block_rows(columns, *args, **kwargs)

    def counted_top(points, after, stop_at=0):
        scanned.append(len(points) - stop_at)
        return window_top(points, after, stop_at)

    monkeypatch.setattr(charts, "block_rows", counted_rows)
    monkeypatch.setattr(charts, "window_top", counted_top)
    memo = charts.ColumnMemo()
    hist: dict[str, deque] = {n: deque(maxlen=600) for n in ("gen", "run", "kv")}
    width, t = 90, T
    spc = 300.0 / (width - 4)  # the plot's columns (a gutter of 4)

    def lay_out() -> tuple[charts.ChartLayout, charts.ChartLayout]:
        main, *others = [charts.ChartSeries(n, n, n, p, "-") for n, p in hist.items()]
        kept = charts.ChartInput(main, others, [], width, 6, memo=memo).layout()
        return kept, charts.ChartInput(main, others, [], width, 6).layout()

    for step in range(200):  # a busy window: every sample changes every newest column
        t += 1.0
        for i, name in enumerate(hist):
            hist[name].append((t, 100.0 + 40 * math.sin(step / 7 + i)))
    lay_out()
    t = (math.floor(t / spc) + 1) * spc + 0.01  # the first sample of a new column
    for name in hist:
        hist[name].append((t, 120.0))
    lay_out()
    drawn.clear()
    scanned.clear()
    t += 0.4  # the next sample, in the same column, other values
    for i, name in enumerate(hist):
        hist[name].append((t, 125.0 + i))
    kept, fresh = lay_out()
    assert kept == fresh
    assert drawn[:3] == [1, 1, 1]  # with the memo: the newest column of each series
    assert scanned[0] == 1  # the scale's top: the new point only
    assert max(drawn) == width - 4 and max(scanned) > 100  # (afresh: the whole window)


@pytest.mark.parametrize("maxlen", [600, 40])
def test_the_scale_top_kept_between_samples_is_the_one_scanned_afresh(maxlen):
    """ColumnMemo.top scans only new points while the top it holds is in the window: over
    spikes that leave the window, ties, gaps, a short history losing points and a series
    read again, it is window_top of the whole window (value and stamp)."""
    rng = random.Random(11)
    memo = charts.ColumnMemo()
    points: deque = deque(maxlen=maxlen)
    t = T
    for step in range(1500):
        t += rng.choice([0.5, 1.0, 1.0, 2.0, 30.0]) + (400.0 if step == 600 else 0.0)
        points.append((t, rng.choice([0.0, 5.0, 5.0, rng.uniform(0, 9), 50.0, None, math.nan])))
        if step == 900:  # the same object read again, older stamps
            again = [(ts - 0.5, v) for ts, v in points]
            points.clear()
            points.extend(again)
        if step == 1100:
            points = deque(points, maxlen=maxlen)  # another object
        after = t - 300.0
        assert memo.top("gen", points, after) == charts.window_top(points, after), step


def test_a_window_moved_on_by_a_column_draws_its_newest_columns_only(monkeypatch):
    """Laid out through a ColumnMemo, a sample that starts the next column (the layout every
    few seconds) moves the window on by one: at the same scale, the block characters of the
    columns drawn already are kept and only the column completed since and the new one are
    drawn (two columns a series, not the whole width); a scale that moved draws the whole
    width again. The layout is the one laid out afresh each time."""
    drawn: list[int] = []
    block_rows = charts.block_rows

    def counted_rows(columns, *args, **kwargs):
        drawn.append(len(columns))
        return block_rows(columns, *args, **kwargs)

    monkeypatch.setattr(charts, "block_rows", counted_rows)
    memo = charts.ColumnMemo()
    hist: dict[str, deque] = {n: deque(maxlen=600) for n in ("gen", "run", "kv")}
    width, t = 90, T
    spc = 300.0 / (width - 4)  # the plot's columns (a gutter of 4)

    def lay_out() -> None:
        main, *others = [charts.ChartSeries(n, n, n, p, "-") for n, p in hist.items()]
        kept = charts.ChartInput(main, others, [], width, 6, memo=memo).layout()
        assert kept == charts.ChartInput(main, others, [], width, 6).layout()

    for step in range(400):  # a full window, values that keep each series' scale
        t += 1.0
        for i, name in enumerate(hist):
            hist[name].append((t, 100.0 + 10 * i + 5 * math.sin(step / 3)))
    lay_out()
    shifted = 0
    for _ in range(5):  # the first sample of each of the next columns
        t = (math.floor(t / spc) + 1) * spc + 0.01
        for i, name in enumerate(hist):
            hist[name].append((t, 100.0 + 10 * i))
        drawn.clear()
        lay_out()
        shifted += drawn[:3] == [2, 2, 2]
    assert shifted >= 4  # (a column leaving may take a series' top with it: drawn afresh)
    t = (math.floor(t / spc) + 1) * spc + 0.01
    for name in hist:
        hist[name].append((t, 900.0))  # a new peak: every scale moves
    drawn.clear()
    lay_out()
    assert drawn[:3] == [width - 4] * 3
