"""A minimal stand-in for the session recorder (sgltui/agent/recorder.py, session area).

The agent uses the real Recorder whenever it is importable; this keeps the agent usable (events,
server logs, bench paths in a session directory) in a tree where that module is absent or broken,
with the same method names and the same on-disk layout.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

from sgltui.core import locations


class MiniRecorder:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._secrets: list[str] = []
        self._error: str | None = None
        for sub in ("", "servers", "bench"):
            (path / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
        self._events = open(path / "events.jsonl", "a", encoding="utf-8")
        self._timeline = open(path / "timeline.jsonl", "a", encoding="utf-8")

    @classmethod
    def create(cls, state_dir: Path, session_dir: Path | None = None) -> "MiniRecorder":
        if session_dir is None:
            name = time.strftime("%Y%m%d-%H%M%S") + "-" + socket.gethostname().split(".")[0]
            session_dir = locations.sessions_dir(state_dir) / name
        return cls(Path(session_dir))

    @classmethod
    def reopen(cls, session_dir: Path) -> "MiniRecorder":
        return cls(Path(session_dir))

    def _redact(self, text: str) -> str:
        for s in self._secrets:
            text = text.replace(s, "***")
        return text

    def _write(self, fh, obj: dict) -> None:
        try:
            fh.write(self._redact(json.dumps(obj, default=str)) + "\n")
            fh.flush()
            self._error = None
        except OSError as exc:
            self._error = f"{exc.strerror or exc} ({fh.name})"

    def event(self, type: str, **fields: Any) -> dict:
        ev = {"v": 1, "ts": time.time(), "type": type, **fields}
        ev.setdefault("client", None)
        ev.setdefault("slot", None)
        self._write(self._events, ev)
        return json.loads(self._redact(json.dumps(ev, default=str)))

    def sample(self, sample: dict) -> None:
        self._write(self._timeline, sample)

    def server_log_path(self, launch_id: str) -> Path:
        return self.path / "servers" / f"{launch_id}.log"

    def bench_path(self, run_id: str) -> Path:
        return self.path / "bench" / f"{run_id}.json"

    @property
    def disk(self) -> dict:
        return {"ok": self._error is None, "error": self._error}

    def add_secret(self, secret: str) -> None:
        if secret and secret not in self._secrets:
            self._secrets.append(secret)

    def close(self) -> None:
        for fh in (self._events, self._timeline):
            try:
                fh.close()
            except OSError:
                pass
