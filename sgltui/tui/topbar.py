"""The header line: its parts, the least needed left out first when the terminal is narrow.

A header longer than the terminal was cut at its end, where the parts that ask for action are
(`demo load running (D: stop)`, a full disk): at 80 columns it read `... · demo load`.
"""

from __future__ import annotations

from textual.content import Content

SEP = " · "


def fit(parts: list[tuple[str, int]], width: int) -> str:
    """Join (markup, keep) parts with " · " into at most `width` cells: while too long, the part
    of the lowest `keep` goes (the last of equals first); parts of keep 0 or more always stay."""
    shown = list(parts)

    def cells(ps: list[tuple[str, int]]) -> int:
        return Content.from_markup(SEP.join(m for m, _ in ps)).cell_length

    while cells(shown) > width:
        droppable = [i for i, (_, keep) in enumerate(shown) if keep < 0]
        if not droppable:
            break
        lowest = min(shown[i][1] for i in droppable)
        shown.pop(max(i for i in droppable if shown[i][1] == lowest))
    return SEP.join(m for m, _ in shown)
