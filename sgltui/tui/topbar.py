"""The header line: its parts, the least needed left out first when the terminal is narrow.

A header longer than the terminal was cut at its end, where the parts that ask for action are
(`demo load running (D: stop)`, a full disk): at 80 columns it read `... · demo load`.
"""

from __future__ import annotations

from pathlib import Path

from textual.content import Content
from textual.markup import escape

from sgltui.tui.fleetsource import FleetSource, host_of
from sgltui.tui.model import TuiModel
from sgltui.tui.source import TuiSource

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


def parts(model: TuiModel, source: TuiSource, fleet: FleetSource | None) -> list[tuple[str, int]]:
    """The header's parts as (markup, keep): a narrow terminal leaves out those of keep < 0,
    lowest first (see fit)."""
    agent = model.agent
    out: list[tuple[str, int]] = [("[b]sgltui[/]", 0)]
    if source.read_only:
        out.append((f"[b $warning]{source.read_only_label}[/]", 0))
    if fleet is not None:
        hosts = fleet.hosts
        up = sum(1 for h in hosts if h.reachable)
        style = "$success" if up == len(hosts) else "$warning"
        out.append((f"[{style}]● {up}/{len(hosts)} hosts reachable[/]", 0))
        focus = host_of(model.current_id) or fleet.focused()
        if focus:
            out.append((f"host {escape(focus)}", -1))
    elif model.connected:
        out.append(("[$success]● connected[/]", 0))
        if agent.pid:
            out.append((f"agent pid {agent.pid}", -1))
        if agent.session_dir:
            out.append((f"session {escape(Path(agent.session_dir).name)}", -2))
    else:
        out.append((f"[$error]○ {escape(model.connection_note)}[/]", 0))
    if agent.demo_load:
        out.append(("[b $warning]demo load running[/] (D: stop)", 0))
    if not agent.disk.ok:
        out.append((f"[b $error]disk: {escape(str(agent.disk.error))}[/]", 0))
    return out
