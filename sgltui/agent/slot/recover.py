"""When agent-state.json cannot be read: keep it aside and find the agent's servers another way.

agent-state.json is how a starting agent finds the servers an earlier one left running. A
corrupt one (a disk error, a stray write, `printf 'garbage{{' > agent-state.json`) once started
a new session without a word: the servers ran on unmanaged, holding their GPUs and ports, and a
later start was refused for a port "in use" (issue 35 F4). Instead:

- the bad file is moved aside (agent-state.json.bad-TIMESTAMP), never overwritten;
- each server of this state dir is found by its log relay (agent/slot/logrelay.py), a process the
  agent starts beside every server with the server's log path in its argv: a path under this
  state dir. The server is the process whose stdout is the pipe the relay reads (the relay
  outlives an agent: it is in its own process group, not the server's);
- what the agent knew of that launch (its slot, profile, address, whether it became ready) is
  read back from the session's own events (the `launch` and `slot.state` lines), in the session
  directory the log path names;
- the record the next agent adopts is rebuilt from those, and what was done is said (agent.log).

The gateways of pools keep their own pid files (agent/pools/gateway.py), and are found by their
open log (their stdout, under this state dir) when that file is unreadable too.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import psutil

log = logging.getLogger("sgltui.agent.recover")

RELAY_MODULE = "sgltui.agent.slot.logrelay"
# and the name it had before agent/ was split into packages: a server launched by an older
# agent still runs under its relay after an upgrade, and must be found, not left behind
RELAY_MODULES = (RELAY_MODULE, "sgltui.agent.logrelay")


def set_aside(path: Path) -> Path | None:
    """Move the unreadable file out of the way (kept for whoever wants to look at it)."""
    aside = path.with_name(f"{path.name}.bad-{time.strftime('%Y%m%d-%H%M%S')}")
    try:
        os.replace(path, aside)
    except OSError as exc:
        log.warning("cannot keep %s aside (%s)", path, exc.strerror or exc)
        return None
    return aside


def _pipe_of(pid: int, fd: int) -> str | None:
    try:
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return None
    return target if target.startswith("pipe:") else None


def _relays(state_dir: Path) -> list[tuple[int, Path]]:
    """(relay pid, log path) of every log relay whose log lies under `state_dir`."""
    root = str(state_dir.resolve())
    out = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        argv = p.info.get("cmdline") or []
        if len(argv) >= 4 and argv[1] == "-m" and argv[2] in RELAY_MODULES:
            log_path = Path(argv[3])
            with contextlib.suppress(OSError):
                if str(log_path.resolve()).startswith(root + os.sep):
                    out.append((int(p.info["pid"]), log_path))
    return out


def _server_of(relay_pid: int) -> psutil.Process | None:
    """The process group leader whose stdout is the pipe the relay reads."""
    pipe = _pipe_of(relay_pid, 0)
    if pipe is None:
        return None
    for p in psutil.process_iter(["pid"]):
        pid = int(p.info["pid"])
        if pid == relay_pid or _pipe_of(pid, 1) != pipe:
            continue
        with contextlib.suppress(OSError):
            if os.getpgid(pid) == pid:  # the server's main process leads its own group
                return p
    return None


def _events(session: Path) -> list[dict[str, Any]]:
    out = []
    with contextlib.suppress(OSError):
        for line in (session / "events.jsonl").read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError, RecursionError):
                ev = json.loads(line)
                if isinstance(ev, dict) and ev.get("type") in ("launch", "slot.state"):
                    out.append(ev)
    return out


def find_servers(state_dir: Path) -> dict[str, Any]:
    """An agent-state as the lost file would have held it, rebuilt from the running servers of
    this state dir and their session's events (slots it cannot place are left out)."""
    slots: dict[str, dict[str, Any]] = {}
    session_dir: str | None = None
    for relay_pid, log_path in _relays(state_dir):
        server = _server_of(relay_pid)
        if server is None:
            continue
        launch_id = log_path.stem
        session = log_path.parent.parent  # SESSION/servers/LAUNCH_ID.log
        events = _events(session)
        launch = next(
            (e for e in events if e["type"] == "launch" and e.get("launch_id") == launch_id), None
        )
        if launch is None or not launch.get("slot"):
            log.warning("found server pid %s (log %s) but not its launch", server.pid, log_path)
            continue
        ready = any(
            e["type"] == "slot.state"
            and e.get("launch_id") == launch_id
            and e.get("state") == "ready"
            for e in events
        )
        with contextlib.suppress(psutil.Error):
            slots[str(launch["slot"])] = {
                "profile": launch.get("profile"),
                "state": "ready" if ready else "launching",
                "tree": {
                    "pid": server.pid,
                    "pgid": server.pid,
                    "create_time": server.create_time(),
                    "seen": [],
                },
                "launch_id": launch_id,
                "log_path": str(log_path),
                "host": launch.get("host") or _flag(server, "--host") or "127.0.0.1",
                "port": launch.get("port") or int(_flag(server, "--port") or 30000),
                "command": launch.get("command") or [],
                "command_hash": launch.get("command_hash"),
            }
            session_dir = str(session)
    return {"v": 1, "session_dir": session_dir, "slots": slots}


def _flag(server: psutil.Process, name: str) -> str | None:
    """A flag's value on the server's command line (where the launch event has none)."""
    try:
        argv = server.cmdline()
    except psutil.Error:
        return None
    for i, a in enumerate(argv):
        if a == name and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def find_by_stdout(path: Path) -> list[int]:
    """Pids of the process group leaders whose stdout is the file `path`: a pool's gateway
    writes to its log under this state dir (smg sets its own process title, 'smg::router', so
    its argv no longer names the wrapper or the pool; its open log still does)."""
    want = str(path.resolve())
    out = []
    for p in psutil.process_iter(["pid"]):
        pid = int(p.info["pid"])
        try:
            target = os.readlink(f"/proc/{pid}/fd/1")
            if target == want and os.getpgid(pid) == pid:
                out.append(pid)
        except OSError:
            continue
    return out
