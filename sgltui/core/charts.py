"""Unicode charts: horizontal bars, stacked bars, sparklines and the throughput line chart.

They render in any terminal, Markdown viewer (inside code blocks) or e-mail, with no plotting
dependency; eighth-block characters give 8 steps per cell so short bars still differ. This is the
one sparkline renderer: the report, the Jobs pane and the TUI's throughput chart all draw their
block columns with `block_rows`. No Textual here: the chart comes out as rows of (text, role)
cells and the widget maps each role to a theme colour.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

_EIGHTHS = " ▏▎▍▌▋▊▉█"
_BLOCKS = " ▁▂▃▄▅▆▇█"  # index = eighths of a cell filled


def _finite(v: float | None) -> bool:
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)


def _num(v: float | None) -> float | None:
    return float(v) if v is not None and _finite(v) else None


def filled_cells(fraction: float | None, width: int) -> int:
    """How many of a fill bar's `width` cells a fraction (0..1) fills: the one rule of every
    bar (progress, jobs, GPU memory in `top`, report bars), so one value looks the same in each.

    Whole cells filled, rounded down (99.9% is not a full bar); but anything above 0 fills at
    least one cell, so a small share never looks like none. None, NaN and <= 0 fill nothing;
    >= 1 fills all. Only a one-cell bar breaks the "full only when done" half of the rule: a
    non-zero fraction fills its cell."""
    f = _num(fraction)
    if width <= 0 or f is None or f <= 0:
        return 0
    if f >= 1:
        return width
    # The epsilon keeps float error from dropping a cell (0.29 * 100 is 28.999999999999996).
    cells = math.floor(f * width + 1e-9)
    return max(1, min(cells, width - 1))


def hbar(value: float | None, maximum: float, width: int = 24) -> str:
    """A bar of `width` cells at most, proportional to value/maximum (eighth-cell resolution)."""
    if not _finite(value) or maximum <= 0 or value <= 0:  # type: ignore[operator]
        return ""
    eighths = filled_cells(value / maximum, width * 8)  # type: ignore[operator]
    full, rest = divmod(eighths, 8)
    bar = "█" * full + (_EIGHTHS[rest] if rest else "")
    return bar or "▏"


def stacked_bar(parts: Sequence[tuple[float | None, str]], scale: float, width: int = 40) -> str:
    """One bar of segments, each drawn with its own fill character; `scale` seconds = width cells.

    Segments round to whole cells, but any non-zero part gets at least one cell so that it shows."""
    if scale <= 0:
        return ""
    out = []
    for value, char in parts:
        if not _finite(value) or value <= 0:  # type: ignore[operator]
            continue
        cells = max(1, round(value / scale * width))  # type: ignore[operator]
        out.append(char * cells)
    return "".join(out)


def block_rows(
    columns: Sequence[float | None],
    height: int = 1,
    lo: float | None = None,
    hi: float | None = None,
) -> list[str]:
    """`height` text rows (top first) of one block column per value, scaled lo..hi.

    lo/hi default to the values' min/max. A missing value (None, NaN) is a blank column; any
    present value fills at least the lowest eighth, so "no data" never looks like "at the floor".
    A flat series (hi == lo) sits at half height when positive, at the floor otherwise."""
    if height <= 0 or not columns:
        return []
    # (_num inline, finite told by two comparisons, NaN failing both: no call per column)
    nums = [float(c) if c is not None and -math.inf < c < math.inf else None for c in columns]
    present = [f for f in nums if f is not None]
    if not present:
        return [" " * len(columns)] * height
    low = min(present) if lo is None else lo
    high = max(present) if hi is None else hi
    span = high - low
    top = height * 8 - 1
    # The floor is the lowest eighth (present), the top the full height: 1 .. 8*height; a
    # column's characters (top first) are looked up, not worked out per row and cell.
    cells = _column_cells(height)  # cells[0]: a blank column
    if span <= 0:
        flat = cells[1 + round((0.5 if high > 0 else 0.0) * top)]
        stacks = [cells[0] if f is None else flat for f in nums]
    else:
        stacks = [
            cells[0]
            if f is None
            else cells[1 + (0 if f <= low else top if f >= high else round((f - low) / span * top))]
            for f in nums
        ]
    if height == 1:
        return ["".join(stacks)]
    return ["".join(row) for row in zip(*stacks, strict=True)]


@functools.cache
def _column_cells(height: int) -> tuple[str, ...]:
    """For each fill 0 .. 8*height eighths, a column's `height` characters, top first."""
    return tuple(
        "".join(_BLOCKS[min(8, max(0, e - level * 8))] for level in range(height - 1, -1, -1))
        for e in range(height * 8 + 1)
    )


def index_buckets(values: Sequence[float | None], width: int) -> list[float | None]:
    """Values squeezed into at most `width` columns (means, oldest first); a column with no
    finite value is None."""
    n = len(values)
    cells = min(width, n)
    out: list[float | None] = []
    for i in range(cells):
        chunk = [
            f
            for f in (_num(v) for v in values[i * n // cells : (i + 1) * n // cells])
            if f is not None
        ]
        out.append(sum(chunk) / len(chunk) if chunk else None)
    return out


def sparkline(
    values: Sequence[float | None],
    width: int = 60,
    lo: float | None = None,
    hi: float | None = None,
) -> str:
    """Values squeezed into `width` cells (bucket means) on one row; None or NaN buckets print
    as a space."""
    if not values or width <= 0:
        return ""
    return block_rows(index_buckets(values, width), 1, lo, hi)[0]


# -- the throughput chart -------------------------------------------------------------------

Cell = tuple[str, str]  # (text, role): role is a series name or one of the roles below
Row = tuple[Cell, ...]  # (tuples: a widget keys its kept strips by them)
AXIS, TEXT, MARKER = "axis", "text", "marker"
SWATCH = "■"


@dataclass(frozen=True)
class ChartSeries:
    """One series: `name` is its role (the widget's colour key), `label` its legend name,
    `short` its name in the y-axis gutter, `latest` its newest value as text."""

    name: str
    label: str
    short: str
    points: Sequence[tuple[float, float | None]]  # (unix ts, value), oldest first
    latest: str = "-"


@dataclass(frozen=True)
class ChartMarker:
    """Something that happened at `ts`, drawn as a vertical line with `label` beside it."""

    ts: float
    label: str


FILL_GAP_SAMPLES = 32  # the newest gaps the sample interval is taken from


def fill_gap(
    points: Sequence[tuple[float, float | None]], seconds_per_col: float, first_col: int
) -> float:
    """Three sample intervals (the median of the newest gaps between stamps from column
    `first_col` on, to a quarter second so that sampling jitter does not move it): an empty
    column between two samples closer than this is a narrow column, not a gap. The newest
    gaps only: a sampling rate that changed is the one that matters, and it costs no pass
    over the whole window."""
    # No call per point: the stamps written into a list made once, finite told by comparisons.
    stamps, taken = [0.0] * (FILL_GAP_SAMPLES + 1), 0
    for ts, v in reversed(points):  # newest first: stop at the column
        if ts / seconds_per_col < first_col or taken > FILL_GAP_SAMPLES:
            break  # (ts / spc < first_col is the same test as floor(ts / spc) < first_col)
        if v is not None and -math.inf < v < math.inf:
            stamps[taken] = ts
            taken += 1
    gaps = sorted([a - b for a, b in zip(stamps[:taken], stamps[1:taken]) if a > b])
    return 3 * max(0.25, round(gaps[len(gaps) // 2] * 4) / 4) if gaps else 0.0


def time_columns(
    points: Sequence[tuple[float, float | None]],
    width: int,
    seconds_per_col: float,
    end: float,
    max_gap: float | None = None,
) -> list[float | None]:
    """Mean value per column of `seconds_per_col`, the last column holding `end`.

    Columns sit on fixed multiples of `seconds_per_col` in absolute time, so a new sample only
    changes the last column (the whole chart shifts once per column's worth of seconds). An empty
    column between two samples at most `max_gap` apart (default: `fill_gap` of the window's
    points) takes the previous column's value (a narrow column at a wide terminal is not a gap
    in the data)."""
    if width <= 0:
        return []
    first = math.floor(end / seconds_per_col) - width + 1
    if max_gap is None:
        max_gap = fill_gap(points, seconds_per_col, first)
    sums, counts = [0.0] * width, [0] * width
    _add_columns(points, seconds_per_col, first, 0, sums, counts)
    return _column_means(sums, counts, seconds_per_col, max_gap)


def _add_columns(
    points: Sequence[tuple[float, float | None]],
    spc: float,
    first: int,
    since: int,
    sums: list[float],
    counts: list[int],
) -> None:
    """Add the points of columns `since`.. (relative to the window's `first` column) into
    `sums` and `counts`, newest first: the same additions in the same order whether a whole
    window is summed or only its newest columns again (so the same floats)."""
    width = len(sums)
    # floor() only for a point out of the last one's column (floor(x) == c iff c <= x < c + 1)
    start, col = math.inf, 0  # the last point's column: absolute (its start) and relative
    for ts, v in reversed(points):  # newest first: stop at the window's left edge
        x = ts / spc
        if not start <= x < start + 1:
            start = math.floor(x)
            col = start - first
            if col < since:
                break
        if v is None or not -math.inf < v < math.inf or col >= width:  # (NaN: not finite)
            continue
        sums[col] += v
        counts[col] += 1


def _column_means(
    sums: list[float], counts: list[int], spc: float, max_gap: float
) -> list[float | None]:
    out: list[float | None] = [s / c if c else None for s, c in zip(sums, counts, strict=True)]
    seen = [i for i, c in enumerate(counts) if c]
    for a, b in zip(seen, seen[1:]):
        if 1 < b - a and (b - a) * spc <= max_gap:
            for i in range(a + 1, b):
                out[i] = out[a]
    return out


@dataclass(frozen=True)
class SeriesMark:
    """A series as a chart last read it: the object, its length, its first stamp and its
    newest point. Both shortcuts below (re-summing only the newest columns, keeping a chart
    whose newest column repeats) hold only for the same series grown since by points at the
    end and shortened at the start (the TUI's bounded histories); `appended` tells."""

    points: Sequence[tuple[float, float | None]]
    length: int
    oldest: float
    newest: tuple[float, float | None]

    @classmethod
    def of(cls, points: Sequence[tuple[float, float | None]]) -> SeriesMark | None:
        return cls(points, len(points), points[0][0], points[-1]) if points else None

    def appended(self, points: Sequence[tuple[float, float | None]]) -> int | None:
        """How many points `points` gained at the end since (0: none); None when it is another
        series, or changed otherwise (emptied and filled again, a point replaced, stamps
        going back, points dropped that its first stamp does not account for)."""
        if points is not self.points or not points:
            return None
        newest_ts, added, n = self.newest[0], 0, len(points)
        for ts, _ in reversed(points):
            if ts <= newest_ts:
                break
            added += 1
        dropped = self.length + added - n
        if dropped < 0 or added >= n or points[n - added - 1] != self.newest:
            return None
        if (points[0][0] != self.oldest) != (dropped > 0):
            return None
        return added


def window_top(
    points: Sequence[tuple[float, float | None]], after: float, stop_at: int = 0
) -> tuple[float, float | None]:
    """The largest finite value (0 at least) of the points stamped after `after`, and the
    newest stamp holding it (None: no finite value of 0 or more); newest first, down to
    index `stop_at`."""
    top, top_ts = 0.0, None
    for i in range(len(points) - 1, stop_at - 1, -1):
        ts, v = points[i]
        if ts <= after:
            break
        if v is not None and math.isfinite(v) and (v > top or top_ts is None and v == top):
            top, top_ts = v, ts
    return top, top_ts


@dataclass
class _Top:
    mark: SeriesMark  # the series scanned, as it was then
    after: float  # the window's left edge then
    top: float
    top_ts: float | None


@dataclass
class _Summed:
    mark: SeriesMark | None  # the series summed, as it was then
    width: int
    spc: float
    first: int
    sums: list[float]
    counts: list[int]
    # The means last returned and the fill rule they were worked out with: a sample that
    # only changes the newest column, which held points already, changes only its mean.
    means: list[float | None] | None = None
    max_gap: float = 0.0


@dataclass
class _Drawn:
    """A series' block rows as last drawn, and what from: at the same scale, only the columns
    whose means are not the ones drawn at the same times are drawn again."""

    height: int
    lo: float
    hi: float
    columns: list[float | None]
    rows: list[str]
    first: int = 0  # the absolute column `columns` start at


class ColumnMemo:
    """`time_columns` of series that only grow at the end and lose points at the start (the
    TUI's bounded histories), kept from one layout to the next: a new sample changes the
    newest column and a shift drops the oldest, so only the columns new points fall in are
    summed again, not every point of the window (a widget lays its chart out on most
    samples). Anything else (another series object, width or scale, a point dropped from
    inside the window, stamps going back) sums the window afresh."""

    def __init__(self) -> None:
        self._kept: dict[str, _Summed] = {}
        self._drawn: dict[str, _Drawn] = {}
        self._tops: dict[str, _Top] = {}

    def top(
        self, name: str, points: Sequence[tuple[float, float | None]], after: float
    ) -> tuple[float, float | None]:
        """`window_top(points, after)`, kept per series: a series only appended to since, whose
        top is still in the window, is scanned over its new points only (not the whole
        window each sample)."""
        kept = self._tops.get(name)
        added = kept.mark.appended(points) if kept is not None else None
        if (
            kept is not None
            and added is not None
            and after >= kept.after  # (a window reaching further back: scan it afresh)
            and (kept.top_ts is None or kept.top_ts > after and kept.top_ts >= points[0][0])
        ):
            new_top, new_ts = window_top(points, after, len(points) - added)
            if new_ts is not None and (kept.top_ts is None or new_top >= kept.top):
                kept.top, kept.top_ts = new_top, new_ts
            kept.mark, kept.after = SeriesMark(points, len(points), points[0][0], points[-1]), after
            return kept.top, kept.top_ts
        top, top_ts = window_top(points, after)
        mark = SeriesMark.of(points)
        if mark is not None:
            self._tops[name] = _Top(mark, after, top, top_ts)
        else:
            self._tops.pop(name, None)
        return top, top_ts

    def columns(
        self,
        name: str,
        points: Sequence[tuple[float, float | None]],
        width: int,
        spc: float,
        end: float,
        max_gap: float,
    ) -> list[float | None]:
        if width <= 0:
            return []
        first = math.floor(end / spc) - width + 1
        kept = self._kept.get(name)
        since = self._since(kept, points, width, spc, first)
        # Only the newest column summed again, which held points already: the columns that
        # fill a gap stay as they were (a fill copies an older column), so only its mean moves.
        newest_only = (
            kept is not None
            and since == width - 1
            and first == kept.first
            and kept.means is not None
            and kept.max_gap == max_gap
            and kept.counts[-1] > 0
        )
        if kept is None or since is None:
            kept = _Summed(None, width, spc, first, [0.0] * width, [0] * width)
            self._kept[name] = kept
            since = 0
        else:
            shift = first - kept.first
            if shift:
                kept.sums = kept.sums[shift:] + [0.0] * shift
                kept.counts = kept.counts[shift:] + [0] * shift
                kept.first = first
            for col in range(since, width):
                kept.sums[col], kept.counts[col] = 0.0, 0
        _add_columns(points, spc, first, since, kept.sums, kept.counts)
        kept.mark = SeriesMark.of(points)
        if newest_only and kept.counts[-1] > 0 and kept.means is not None:
            means = kept.means[:]  # (a copy: the caller's list is compared with the next)
            means[-1] = kept.sums[-1] / kept.counts[-1]
        else:
            means = _column_means(kept.sums, kept.counts, spc, max_gap)
        kept.means, kept.max_gap = means, max_gap
        return means[:]

    def block_rows(
        self,
        name: str,
        columns: list[float | None],
        height: int,
        lo: float,
        hi: float,
        first: int = 0,
    ) -> list[str]:
        """`block_rows(columns, height, lo, hi)`, kept per series; `first` is the absolute
        column `columns` start at. At the same scale, the columns that are the ones drawn
        (the same values at the same times) keep their characters (a column's characters
        depend on its value and the scale alone): a sample in the newest column draws that
        column again, and a window moved on by k columns draws its k + 1 newest (the one
        completed since, and the new), not every column."""
        drawn = self._drawn.get(name)
        n = len(columns)
        shift = first - drawn.first if drawn is not None else -1
        if (
            drawn is not None
            and (drawn.height, drawn.lo, drawn.hi) == (height, lo, hi)
            and len(drawn.columns) == n
            and 0 <= shift < n - 1
            and drawn.columns[shift:-1] == columns[: n - 1 - shift]
        ):
            if shift or drawn.columns[-1] != columns[-1]:
                newest = block_rows(columns[n - 1 - shift :], height, lo, hi)
                drawn.rows = [
                    row[shift:-1] + cells for row, cells in zip(drawn.rows, newest, strict=True)
                ]
                drawn.columns, drawn.first = columns, first
            return drawn.rows
        rows = block_rows(columns, height, lo, hi)
        self._drawn[name] = _Drawn(height, lo, hi, columns, rows, first)
        return rows

    @staticmethod
    def _since(
        kept: _Summed | None,
        points: Sequence[tuple[float, float | None]],
        width: int,
        spc: float,
        first: int,
    ) -> int | None:
        """The first window column (relative) to sum again, None to sum the whole window."""
        if kept is None or kept.mark is None or (kept.width, kept.spc) != (width, spc):
            return None
        if first < kept.first or first - kept.first >= width:
            return None
        added = kept.mark.appended(points)
        if added is None:
            return None
        n = len(points)
        if n < kept.mark.length + added and math.floor(points[0][0] / spc) >= first:
            return None  # points dropped from inside the window (a short history)
        if not added:
            return width
        return max(0, math.floor(points[n - added][0] / spc) - first)


def _nice_step(raw: float) -> float:
    """The smallest round step (1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 x 10^k) at or above `raw`."""
    if raw <= 0 or not math.isfinite(raw):
        return 1.0
    exp = math.floor(math.log10(raw))
    for m in (1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0):
        step = m * 10.0**exp
        if step >= raw * (1 - 1e-9):
            return step
    return 10.0 ** (exp + 1)


def axis_number(v: float) -> str:
    """A tick label: 0, 2.5, 150, 1.2k, 12k, 1.5M."""
    for div, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:.3g}{suffix}"
    return f"{v:.3g}"


def y_ticks(top: float, rows: int) -> tuple[float, dict[int, str]]:
    """The scale's maximum (a round number at or above `top`) and the tick labels by row: row r
    of `rows` (0 at the top) is labelled with the value at its top edge, and row `rows` (the
    axis line under the plot) with 0.

    The plot is split into 1 to 4 intervals of whole rows, so every label sits exactly on its
    value; of those splits the one with the lowest round maximum wins (the data fills the
    plot), and a plot of 4 rows or more gets at least one label between 0 and the maximum."""
    rows = max(1, rows)
    splits = [d for d in range(1, 5) if rows % d == 0 and (d > 1 or rows < 4)] or [1]
    best: tuple[float, int] | None = None
    for d in splits:
        hi = (_nice_step(top / d) if top > 0 else 1.0) * d
        if best is None or hi < best[0] - 1e-9 or (abs(hi - best[0]) <= 1e-9 and d > best[1]):
            best = (hi, d)
    assert best is not None
    hi, d = best
    return hi, {rows - i * rows // d: axis_number(i * hi / d) for i in range(d + 1)}


@functools.lru_cache(maxsize=64)
def _scale(top: float, rows: int) -> tuple[float, tuple[tuple[int, str], ...], int]:
    """`y_ticks(top, rows)`, its labels by row and the widest's length, kept (~25 calls)."""
    hi, labels = y_ticks(top, rows)
    return hi, tuple(sorted(labels.items())), max([len(t) for t in labels.values()])


def _age_label(age_s: float) -> str:
    if age_s % 60 == 0:
        return f"-{age_s / 60:.0f}m"
    return f"-{age_s:.0f}s" if age_s < 60 else f"-{age_s / 60:g}m"


@functools.lru_cache(maxsize=32)
def time_axis(width: int, window_s: float) -> str:
    """The time axis under a plot of `width` columns spanning `window_s`: labels at round ages
    ("-5m", "-4m", ...) where they fit, "now" at the right end."""
    line = ["─"] * width
    if width <= 0:
        return ""
    now = "now"
    spc = window_s / width
    placed: list[tuple[int, int]] = [(width - len(now), width)]
    for step in (10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600):
        if step / spc >= 10:  # labels about ten columns apart at least
            break
    ages: list[float] = [step * i for i in range(1, int(window_s // step) + 1)]
    if window_s not in ages:
        ages.append(window_s)  # the left end says how far back the chart goes
    for age in sorted(ages, reverse=True):
        text = _age_label(age)
        col = max(0, width - 1 - round(age / spc))
        end = col + len(text)
        if end <= width and all(end + 1 <= a or col >= b + 1 for a, b in placed):
            placed.append((col, end))
            line[col:end] = text
    if len(now) <= width:
        line[width - len(now) :] = now
    return "".join(line)


# A widget works the legend out up to three times a sample (its room, then the frame): the
# rows of the same names and values at the same width are the same.
@functools.lru_cache(maxsize=16)
def legend_rows(
    series: tuple[tuple[str, str, str, str], ...], width: int
) -> tuple[tuple[Cell, ...], ...]:
    return _lay_legend(series, width)


_SWATCH_W = len(SWATCH)


def _lay_legend(
    series: Sequence[tuple[str, str, str, str]], width: int
) -> tuple[tuple[Cell, ...], ...]:
    # Laid out on every sample of a busy server (its figures change): list comprehensions and
    # one join, not a generator step and a len() per cell.
    n = len(series)
    gap = 2
    texts: list[str] = []
    for use_long, gap in ((True, 2), (False, 2), (False, 1)):
        texts = [f" {label if use_long else short} {latest}" for _, label, short, latest in series]
        if len("".join(texts)) + n * _SWATCH_W + gap * (n - 1) <= width:  # one row: no breaks
            sp = (" " * gap, TEXT)
            one = [c for (s, *_), t in zip(series, texts) for c in (sp, (SWATCH, s), (t, TEXT))]
            return (tuple(one[1:]),) if one else ()
    spacer = (" " * gap, TEXT)
    rows: list[tuple[Cell, ...]] = []
    row: tuple[Cell, ...] = ()
    used = 0
    for (name, *_), text in zip(series, texts, strict=True):
        size = _SWATCH_W + len(text)
        if row and used + gap + size > width:
            rows.append(row)
            row, used = (), 0
        if row:
            row += (spacer,)
            used += gap
        row += ((SWATCH, name), (text, TEXT))
        used += size
    if row:
        rows.append(row)
    return tuple(rows)


def legend_height(series: Sequence[ChartSeries], width: int) -> int:
    return len(legend_rows(tuple([(s.name, s.label, s.short, s.latest) for s in series]), width))


@dataclass(frozen=True)
class ChartLayout:
    """Everything the throughput chart shows, before it is drawn: two equal layouts draw the
    same rows. Cheap next to drawing (a few column means per series), so a widget can compare
    layouts on every sample and draw only when something visible changed: an idle server's
    chart changes once per column's worth of seconds, not once per sample."""

    legend: tuple[tuple[Cell, ...], ...]
    plot_rows: int
    gutter: int
    labels: tuple[tuple[int, str], ...]  # (row, tick label), row plot_rows is the axis line
    axis: str  # the time axis under the plot
    main: tuple[str, tuple[str, ...]]  # (role, the plot's rows of block characters)
    others: tuple[tuple[str, str, str], ...]  # (gutter name, role, one row of blocks) each
    marks: tuple[tuple[int, str], ...]  # (plot column, label), oldest first


@dataclass(frozen=True)
class _Frame:
    """What every part of the chart shares: the legend, the newest stamp, the y scale and the
    time columns' width."""

    legend: tuple[tuple[Cell, ...], ...]
    end: float
    hi: float
    labels: tuple[tuple[int, str], ...]  # (row, tick label), by row
    gutter: int
    plot_w: int
    spc: float  # seconds per column
    has_points: bool
    # The stamp of the newest point holding the scale's top (None: no finite value above 0 or
    # at 0): the scale may change when it leaves the window.
    top_ts: float | None = None
    top: float = 0.0


def _frame(
    main: ChartSeries,
    others: Sequence[ChartSeries],
    legend_only: Sequence[ChartSeries],
    width: int,
    plot_rows: int,
    window_s: float,
    memo: ColumnMemo | None = None,
) -> _Frame:
    shown = [(s.name, s.label, s.short, s.latest) for s in (main, *others, *legend_only)]
    legend = legend_rows(tuple(shown), width)
    stamps = [s.points[-1][0] for s in (main, *others) if s.points]  # each oldest first
    end = max(stamps) if stamps else 0.0
    if memo is None:
        top, top_ts = window_top(main.points, end - window_s)
    else:
        top, top_ts = memo.top(main.name, main.points, end - window_s)
    hi, labels, widest = _scale(top, plot_rows)
    gutter = max([widest] + [len(s.short) for s in others]) + 1
    plot_w = width - gutter
    spc = window_s / plot_w if plot_w > 0 else window_s
    return _Frame(legend, end, hi, labels, gutter, plot_w, spc, bool(stamps), top_ts, top)


def _marks(markers: Sequence[ChartMarker], frame: _Frame) -> tuple[tuple[int, str], ...]:
    last = math.floor(frame.end / frame.spc)
    marks: dict[int, str] = {}
    for m in sorted(markers, key=lambda m: m.ts):
        col = frame.plot_w - 1 - (last - math.floor(m.ts / frame.spc))
        if 0 <= col < frame.plot_w and frame.has_points:
            marks[col] = m.label
    return tuple(marks.items())


@dataclass(frozen=True)
class ChartInput:
    """What the throughput chart is drawn from: the frame (legend, scale, columns) and the
    fill rule are worked out once; `memo` keeps each series' columns between layouts."""

    main: ChartSeries
    others: Sequence[ChartSeries]
    markers: Sequence[ChartMarker]
    width: int
    plot_rows: int
    window_s: float = 300.0
    legend_only: Sequence[ChartSeries] = ()
    # Where a widget keeps its series' columns between layouts (None: summed afresh).
    memo: ColumnMemo | None = field(default=None, compare=False)

    @cached_property
    def frame(self) -> _Frame:
        return _frame(
            self.main,
            self.others,
            self.legend_only,
            self.width,
            self.plot_rows,
            self.window_s,
            self.memo,
        )

    @property
    def plotted(self) -> bool:
        """False when there is room for the legend only."""
        return self.frame.plot_w >= 4 and self.plot_rows >= 1

    @cached_property
    def first_col(self) -> int:
        """The absolute column the window starts in."""
        return math.floor(self.frame.end / self.frame.spc) - self.frame.plot_w + 1

    @cached_property
    def max_gap(self) -> float:
        # All series are sampled together: one fill rule (the main series' sample interval).
        return fill_gap(self.main.points, self.frame.spc, self.first_col)

    def _columns(self, s: ChartSeries) -> list[float | None]:
        frame = self.frame
        if self.memo is None:
            return time_columns(s.points, frame.plot_w, frame.spc, frame.end, self.max_gap)
        return self.memo.columns(s.name, s.points, frame.plot_w, frame.spc, frame.end, self.max_gap)

    def layout(self) -> ChartLayout:
        """The layout of `throughput_chart` (see there); `plot_rows` 0 or a plot narrower than
        4 columns leaves only the legend."""
        frame, main = self.frame, self.main
        if not self.plotted:
            return ChartLayout(frame.legend, 0, frame.gutter, (), "", (main.name, ()), (), ())
        plot_w = frame.plot_w
        cols = self._columns(main)
        grid = (
            block_rows(cols, self.plot_rows, 0.0, frame.hi)
            if self.memo is None
            else self.memo.block_rows(
                main.name, cols, self.plot_rows, 0.0, frame.hi, self.first_col
            )
        )
        rows: list[tuple[str, str, str]] = []
        for s in self.others:
            cols = self._columns(s)
            present = [c for c in cols if c is not None]
            top = max(present) if present else 0.0
            hi = top if top > 0 else 1.0
            line = (
                block_rows(cols, 1, 0.0, hi)
                if self.memo is None
                else self.memo.block_rows(s.name, cols, 1, 0.0, hi, self.first_col)
            )[0]
            rows.append((s.short, s.name, line))
        return ChartLayout(
            frame.legend,
            self.plot_rows,
            frame.gutter,
            frame.labels,
            time_axis(plot_w, self.window_s),
            (main.name, tuple(grid)),
            tuple(rows),
            _marks(self.markers, frame),
        )


@dataclass(frozen=True)
class NewestColumn:
    """Each series' newest point when a chart was last worked out, and whether its column
    held only that value: a sample that repeats every series' newest value in the same
    column (an idle server's, most seconds) changes neither a column's mean, the scale, the
    legend nor the window, so the chart stays as drawn. Cheaper than a layout: a look at
    each series' new points, no pass over the window."""

    spc: float
    column: int  # the window's newest column
    newest: dict[str, tuple[float, float | None, bool]]  # name -> (ts, value, column uniform)
    # The scale is the main series' largest value over the last window_s seconds (not
    # columns): it may change when the newest point holding it leaves, at this stamp.
    top_leaves: float = math.inf
    # name -> the series as read then: one replaced or read again (a history loaded after the
    # first sample, with older stamps) is not "the same, grown".
    seen: dict[str, SeriesMark] = field(default_factory=dict)

    @classmethod
    def of(cls, chart: ChartInput) -> NewestColumn | None:
        """None where there is no such shortcut (a legend only, a series with no points or
        whose newest point is in an older column)."""
        if not chart.plotted:
            return None
        spc = chart.frame.spc
        column = math.floor(chart.frame.end / spc)
        newest: dict[str, tuple[float, float | None, bool]] = {}
        seen: dict[str, SeriesMark] = {}
        for s in (chart.main, *chart.others, *chart.legend_only):
            mark = SeriesMark.of(s.points)
            if mark is None or math.floor(mark.newest[0] / spc) != column:
                return None
            seen[s.name] = mark
            ts, value = mark.newest
            uniform = True
            for t, v in reversed(s.points):
                if math.floor(t / spc) != column:
                    break
                if v != value:
                    uniform = False
                    break
            newest[s.name] = (ts, value, uniform)
        top, top_ts = chart.frame.top, chart.frame.top_ts
        leaves = top_ts + chart.window_s if top_ts is not None and top > 0 else math.inf
        return cls(spc, column, newest, leaves, seen)

    def holds(
        self, points_of: Callable[[str], Sequence[tuple[float, float | None]] | None]
    ) -> bool:
        """True when every series' points since then (`points_of(name)`) are its newest value
        again, in the same column, and that column held nothing else; the series must be
        the ones it was taken of (the objects), only appended to since."""
        for name, (_, value, uniform) in self.newest.items():
            points = points_of(name)
            mark = self.seen.get(name)
            added = None if points is None or mark is None else mark.appended(points)
            if points is None or added is None:
                return False
            if points[-1][0] >= self.top_leaves:
                return False  # the scale's top may have left the window
            for i in range(len(points) - added, len(points)):
                t, v = points[i]
                if not uniform or v != value or math.floor(t / self.spc) != self.column:
                    return False
        return True


@dataclass(frozen=True)
class PlotColumn:
    """The plot as last drawn: the window's newest column, the series it was drawn from and
    when the scale's top leaves the window. Until a sample starts a new column (or the top
    leaves, or a series is replaced), the plot's completed columns, its scale and its time
    axis stay as they are: a widget may keep the plot and update only the legend's figures.
    The in-progress column is then shown as it was when its column began (it is complete by
    the time the next one starts, at most `spc` seconds later)."""

    spc: float
    column: int
    top_leaves: float
    seen: tuple[SeriesMark | None, ...]  # the plotted series as drawn (main, then others)

    @classmethod
    def of(cls, chart: ChartInput) -> PlotColumn | None:
        """None where nothing is plotted (a legend only)."""
        if not chart.plotted:
            return None
        frame = chart.frame
        leaves = (
            frame.top_ts + chart.window_s
            if frame.top_ts is not None and frame.top > 0
            else math.inf
        )
        seen = tuple([SeriesMark.of(s.points) for s in (chart.main, *chart.others)])
        return cls(frame.spc, math.floor(frame.end / frame.spc), leaves, seen)

    def holds(self, points: Sequence[Sequence[tuple[float, float | None]] | None]) -> bool:
        """True when every plotted series (`points`: each one's points now, in the chart's
        order; more after them are not looked at) is the one drawn, only appended to since,
        with no point in a newer column, and the scale's top is still in the window."""
        column_of = None  # (a stamp seen in the column: series sampled together share it)
        for mark, now in zip(self.seen, points, strict=False):
            if mark is None:
                if now:
                    return False  # its first points
                continue
            added = None if now is None else mark.appended(now)
            if now is None or added is None:
                return False
            ts = now[-1][0]
            if ts >= self.top_leaves:
                return False
            if added and ts != column_of:
                if math.floor(ts / self.spc) != self.column:
                    return False
                column_of = ts
        return True


def draw_chart(layout: ChartLayout) -> list[Row]:
    """The rows of a chart layout, top to bottom (see `throughput_chart`)."""
    out: list[Row] = list(layout.legend)
    if not layout.plot_rows:
        return out
    labels = dict(layout.labels)
    gutter, plot_rows = layout.gutter, layout.plot_rows
    marks = dict(layout.marks)
    main_role, grid = layout.main
    body: list[tuple[str, str, list[str]]] = [
        (labels.get(i, "").rjust(gutter - 1) + "┤", main_role, list(line))
        for i, line in enumerate(grid)
    ]
    body += [(short.rjust(gutter - 1) + "┤", role, list(row)) for short, role, row in layout.others]
    axis: Row = ((labels[plot_rows].rjust(gutter - 1) + "└", AXIS), (layout.axis, AXIS))
    for y, (head, role, cells) in enumerate(body):
        if y == plot_rows:
            out.append(axis)
        if not marks:  # one role across the row: one run (most rows, most of the time)
            out.append(((head, AXIS), ("".join(cells), role)) if cells else ((head, AXIS),))
            continue
        roles = [role] * len(cells)
        for col in marks:
            if cells[col] == " " or y == 0:
                cells[col] = "│"
            roles[col] = MARKER
        if y == 0:
            _label_markers(cells, roles, marks)
        line: list[Cell] = [(head, AXIS)]
        for ch, r in zip(cells, roles, strict=True):
            if line[-1][1] == r:
                line[-1] = (line[-1][0] + ch, r)
            else:
                line.append((ch, r))
        out.append(tuple(line))
    if len(body) == plot_rows:
        out.append(axis)
    return out


def throughput_chart(
    main: ChartSeries,
    others: Sequence[ChartSeries],
    markers: Sequence[ChartMarker],
    width: int,
    plot_rows: int,
    window_s: float = 300.0,
    legend_only: Sequence[ChartSeries] = (),
) -> list[Row]:
    """The chart, top to bottom: legend, `main` on `plot_rows` rows with a y-axis scale, the
    time axis, one row per series of `others` (each scaled 0..its own maximum). Markers are
    vertical lines at their time, labelled on the top plot row; markers outside the window are
    left out. Every series shares the time columns, so a marker lines up across all rows.
    `legend_only` series are in the legend (their latest value) without a row."""
    return draw_chart(
        ChartInput(main, others, markers, width, plot_rows, window_s, legend_only).layout()
    )


def _room(col: int, step: int, most: int, width: int, blocked: set[int]) -> list[int]:
    """Free cells from beside `col` towards `step`, up to `most`, stopping at a blocked one."""
    out: list[int] = []
    i = col + step
    while 0 <= i < width and len(out) < most and i not in blocked:
        out.append(i)
        i += step
    return out


MIN_LABEL = 4  # a label cut shorter than this says nothing ("tp"): left out instead


def _label_markers(cells: list[str], roles: list[str], marks: dict[int, str]) -> None:
    """Write each marker's label on the row beside its line: to the right when it fits, else to
    the left. A label never covers another marker's line or label and keeps a blank cell from
    the next label; short of room it is cut with an ellipsis, or left out when under MIN_LABEL
    cells (the newest marker goes first: it is the one people look for)."""
    width = len(cells)
    taken = set(marks)  # marker lines and placed labels
    apart: set[int] = set()  # the cell each side of a placed label: labels never touch
    for col in sorted(marks, reverse=True):
        text = marks[col]

        right, left = (
            _room(col, 1, len(text), width, taken | apart),
            _room(col, -1, len(text), width, taken | apart),
        )
        free = right if len(right) == len(text) or len(right) >= len(left) else left
        if len(free) < len(text):
            if len(free) < MIN_LABEL:
                continue
            text = text[: len(free) - 1] + "…"
        free = sorted(free)
        for i, ch in zip(free, text):
            cells[i] = ch
            roles[i] = MARKER
            taken.add(i)
        apart.update((free[0] - 1, free[-1] + 1))
