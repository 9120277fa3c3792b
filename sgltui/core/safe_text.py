"""Text from files users write (profile names, descriptions, paths), made safe to print.

A profile may hold any string, including terminal escapes (ESC [2J clears the screen, OSC 0 sets
the window title, U+202E flips the line). Everything sgltui prints from a profile -- the CLI's
tables and errors, the TUI's profile rows -- goes through `printable`, which shows such characters
escaped (so the user can see and fix them) and cuts long text to a limit.
"""

from __future__ import annotations

import unicodedata
from typing import Any

ELLIPSIS = "…"


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return {"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(ch, f"\\x{code:02x}")
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _unsafe(ch: str) -> bool:
    # Cc: C0, DEL and C1 controls (ESC, BEL, CSI...). Cf: format characters such as the bidi
    # overrides. Cs/Co/Cn: lone surrogates, private use, unassigned -- nothing a name needs.
    # Zl/Zp: line and paragraph separators, which break a one-line row.
    category = unicodedata.category(ch)
    return category[0] == "C" or category in ("Zl", "Zp")


def printable(text: object, limit: int | None = None) -> str:
    """`text` with control and format characters escaped, cut to `limit` characters (with …)."""
    text = str(text)
    if limit is not None and len(text) > limit:
        text = text[: max(limit - 1, 0)]
        cut = True
    else:
        cut = False
    if not text.isprintable():  # str.isprintable() is False for every character _unsafe() finds
        text = "".join(_escape(ch) if _unsafe(ch) else ch for ch in text)
        if limit is not None and len(text) > limit:
            text, cut = text[: max(limit - 1, 0)], True
    return text + ELLIPSIS if cut else text


# Text fields of a profile row (agent `profiles` op, `sgltui profiles list --json`) and how much
# of each a display shows. Names and keys are validated plain at load; descriptions are free text.
PROFILE_TEXT_FIELDS = {
    "name": 64,
    "key": 16,
    "extends": 64,
    "description": 200,
    # The agent's verdicts quote the files (an invalid value, a path): free text as well.
    "problem": 300,
    "host_pool_problem": 120,
    "host_pool_how": 120,
    "host_pool_note": 120,
}


def printable_profile_row(row: dict[str, Any]) -> dict[str, Any]:
    """`row` with its text fields made printable and cut, for the TUI and other displays."""
    out = dict(row)
    for name, limit in PROFILE_TEXT_FIELDS.items():
        if isinstance(out.get(name), str):
            out[name] = printable(out[name], limit)
    return out
