"""Small helpers shared by the core tests."""

from __future__ import annotations

import textwrap
from pathlib import Path


def write(directory: Path, name: str, text: str) -> Path:
    """Write a profile file from an indented literal; returns its path."""
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def line_of(path: Path, needle: str) -> int:
    """1-based line of the first line of `path` that contains `needle`."""
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in {path}")
