"""The managed server's process tree: the processes whose GPU and host memory count as the server's.

A SGLang server is a main process plus one scheduler per TP rank (and detokenizer, DP controller).
Descendants alone are not enough: a scheduler reparented to init after its parent died keeps its
VRAM (sgl-project/sglang#23627). The agent starts each server in its own session, so members of
the server's process group/session are counted too, which finds those orphans.
Blocking (psutil, /proc): call from a worker thread.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import psutil


@dataclass
class ProcTree:
    root: int
    pids: set[int] = field(default_factory=set)
    names: dict[int, str] = field(
        default_factory=dict
    )  # pid -> process name (comm, 15 chars at most)
    # pid -> names a foreign tool may know the process by: comm, argv[0] and its basename
    # (SGLang retitles schedulers "sglang::scheduler_TP<r>", which lands in argv[0]), exe path.
    labels: dict[int, tuple[str, ...]] = field(default_factory=dict)
    alive: bool = True

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


def _session_members(root: int) -> set[int]:
    members: set[int] = set()
    for pid in psutil.pids():
        try:
            if os.getsid(pid) == root or os.getpgid(pid) == root:
                members.add(pid)
        except OSError:
            continue
    return members


def server_tree(root: int, extra_pids: set[int] | frozenset[int] = frozenset()) -> ProcTree:
    """The process tree of `root`: itself, its descendants and its session/process-group members."""
    tree = ProcTree(root=root)
    procs: list[psutil.Process] = []
    try:
        top = psutil.Process(root)
        procs.append(top)
        procs.extend(top.children(recursive=True))
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        tree.alive = False
    seen = {p.pid for p in procs}
    for pid in _session_members(root) | set(extra_pids):
        if pid not in seen:
            try:
                procs.append(psutil.Process(pid))
                seen.add(pid)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
    for p in procs:
        try:
            name = p.name()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        tree.names[p.pid] = name
        tree.pids.add(p.pid)
        labels = [name]
        try:
            argv = p.cmdline()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            argv = []
        if argv and argv[0]:
            labels += [argv[0], argv[0].rsplit("/", 1)[-1]]
        try:
            exe = p.exe()  # NVML names a process by its executable path (seen on an H200 host)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            exe = ""
        if exe:
            labels.append(exe)
        tree.labels[p.pid] = tuple(dict.fromkeys(labels))
    return tree
