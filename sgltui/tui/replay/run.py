"""`sgltui replay SESSION`: open the replay app on a session directory."""

from __future__ import annotations

from pathlib import Path

from sgltui.tui.replay.app import make_replay_app


def run_replay(path: Path, speed: float = 10.0, at: float | None = None) -> int:
    app = make_replay_app(Path(path), at=at, speed=speed)
    app.run()
    return 0
