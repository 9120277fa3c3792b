"""Throughput over the last five minutes: gen tok/s on a y-axis scale, the other series on one
row each, a time axis, a legend with the latest values and a marker at every swap.

One widget drawing its own lines (Line API: render_line serves cached Strips) instead of a
plotting widget or a Sparkline per series: the chart changes every second, and repainting it
through Rich on every frame costs most of an idle TUI's CPU. The layout is core.charts'; this
widget only colours it, sizes it and decides what to repaint. A sample within the plot's
newest column redraws the legend's figures only (core.charts.PlotColumn); the chart is laid
out again, and the rows whose layout changed redrawn, when a column completes (~5 s at 120
columns), a swap is marked, or the size, theme or series change; never on a timer.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from rich.cells import cached_cell_len
from rich.segment import Segment
from rich.style import Style
from textual.app import App
from textual.geometry import Region, Size
from textual.screen import Screen
from textual.strip import Strip
from textual.widget import Widget

from sgltui.core import charts, units
from sgltui.tui import fmt
from sgltui.tui.widgets.chart_legend import KeptLegend, legend_figures
from sgltui.tui.widgets.strips import row_spans

WINDOW_S = 300.0  # the border title says "last 5 min"

# (series name in TuiModel, legend label, gutter label, theme colour, formatter of the latest
# value). The first is the plotted one; the others get one row each.
ROWS: tuple[tuple[str, str, str, str, Callable[[float], str]], ...] = (
    ("gen_throughput", "gen tok/s", "tok/s", "accent", units.sig3),
    ("running", "running", "run", "primary", fmt.num),
    ("queued", "queued", "queue", "error", fmt.num),
    ("token_usage", "KV usage", "KV", "success", lambda v: f"{v * 100:.0f}%"),
    ("accept_length", "accept len", "acc", "secondary", lambda v: f"{v:.2f}"),
)

# name -> formatter of its latest value (a slot's tok/s: units.sig3)
FORMS = {name: form for name, _, _, _, form in ROWS}

# Colours of the rows per slot (several slots), in turn.
SLOT_COLOURS = ("primary", "secondary", "success", "warning", "error", "accent")

# Plot heights whose row count splits into whole-row tick intervals (see charts.y_ticks).
PLOT_ROWS = (2, 3, 4, 6, 8, 9, 12)


@functools.lru_cache(maxsize=8)  # (asked each sample, of a height that seldom changes)
def plot_rows_for(screen_height: int) -> int:
    """Rows of the gen tok/s plot for a terminal this tall: 2 at 24 lines, 3 at 30, 6 at 40,
    9 at 50; the chart grows with the terminal while the log pane keeps most of the rest."""
    fits = [r for r in PLOT_ROWS if r <= (screen_height - 20) // 3]
    return fits[-1] if fits else PLOT_ROWS[0]


class ThroughputPane(Widget, can_focus=True):
    DEFAULT_CSS = "ThroughputPane { height: auto; }"

    def __init__(self, window_s: float = WINDOW_S, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.window_s = window_s
        self._series: Mapping[str, Sequence[tuple[float, float]]] = {}
        self._swaps: list[tuple[float, str]] = []
        self._swaps_given: Iterable[tuple[float, str]] | None = None  # what _swaps copies
        self._has_spec = False
        self._slots: Mapping[str, Sequence[tuple[float, float]]] = {}
        self._layout: charts.ChartLayout | None = None  # what the plot's strips below show
        # The legend's rows as on screen: a sample in the plot's newest column redraws them
        # alone (the layout above keeps the legend it was laid out with).
        self._legend: tuple[tuple[charts.Cell, ...], ...] = ()
        self._strips: list[Strip] = []
        self._row_strips: dict[tuple[charts.Cell, ...], Strip] = {}  # cells -> the Strip drawn
        self._key: tuple[Any, ...] | None = None  # the size and room the strips were drawn for
        # The plot's newest column as drawn, and what else it was drawn from (swaps, the
        # accept row, the slots): a sample in the same column updates the legend's figures
        # only (the plot is laid out again when a column completes, every few seconds).
        self._plot: charts.PlotColumn | None = None
        self._drawn_from: tuple[object, ...] = ()
        # The legend's series as last laid out, in its order (the plotted ones first): where
        # its points are (the key, and whether in the slots' series), and (name, label,
        # gutter name, formatter); the latest values its figures were last drawn from.
        self._sources: list[tuple[str, bool]] = []
        self._legend_of: list[tuple[str, str, str, Callable[[float], str]]] = []
        self._drawn_values: list[float | None] = []
        self._figures: list[str] = []  # their texts in the legend
        self._forms: list[Callable[[float], str]] = []  # their formatters
        # The legend as on screen, kept for a sample to write its changed figures into.
        self._kept = KeptLegend()
        # Each series' columns from one layout to the next (a sample re-sums the newest only).
        self._memo = charts.ColumnMemo()
        self._styles_for: tuple[tuple[object, ...], dict[str, Style]] | None = None
        self._base: Style | None = None  # the pane's Rich style, until its styles change
        self._head_cells: dict[str, int] = {}  # a row's head in the gutter -> its cells
        # (text, role) -> its Segment in the roles' styles, from one layout to the next: a
        # legend row drawn again makes the Segments of its changed figures only.
        self._segments: dict[charts.Cell, Segment] = {}
        self._on_screen: Screen[Any] | None = None  # the screen it is on, once looked up
        self._on_app: App[Any] | None = None  # its app, once looked up (a context variable)
        # Rows it may take, border included (several slots: what the memory pane and the slots
        # view leave of the screen; panes.chart_room); None: as many as plot_rows_for says.
        self.room: int | None = None
        self.room_from: tuple[object, ...] = ()  # what chart_room worked `room` out from
        # (the main screen, the slots view, the memory pane): what chart_room reads, found once
        self.room_panes: tuple[Any, Any, Any] | None = None

    # -- data ---------------------------------------------------------------------------------

    def show(
        self,
        series: Mapping[str, Sequence[tuple[float, float]]],
        has_spec: bool,
        swaps: Iterable[tuple[float, str]] = (),
        slots: Mapping[str, Sequence[tuple[float, float]]] | None = None,
    ) -> None:
        """New samples or swaps. A sample in the plot's newest column as drawn updates the
        legend's figures only (what is read each second); a new column, swap, size or series
        lays the chart out again and repaints the rows that changed. So the plot is redrawn
        once per column's worth of seconds (~5 s at 120 columns), and its newest column is
        shown complete when the next one starts."""
        # The model's own series (bounded deques it appends to), not copies: the chart always
        # draws the newest data, and copying 600 points per series each second costs more than
        # the layout.
        self._series = series
        self._slots = slots or {}
        if swaps is not self._swaps_given:  # (TuiModel.chart_marks: the same list till a swap)
            self._swaps_given, self._swaps = swaps, list(swaps)
        self._has_spec = has_spec
        if self._key is None:
            # Not drawn yet, or its styles applied again: render_line draws it when painted.
            self.refresh(layout=True)
            return
        # The width it was drawn at (the content width costs a walk of its ancestors each
        # sample): a resize has Textual paint every row again, and render_line then draws
        # them at the new width (_cached_strips).
        width = self._key[0]
        key = self._strips_key(width)
        drawn_from = (self._swaps, has_spec, tuple(self._slots))
        if key == self._key and self._plot is not None and drawn_from == self._drawn_from:
            # The legend's series as they are now, looked up once for both uses below.
            series, slots = self._series, self._slots
            try:  # (subscripts: no call per series; one missing is looked up as a layout does)
                points: list[Sequence[tuple[float, float]] | None] = [
                    (slots if in_slots else series)[k] for k, in_slots in self._sources
                ]
            except KeyError:
                points = [(slots if in_slots else series).get(k) for k, in_slots in self._sources]
            if self._plot.holds(points) and self._show_legend(width, points):
                return  # the same column: the legend's figures only
        if not self.display:
            # Hidden (a short screen's memory pane in its place): laid out when shown again.
            self.refresh(layout=True)
            return
        if drawn_from[2:] != self._drawn_from[2:]:
            self._memo = charts.ColumnMemo()  # other slots: their columns go
        self._drawn_from = drawn_from
        chart = self._chart_input(width, key)
        # (a layout re-sums only the newest columns, core.charts.ColumnMemo: cheap enough to
        # work out and compare on every sample that does not repeat the last)
        layout = chart.layout()
        if key == self._key and layout == self._layout and layout.legend == self._legend:
            self._laid_out(chart)
            return  # nothing visible changed (an idle server's)
        old = self._strips
        strips = self._draw(width, chart, layout, key)
        if len(strips) != len(old):
            # The legend wrapped, the accept row came or went, or the room changed the plot's
            # height: Textual lays it out again (get_content_height) and paints every row.
            self.refresh(layout=True)
            return
        rows = [y for y, strip in enumerate(strips) if strip is not old[y]]
        # A region per run of changed rows (a layout's new column changes most of the plot).
        changed = [Region(0, y, width, n) for y, n in row_spans(rows)]
        if changed:
            self.refresh(*changed)  # (one refresh: a busy server's sample changes most rows)

    # -- layout -------------------------------------------------------------------------------

    def _chart_series(
        self, with_slots: bool = True
    ) -> tuple[charts.ChartSeries, list[charts.ChartSeries]]:
        """The plotted series and the others; `with_slots` False leaves out the row of each
        slot (several slots: the totals only)."""
        out = []
        for name, label, short, _, form in ROWS:
            if name == "accept_length" and not self._has_spec:
                continue
            points = self._series.get(name) or []
            latest = form(points[-1][1]) if points else "-"
            if name == "gen_throughput" and self._slots:
                # Several slots: the plot is their total, and each slot's tok/s has a row.
                out.append(charts.ChartSeries(name, "total tok/s", short, points, latest))
                if with_slots:
                    out.extend(self._slot_series())
                continue
            out.append(charts.ChartSeries(name, label, short, points, latest))
        return out[0], out[1:]

    def _slot_series(self) -> list[charts.ChartSeries]:
        out = []
        for sid, slot_points in self._slots.items():
            now = units.sig3(slot_points[-1][1]) if slot_points else "-"
            # A fleet's host/slot keeps its end in the gutter: pu1/0 and pu2/0 differ.
            short = sid[:5] if "/" not in sid else sid[-5:]
            out.append(charts.ChartSeries(f"slot:{sid}", sid, short, slot_points, now))
        return out

    def _slot_rows_fit(self, rows: int, totals: int, short: bool) -> bool:
        """Whether a row per slot may fit `room` beside at least 3 rows of plot, counted
        before any legend is laid out: a legend of one row at least, the time axis, a row per
        other series. Where it cannot (8 slots at 120x40), the slots' series are neither
        formatted nor laid out each sample only to be dropped (_fit_room)."""
        if self._slots and short:
            return False  # (a short screen shows the total only: _chart_input)
        if self.room is None or not self._slots:
            return True
        rest = 1 + 1 + totals + len(self._slots)
        return min(rows, self.room - 2 - rest) >= 3

    def _plot_rows(self) -> int:
        if self._on_app is None:
            self._on_app = self.app
        return plot_rows_for(self._on_app.size.height)

    def _short(self) -> bool:
        """Whether the screen is a short one (app.py's -short: no row to spare)."""
        if self._on_screen is None:
            self._on_screen = self.screen  # (found once: `screen` walks every ancestor)
        return self._on_screen.has_class("-short")

    def _chart_input(self, width: int, key: tuple[Any, ...] | None = None) -> charts.ChartInput:
        """The chart at `width`; `key` (_strips_key's, when worked out already) gives the plot's
        rows and whether the screen is short."""
        rows, short = (self._plot_rows(), self._short()) if key is None else key[1:3]
        totals = len(ROWS) - 1 if self._has_spec else len(ROWS) - 2  # (less the accept row)
        with_slots = self._slot_rows_fit(rows, totals, short)
        main, others = self._chart_series(with_slots)
        markers = [charts.ChartMarker(ts, label) for ts, label in self._swaps]
        legend_only: list[charts.ChartSeries] = []
        if short and self._slots:
            # No rows to spare: the slots view has each slot's tok/s and requests; the chart
            # their total.
            others = []
        if self.room is not None and self._slots:
            return self._fit_room(main, others, markers, width, rows, with_slots)
        if short and charts.legend_height([main, *others], width) > 1:
            # A short terminal has no row to spare: a legend that wraps costs the plot a row
            # and the accept length its history (its latest value stays in the legend).
            rows = max(1, rows - 1)
            legend_only = [s for s in others if s.name == "accept_length"]
            others = [s for s in others if s.name != "accept_length"]
        return charts.ChartInput(
            main, others, markers, width, rows, self.window_s, legend_only, self._memo
        )

    def _fit_room(
        self,
        main: charts.ChartSeries,
        others: list[charts.ChartSeries],
        markers: list[charts.ChartMarker],
        width: int,
        rows: int,
        with_slots: bool = True,
    ) -> charts.ChartInput:
        """Several slots: a row per slot while they fit beside at least 3 rows of plot, else
        the total only (the slots view has each slot's tok/s); then the tallest plot that fits
        `room` (2 rows at least: a screen too short for that scrolls). `with_slots` False:
        `others` are the totals already."""
        room = (self.room or 0) - 2  # its border
        totals = [s for s in others if not s.name.startswith("slot:")] if with_slots else others
        for shown in (others, totals) if len(others) > len(totals) else (totals,):
            # legend, the plot, the time axis, a row per other series
            rest = charts.legend_height([main, *shown], width) + 1 + len(shown)
            most = min(rows, room - rest)
            fits = [r for r in PLOT_ROWS if r <= most]
            if fits and (fits[-1] >= 3 or shown is totals):
                return charts.ChartInput(
                    main, shown, markers, width, fits[-1], self.window_s, memo=self._memo
                )
        return charts.ChartInput(
            main, totals, markers, width, PLOT_ROWS[0], self.window_s, memo=self._memo
        )

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(charts.draw_chart(self._chart_input(width).layout()))

    # -- drawing ------------------------------------------------------------------------------

    def _role_styles(self, base: Style) -> dict[str, Style]:
        # (a new theme applies the styles again: notify_style_update forgets these)
        key = (base, tuple(self._slots))
        if self._styles_for is not None and self._styles_for[0] == key:
            return self._styles_for[1]  # (parsing a style per role each draw cost a third of it)
        theme = self.app.theme_variables
        styles = {
            charts.TEXT: base,
            charts.AXIS: base + Style(dim=True),
            charts.MARKER: base + Style.parse(f"bold {theme.get('foreground', 'white')}"),
        }
        for name, _, _, colour, _ in ROWS:
            styles[name] = base + Style.parse(theme.get(colour, "yellow"))
        for i, sid in enumerate(self._slots):
            colour = SLOT_COLOURS[i % len(SLOT_COLOURS)]
            styles[f"slot:{sid}"] = base + Style.parse(theme.get(colour, "yellow"))
        self._styles_for = (key, styles)
        self._segments = {}
        return styles

    def _base_style(self) -> Style:
        """The widget's Rich style, worked out again only after its styles changed
        (notify_style_update): `rich_style` walks every ancestor's styles, and so did asking
        Textual whether they changed (`get_visual_style`) for every row drawn."""
        if self._base is None:
            self._base = self.rich_style
        return self._base

    def notify_style_update(self) -> None:
        """Textual's call when the pane's styles are applied again (a theme, a class or pseudo
        class of it or of an ancestor whose rules reach it): its Rich style and the roles' are
        worked out again, and every row drawn again with them."""
        super().notify_style_update()
        self._base = None
        self._styles_for = None
        self._key = None

    def _strips_key(self, width: int) -> tuple[Any, ...]:
        # (another theme applies the styles again: notify_style_update forgets the strips)
        return (width, self._plot_rows(), self._short(), self.room)

    def _laid_out(self, chart: charts.ChartInput) -> None:
        """What the legend-only path needs of the chart just laid out."""
        self._plot = charts.PlotColumn.of(chart)
        shown = (chart.main, *chart.others, *chart.legend_only)
        names = [(s.name, s.label, s.short) for s in shown]
        if names != [entry[:3] for entry in self._legend_of]:  # (the same series: kept)
            self._sources = [
                (name[5:], True) if name.startswith("slot:") else (name, False)
                for name, _, _ in names
            ]
            self._legend_of = [(*n, FORMS.get(n[0], units.sig3)) for n in names]
            self._forms = [form for *_, form in self._legend_of]
        # (the layout's series were read and formatted as these: ChartSeries.latest)
        self._drawn_values = [s.points[-1][1] if s.points else None for s in shown]
        self._figures = [s.latest for s in shown]

    def _show_legend(
        self, width: int, points: Sequence[Sequence[tuple[float, float]] | None]
    ) -> bool:
        """The legend's figures of its series' `points` now (in _sources' order), the plot as
        drawn: only the legend rows whose text changed are drawn and repainted. False (nothing
        done) when the legend would take another number of rows: the chart is laid out again."""
        if self._layout is None:
            return False
        values = [p[-1][1] if p else None for p in points]
        drawn = self._drawn_values
        if values == drawn:
            return True  # the figures drawn (an idle server's second)
        kept = self._kept
        wrote = kept.write(values, drawn, self._figures, self._forms, self._legend_of, width)
        if wrote is None:
            return self._lay_legend_out(width, values)  # (laid out otherwise: afresh)
        rows, texts = wrote
        base = self._base_style()
        for y in rows:
            self._strips[y] = kept.strip(y, width, base)
        self._legend = tuple(kept.cells)
        self._drawn_values, self._figures = values, texts
        if rows:
            self.refresh(*[kept.regions[y] for y in rows])
        return True

    def _lay_legend_out(self, width: int, values: list[float | None]) -> bool:
        """The legend laid out again with the figures of `values` (laid out otherwise than
        the one kept): the rows whose text changed drawn and repainted. False when it would
        take another number of rows (the chart is laid out again)."""
        drawn = self._drawn_values
        # Only the figures whose value changed are formatted (equal numbers format the same).
        texts = [
            text if value == was else "-" if value is None else form(value)
            for (_, _, _, form), value, was, text in zip(
                self._legend_of, values, drawn, self._figures, strict=True
            )
        ]
        legend = charts.legend_rows(legend_figures(self._legend_of, texts), width)
        shown = self._legend
        if legend == shown:
            self._drawn_values, self._figures = values, texts
            return True
        if len(legend) != len(shown):
            return False
        self._legend, self._drawn_values, self._figures = legend, values, texts
        base = self._base_style()
        self._keep_legend(width, (base, self._role_styles(base)))
        kept, changed = self._kept, []
        for y, cells in enumerate(legend):
            if cells != shown[y]:
                self._strips[y] = (
                    kept.strip(y, width, base)
                    if kept.segments[y] is not None
                    else self._strip(cells, width)
                )
                changed.append(kept.regions[y])
        self.refresh(*changed)
        return True

    def _strip(
        self,
        cells: Sequence[charts.Cell],
        width: int,
        styles: tuple[Style, dict[str, Style]] | None = None,
        plain: bool = False,
    ) -> Strip:
        """A row's Strip; `styles`: the pane's and the roles' (when looked up already);
        `plain`: its cells after the first are a cell a character."""
        segments, used = self._segments_of(cells, width, styles, plain=plain)
        if used > width:
            return Strip(segments).adjust_cell_length(width, self._base_style())  # (cut)
        return Strip(segments, width)

    def _segments_of(
        self,
        cells: Sequence[charts.Cell],
        width: int,
        styles: tuple[Style, dict[str, Style]] | None = None,
        pad: bool = True,
        plain: bool = False,
    ) -> tuple[list[Segment], int]:
        """A row's Segments, padded to `width` (`pad`), and the cells its text takes;
        `plain`: its cells after the first are a cell a character."""
        if styles is None:
            base = self._base_style()
            roles = self._role_styles(base)  # (other styles: the kept Segments go)
        else:
            base, roles = styles
        # Padded here, its length counted once over the row's text: `adjust_cell_length`
        # counted each segment's cells and made a second Strip (a legend row each sample).
        # (`cells` is read twice: a sequence, the rows' tuples that key the kept strips.)
        # (the row's text is new each time: rich's cached_cell_len, as cell_len would call)
        if plain:
            head = cells[0][0]
            used = self._head_cells.get(head)
            if used is None:
                used = self._head_cells[head] = cached_cell_len(head)  # (a gutter name: wide?)
            for text, _ in cells[1:]:
                used += len(text)
        else:
            used = cached_cell_len("".join([text for text, _ in cells]))
        if used < width and pad:
            cells = (*cells, (" " * (width - used), charts.TEXT))
        known = self._segments
        for cell in cells:
            if cell not in known:  # (a legend row drawn again: its changed figures only)
                text, role = cell
                known[cell] = Segment(text, roles.get(role, base))
        return [known[cell] for cell in cells], used

    def _keep_legend(self, width: int, styles: tuple[Style, dict[str, Style]]) -> None:
        """Keep the legend on screen (self._legend, its figures self._figures) for the
        samples that only write new figures into it; `styles`: the pane's and the roles'."""
        self._kept.keep(
            self._legend,
            self._figures,
            self._legend_of,
            width,
            self._styles_for,  # (the roles' styles as looked up: replaced when they change)
            lambda row: self._segments_of(row, width, styles, pad=False),
        )

    def _draw(
        self,
        width: int,
        chart: charts.ChartInput,
        layout: charts.ChartLayout,
        key: tuple[Any, ...],
    ) -> list[Strip]:
        # A row whose cells are the same as on screen keeps its Strip (the object: show()
        # repaints only the rows whose Strip is new); styles are looked up once per draw.
        # (`key`: the strips' key, _strips_key(width))
        reuse = self._row_strips if self._key == key else {}
        # (the widget's style and the roles' are kept between draws: _base_style)
        if len(self._segments) > 1000:
            self._segments = {}  # (the figures of a few columns' worth of samples, at most)
        base = self._base_style()
        styles = (base, self._role_styles(base))
        rows = charts.draw_chart(layout)
        self._legend = layout.legend
        self._laid_out(chart)
        self._keep_legend(width, styles)  # (the legend rows' Segments: their strips made of them)
        kept, strips = self._kept, []
        for y, segments in enumerate(kept.segments):
            cells = rows[y]
            strip = reuse.get(cells)  # (the legend's rows first: made of their kept Segments)
            if strip is None:
                strip = (
                    self._strip(cells, width, styles)
                    if segments is None
                    else kept.strip(y, width, base)
                )
            strips.append(strip)
        # Below the legend, with no marker labelled in the plot, a row is its head in the
        # gutter and text a cell a character (block elements, the time axis): its cells are
        # counted without a pass over its text (rows of ~120 characters).
        plain = not layout.marks
        strips += [
            reuse.get(cells) or self._strip(cells, width, styles, plain)
            for cells in rows[len(strips) :]
        ]
        self._row_strips = dict(zip(rows, strips, strict=True))
        self._strips = strips
        self._layout, self._key = layout, key
        return strips

    def _cached_strips(self, width: int) -> list[Strip]:
        key = self._strips_key(width)
        if self._key != key:  # resized, another theme, or never drawn
            chart = self._chart_input(width, key)
            return self._draw(width, chart, chart.layout(), key)
        return self._strips

    def render_line(self, y: int) -> Strip:
        width = self.content_region.width
        strips = self._cached_strips(width)
        if 0 <= y < len(strips):
            return strips[y]
        return Strip.blank(width, self.rich_style)
