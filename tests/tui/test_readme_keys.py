"""Issue 51 item 14: README's key table said `w` changes the log level (it is `e`; `w` wraps).
Each row of the table that names a key's id must give that id's key (tui/bindings.py)."""

from __future__ import annotations

import re
from pathlib import Path

from sgltui.tui.bindings import KEYS

# Textual's names of the keys the README writes as they are typed
TYPED = {"slash": "/", "question_mark": "?", "plus": "+", "minus": "-", "f1": "F1"}
README = Path(__file__).resolve().parents[2] / "README.md"


def key_rows() -> list[tuple[str, str]]:
    text = README.read_text(encoding="utf-8")
    table = text.split("### Keys", 1)[1].split("\n\n", 2)[1]
    rows = []
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) >= 3:
            rows.append((cells[0], cells[1]))
    return rows


def test_each_key_the_readme_names_is_the_apps():
    by_id = {k.id: [TYPED.get(x, x) for x in k.key.split(",")] for k in KEYS}
    checked = 0
    for keys_cell, ids_cell in key_rows():
        shown = set(re.findall(r"`([^`]+)`", keys_cell))
        for key_id in re.findall(r"`([a-z_]+\.[a-z_0-9]+)`", ids_cell):
            if key_id in by_id:
                said = f"README gives {shown} for {key_id}: it is {by_id[key_id]}"
                assert set(by_id[key_id]) <= shown, said
                checked += 1
    assert checked >= 15  # the table was read
