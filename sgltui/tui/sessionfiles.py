"""What the TUI reads of the agent's session directory on connect (when it is on this machine):
the recent events (the Activity tab's history) and the bench result files; and the report it
writes there (the palette's "Session report")."""

from __future__ import annotations

import json
from pathlib import Path


def recent_events(path: Path, limit: int = 200, max_bytes: int = 256 * 1024) -> list[dict]:
    """The last `limit` events of a session's events.jsonl (reads only its tail)."""
    try:
        with path.open("rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            tail = f.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return []
    if size > max_bytes:
        tail = tail[1:]  # the first line is cut
    out = []
    for line in tail[-limit:]:
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if isinstance(ev, dict):
            out.append(ev)
    return out


def bench_files(folder: Path, limit: int = 10) -> list[Path]:
    """The newest `limit` bench result files of a session, oldest first."""
    try:
        files = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime)
    except OSError:
        return []
    return files[-limit:]


def write_report(folder: Path) -> tuple[str, bool]:
    """`sgltui report --save` for the session in `folder` (blocking: a worker thread): the line
    to show, and whether it is an error."""
    from sgltui.core.files import write_atomic
    from sgltui.session.reader import SessionError, load_session
    from sgltui.session.report import build_report, render

    try:
        text = render(build_report(load_session(folder)), "md")
        write_atomic(folder / "report.md", text)  # 0600: a report names models and paths
    except (SessionError, OSError) as exc:
        return f"no report: {exc}".splitlines()[0], True
    return f"report written: {folder / 'report.md'}", False
