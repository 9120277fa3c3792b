"""core/retry.py: the one backoff, and each caller's policy as it states it."""

from __future__ import annotations

import re
from pathlib import Path

from sgltui.core.retry import Backoff

SGLTUI = Path(__file__).resolve().parents[2] / "sgltui"


def waits(b: Backoff, n: int) -> list[float]:
    return [b.failed() for _ in range(n)]


def test_doubling_to_a_cap_and_starting_over_after_a_success():
    b = Backoff(first=1.0, cap=30.0)  # the fleet link's
    assert waits(b, 7) == [1, 2, 4, 8, 16, 30, 30]
    b.reset()
    assert b.failed() == 1.0


def test_the_first_failures_may_go_again_at_once():
    b = Backoff(first=1.0, cap=60.0, immediate=1)  # the keeper's: a first crash restarts now
    assert waits(b, 9) == [0, 1, 2, 4, 8, 16, 32, 60, 60]
    assert b.wait(1) == 0.0 and b.wait(3) == 2.0


def test_a_fixed_interval():
    b = Backoff(first=2.0, cap=2.0, factor=1.0)  # the session writer's disk retry
    assert waits(b, 3) == [2.0, 2.0, 2.0]


def test_no_other_module_writes_the_arithmetic_again():
    """`x * 2 ** n` or `min(x * 2, cap)` anywhere else is a sixth backoff."""
    pattern = re.compile(r"\* 2 \*\* |min\(\s*\w+\s*\*\s*2\s*,")  # (2**20, a MiB, is no backoff)
    found = [
        f"{p.relative_to(SGLTUI)}:{i}"
        for p in SGLTUI.rglob("*.py")
        if p.name != "retry.py"
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert not found, found
