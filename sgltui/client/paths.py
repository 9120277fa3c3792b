"""Where an agent's files live inside its state directory: the socket clients connect to, its
pid, lock and log. Both ends read these names (the agent when it binds, every client when it
connects), so they live here, beside the client, with nothing but the standard library."""

from __future__ import annotations

from pathlib import Path

SOCKET, PIDFILE, LOCKFILE, LOGFILE = "agent.sock", "agent.pid", "agent.lock", "agent.log"


def paths(state_dir: Path) -> dict[str, Path]:
    return {
        "socket": state_dir / SOCKET,
        "pid": state_dir / PIDFILE,
        "lock": state_dir / LOCKFILE,
        "log": state_dir / LOGFILE,
    }
