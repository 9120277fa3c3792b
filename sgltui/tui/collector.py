"""The garbage collector's pace in the TUI's own process, set once the first screen is drawn.

A busy screen allocates every second (strips, segments, the model's readings): with CPython's
default threshold (700 net allocations of tracked objects) the young generation was collected
about once a second and the middle one every ten, ~0.2-0.3 ms a second of a busy 8-slot
screen, most of it walking objects that a few seconds later are garbage freed by their
reference counts anyway (docs/performance.md, "Tenth round"). A higher threshold collects
every ~10 s instead; cycles wait longer (a few MB at most).

The objects made while starting (Textual's CSS, widgets, the first STATUS) live as long as the
app: after one full collection, `gc.freeze` moves them out of the generations, so that a full
collection later (rare, as long-lived objects pile up) walks only what came after.

Only in a process that is the TUI's (a real terminal): an app run headless shares its process
(tests, a screenshot run), where freezing would keep every app's cycles for good."""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 7000  # net allocations between collections of the youngest generation

_settled: list[bool] = []  # once per process


def settle(headless: bool) -> bool:
    """Freeze what starting made and collect at the TUI's pace; True when it did (the first
    call of a process not headless)."""
    if headless or _settled:
        return False
    _settled.append(True)
    gc.collect()  # (startup's garbage freed first: a frozen cycle is never collected)
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
    return True
