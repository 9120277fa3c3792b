"""The throughput chart's legend as kept on screen, for the samples that only change its
figures (most seconds of a busy server): where each figure's text sits, and each row's
Segments, cells and Region. A sample writes its changed figures into their fields and makes
a Strip only for a row whose text changed, with no legend laid out while every figure keeps
its length; a figure that grows or shrinks has the legend laid out again (core.charts) and
kept as it comes out."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region
from textual.strip import Strip

from sgltui.core import charts

# (name, label, gutter name, formatter of its latest value): a legend's series, in its order
Entry = tuple[str, str, str, Callable[[float], str]]
Rows = tuple[tuple[charts.Cell, ...], ...]


def legend_figures(
    legend_of: Sequence[Entry], texts: Sequence[str]
) -> tuple[tuple[str, str, str, str], ...]:
    """The legend's series with their figures `texts`, as charts.legend_rows lays them out."""
    return tuple(
        [
            (name, label, short, text)
            for (name, label, short, _), text in zip(legend_of, texts, strict=True)
        ]
    )


class KeptLegend:
    def __init__(self) -> None:
        # Per figure, in the legend's order: its row, its cell in the row and the text before
        # it there (" tok/s "). None: no legend kept whose figures have fields.
        self.at: list[tuple[int, int, str]] | None = None
        self.cells: list[tuple[charts.Cell, ...]] = []  # per row: its cells
        self.segments: list[list[Segment] | None] = []  # its Segments, no padding (None: cut)
        self.used: list[int] = []  # the cells its text takes
        self.regions: list[Region] = []  # what a refresh of it names
        self.kept_for: tuple[int, object] | None = None  # (width, the styles) of the above
        self._pads: dict[int, Segment] = {}  # padding's width -> its Segment, in `base`

    def same(self, legend_of: Sequence[Entry], texts: Sequence[str], width: int) -> bool:
        """Whether the legend with figures `texts`, some of another length than those kept,
        is laid out as the one kept with its figures replaced (the same rows, labels, gaps)."""
        legend = charts.legend_rows(legend_figures(legend_of, texts), width)
        at = self.at
        if at is None or len(legend) != len(self.cells) or len(at) != len(texts):
            return False
        expect = [[*row] for row in self.cells]
        for (y, k, before), text in zip(at, texts, strict=True):
            expect[y][k] = (before + text, charts.TEXT)
        return list(legend) == [tuple(row) for row in expect]

    def keep(
        self,
        legend: Rows,
        texts: Sequence[str],
        legend_of: Sequence[Entry],
        width: int,
        styles: object,
        segments_of: Callable[[tuple[charts.Cell, ...]], tuple[list[Segment], int]],
    ) -> None:
        """Keep `legend` (its figures `texts`) at `width` in `styles` (compared by identity:
        the pane's look-up, replaced when they change); `segments_of` makes a row's Segments
        (no padding) and gives the cells its text takes. The rows kept already at this width
        and in these styles keep their Segments; the fields are kept while the legend is the
        one kept with other figures (a layout's, most often)."""
        rows = list(legend)
        kept_for = self.kept_for
        same = kept_for is not None and kept_for[0] == width and kept_for[1] is styles
        if not same or not self.same(legend_of, texts, width):
            self.at = _fields(rows, texts)
        segments: list[list[Segment] | None] = []
        used: list[int] = []
        for y, row in enumerate(rows):
            if same and y < len(self.cells) and self.cells[y] == row:
                segments.append(self.segments[y])
                used.append(self.used[y])
                continue
            row_segments, cells = segments_of(row)
            segments.append(row_segments if cells <= width else None)
            used.append(cells)
        self.cells, self.segments, self.used = rows, segments, used
        if not same:
            self.kept_for, self._pads = (width, styles), {}
            self.regions = [Region(0, y, width, 1) for y in range(len(rows))]
        elif len(self.regions) != len(rows):
            self.regions = [Region(0, y, width, 1) for y in range(len(rows))]

    def write(
        self,
        values: Sequence[float | None],
        drawn: Sequence[float | None],
        figures: Sequence[str],
        forms: Sequence[Callable[[float], str]],
        legend_of: Sequence[Entry],
        width: int,
    ) -> tuple[list[int], list[str]] | None:
        """Write the figures of `values` (those of `drawn` are shown, as `figures`) into
        their fields: the rows changed and the figures' texts now; None (nothing changed)
        when the legend is to be laid out again (a figure of another length laid out
        otherwise, or a row wider than `width`). Only the figures whose value changed are
        formatted (equal numbers format the same)."""
        at, kept = self.at, self.segments
        if at is None:
            return None
        rows: list[list[Segment] | None] = [None] * len(kept)
        used = self.used[:]
        texts = [*figures]
        resized = False
        for i, value in enumerate(values):
            if value == drawn[i]:
                continue
            text = "-" if value is None else forms[i](value)
            was = figures[i]
            if text == was:
                continue
            y, k, before = at[i]
            texts[i] = text
            segments = rows[y]
            if segments is None:
                row = kept[y]
                if row is None:
                    return None  # (a row cut to the width)
                segments = rows[y] = row[:]
            segments[k] = Segment(before + text, segments[k].style)
            # A figure of the same length leaves the legend's layout as it is:
            # charts._lay_legend decides from the texts' lengths alone, and the formatters'
            # texts are ASCII (a character a cell).
            grown = len(text) - len(was)  # (two calls, a figure of the few that changed)
            if grown:
                used[y] += grown
                resized = True
        if resized and (max(used) > width or not self.same(legend_of, texts, width)):
            return None
        changed = [y for y, segments in enumerate(rows) if segments is not None]
        for y in changed:
            kept[y] = rows[y]
        self.used = used
        for i, text in enumerate(texts):
            if text is not figures[i]:
                y, k, before = at[i]
                cells = self.cells[y]
                self.cells[y] = (*cells[:k], (before + text, charts.TEXT), *cells[k + 1 :])
        return changed, texts

    def strip(self, y: int, width: int, base: Style) -> Strip:
        """Row `y`'s Strip (kept Segments), padded to `width` in `base`."""
        segments, used = self.segments[y], self.used[y]
        assert segments is not None
        if used < width:
            pad = self._pads.get(width - used)
            if pad is None:
                pad = self._pads[width - used] = Segment(" " * (width - used), base)
            segments = [*segments, pad]
        return Strip(segments, width)


def _fields(
    rows: list[tuple[charts.Cell, ...]], texts: Sequence[str]
) -> list[tuple[int, int, str]] | None:
    """Each figure's field in `rows` (charts._lay_legend's: each series is its swatch, in
    its role, then its text), in order; None where they are not the figures `texts`."""
    found = []
    for y, row in enumerate(rows):
        for k in range(1, len(row)):
            if row[k - 1][0] == charts.SWATCH and row[k - 1][1] != charts.TEXT:
                found.append((y, k, row[k][0]))
    if len(found) != len(texts) or not all(
        cell.endswith(text) for (_, _, cell), text in zip(found, texts, strict=True)
    ):
        return None
    return [
        (y, k, cell[: len(cell) - len(text)])
        for (y, k, cell), text in zip(found, texts, strict=True)
    ]
