"""The throughput chart in the running app: axis labels, legend and a swap's marker, at the
sizes the layout supports, driven through a scripted swap (profile key -> `swap` op -> the
agent's swap.done event)."""

from __future__ import annotations

import os
import sys

import pytest

from sgltui.core import charts, units
from sgltui.tui.screens import DrainChoice
from sgltui.tui.widgets.throughput import ThroughputPane
from tests.support.scripted import T0, make_sample

from .helpers import ScriptedSource, app_with, ops, status_with, until


def chart_text(chart: ThroughputPane) -> list[str]:
    return [chart.render_line(y).text for y in range(chart.size.height)]


def swap_agent(op, args, src):
    """The agent's answer to a swap: it is done at once, then the samples go on."""
    if op == "swap":
        src.feed(
            {
                "push": "event",
                "data": {
                    "v": 1,
                    "ts": T0 + 61,
                    "type": "swap.done",
                    "slot": "0",
                    "from": "demo-mtp",
                    "to": args["profile"],
                    "ok": True,
                    "timings_s": {"total": 9.0},
                },
            }
        )
        for t in range(62, 90):
            src.feed({"push": "sample", "data": make_sample(t)})
    return None  # the scripted reply: accepted


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 50)])
async def test_axes_legend_and_swap_marker_after_a_scripted_swap(size):
    samples = [{"push": "sample", "data": make_sample(t)} for t in range(1, 60)]
    src = ScriptedSource(status_with(running=0), samples, on_call=swap_agent)
    app = app_with(src)
    async with app.run_test(size=size) as pilot:
        chart = app.query_one(ThroughputPane)
        await until(pilot, lambda: len(app.model.series["gen_throughput"]) >= 59)
        await pilot.pause(0.2)
        before = chart_text(chart)
        assert not any("demo-no-mtp" in line for line in before)
        await pilot.press("1")  # demo-no-mtp's key; requests run, so it asks how to drain
        await until(pilot, lambda: isinstance(app.screen, DrainChoice))
        await pilot.press("f")
        await until(pilot, lambda: ops(src, "swap"))
        await until(pilot, lambda: any("demo-no-mtp" in line for line in chart_text(chart)))
        await until(pilot, lambda: len(app.model.series["gen_throughput"]) >= 87)
        await pilot.pause(0.2)
        lines = chart_text(chart)
        shown = "\n".join(lines)
        # legend: a swatch per series with its name and latest value
        legend = " ".join(line for line in lines if "■" in line)
        assert lines[0].startswith("■ ")
        for name in ("tok/s", "run", "queue", "KV"):
            assert f"■ {name}" in legend or f"■ gen {name}" in legend or name in legend
        # y-axis: a round maximum at the top, 0 on the time axis
        top = lines[[i for i, line in enumerate(lines) if "┤" in line][0]]
        assert top.split("┤")[0].strip() in ("240", "250", "300")
        axis = next(line for line in lines if "└" in line)
        assert axis.split("└")[0].strip() == "0"
        assert "-5m" in axis and axis.rstrip().endswith("now")
        # the swap: a line with the profile's name beside it
        assert "│demo-no-mtp" in shown or "demo-no-mtp│" in shown
        # the chart fills the pane's width
        assert all(len(line) == chart.content_region.width for line in lines)


async def test_chart_grows_with_the_pane():
    heights = {}
    for size in [(80, 24), (100, 30), (160, 50)]:
        src = ScriptedSource(
            status_with(), [{"push": "sample", "data": make_sample(t)} for t in range(1, 20)]
        )
        app = app_with(src)
        async with app.run_test(size=size) as pilot:
            chart = app.query_one(ThroughputPane)
            await until(pilot, lambda a=app: len(a.model.series["gen_throughput"]) >= 19)
            await pilot.pause(0.2)
            heights[size] = chart.size.height
            assert chart.content_region.width > size[0] // 3
    assert heights[(80, 24)] < heights[(100, 30)] < heights[(160, 50)]


async def test_chart_repaints_nothing_when_nothing_changed():
    """No timers: an idle chart (no new samples) builds no new strips."""
    src = ScriptedSource(
        status_with(), [{"push": "sample", "data": make_sample(t)} for t in range(1, 20)]
    )
    app = app_with(src)
    async with app.run_test(size=(120, 40)) as pilot:
        chart = app.query_one(ThroughputPane)
        await until(pilot, lambda: len(app.model.series["gen_throughput"]) >= 19)
        await pilot.pause(0.3)
        strips = chart_text(chart)
        first = chart.render_line(0)
        await pilot.pause(1.2)  # longer than the status poll
        assert chart.render_line(0) is first and chart_text(chart) == strips


def idle_sample(t: float, gen: float = 0.0) -> dict:
    """A sample of a server with nothing to do (or generating `gen` tok/s), the same each time."""
    sample = make_sample(t, running=0)
    for engine in sample["engine"].values():
        engine.update(gen_throughput=gen, num_queue_reqs=0, token_usage=0.0, accept_length=0)
    return sample


async def test_a_sample_that_changes_nothing_visible_redraws_nothing():
    """An idle server's samples land in the chart's last column with the same value: the layout
    is the same, so no row is redrawn (the chart redraws when the columns shift or a value
    changes what is drawn)."""
    status = status_with(running=0)
    status["telemetry"]["engine"] = idle_sample(0)["engine"]  # the status' sample: idle too
    src = ScriptedSource(status, [{"push": "sample", "data": idle_sample(t)} for t in (1, 2)])
    app = app_with(src)
    points = lambda: len(app.model.series["gen_throughput"])  # noqa: E731
    async with app.run_test(size=(120, 40)) as pilot:
        chart = app.query_one(ThroughputPane)
        await until(pilot, lambda: points() >= 3)  # the status' sample and two pushed
        await pilot.pause(0.3)
        first, text = chart.render_line(1), chart_text(chart)
        # 120 columns: about 5 s per column; t=2.5 is in the same column as t=2.
        src.feed({"push": "sample", "data": idle_sample(2.5)})
        await until(pilot, lambda: points() >= 4)
        await pilot.pause(0.3)
        assert chart.render_line(1) is first and chart_text(chart) == text
        src.feed({"push": "sample", "data": idle_sample(3, gen=150.0)})  # a value that shows
        await until(pilot, lambda: points() >= 5)
        await pilot.pause(0.3)
        # the legend's figure at once; the plot when its column completes (test below)
        assert chart_text(chart) != text and "150" in chart_text(chart)[0]


async def test_the_plot_is_laid_out_once_per_column_the_legend_each_sample(monkeypatch):
    """Issue 49 (costs that follow change): samples inside the plot's newest column update the
    legend's figures only; the plot (its columns, scale and rows) is laid out again when a
    sample starts the next column, and then shows the completed column."""
    layouts = []
    real = charts.ChartInput.layout
    monkeypatch.setattr(charts.ChartInput, "layout", lambda c: layouts.append(1) or real(c))
    status = status_with(running=0)
    status["telemetry"]["engine"] = idle_sample(0)["engine"]
    src = ScriptedSource(status, [{"push": "sample", "data": idle_sample(t)} for t in (1, 2)])
    app = app_with(src)
    points = lambda: len(app.model.series["gen_throughput"])  # noqa: E731
    async with app.run_test(size=(120, 40)) as pilot:
        chart = app.query_one(ThroughputPane)
        await until(pilot, lambda: points() >= 3)
        await pilot.pause(0.3)
        spc, column = chart._plot.spc, chart._plot.column
        start = (column + 1) * spc - T0 + 0.01  # the next column's first moment
        assert spc > 2.0  # (room below for four samples half a second apart)
        src.feed({"push": "sample", "data": idle_sample(start, gen=10.0)})
        await until(pilot, lambda: points() >= 4)
        await pilot.pause(0.3)
        laid_out, plot = len(layouts), chart_text(chart)[1:]
        for i, gen in enumerate((200.0, 180.0, 220.0, 190.0), start=1):
            src.feed({"push": "sample", "data": idle_sample(start + 0.5 * i, gen=gen)})
            await until(pilot, lambda n=4 + i: points() >= n)
            await pilot.pause(0.2)
            assert f"{gen:.0f}" in chart_text(chart)[0]  # the legend's figure, each sample
            assert chart_text(chart)[1:] == plot  # the plot as drawn
        assert len(layouts) == laid_out  # no layout within the column
        src.feed({"push": "sample", "data": idle_sample(start + spc, gen=190.0)})
        await until(pilot, lambda: points() >= 9)
        await pilot.pause(0.3)
        assert len(layouts) > laid_out
        assert chart_text(chart)[1:] != plot  # the completed column (~160 tok/s) shows
        top = next(line for line in chart_text(chart) if "┤" in line).split("┤")[0]
        assert float(top) >= 220  # the scale now holds the column's samples


@pytest.mark.parametrize(
    "cells, plain",
    [
        ((("■", "gen_throughput"), (" tok/s 1.19k", "text"), ("  ", "text"), ("■", "queued")), 0),
        ((("■", "slot:名前"), (" 名前 12.3", "text")), 0),  # wide cells: cells, not chars
        ((("■", "gen_throughput"), (" tok/s " + "9" * 200, "text")), 0),  # wider: cut
        # A plot row (`plain`: its head counted once, its blocks a cell a character)
        (((" 名前┤", "axis"), ("▁▂▃█ ▅", "slot:名前")), 1),
        (((" 150┤", "axis"), ("▁" * 200, "gen_throughput")), 1),  # wider than the pane: cut
    ],
)
async def test_a_chart_row_is_padded_or_cut_to_the_width_as_textual_would(cells, plain):
    """A legend row's Strip is padded to the pane's width with the pane's style (its length
    counted once over the row's text), the same segments as Textual's `adjust_cell_length`
    gives; a row wider than the pane is cut to it. So is a plot row whose head in the
    gutter is counted once and its blocks a cell each (a wide gutter name counts double)."""
    from rich.segment import Segment
    from textual.strip import Strip

    app = app_with(ScriptedSource(status_with()))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.model.connected and app.first_status.is_set())
        pane = app.query_one(ThroughputPane)
        width = pane.content_region.width
        strip = pane._strip(cells, width, plain=bool(plain))
        assert pane._strip(cells, width, plain=bool(plain)).cell_length == width  # (kept count)
        base = pane._base_style()
        styles = pane._role_styles(base)
        expected = Strip(
            [Segment(text, styles.get(role, styles[charts.TEXT])) for text, role in cells]
        ).adjust_cell_length(width, base)
        assert strip.cell_length == width
        assert list(strip) == list(expected)


class CallCount:
    """Python calls made in sgltui's code, and its calls out of it (into Textual, Rich or a
    builtin), while on: the measure of the chart's draw each second (issue 49's budget is
    counted in calls a second; their number, unlike their time, is deterministic)."""

    def __init__(self) -> None:
        import sgltui

        self.ours = os.path.dirname(sgltui.__file__)
        self.calls = 0

    def _profile(self, frame, event, arg) -> None:
        if event == "c_call":
            self.calls += frame.f_code.co_filename.startswith(self.ours)
        elif event == "call":
            back = frame.f_back
            self.calls += frame.f_code.co_filename.startswith(self.ours) or (
                back is not None and back.f_code.co_filename.startswith(self.ours)
            )

    def counted(self, fn):
        def run(*args, **kwargs):
            sys.setprofile(self._profile)
            try:
                return fn(*args, **kwargs)
            finally:
                sys.setprofile(None)

        return run


async def test_a_busy_sample_costs_the_chart_a_bounded_number_of_calls(monkeypatch):
    """Issue 49's budget, counted: a busy server's sample in the plot's newest column (most
    seconds) costs the chart's draw ~70 calls (~150 before the twelfth round: a generator
    step per legend cell, a Segment made per cell, the pane's style asked of Textual for
    every row drawn; ~90 before its second round: the content width and the strips' key
    asked twice), and a sample that starts a column ~465 (~1200: every column of every
    series drawn again; ~750: a call per point summed and per gap's stamp, the scale's ticks
    worked out again, the input's look-ups made twice). Thirteenth round: ~45 in the newest
    column (~65: the legend laid out and its row's Segments made again for each figure),
    ~480 for a new column (the plot rows' cells counted without a pass over their text)."""
    count = CallCount()
    monkeypatch.setattr(ThroughputPane, "show", count.counted(ThroughputPane.show))
    samples = [{"push": "sample", "data": make_sample(t)} for t in range(1, 40)]
    src = ScriptedSource(status_with(running=2), samples)
    app = app_with(src)
    points = lambda: len(app.model.series["gen_throughput"])  # noqa: E731
    async with app.run_test(size=(120, 40)) as pilot:
        chart = app.query_one(ThroughputPane)
        await until(pilot, lambda: points() >= 40)
        await pilot.pause(0.3)
        start = (chart._plot.column + 1) * chart._plot.spc - T0 + 0.01  # the next column
        per_sample = []
        for i in range(4):
            count.calls = 0
            src.feed({"push": "sample", "data": make_sample(start + 0.5 * i)})
            await until(pilot, lambda n=41 + i: points() >= n)
            await pilot.pause(0.2)
            per_sample.append(count.calls)
            assert f"{app.model.series['gen_throughput'][-1][1]:.0f}" in chart_text(chart)[0]
        new_column, *same_column = per_sample
        assert new_column <= 500, per_sample
        assert max(same_column) <= 50, per_sample


async def test_a_new_theme_redraws_the_chart_in_its_colours():
    """The chart keeps its Rich style, the roles' styles and the Segments made with them from
    one draw to the next (asking Textual for the pane's style cost a walk of its ancestors
    for every row drawn); Textual applying the styles again (a new theme) drops them all,
    and every row is drawn again in the new colours."""
    from rich.style import Style

    src = ScriptedSource(
        status_with(running=2), [{"push": "sample", "data": make_sample(t)} for t in range(1, 20)]
    )
    app = app_with(src)
    async with app.run_test(size=(120, 40)) as pilot:
        chart = app.query_one(ThroughputPane)
        await until(pilot, lambda: len(app.model.series["gen_throughput"]) >= 19)
        await pilot.pause(0.3)

        def colours() -> tuple[object, object]:
            """The gen tok/s swatch's colour in the legend and its plot row's blocks'."""
            legend = next(s for s in chart.render_line(0) if s.text == "■")
            # the lowest plot row (the y axis' 0 is on the time axis below it)
            bottom = next(y for y in range(chart.size.height) if "└" in chart_text(chart)[y]) - 1
            blocks = next(s for s in chart.render_line(bottom) if "█" in s.text)
            return legend.style.color, blocks.style.color

        def accent() -> object:
            return Style.parse(app.theme_variables["accent"]).color

        assert colours() == (accent(), accent())
        before = accent()
        app.theme = "gruvbox" if app.theme != "gruvbox" else "nord"
        await until(pilot, lambda: accent() != before)
        await pilot.pause(0.3)
        assert colours() == (accent(), accent())


def test_the_charts_room_is_worked_out_again_only_when_what_it_reads_changed():
    """panes.chart_room keeps the chart's room with the slots view's rows, the memory pane's
    and the terminal's size it was worked out from: a sample that changes none of them reads
    no screen size (a dozen calls each second); each of them changed gives the room anew.
    The screen and the two panes it reads are found once for the chart."""
    from types import SimpleNamespace

    from textual.geometry import Size

    from sgltui.tui import panes
    from sgltui.tui.widgets.memory import MemoryPane
    from sgltui.tui.widgets.slots import SlotsPane

    class Slots(SlotsPane):
        rows = 9

        @property
        def row_count(self) -> int:
            return self.rows

    class Memory(MemoryPane):
        lines = 5

        def wanted_height(self) -> int:
            return self.lines

    class Screen:
        reads = 0
        app = SimpleNamespace(size=Size(120, 40))

        def has_class(self, name: str) -> bool:
            return False

        @property
        def size(self) -> Size:
            Screen.reads += 1
            return self.app.size

    slots, memory, screen = Slots(), Memory(), Screen()
    looked: list[str] = []  # the panes looked up (the chart's: once)
    host = SimpleNamespace(
        model=SimpleNamespace(several=True),
        main_screen=screen,
        fleet=None,
        pane=lambda name: looked.append(name) or {"slots": slots, "memory": memory}[name],
    )
    chart = ThroughputPane()

    def room() -> int | None:
        chart.room = panes.chart_room(host, chart)
        return chart.room

    def afresh() -> int | None:
        return panes.chart_room(host)  # (no pane: nothing kept)

    first = room()
    assert first == afresh() and Screen.reads == 2
    assert room() == first and Screen.reads == 2  # a sample: nothing it reads changed
    Screen.app = SimpleNamespace(size=Size(120, 50))  # a taller terminal
    assert room() == afresh() != first
    slots.rows = 5  # the slots view lost rows
    taller = room()
    assert taller == afresh() and taller > first
    memory.lines = 9  # a GPU more in the memory pane
    assert room() == afresh() == taller - 4
    looked.clear()
    room(), room()
    assert not looked  # (the chart's screen and panes: found once, not each sample)


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_a_figure_is_written_into_its_field_or_the_legend_laid_out_again(size, monkeypatch):
    """Issue 49, thirteenth round: a sample in the plot's newest column writes each changed
    figure into its field of the legend as kept (no legend laid out: charts.legend_rows not
    asked) while it keeps its length; a figure that grows or shrinks lays the legend out
    again. Each time the legend reads as one laid out afresh from the same series (no stale
    figure, no padding of the old length, a row wrapped as it would be)."""
    lays = []
    real = charts.legend_rows
    monkeypatch.setattr(charts, "legend_rows", lambda *a: lays.append(1) or real(*a))
    status = status_with(running=0)
    status["telemetry"]["engine"] = idle_sample(0)["engine"]
    src = ScriptedSource(status, [{"push": "sample", "data": idle_sample(t)} for t in (1, 2)])
    app = app_with(src)
    points = lambda: len(app.model.series["gen_throughput"])  # noqa: E731
    async with app.run_test(size=size) as pilot:
        chart = app.query_one(ThroughputPane)
        await until(pilot, lambda: points() >= 3)
        await pilot.pause(0.3)
        spc, column = chart._plot.spc, chart._plot.column
        start = (column + 1) * spc - T0 + 0.01  # the next column's first moment
        src.feed({"push": "sample", "data": idle_sample(start, gen=150.0)})
        await until(pilot, lambda: points() >= 4)
        await pilot.pause(0.3)
        width = chart.content_region.width

        def afresh() -> list[str]:
            rows = charts.draw_chart(chart._chart_input(width).layout())
            legend = len(chart._chart_input(width).layout().legend)
            return ["".join(t for t, _ in row).ljust(width) for row in rows[:legend]]

        # (gen tok/s, whether its figure keeps the length of the one before: 150 -> 160 ...)
        steps = [
            (160.0, True),
            (1500.0, False),
            (1510.0, True),
            (7.0, False),
            (160.0, False),
            (170.0, True),
        ]
        for i, (gen, same_length) in enumerate(steps, start=1):
            lays.clear()
            src.feed({"push": "sample", "data": idle_sample(start + 0.3 * i, gen=gen)})
            await until(pilot, lambda n=4 + i: points() >= n)
            await pilot.pause(0.2)
            assert bool(lays) != same_length, (gen, lays)  # laid out only for another length
            shown = chart_text(chart)[: len(afresh())]
            assert shown == afresh(), (gen, shown)  # (afresh() lays the legend out itself)
            assert f" {units.sig3(gen)}" in "".join(shown)
        assert chart._plot.column == column + 1  # (all in one column: the legend path)


async def test_the_swaps_markers_are_made_again_only_when_the_swaps_change(monkeypatch):
    """TuiModel.chart_marks keeps the chart's markers with the swaps and `several` they were
    made of: a sample made them again each second (the model's list and the pane's copy); a
    swap makes them again at once (the marker shows with its swap)."""
    from sgltui.tui import model as M

    made = []
    real = M._marks_of
    monkeypatch.setattr(M, "_marks_of", lambda *a: made.append(1) or real(*a))
    samples = [{"push": "sample", "data": make_sample(t)} for t in range(1, 10)]
    src = ScriptedSource(status_with(running=0), samples, on_call=swap_agent)
    app = app_with(src)
    points = lambda: len(app.model.series["gen_throughput"])  # noqa: E731
    async with app.run_test(size=(120, 40)) as pilot:
        chart = app.query_one(ThroughputPane)
        await until(pilot, lambda: points() >= 9)
        await pilot.pause(0.2)
        made.clear()
        for t in range(10, 14):
            src.feed({"push": "sample", "data": make_sample(t)})
            await until(pilot, lambda n=t: points() >= n)
            await pilot.pause(0.1)
        assert not made  # four samples, no swap
        src.feed(
            {
                "push": "event",
                "data": {
                    "v": 1,
                    "ts": T0 + 14,
                    "type": "swap.done",
                    "slot": "0",
                    "from": "demo-mtp",
                    "to": "demo-no-mtp",
                    "ok": True,
                    "timings_s": {"total": 9.0},
                },
            }
        )
        await until(pilot, lambda: any("demo-no-mtp" in line for line in chart_text(chart)))
        assert made
