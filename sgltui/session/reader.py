"""Find and load recorded sessions (read-only): listing, name resolution, loading for reports/replay.

Layout (written by sgltui/session/writer.py; see docs/sessions.md):
``<state>/sessions/<YYYYmmdd-HHMMSS>-<host>/{events.jsonl, timeline.jsonl, servers/, bench/}``.
Every read here tolerates a session that is still being written or was cut by kill -9.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sgltui.session.jsonl import (
    JsonlIndex,
    ReadStats,
    iter_jsonl,
    iter_text_lines,
    read_json,
    read_jsonl,
    rotated_parts,
)
from sgltui.session.layout import (
    BENCH_DIR,
    EVENTS_FILE,
    SERVERS_DIR,
    TIMELINE_FILE,
    sessions_root,
)


class SessionError(Exception):
    """One-line, user-facing: what is wrong and what to do."""


def is_session_dir(path: Path) -> bool:
    return path.is_dir() and (
        any(rotated_parts(path / EVENTS_FILE)) or (path / SERVERS_DIR).is_dir()
    )


def session_dirs(state_dir: Path) -> list[Path]:
    """Session directories, oldest first (names start with the start time, so names sort)."""
    root = sessions_root(state_dir)
    try:
        entries = [p for p in root.iterdir() if is_session_dir(p)]
    except OSError:
        return []
    return sorted(entries, key=lambda p: (p.name, p.stat().st_mtime))


def resolve_session(state_dir: Path, name: str | None) -> Path:
    """A session dir from a name, a unique name prefix, a path, or None (= the latest)."""
    root = sessions_root(state_dir)
    if name:
        as_path = Path(name).expanduser()
        if as_path.is_dir() and ("/" in name or as_path.is_absolute() or name.startswith(".")):
            if not is_session_dir(as_path):
                raise SessionError(
                    f"{as_path} is not a session directory (no events.jsonl); see `sgltui sessions list`"
                )
            return as_path
        dirs = session_dirs(state_dir)
        exact = [d for d in dirs if d.name == name]
        if exact:
            return exact[0]
        matches = [d for d in dirs if d.name.startswith(name)]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            names = ", ".join(d.name for d in matches[:4])
            raise SessionError(
                f"session {name!r} is ambiguous ({names}{', ...' if len(matches) > 4 else ''}); give more of the name"
            )
        raise SessionError(f"no session {name!r} under {root}; see `sgltui sessions list`")
    dirs = session_dirs(state_dir)
    if not dirs:
        raise SessionError(
            f"no sessions under {root} yet; start a server (`sgltui start PROFILE`) to record one"
        )
    return dirs[-1]


# ---------------------------------------------------------------------------------------------
# Listing (cheap: first and last event only)
# ---------------------------------------------------------------------------------------------


def _first_event(path: Path) -> dict[str, Any] | None:
    for ev in iter_jsonl(path / EVENTS_FILE):
        return ev
    return None


def _last_event(path: Path) -> dict[str, Any] | None:
    """The last whole event line, read from the end of the live part (sessions can be large)."""
    for part in reversed(rotated_parts(path / EVENTS_FILE)):
        try:
            with open(part, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                size = fh.tell()
                fh.seek(max(0, size - 65536))
                tail = fh.read()
        except OSError:
            continue
        lines = tail.split(b"\n")
        # The chunk after the last newline is torn (or empty); the first may be cut by our seek.
        for raw in reversed(lines[1:-1] if size > 65536 else lines[:-1]):
            try:
                obj = json.loads(raw)
            except ValueError:
                continue
            if isinstance(obj, dict):
                return obj
    return None


def _dir_size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


@dataclass
class SessionSummary:
    name: str
    path: Path
    started: float | None
    last_event: float | None
    ended: bool  # an agent.stop was the last event
    size_bytes: int
    launches: int
    bench_runs: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": str(self.path),
            "started": self.started,
            "last_event": self.last_event,
            "ended": self.ended,
            "size_bytes": self.size_bytes,
            "launches": self.launches,
            "bench_runs": self.bench_runs,
        }


def summarize(path: Path) -> SessionSummary:
    first, last = _first_event(path), _last_event(path)
    servers = path / SERVERS_DIR
    bench = path / BENCH_DIR
    launches = len([p for p in servers.glob("*.log")]) if servers.is_dir() else 0
    runs = len([p for p in bench.glob("*.json")]) if bench.is_dir() else 0
    return SessionSummary(
        name=path.name,
        path=path,
        started=(first or {}).get("ts"),
        last_event=(last or {}).get("ts"),
        ended=(last or {}).get("type") == "agent.stop",
        size_bytes=_dir_size(path),
        launches=launches,
        bench_runs=runs,
    )


# ---------------------------------------------------------------------------------------------
# Loading a whole session
# ---------------------------------------------------------------------------------------------


@dataclass
class BenchRun:
    run_id: str
    path: Path
    data: dict[str, Any] | None
    error: str | None


@dataclass
class Session:
    path: Path
    events: list[dict[str, Any]]
    timeline: JsonlIndex  # sorted by ts, read from disk on demand (sessions can be huge)
    bench: list[BenchRun]
    events_stats: ReadStats
    timeline_stats: ReadStats
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.path.name

    def server_log(self, launch_id: str) -> Path:
        return self.path / SERVERS_DIR / f"{launch_id}.log"

    def server_log_lines(self, launch_id: str) -> Iterator[str]:
        """Raw lines (rotated parts included); callers redact before showing or copying them."""
        return iter_text_lines(self.server_log(launch_id))


def load_session(path: Path, with_timeline: bool = True) -> Session:
    path = Path(path)
    if not path.is_dir():
        raise SessionError(f"{path} does not exist; see `sgltui sessions list`")
    events, ev_stats = read_jsonl(path / EVENTS_FILE)
    tl_stats = ReadStats()
    # without the timeline: an index of a file that does not exist, i.e. empty
    timeline = JsonlIndex(path / (TIMELINE_FILE if with_timeline else ".no-timeline"), tl_stats)
    events.sort(key=lambda e: e.get("ts") or 0.0)  # backlog after a disk outage may be out of order
    runs = []
    bench_dir = path / BENCH_DIR
    if bench_dir.is_dir():
        for p in sorted(bench_dir.glob("*.json")):
            data, err = read_json(p)
            if data is not None and not isinstance(data, dict):
                data, err = None, f"{p.name}: not a bench result object"
            runs.append(
                BenchRun(run_id=(data or {}).get("run_id") or p.stem, path=p, data=data, error=err)
            )
    notes = []
    for label, st in ((EVENTS_FILE, ev_stats), (TIMELINE_FILE, tl_stats)):
        note = st.note()
        if note:
            notes.append(f"{label}: {note}")
    for run in runs:
        if run.error:
            notes.append(f"bench/{run.error}")
    return Session(path, events, timeline, runs, ev_stats, tl_stats, notes)
