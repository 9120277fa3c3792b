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
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

# How old a process table the periodic readers (slot monitors, GPU and host samplers, each
# once a second) share: one pass over /proc serves all of them.
SHARED_AGE_S = 0.9
LABELS_AGE_S = 10.0  # a process's names are read again this often (a server retitles early)


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
    # pid -> (monotonic time read, its labels): see _labels_of
    _label_cache: dict[int, tuple[float, tuple[str, ...]]] = field(
        default_factory=dict, repr=False, compare=False
    )

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

    def refresh(self, max_age: float = SHARED_AGE_S) -> list[int]:
        """Record the current descendants of the main process; return the live pids of the tree.

        Reads the process table shared by every slot and sampler (one pass over /proc at most
        every `max_age` seconds, whatever the number of slots): each slot walking /proc every
        second on its own was most of an 8-slot agent's CPU."""
        table = process_table(max_age)
        if table is not None and not table.same(self.pid, self.create_time):
            table = process_table(0.0)  # a table from before this server (or since it ended)
        if table is not None:
            return self._refresh_from(table)
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

    def refresh_shared(self, max_age: float = SHARED_AGE_S) -> list[int] | None:
        """refresh() when the shared process table is young enough and holds the main process
        (no /proc read: cheap enough for the event loop, so no worker thread per slot each
        second); None when refresh() would have to read /proc."""
        table = shared_table(max_age)
        if table is None or not table.same(self.pid, self.create_time):
            return None
        return self._refresh_from(table)

    def _refresh_from(self, table: ProcessTable) -> list[int]:
        seen = dict(self.seen)
        main = table.procs.get(self.pid)
        if main is not None and abs(main.create_time - self.create_time) < 0.01:
            for child in table.descendants(self.pid):
                seen.setdefault(child, table.procs[child].create_time)
        self.seen = seen
        return sorted(p for p, t in seen.items() if table.same(p, t))

    def alive(self, max_age: float = 0.0) -> list[int]:
        """Live processes of this launch: seen pids that are still the same process, plus any
        process still in the launch's process group or session (orphans keep both).

        `max_age`: a process table this old will do (the samplers'); 0 (stop, kill, release
        waits) reads /proc afresh."""
        table = process_table(max_age)
        if table is not None:
            return self._alive_from(table)
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

    def _alive_from(self, table: ProcessTable) -> list[int]:
        pids = {p for p, t in self.seen.items() if table.same(p, t)}
        added = {}
        for pid in table.members(self.pgid):
            info = table.procs[pid]
            # A zombie holds nothing (no memory, no port); it only waits for its reaper.
            if pid not in pids and info.create_time >= self.create_time - 1 and not info.zombie:
                pids.add(pid)
                added[pid] = info.create_time
        if added:
            self.seen = {**self.seen, **added}  # replaced whole, see refresh
        return sorted(pids)

    def scan(self) -> ProcTree:
        """Find the tree's live processes now (descendants, group and session members) with the
        names they are known by; sets `pids`, `names`, `labels`. Returns self."""
        self.refresh()
        names: dict[int, str] = {}
        labels: dict[int, tuple[str, ...]] = {}
        for pid in self.alive(SHARED_AGE_S):
            found = self._labels_of(pid)
            if found:
                names[pid] = found[0]
                labels[pid] = found
        # Replaced whole, never mutated: the GPU and host threads read them while a scan runs.
        self.names, self.labels, self.pids = names, labels, set(names)
        return self

    def _labels_of(self, pid: int) -> tuple[str, ...]:
        """_labels(pid), read again only every LABELS_AGE_S (three files per process per
        scan, per slot, each second, for names that change once in a server's life)."""
        now = time.monotonic()
        hit = self._label_cache.get(pid)
        if hit is not None and now - hit[0] <= LABELS_AGE_S:
            return hit[1]
        found = _labels(pid)
        cache = {p: v for p, v in self._label_cache.items() if now - v[0] <= LABELS_AGE_S}
        cache[pid] = (now, found)
        self._label_cache = cache  # replaced whole: scans run in the GPU and host threads
        return found

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


@dataclass(frozen=True)
class ProcInfo:
    ppid: int
    pgrp: int
    session: int
    create_time: float  # as psutil's Process.create_time()
    zombie: bool


@dataclass
class ProcessTable:
    """Every process of the host from one pass over /proc/<pid>/stat (Linux)."""

    procs: dict[int, ProcInfo]
    taken: float  # monotonic
    _children: dict[int, list[int]] | None = None

    def same(self, pid: int, create_time: float) -> bool:
        info = self.procs.get(pid)
        return info is not None and abs(info.create_time - create_time) < 0.01 and not info.zombie

    def descendants(self, pid: int) -> list[int]:
        if self._children is None:
            children: dict[int, list[int]] = {}
            for p, info in self.procs.items():
                children.setdefault(info.ppid, []).append(p)
            self._children = children
        out, todo = [], list(self._children.get(pid, ()))
        while todo:
            p = todo.pop()
            out.append(p)
            todo.extend(self._children.get(p, ()))
        return out

    def members(self, pgid: int) -> list[int]:
        """pids whose process group or session is `pgid`."""
        return [p for p, i in self.procs.items() if i.pgrp == pgid or i.session == pgid]


_table_lock = threading.Lock()
_table: ProcessTable | None = None
_no_proc = not os.path.isdir("/proc/self")


def process_table(max_age: float = SHARED_AGE_S) -> ProcessTable | None:
    """The host's processes, read at most `max_age` seconds ago; None where there is no /proc
    (the psutil calls then answer process by process)."""
    global _table
    if _no_proc:
        return None
    with _table_lock:
        now = time.monotonic()
        if _table is not None and max_age > 0 and now - _table.taken <= max_age:
            return _table
        try:
            _table = ProcessTable(_read_proc(), now)
        except OSError:
            return None
        return _table


def shared_table(max_age: float = SHARED_AGE_S) -> ProcessTable | None:
    """The shared process table when it was read at most `max_age` seconds ago; never reads."""
    with _table_lock:
        table = _table
    if table is None or time.monotonic() - table.taken > max_age:
        return None
    return table


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


_boot_time: float | None = None


def _read_proc() -> dict[int, ProcInfo]:
    global _boot_time
    if _boot_time is None:
        _boot_time = psutil.boot_time()
    boot = _boot_time
    out: dict[int, ProcInfo] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        # The command name may hold spaces and parentheses: the fields follow the last ')'.
        fields = data[data.rfind(b")") + 2 :].split()
        try:
            out[int(name)] = ProcInfo(
                ppid=int(fields[1]),
                pgrp=int(fields[2]),
                session=int(fields[3]),
                create_time=int(fields[19]) / _CLOCK_TICKS + boot,
                zombie=fields[0] == b"Z",
            )
        except (IndexError, ValueError):
            continue
    return out


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
