"""The session directory's format: its version and every folder and file name, in one place.

    <state>/sessions/<YYYYmmdd-HHMMSS>-<host>[-N]/   mode 0700
        events.jsonl[.1 .. .N]      one event per line, flushed per event ("v": FORMAT_VERSION)
        timeline.jsonl[.1 .. .N]    one sample per line
        servers/<launch-id>.log     each server's own output (written through the log relay)
        bench/<run-id>.json         a bench run's result; bench/<run-id>/ its per-request records
        screenshots/*.svg           screenshots taken in the TUI
        report.md                   written by `sgltui report --save`

Every folder is 0700 and every file 0600 (core/files.py). The writer is session/writer.py,
the readers session/reader.py and session/jsonl.py.
"""

from __future__ import annotations

from pathlib import Path

from sgltui.protocol import EVENT_SCHEMA

# Bumped (in sgltui/protocol/, with the events' shapes) when a reader of the old format would misread
# the new one; written as "v" on every event and sample. Readers accept it and older ones.
FORMAT_VERSION = EVENT_SCHEMA

SESSIONS_DIR = "sessions"
EVENTS_FILE = "events.jsonl"
TIMELINE_FILE = "timeline.jsonl"
SERVERS_DIR = "servers"
BENCH_DIR = "bench"
SCREENSHOTS_DIR = "screenshots"
REPORT_FILE = "report.md"


def sessions_root(state_dir: Path) -> Path:
    """<state>/sessions: where the agent starts each new session."""
    return Path(state_dir) / SESSIONS_DIR
