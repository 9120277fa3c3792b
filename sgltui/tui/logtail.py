"""The log lines a TUI opening on a running server shows: the tail, and the server's last lines
that are not access or per-batch lines when the tail is all of those.

A server under load writes an access line per request: its last 200 lines were all folded away,
and the log pane of a re-opened TUI read only `248 access/batch lines hidden (z shows them)`.
"""

from __future__ import annotations

from sgltui import protocol
from sgltui.tui.logbuffer import is_noise
from sgltui.tui.source import TuiSource, ask

TAIL = 200  # lines read first, as before
WANTED = 30  # fewer lines than this that are not noise: read further back
DEEP = 20_000  # how far back (LogsArgs allows 100,000); one read, only when the tail is noise
KEEP = 60  # lines that are not noise kept from that deeper read


async def read_tail(source: TuiSource, slot: str) -> protocol.LogsReply:
    tail: protocol.LogsReply = await ask(source, "logs", slot=slot, lines=TAIL)
    if len(tail.lines) < TAIL or sum(not is_noise(t) for t in tail.lines) >= WANTED:
        return tail  # the whole file, or enough to read
    deep: protocol.LogsReply = await ask(source, "logs", slot=slot, lines=DEEP)
    if deep.launch_id != tail.launch_id:
        return tail  # a new launch came in between: its own tail is the one to show
    lines = deep.lines
    # The deeper read's last KEEP lines that are not noise, and its last TAIL lines: in order.
    quiet = [i for i, t in enumerate(lines) if not is_noise(t)][-KEEP:]
    keep = sorted(set(quiet) | set(range(max(0, len(lines) - TAIL), len(lines))))
    return protocol.LogsReply(
        lines=[lines[i] for i in keep], path=deep.path, launch_id=deep.launch_id
    )
