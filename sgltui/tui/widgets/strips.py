"""Lines drawn from parts: a styled part rendered once and kept, the figures that change each
sample appended as plain text. Rendering a whole line's markup each second (parse, style,
segment) cost most of what the memory pane and the slots view spent on an idle screen; a
line's styled parts change far less often than its figures.

A part rendered on its own carries the cell offsets Content gives its segments (text
selection reads them, a screenshot's ids hash them), counted from its own start: `shifted`
moves them to where the part sits in the line, `at` gives a plain segment its offset.
"""

from __future__ import annotations

import functools

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip


@functools.lru_cache(maxsize=256)
def at(x: int) -> Style:
    """The meta Content gives a segment that starts at cell `x` of its line (kept: a Style
    with meta pickles it, a slots row's figures each sample)."""
    return Style.from_meta({"offset": (x, 0)})


def shifted(strip: Strip, x: int) -> Strip:
    """A part rendered on its own, placed at cell `x` of the line: its segments' offsets
    moved by x."""
    out = []
    for seg in strip:
        style = seg.style
        if style is not None and "offset" in style.meta:
            ox, oy = style.meta["offset"]
            style = style.clear_meta_and_links() + Style.from_meta(
                {**style.meta, "offset": (ox + x, oy)}
            )
        out.append(Segment(seg.text, style, seg.control))
    return Strip(out, strip.cell_length)


def row_spans(rows: list[int]) -> list[tuple[int, int]]:
    """Ascending row numbers as runs of consecutive rows, (first, count) each: [0, 1, 2, 5]
    is [(0, 3), (5, 1)]. A widget refreshes a region per run, not per row: a busy pool's
    sample changes every row of the slots view, and each region is Textual's work twice
    (the widget's refresh, then the compositor's cut of it), the one region the same rows."""
    spans: list[tuple[int, int]] = []
    for row in rows:
        if spans and spans[-1][0] + spans[-1][1] == row:
            spans[-1] = (spans[-1][0], spans[-1][1] + 1)
        else:
            spans.append((row, 1))
    return spans
