"""SGLang servers of this user on this host that sgltui did not start (issue 38, "found").

Most people who try sgltui already run a server: by hand in tmux, from a script. They are found
by process (this uid, a command line of `sglang serve`, `python -m sglang.launch_server` or the
simulator `python -m sgltui.sim`, not one of the agent's own), by the port it listens on and by
its `/server_info` (the model). `sgltui status` lists them with the command that attaches one.

`scan()` blocks (it walks /proc and asks each new server over HTTP): call it from a worker
thread. `Discovery` keeps the agent's last scan and refreshes it in the background.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from sgltui.agent.slot import info_fetch
from sgltui.core.safe_text import printable

log = logging.getLogger(__name__)

_MODULES = ("sglang.launch_server", "sgltui.sim")
# Set in the environment of every server an sgltui agent launches (agent/slot/slot.py): a server
# of another agent of this user (another state dir) is sgltui's too, not one to attach.
LAUNCH_MARK = "SGLTUI_LAUNCH_ID"
_DEFAULT_PORT = 30000
RETRY_S = 15.0  # a server that did not answer (still loading) is looked at again after this
_WILDCARD = ("0.0.0.0", "::", "", "[::]")
NOT_LISTENING = "not listening yet"
NEEDS_KEY = "it needs an API key: attach with --api-key-file"


@dataclass(frozen=True)
class Found:
    """One unmanaged server: what `status --json` lists under "unmanaged"."""

    pid: int
    port: int | None
    url: str | None
    model: str | None
    kind: str = "sglang"  # "sglang" or "sim" (the simulator)
    version: str | None = None
    note: str | None = None  # why it could not be asked (no port, a key, no answer)
    at: float = field(default_factory=time.monotonic, compare=False)  # when it was asked

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("at")
        return out

    def line(self) -> str:
        """`not managed: sglang on :30000, pid N, MODEL; attach with ...`"""
        where = f" on :{self.port}" if self.port else ""
        model = f", {self.model}" if self.model else ""
        note = f" ({self.note})" if self.note else ""
        head = f"not managed: {self.kind}{where}, pid {self.pid}{model}{note}"
        if self.url is None:
            return head
        return f"{head}; attach with `sgltui attach {self.url}`"


def server_kind(cmdline: list[str]) -> str | None:
    """'sglang' or 'sim' for a server's command line, else None. A wrapper whose argument is
    such a command (`timeout 1h python -m sglang.launch_server`) is not one: its child is."""
    if not cmdline:
        return None
    if "-m" in cmdline:
        i = cmdline.index("-m")
        if i + 1 < len(cmdline) and cmdline[i + 1] in _MODULES and _is_python(cmdline[0]):
            return "sim" if cmdline[i + 1] == "sgltui.sim" else "sglang"
    if Path(cmdline[0]).name == "sglang" and len(cmdline) > 1 and cmdline[1] == "serve":
        return "sglang"
    # `python /path/bin/sglang serve` (a console script run by its interpreter)
    if (
        _is_python(cmdline[0])
        and len(cmdline) > 2
        and Path(cmdline[1]).name == "sglang"
        and cmdline[2] == "serve"
    ):
        return "sglang"
    return None


def _is_python(program: str) -> bool:
    return Path(program).name.startswith("python")


def flag(cmdline: list[str], name: str) -> str | None:
    """The value of `--name V` or `--name=V` (the last one wins, as argparse has it)."""
    value = None
    for i, word in enumerate(cmdline):
        if word == name and i + 1 < len(cmdline):
            value = cmdline[i + 1]
        elif word.startswith(name + "="):
            value = word.split("=", 1)[1]
    return value


def _listening(proc: psutil.Process) -> list[tuple[str, int]]:
    try:
        conns = proc.net_connections(kind="inet")
    except (psutil.Error, OSError):
        return []
    return [(c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN and c.laddr]


def _connect_host(host: str) -> str:
    if host in _WILDCARD:
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


def _ask(url: str, timeout: float) -> tuple[dict | None, str | None]:
    """(/server_info, None) or (None, why not). Bounded: `timeout` for the whole answer (one
    that drips holds the scan, and an attach waiting for it, no longer), and its size."""
    try:
        return info_fetch.fetch_blocking(url, None, deadline_s=timeout), None
    except info_fetch.FetchError as exc:
        if exc.needs_key:  # it answered: it listens, and wants a key
            return None, NEEDS_KEY
        why = str(exc)
        return None, f"{why} on {url}" if why.startswith("no answer") else why


def model_of(info: dict | None, cmdline: list[str]) -> str | None:
    """The model a server serves, escaped for a terminal (another process's command line and a
    server's answer may hold escape sequences: `status` prints it)."""
    name: str | None = None
    if info:
        for key in ("served_model_name", "model_path"):
            if info.get(key):
                name = str(info[key])
                break
    if name is None:
        name = flag(cmdline, "--served-model-name") or flag(cmdline, "--model-path")
    if name is None and len(cmdline) > 2 and cmdline[1:2] == ["serve"]:
        name = cmdline[2] if not cmdline[2].startswith("-") else None
    return printable(name, 200) if name is not None else None


def _version(info: dict) -> str | None:
    value = info.get("version")
    return printable(value, 64) if isinstance(value, str) and value else None


def _port_open(host: str, port: int) -> bool:
    """Whether something accepts a connection on host:port (a cheap look, no HTTP)."""
    try:
        with socket.create_connection((host.strip("[]"), port), timeout=0.5):
            return True
    except (OSError, ValueError):
        return False


def _examine(proc: psutil.Process, cmdline: list[str], kind: str, timeout: float) -> Found:
    port_flag = flag(cmdline, "--port")
    host = flag(cmdline, "--host") or "127.0.0.1"
    wanted = int(port_flag) if port_flag and port_flag.isdigit() else _DEFAULT_PORT
    listening = _listening(proc)
    # The HTTP port is the one the command line names, when the process listens on it; else
    # whichever of its ports answers /server_info (a port given in a --config file).
    candidates = [(h, p) for h, p in listening if p == wanted] or listening
    if not candidates:
        # It does not listen itself: still loading, or its HTTP server lives in a child
        # process; then the port its command line names answers (a 401 too: it listens).
        if _port_open(_connect_host(host), wanted) and _tree_listens(proc, wanted):
            candidates = [(host, wanted)]
        else:
            return Found(pid=proc.pid, port=wanted, url=None, model=model_of(None, cmdline),
                         kind=kind, note=NOT_LISTENING)  # fmt: skip
    why = None
    for ip, port in candidates[:4]:
        url = f"http://{_connect_host(ip if ip not in _WILDCARD else host)}:{port}"
        info, why = _ask(url, timeout)
        if info is not None:
            return Found(
                pid=proc.pid,
                port=port,
                url=url,
                model=model_of(info, cmdline),
                kind=kind,
                version=_version(info),
            )
        if why == NEEDS_KEY:
            return Found(proc.pid, port, url, model_of(None, cmdline), kind, note=why)
    ip, port = candidates[0]
    return Found(
        pid=proc.pid,
        port=port,
        url=f"http://{_connect_host(ip if ip not in _WILDCARD else host)}:{port}",
        model=model_of(None, cmdline),
        kind=kind,
        note=why,
    )


def scan(
    ours: Iterable[int] = (), agent_pid: int | None = None, timeout: float = 2.0
) -> list[Found]:
    """Every SGLang server process of this uid that is neither in `ours` nor below
    `agent_pid`, nor launched by any sgltui agent; the topmost of a tree only (SGLang's
    schedulers are its children). A server that answered before is not asked again."""
    with _lock:  # the agent's loop and an attach may scan at once: one at a time
        return _scan(set(ours), agent_pid, timeout)


def _scan(ours: set[int], agent_pid: int | None, timeout: float) -> list[Found]:
    servers = {pid: (key, cmdline, kind) for pid, key, cmdline, kind in _servers()}
    out: list[Found] = []
    answers: dict[tuple[int, int], Found] = {}
    for pid, (key, cmdline, kind) in servers.items():
        if pid in ours:
            continue
        up = _ancestors(pid)
        if up & set(servers) or up & ours or (agent_pid is not None and agent_pid in up):
            continue  # a server's own child, or something the agent started
        prev = _answers.get(key)
        # One that did not answer (loading) is looked at again now and then: its ports are
        # read from the kernel's whole socket table, not a thing to do every 5 s. One that did
        # not listen is looked at again as soon as its port takes a connection (a cheap look).
        if prev is not None and (
            (prev.url and prev.note is None)
            or (time.monotonic() - prev.at < RETRY_S and not _listens_now(prev, cmdline))
        ):
            found = prev
        else:
            try:
                found = _examine(psutil.Process(pid), cmdline, kind, timeout)
            except psutil.Error:
                continue
        answers[key] = found
        out.append(found)
    _answers.clear()
    _answers.update(answers)
    return sorted(out, key=lambda f: (f.port or 0, f.pid))


def _tree_listens(proc: psutil.Process, port: int) -> bool:
    """Whether `proc` or a process below it listens on `port` (not another server that holds
    the port this one names while it loads): one read of the kernel's socket table."""
    try:
        pids = {proc.pid} | {c.pid for c in proc.children(recursive=True)}
        conns = psutil.net_connections(kind="inet")
    except (psutil.Error, OSError):
        return False
    return any(
        c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid in pids
        for c in conns
    )


def _listens_now(prev: Found, cmdline: list[str]) -> bool:
    if prev.note != NOT_LISTENING or prev.port is None:
        return False
    return _port_open(_connect_host(flag(cmdline, "--host") or "127.0.0.1"), prev.port)


_lock = threading.Lock()
# Kept between scans (one at a time: _lock): the walk of /proc reads a
# process's command line and environment once, and a server that answered is not asked again.
# Keyed by (pid, the change time of /proc/PID): a pid used again is another process.
_seen: dict[tuple[int, int], tuple[list[str], str | None]] = {}
_answers: dict[tuple[int, int], Found] = {}


def _servers() -> list[tuple[int, tuple[int, int], list[str], str]]:
    """(pid, key, command line, kind) of this uid's server processes no sgltui launched."""
    uid = os.getuid()
    live: dict[tuple[int, int], tuple[list[str], str | None]] = {}
    out = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            st = os.stat(f"/proc/{name}")
        except OSError:
            continue
        if st.st_uid != uid:
            continue
        key = (int(name), st.st_ctime_ns)
        entry = _seen.get(key)
        if entry is None:
            entry = _classify(name)
            if entry is None:
                continue
        live[key] = entry
        if entry[1] is not None:
            out.append((int(name), key, entry[0], entry[1]))
    _seen.clear()
    _seen.update(live)
    return out


def _classify(pid: str) -> tuple[list[str], str | None] | None:
    """(command line, kind or None: not a server, or one an sgltui agent launched)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            words = [w.decode(errors="replace") for w in fh.read().split(b"\0") if w]
    except OSError:
        return None
    kind = server_kind(words)
    if kind is not None:
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                if (LAUNCH_MARK + "=").encode() in fh.read():
                    kind = None
        except OSError:
            pass
    return words, kind


def _ancestors(pid: int) -> set[int]:
    out: set[int] = set()
    for _ in range(64):
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                stat = fh.read()
            pid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            break
        if pid <= 1 or pid in out:
            break
        out.add(pid)
    return out


class Discovery:
    """The agent's view: scanned every `every_s` in a worker thread, read without blocking."""

    def __init__(self, ours: Callable[[], set[int]], every_s: float = 5.0) -> None:
        self._ours = ours
        self.every_s = every_s
        self.found: list[Found] = []
        self.scanned = asyncio.Event()  # set after the first scan (status waits on it briefly)
        self._task: asyncio.Task | None = None
        self._at = 0.0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="discovery")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def refresh(self) -> list[Found]:
        ours = self._ours()
        try:
            found = await asyncio.to_thread(scan, ours, os.getpid(), 2.0)
        except Exception:  # a scan must never take the agent down
            log.exception("discovery scan")
            found = self.found
        self.found, self._at = found, time.monotonic()
        self.scanned.set()
        return found

    async def _loop(self) -> None:
        while True:
            await self.refresh()
            await asyncio.sleep(self.every_s)

    async def first(self, timeout: float = 3.0) -> None:
        """Wait (bounded) for the first scan: a status right after the agent started."""
        try:
            await asyncio.wait_for(self.scanned.wait(), timeout)
        except TimeoutError:
            pass

    def view(self) -> list[dict[str, Any]]:
        # the last scan less what the agent took since (an attach between two scans)
        ours = self._ours()
        return [f.as_dict() for f in self.found if f.pid not in ours]
