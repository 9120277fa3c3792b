"""The log tail behind the log pane: bounded, levelled, filterable, searchable.

Kept apart from the widget so that filtering and search rules are plain functions of the
buffer (tested without a terminal), and so the widget can redraw from it after a filter change.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Iterator

import msgspec

# SGLang does not print a level (its prefix is only `[time TP0]`-style time and ranks),
# so the level is read from what the line says. Order matters: errors win over warnings.
# Each pattern starts with a look ahead at the first characters its words can start with
# (under the pattern's own flags): a search tries every alternative at every position, and a
# position no word can start at is passed in one test (the error words' search took ~3x as
# long without it, ~10 us a line of 60 characters).
_ERROR_RE = re.compile(
    r"(?=[teofcanwk])(?:Traceback|\bERROR\b|Error:|Exception|out of memory|OutOfMemory|"
    r"\bfailed\b|crashed|address already in use|Not enough memory|watchdog timeout|Killed)",
    re.IGNORECASE,
)
_WARNING_RE = re.compile(
    r"(?=[Wdifu])(?:\bWARNING\b|\bWARN\b|deprecated|is reset to|fewer than|unbalanced|Warning:)"
)


# Lines that repeat every request or every scheduler step: folded away by default so the
# tail shows what happened (a key shows them again).
_ACCESS_RE = re.compile(
    # uvicorn access lines, bare or after SGLang's "[time] " prefix
    r'(?=[\]I])(?:^|\] )INFO:\s+\S+ - "[A-Z]+ \S+ HTTP/[\d.]+" \d{3}'
)
# SGLang's per-batch lines
_BATCH_RE = re.compile(r"(?=[PD])(?:Prefill|Decode) batch(?: \[\d+\])?, ")
# A batch line is SGLang's own figures (tokens, usage, throughput): never an error or a
# warning. Most lines of a serving or idle server are these (the gateway's health check is
# a one-token prefill each second per server), so they skip the level patterns.
_BATCH_HEAD_RE = re.compile(r"^(?:\[[^\]]*\] )?" + _BATCH_RE.pattern)  # after the [time] only
# Any of the patterns anywhere: a line with none (most lines that are no batch line) is an
# info line that is shown, known in one search.
_ANY_RE = re.compile(
    f"(?i:{_ERROR_RE.pattern})|{_WARNING_RE.pattern}|{_ACCESS_RE.pattern}|{_BATCH_RE.pattern}"
)


def is_noise(text: str) -> bool:
    """An access line or a per-batch line (folded by default)."""
    return _ACCESS_RE.search(text) is not None or _BATCH_RE.search(text) is not None


def line_level(text: str) -> str:
    """'error', 'warning' or 'info' for one log line."""
    if _ERROR_RE.search(text):
        return "error"
    if _WARNING_RE.search(text):
        return "warning"
    return "info"


def classify(text: str) -> tuple[str, bool]:
    """(level, noise) of one line: `line_level`, and folded when it is an info line that
    `is_noise` says repeats. A line with none of the patterns is known in one search (the
    rules' searched each: four searches a line, ~12 us)."""
    if _BATCH_HEAD_RE.match(text):
        return "info", True
    if _ANY_RE.search(text) is None:
        return _PLAIN
    if _ERROR_RE.search(text):
        return "error", False
    if _WARNING_RE.search(text):
        return "warning", False
    return "info", True  # (what _ANY_RE found: an access or a batch line)


_PLAIN = ("info", False)
_NOISE = ("info", True)


class LogLine(msgspec.Struct, frozen=True, gc=False):
    """A line of the buffer: a Struct, made in C (a frozen dataclass's __init__ set each
    field through object.__setattr__, for every line pushed); never in a cycle (strings and
    numbers), so never tracked by the collector."""

    seq: int  # monotonically increasing, so the widget knows which lines it already shows
    slot: str
    text: str
    level: str
    noise: bool = False


class LogBuffer:
    """The last `max_lines` server log lines, with a filter and a search term."""

    def __init__(self, max_lines: int = 5000) -> None:
        self.lines: deque[LogLine] = deque(maxlen=max_lines)
        self._seq = 0
        self.filter_text = ""
        self.min_level = "info"  # "warning" shows warnings and errors only
        self.search_text = ""
        self.show_noise = False  # access and per-batch lines are folded away by default
        # Several slots: each line says whose it is, and a slot picked in the slots view
        # shows only its own (None: every slot's).
        self.tag_slots = False
        self.only_slot: str | None = None

    def add(self, slot: str, texts: Iterable[str]) -> list[LogLine]:
        # (a line stripped only when it ends with a line break, the lines appended in one
        # extend: two or three calls a line, where there were up to eleven)
        seq = self._seq
        added = []
        for text in texts:
            if text[-1:] in ("\r", "\n"):
                text = text.rstrip("\r\n")
            seq += 1
            # (classify's first two questions inline: a batch line, a line of none of the
            # patterns; the others asked of classify)
            if _BATCH_HEAD_RE.match(text):
                level, noise = _NOISE
            elif _ANY_RE.search(text) is None:
                level, noise = _PLAIN
            else:
                level, noise = classify(text)
            added.append(LogLine(seq, slot, text, level, noise))
        self._seq = seq
        self.lines.extend(added)
        return added

    def clear(self) -> None:
        self.lines.clear()

    def set_filter(self, text: str) -> None:
        self.filter_text = text.strip()

    def matches(self, line: LogLine) -> bool:
        if line.noise and not self.show_noise:
            return False
        return self._passes(line)

    def shows_any(self, lines: Iterable[LogLine]) -> bool:
        """Whether any of `lines` matches: `matches` and `_passes` inline, one call for a
        tick's lines (three a line, while none matched)."""
        only, level, needle = self.only_slot, self.min_level, self.filter_text
        for line in lines:
            if line.noise and not self.show_noise:
                continue
            if only is not None and line.slot != only:
                continue
            if level == "warning" and line.level == "info":
                continue
            if level == "error" and line.level != "error":
                continue
            if not needle or _contains(line.text, needle):
                return True
        return False

    def folded_matches(self) -> int:
        """The lines that only the fold hides: what showing access/batch lines brings back."""
        if self.show_noise:
            return 0
        return sum(1 for line in self.lines if line.noise and self._passes(line))

    def _passes(self, line: LogLine) -> bool:
        """Slot, level and filter, fold aside."""
        if self.only_slot is not None and line.slot != self.only_slot:
            return False
        if self.min_level == "warning" and line.level == "info":
            return False
        if self.min_level == "error" and line.level != "error":
            return False
        if self.filter_text:
            return _contains(line.text, self.filter_text)
        return True

    def shown_text(self, line: LogLine) -> str:
        """The line as the pane shows it: with its slot's name when several slots mix."""
        if self.tag_slots and self.only_slot is None:
            return f"[{line.slot}] {line.text}"
        return line.text

    def visible(self) -> list[LogLine]:
        return [line for line in self.lines if self.matches(line)]

    def search(self, lines: list[LogLine], start: int, backwards: bool = False) -> int | None:
        """Index in `lines` of the next line containing the search text after `start` (wraps)."""
        if not self.search_text or not lines:
            return None
        n = len(lines)
        step = -1 if backwards else 1
        for k in range(1, n + 1):
            i = (start + step * k) % n
            if _contains(lines[i].text, self.search_text):
                return i
        return None

    def contains(self, text: str) -> bool:
        """Whether `text` contains the search text."""
        return bool(self.search_text) and _contains(text, self.search_text)

    def search_spans(self, text: str) -> Iterator[tuple[int, int]]:
        """(start, end) of each occurrence of the search text in `text`, for highlighting."""
        if not self.search_text:
            return
        needle = self.search_text.lower()
        hay = text.lower()
        i = hay.find(needle)
        while i >= 0:
            yield i, i + len(needle)
            i = hay.find(needle, i + len(needle))


def _contains(text: str, needle: str) -> bool:
    # Case-insensitive unless the user typed a capital (the smart-case habit of less and vim).
    if needle.lower() == needle:
        return needle in text.lower()
    return needle in text
