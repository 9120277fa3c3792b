"""Read the session's append-only files safely, rotated parts included.

The recorder writes one JSON object per line and flushes per line, so a kill -9 (or a full disk)
can leave at most one torn line: the last one, without its newline. A reader must never trip on
it, and must say how much it skipped so a report can mention it. Undecodable lines in the middle
(a torn line that a re-opened recorder closed with a newline) are skipped the same way.

Rotation: ``events.jsonl`` is the live part; older parts are ``events.jsonl.1`` (newest) up to
``events.jsonl.N`` (oldest). Readers walk them oldest first, so records come out in time order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_PART_SUFFIX = re.compile(r"\.(\d+)$")


def rotated_parts(path: Path) -> list[Path]:
    """Every part of a rotated file, oldest first, the live file last (only parts that exist)."""
    path = Path(path)
    numbered: list[tuple[int, Path]] = []
    try:
        for candidate in path.parent.iterdir():
            name = candidate.name
            if name.startswith(path.name + "."):
                m = _PART_SUFFIX.search(name[len(path.name) :])
                if m and name == f"{path.name}.{m.group(1)}":
                    numbered.append((int(m.group(1)), candidate))
    except OSError:
        pass
    parts = [p for _, p in sorted(numbered, key=lambda t: t[0], reverse=True)]
    if path.exists():
        parts.append(path)
    return parts


@dataclass
class ReadStats:
    """What a read skipped: torn_tail is the unfinished last line, bad_lines the rest."""

    records: int = 0
    bad_lines: int = 0
    torn_tail: bool = False
    parts: int = 0
    unreadable: list[str] = field(default_factory=list)

    @property
    def skipped(self) -> int:
        return self.bad_lines + (1 if self.torn_tail else 0)

    def note(self) -> str | None:
        """One line for a report, or None when nothing was skipped."""
        bits = []
        if self.torn_tail:
            bits.append("an unfinished last line (the writer was stopped mid-line)")
        if self.bad_lines:
            bits.append(f"{self.bad_lines} undecodable line(s)")
        if self.unreadable:
            bits.append("unreadable: " + ", ".join(self.unreadable))
        return "skipped " + " and ".join(bits) if bits else None


def iter_jsonl(
    path: Path, stats: ReadStats | None = None, rotated: bool = True
) -> Iterator[dict[str, Any]]:
    """Yield each JSON object of `path` (and its rotated parts, oldest first).

    Lines that are not a complete JSON object are skipped and counted in `stats`. Only the very
    last line of the live part can be "torn"; a line without newline in an older part is a
    decodable-or-bad line like any other (rotation happens between whole lines).
    """
    stats = stats if stats is not None else ReadStats()
    parts = rotated_parts(path) if rotated else ([Path(path)] if Path(path).exists() else [])
    for index, part in enumerate(parts):
        stats.parts += 1
        is_live = index == len(parts) - 1
        try:
            fh = open(part, "rb")
        except OSError as exc:
            stats.unreadable.append(f"{part.name} ({exc.strerror or exc})")
            continue
        with fh:
            for raw in fh:
                if not raw.endswith(b"\n"):
                    # No newline: the writer never finished this line (it may still be writing).
                    if is_live:
                        stats.torn_tail = True
                        break
                if not raw.strip():
                    continue
                try:
                    obj = json.loads(raw)
                except ValueError:
                    stats.bad_lines += 1
                    continue
                if not isinstance(obj, dict):
                    stats.bad_lines += 1
                    continue
                stats.records += 1
                yield obj


def read_jsonl(path: Path, rotated: bool = True) -> tuple[list[dict[str, Any]], ReadStats]:
    """All objects of a JSONL file (rotated parts included) and what was skipped."""
    stats = ReadStats()
    records = list(iter_jsonl(path, stats, rotated=rotated))
    return records, stats


def iter_text_lines(path: Path, rotated: bool = True) -> Iterator[str]:
    """Lines of a text log (a server's output), rotated parts oldest first, without newlines.

    Bytes that are not UTF-8 (a crashing process can print anything) are replaced, not fatal.
    """
    parts = rotated_parts(path) if rotated else [Path(path)]
    for part in parts:
        try:
            fh = open(part, encoding="utf-8", errors="replace")
        except OSError:
            continue
        with fh:
            for line in fh:
                yield line.rstrip("\r\n")


def read_json(path: Path) -> tuple[Any, str | None]:
    """(object, None) or (None, one-line reason) for a whole-file JSON record."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh), None
    except FileNotFoundError:
        return None, f"{path.name}: missing"
    except OSError as exc:
        return None, f"{path.name}: {exc.strerror or exc}"
    except ValueError as exc:
        return None, f"{path.name}: not valid JSON ({exc})"
    except RecursionError:
        return None, f"{path.name}: not valid JSON (nested too deeply)"


# ---------------------------------------------------------------------------------------------
# Indexed access: week-long sessions hold hundreds of thousands of samples and log lines; keep
# only (time, part, offset) per line in memory and read the lines themselves on demand.
# ---------------------------------------------------------------------------------------------


class _Parts:
    """Open file handles of a rotated file's parts, for seek-and-read."""

    def __init__(self, parts: list[Path]) -> None:
        self.paths = parts
        self._fh: dict[int, Any] = {}

    def read_line(self, part: int, offset: int) -> bytes:
        fh = self._fh.get(part)
        if fh is None:
            fh = self._fh[part] = open(self.paths[part], "rb")
        fh.seek(offset)
        return fh.readline()

    def close(self) -> None:
        for fh in self._fh.values():
            fh.close()
        self._fh.clear()


def _scan(parts: list[Path], stats: ReadStats | None) -> Iterator[tuple[int, int, bytes]]:
    """(part index, offset, raw line) for every complete line, oldest part first."""
    for index, part in enumerate(parts):
        if stats is not None:
            stats.parts += 1
        is_live = index == len(parts) - 1
        try:
            fh = open(part, "rb")
        except OSError as exc:
            if stats is not None:
                stats.unreadable.append(f"{part.name} ({exc.strerror or exc})")
            continue
        with fh:
            offset = 0
            for raw in fh:
                start, offset = offset, offset + len(raw)
                if not raw.endswith(b"\n") and is_live:
                    if stats is not None:
                        stats.torn_tail = True
                    break
                yield index, start, raw


class JsonlIndex:
    """The objects of a JSONL file (rotated parts included), sorted by their "ts", read lazily.

    Sequence-like: len(), [i], slice(a, b), iteration; `ts` is the sorted array of times (bisect
    it). Lines without a numeric "ts" are skipped like undecodable ones."""

    def __init__(self, path: Path, stats: ReadStats | None = None, rotated: bool = True) -> None:
        from array import array

        self.stats = stats if stats is not None else ReadStats()
        parts = rotated_parts(path) if rotated else ([Path(path)] if Path(path).exists() else [])
        self._parts = _Parts(parts)
        rows: list[tuple[float, int, int]] = []
        for part, offset, raw in _scan(parts, self.stats):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except ValueError:
                self.stats.bad_lines += 1
                continue
            ts = obj.get("ts") if isinstance(obj, dict) else None
            if not isinstance(ts, (int, float)) or isinstance(ts, bool):
                self.stats.bad_lines += 1
                continue
            self.stats.records += 1
            rows.append((float(ts), part, offset))
        rows.sort()  # stable for equal times: file order
        self.ts = array("d", (r[0] for r in rows))
        self._part = array("H", (r[1] for r in rows))
        self._off = array("q", (r[2] for r in rows))

    def __len__(self) -> int:
        return len(self.ts)

    def __getitem__(self, i: int) -> dict[str, Any]:
        if i < 0:
            i += len(self.ts)
        if not 0 <= i < len(self.ts):
            raise IndexError(i)
        obj: dict[str, Any] = json.loads(self._parts.read_line(self._part[i], self._off[i]))
        return obj

    def slice(self, a: int, b: int) -> list[dict[str, Any]]:
        return [self[i] for i in range(max(0, a), min(b, len(self.ts)))]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for i in range(len(self.ts)):
            yield self[i]

    def close(self) -> None:
        self._parts.close()


class TextLineIndex:
    """The lines of a text log (rotated parts included) with a time per line, read lazily.

    `stamp(line) -> float | None` gives a line's own time; lines without one inherit the
    previous line's (first lines: `start`), and time never goes backwards."""

    def __init__(
        self,
        path: Path,
        stamp: Callable[[str], float | None],
        start: float,
        rotated: bool = True,
    ) -> None:
        from array import array

        parts = rotated_parts(path) if rotated else ([Path(path)] if Path(path).exists() else [])
        self._parts = _Parts(parts)
        self.ts = array("d")
        self._part = array("H")
        self._off = array("q")
        last = start
        for part, offset, raw in _scan(parts, None):
            t = stamp(raw[:40].decode("utf-8", "replace"))
            if t is not None and t >= last - 1.0:  # a stamp from another clock must not rewind
                last = max(last, t)
            self.ts.append(last)
            self._part.append(part)
            self._off.append(offset)

    def __len__(self) -> int:
        return len(self.ts)

    def lines(self, a: int, b: int) -> list[str]:
        return [
            self._parts.read_line(self._part[i], self._off[i])
            .decode("utf-8", "replace")
            .rstrip("\r\n")
            for i in range(max(0, a), min(b, len(self.ts)))
        ]

    def close(self) -> None:
        self._parts.close()
