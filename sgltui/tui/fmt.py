"""Small text formatters of the panes: plain numbers, bar cells.

Times, durations, sizes and rates are core/units.py's (the same in the CLI, `top` and reports)."""

from __future__ import annotations

import re
from collections.abc import Callable

from sgltui.client.errors import AgentError
from sgltui.core.charts import filled_cells


def num(v: float | int | None, digits: int = 0) -> str:
    if v is None:
        return "-"
    if digits == 0:
        return f"{v:,.0f}"
    return f"{v:,.{digits}f}"


def bar_cells(fractions: list[float], width: int) -> list[int]:
    """Split `width` cells between consecutive shares (0..1 each, summing to <= 1).

    Each segment ends where `charts.filled_cells` fills up to its running total, so the bar
    as a whole follows the one fill rule (rounded down, full only when full); a small non-zero
    share still gets a cell (a 1 GiB server on an 80 GiB GPU must stay visible).
    """
    cells: list[int] = []
    total = 0.0
    used = 0
    for f in fractions:
        f = max(0.0, f)
        total = min(1.0, total + f)
        end = filled_cells(total, width)
        n = max(0, end - used)  # an earlier bumped-up share may already cover this one
        if f > 0 and n == 0 and used < width:
            n = 1
        n = min(n, width - used)
        cells.append(n)
        used += n
    return cells


# A key named in the agent's TUI wording (`{key:server.stop}`): filled by the app with the key
# its keymap binds (App.key_of), so a remapped key is the one the toast names.
KEY_TOKEN = re.compile(r"\{key:([a-z_.]+)\}")


def with_keys(text: str, key_of: Callable[[str], str] | None = None) -> str:
    """`text` with each `{key:ID}` replaced by key_of(ID); an id it does not know (a newer
    agent's), or no key_of, leaves the action's name."""

    def key(m: re.Match[str]) -> str:
        try:
            return key_of(m.group(1)) if key_of is not None else m.group(1).split(".")[-1]
        except KeyError:
            return m.group(1).split(".")[-1]

    return KEY_TOKEN.sub(key, text)


def one_line(exc: BaseException, key_of: Callable[[str], str] | None = None) -> str:
    """An error as the one line a toast shows: its first line, else its class's name. The
    agent's refusal gives its remedy in the TUI's words (the key to press, named by `key_of`)
    where it has them, not the CLI command its plain line ends with."""
    if isinstance(exc, AgentError):
        text = with_keys(exc.tui_line(), key_of).strip().splitlines()
    else:
        text = str(exc).strip().splitlines()
    return text[0] if text else exc.__class__.__name__
