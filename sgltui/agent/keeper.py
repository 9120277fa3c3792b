"""The agent's keeper: a small parent that starts the agent again when it dies by accident.

A job of 900,000 completions runs for days, mostly while nobody watches; an agent killed by the
OOM killer or a stray `kill -9` must not leave it waiting for someone to type a command. The
detached process that `python -m sgltui.agent` becomes is this keeper; it runs the agent as its
child (`--kept`, a process group of its own) and waits for it:

- the agent exits 0 (a `shutdown`, SIGTERM, or another agent already owns the state dir): the
  keeper exits too, so `sgltui agent stop` leaves no process behind;
- anything else (a signal, an exception): it starts a new agent, which re-adopts the servers
  (agent-state.json) and resumes the jobs (jobs/*.json). The first restart is immediate; crashes
  that follow each other double the wait (1 s, 2 s, ... BACKOFF_MAX_S), and an agent that stayed
  up STABLE_S forgets the earlier crashes. Each crash is one line in agent.log and the keeper's
  state in keeper.json, which `status` and `agent status` read to say why.

One keeper per state dir (flock on keeper.lock). A second launcher finding one alive wakes it
(SIGUSR1: a command typed during a long back-off is answered now) and exits. SIGTERM to the
keeper stops the agent the way `agent stop` does (servers keep running) and ends the keeper.
Knowing nothing of slots or jobs, it stays small: what the OOM killer picks is the agent.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sgltui.core import config as env_config
from sgltui.core import retry
from sgltui.core.files import write_json_atomic
from sgltui.core.pids import pid_alive

LOCKFILE, PIDFILE, STATEFILE = "keeper.lock", "keeper.pid", "keeper.json"
# the wait before the second start of a run of crashes (the first is at once), then doubled
BACKOFF_FIRST_S = env_config.keeper_backoff_first_s()
BACKOFF_MAX_S = env_config.keeper_backoff_max_s()
STABLE_S = env_config.keeper_stable_s()


def enabled() -> bool:
    """SGLTUI_KEEPER=0 runs the agent without a keeper (as before it existed)."""
    return env_config.keeper_enabled()


def describe_exit(returncode: int) -> str:
    """How the agent ended, in words."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        if -returncode == signal.SIGKILL:
            return f"killed by {name} (the OOM killer or a kill -9)"
        return f"killed by {name}"
    return f"exited with code {returncode} (its reason is above in this log)"


@dataclass
class Backoff:
    """How long to wait before the next start, from the crashes of the current run of them:
    the first at once, then BACKOFF_FIRST_S doubling up to BACKOFF_MAX_S (core/retry.py)."""

    crashes: list[float] = field(default_factory=list)  # wall times of this run's crashes
    policy: retry.Backoff = field(
        default_factory=lambda: retry.Backoff(first=BACKOFF_FIRST_S, cap=BACKOFF_MAX_S, immediate=1)
    )

    def after_crash(self, now: float, uptime_s: float) -> float:
        if uptime_s >= STABLE_S:
            self.crashes.clear()  # it ran well for a while: this crash starts a new run
        self.crashes.append(now)
        return self.policy.wait(len(self.crashes))


def read_state(state_dir: Path) -> dict | None:
    """keeper.json, when its keeper is alive (a dead keeper's file says nothing true)."""
    try:
        data = json.loads((state_dir / STATEFILE).read_text())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not pid_alive(int(data.get("pid") or 0)):
        return None
    return data


def view(state_dir: Path) -> dict | None:
    """What status says of the keeper (protocol.KeeperView's fields)."""
    data = read_state(state_dir)
    if data is None:
        return None
    keys = (
        "pid",
        "state",
        "restarts",
        "crashes_in_a_row",
        "last_exit",
        "last_exit_at",
        "next_start_at",
    )
    return {k: data.get(k) for k in keys if data.get(k) is not None}


# agent.log's line, written by the agent's RotatingFileHandler and by the keeper alike.
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def take_lock(path: Path) -> int | None:
    """An exclusive flock on `path` (the agent's, the keeper's), or None when another holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.set_inheritable(fd, False)  # servers and bench runs must not keep the lock alive
    return fd


def keeper_pid(state_dir: Path) -> int | None:
    try:
        pid = int((state_dir / PIDFILE).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if pid_alive(pid) else None


class Keeper:
    def __init__(self, state_dir: Path, agent_argv: list[str]) -> None:
        self.state_dir = state_dir
        self.agent_argv = agent_argv
        self.log_path = state_dir / "agent.log"
        self.backoff = Backoff()
        self.restarts = 0
        self.last_exit: str | None = None
        self.last_exit_at: float | None = None
        self.stopping = False
        self.wake = threading.Event()
        self.proc: subprocess.Popen | None = None

    def log(self, level: str, msg: str) -> None:
        # One O_APPEND write in the agent log's own format: the agent's RotatingFileHandler
        # owns the file; a line now and then from here interleaves whole.
        rec = logging.makeLogRecord({"name": __name__, "levelname": level, "msg": msg})
        line = (logging.Formatter(LOG_FORMAT).format(rec) + "\n").encode()
        with contextlib.suppress(OSError):
            fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)

    def save(self, state: str, **extra: Any) -> None:
        data = {
            "pid": os.getpid(),
            "state": state,  # "running" | "backoff"
            "agent_pid": self.proc.pid if self.proc and state == "running" else None,
            "restarts": self.restarts,
            "crashes_in_a_row": len(self.backoff.crashes),
            "last_exit": self.last_exit,
            "last_exit_at": self.last_exit_at,
            **extra,
        }
        with contextlib.suppress(OSError):  # a full disk must not end the keeper
            write_json_atomic(self.state_dir / STATEFILE, data, fsync=False)

    def _on_term(self, signum: int, frame: Any) -> None:
        self.stopping = True
        self.wake.set()
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)  # the agent's own clean shutdown

    def _on_wake(self, signum: int, frame: Any) -> None:
        self.wake.set()

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        signal.signal(signal.SIGUSR1, self._on_wake)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        while not self.stopping:
            started = time.monotonic()
            self.proc = subprocess.Popen(
                self.agent_argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # its own group: a signal for the keeper's is not its
                close_fds=True,
            )
            self.save("running")
            rc = self.proc.wait()
            if rc == 0 or self.stopping:
                break
            uptime = time.monotonic() - started
            self.last_exit, self.last_exit_at = describe_exit(rc), time.time()
            delay = self.backoff.after_crash(time.time(), uptime)
            self.restarts += 1
            n = len(self.backoff.crashes)
            run = f"crash {n} in a row, " if n > 1 else ""
            self.log(
                "WARNING" if n < 3 else "ERROR",
                f"agent pid {self.proc.pid} {self.last_exit} after {uptime:.1f}s up; {run}"
                + (f"starting a new one in {delay:.0f}s" if delay else "starting a new one now"),
            )
            if delay:
                self.save("backoff", next_start_at=time.time() + delay, backoff_s=delay)
                self.wake.clear()
                if self.wake.wait(delay) and not self.stopping:
                    self.log("INFO", "woken by a command: starting the agent now")
        return 0


def run(state_dir: Path, agent_argv: list[str]) -> int:
    """Be the keeper of `state_dir` (already detached), or wake the one that is."""
    fd = take_lock(state_dir / LOCKFILE)
    if fd is None:
        pid = keeper_pid(state_dir)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGUSR1)
        return 0
    pidfile = state_dir / PIDFILE
    try:
        with contextlib.suppress(OSError):
            pidfile.write_text(f"{os.getpid()}\n")
        return Keeper(state_dir, agent_argv).run()
    finally:
        for f in (pidfile, state_dir / STATEFILE):
            with contextlib.suppress(OSError):
                f.unlink()
        os.close(fd)
