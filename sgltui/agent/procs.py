"""Server process trees: who belongs to a launch, how to end them all, and what they still hold.

SGLang's own kill_process_tree only finds live descendants; schedulers reparented to init keep
their VRAM forever (sgl-project/sglang#23627, PR #31645). So a launch remembers every pid it ever
saw in its tree (with the create time, so a recycled pid is never mistaken for ours) and also
matches on its process group and session, which survive reparenting (the agent starts each
server in its own session).

One class, ProcTree, serves the slot (stop, kill, release wait) and the telemetry samplers
(`scan()`: which processes' GPU and host memory count as the server's). Blocking (psutil,
/proc): call from a worker thread.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil


@dataclass
class ProcTree:
    """The processes of one launch: the main pid, its process group, and every pid seen in it.

    `pids`, `names` and `labels` are what the last `scan()` found (empty before the first)."""

    pid: int
    pgid: int
    create_time: float
    seen: dict[int, float] = field(default_factory=dict)  # pid -> create_time
    pids: set[int] = field(default_factory=set)
    names: dict[int, str] = field(default_factory=dict)  # pid -> comm (15 chars at most)
    # pid -> names a foreign tool may know the process by: comm, argv[0] and its basename
    # (SGLang retitles schedulers "sglang::scheduler_TP<r>", which lands in argv[0]), exe path.
    labels: dict[int, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, pid: int) -> ProcTree:
        proc = psutil.Process(pid)
        tree = cls(pid=pid, pgid=os.getpgid(pid), create_time=proc.create_time())
        tree.seen[pid] = tree.create_time
        return tree

    @classmethod
    def around(cls, pid: int) -> ProcTree:
        """The tree of a server the agent did not start here (telemetry gets a pid): like `of`,
        but a pid already gone gives an empty tree instead of an error."""
        try:
            return cls.of(pid)
        except (psutil.Error, OSError):
            return cls(pid=pid, pgid=pid, create_time=0.0)

    @property
    def root(self) -> int:
        return self.pid

    def to_json(self) -> dict:
        return {
            "pid": self.pid,
            "pgid": self.pgid,
            "create_time": self.create_time,
            "seen": [[p, t] for p, t in self.seen.items()],
        }

    @classmethod
    def from_json(cls, data: dict) -> ProcTree:
        tree = cls(
            pid=int(data["pid"]), pgid=int(data["pgid"]), create_time=float(data["create_time"])
        )
        tree.seen = {int(p): float(t) for p, t in data.get("seen", [])}
        return tree

    def main_alive(self) -> bool:
        return _same_process(self.pid, self.create_time)

    def refresh(self) -> list[int]:
        """Record the current descendants of the main process; return the live pids of the tree."""
        # Runs in worker threads while the loop reads `seen`: built aside, then replaced whole.
        seen = dict(self.seen)
        try:
            main = psutil.Process(self.pid)
            if abs(main.create_time() - self.create_time) < 0.01:
                for child in main.children(recursive=True):
                    try:
                        seen.setdefault(child.pid, child.create_time())
                    except psutil.Error:
                        pass
        except psutil.Error:
            pass
        self.seen = seen
        # Cheap on purpose (called every second): the process-group scan is left to alive().
        return sorted(p for p, t in seen.items() if _same_process(p, t))

    def alive(self) -> list[int]:
        """Live processes of this launch: seen pids that are still the same process, plus any
        process still in the launch's process group or session (orphans keep both)."""
        pids = {p for p, t in self.seen.items() if _same_process(p, t)}
        for pid in _group_members(self.pgid):
            if pid in pids:
                continue
            try:
                proc = psutil.Process(pid)
                if (
                    proc.create_time() >= self.create_time - 1
                    and proc.status() != psutil.STATUS_ZOMBIE
                ):
                    # A zombie holds nothing (no memory, no port); it only waits for its reaper.
                    pids.add(pid)
                    self.seen = {**self.seen, pid: proc.create_time()}  # replaced, see refresh
            except psutil.Error:
                continue
        return sorted(pids)

    def scan(self) -> ProcTree:
        """Find the tree's live processes now (descendants, group and session members) with the
        names they are known by; sets `pids`, `names`, `labels`. Returns self."""
        self.refresh()
        names: dict[int, str] = {}
        labels: dict[int, tuple[str, ...]] = {}
        for pid in self.alive():
            found = _labels(pid)
            if found:
                names[pid] = found[0]
                labels[pid] = found
        # Replaced whole, never mutated: the GPU and host threads read them while a scan runs.
        self.names, self.labels, self.pids = names, labels, set(names)
        return self

    def match_name(self, name: str) -> int | None:
        """A pid of this tree known by `name` (a path, a full title or a 15-char comm), or None."""
        if not name:
            return None
        candidates = {name, name.rsplit("/", 1)[-1]}
        for pid, labels in self.labels.items():
            for label in labels:
                if label in candidates or any(
                    len(label) == 15 and c.startswith(label) for c in candidates
                ):
                    return pid
        return None

    def signal_main(self, sig: int) -> None:
        if self.main_alive():
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill_all(self) -> None:
        """SIGKILL the process group and every still-live pid seen in the tree."""
        try:
            os.killpg(self.pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for pid in self.alive():
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def server_tree(pid: int) -> ProcTree:
    """The tree around `pid`, scanned (what the samplers read)."""
    return ProcTree.around(pid).scan()


def _group_members(pgid: int) -> list[int]:
    """pids whose process group or session is `pgid` (a server started in its own session has
    pgid == sid == its pid)."""
    found = []
    for pid in psutil.pids():
        try:
            if os.getpgid(pid) == pgid or os.getsid(pid) == pgid:
                found.append(pid)
        except OSError:
            continue
    return found


def _labels(pid: int) -> tuple[str, ...]:
    """(comm, argv[0], its basename, exe) of a live process, duplicates dropped; () when gone."""
    try:
        proc = psutil.Process(pid)
        labels = [proc.name()]
    except psutil.Error:
        return ()
    try:
        argv = proc.cmdline()
    except psutil.Error:
        argv = []
    if argv and argv[0]:
        labels += [argv[0], argv[0].rsplit("/", 1)[-1]]
    try:
        exe = proc.exe()  # NVML names a process by its executable path (seen on an H200 host)
    except (psutil.Error, OSError):
        exe = ""
    if exe:
        labels.append(exe)
    return tuple(dict.fromkeys(labels))


def _same_process(pid: int, create_time: float) -> bool:
    try:
        proc = psutil.Process(pid)
        return (
            abs(proc.create_time() - create_time) < 0.01 and proc.status() != psutil.STATUS_ZOMBIE
        )
    except psutil.Error:
        return False


def describe(pids: list[int]) -> str:
    """'123 (sglang::scheduler), 124 (python)' for messages."""
    out = []
    for pid in pids:
        try:
            name = psutil.Process(pid).name()
        except psutil.Error:
            name = "?"
        out.append(f"{pid} ({name})")
    return ", ".join(out)


def port_free(host: str, port: int) -> bool:
    """True when a server could bind host:port now (what SGLang's uvicorn will do after loading)."""
    bind_host = "0.0.0.0" if host in ("", "0.0.0.0", "::") else host
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((bind_host, port))
        except socket.gaierror:
            # Not a name this host resolves (validation refuses it first: core/validate.py's
            # host check); nothing here can hold it, and the server's own bind will say so.
            return True
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            if exc.errno == errno.EADDRNOTAVAIL:
                return True  # not a local address: nothing here can hold it
            raise
    return True


def port_holder(port: int) -> str | None:
    """Who listens on `port`, as 'pid (name)', when this user may see it."""
    try:
        conns = psutil.net_connections(kind="inet")
    except (psutil.Error, OSError):
        return None
    for c in conns:
        if c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN and c.pid:
            return describe([c.pid])
    return None


def orphan_sglang_processes(exclude: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """sglang:: processes (schedulers, detokenizers) whose launcher is gone: reparented to init or
    to a subreaper, so nobody will ever stop them and they hold GPU memory."""
    found = []
    for proc in psutil.process_iter(["pid", "name", "ppid"]):
        try:
            name = proc.info["name"] or ""
            if proc.pid in exclude or not name.startswith("sglang::"):
                continue
            ppid = proc.info["ppid"] or 0
            # A live launcher can have any name (torch renames it "pt_main_thread"), so only a
            # parent that is init (or systemd as a subreaper) marks the process as orphaned.
            parent_name = psutil.Process(ppid).name() if ppid > 1 else "init"
            if ppid <= 1 or parent_name in ("systemd", "init", "tini", "dumb-init"):
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


def wait_until(pred, timeout: float, interval: float = 0.1) -> bool:
    """Blocking poll (for use in worker threads)."""
    deadline = time.monotonic() + timeout
    while True:
        if pred():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def read_pid_file(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None
