"""A bench run cut by a swap, in words: the agent stops a sweep when the user confirms a swap of
its slot (agent/children.py) and marks its result `cut`; the CLI, the TUI's Activity and the
session report each say so with this line."""

from __future__ import annotations

from typing import Any


def cut_line(cut: dict[str, Any]) -> str:
    """A result's `cut` ({by, slot, to, client, at}) as one line."""
    by = f" by {cut['client']}" if cut.get("client") else ""
    return (
        f"CUT by a {cut.get('by') or 'swap'} of slot {cut.get('slot')} to {cut.get('to')}{by}: "
        "the points after it were not measured"
    )
