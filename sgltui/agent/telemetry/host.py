"""Host readings via psutil: RAM, swap, CPU, and each managed server's process tree (RSS, CPU).

A hicache host pool is pinned RAM held by the scheduler processes, so on a real host it shows in
the server's RSS; simulated servers publish theirs (server_pinned_bytes). Blocking: worker thread.
"""

from __future__ import annotations

from typing import Any

import psutil

from sgltui.agent.slot.procs import ProcTree


class HostSampler:
    def __init__(self) -> None:
        # psutil computes cpu_percent against the previous call on the same Process object, so the
        # objects are kept between samples (keyed by pid; dropped when the process goes).
        self._procs: dict[int, psutil.Process] = {}
        psutil.cpu_percent(interval=None)  # prime: the first call always returns 0.0

    def sample(
        self, trees: dict[str, ProcTree], pinned: dict[str, int] | None = None
    ) -> dict[str, Any]:
        vm = psutil.virtual_memory()
        sw = psutil.swap_memory()
        host: dict[str, Any] = {
            "ram_total_bytes": int(vm.total),
            "ram_used_bytes": int(vm.total - vm.available),
            "ram_available_bytes": int(vm.available),
            "swap_total_bytes": int(sw.total),
            "swap_used_bytes": int(sw.used),
            "cpu_pct": float(psutil.cpu_percent(interval=None)),
            "cpu_count": psutil.cpu_count() or 1,
            "server_rss_bytes": {},
            "server_cpu_pct": {},
            "server_pinned_bytes": dict(pinned or {}),
        }
        wanted: set[int] = set()
        for slot, tree in trees.items():
            rss, cpu = 0, 0.0
            for pid in tree.pids:
                wanted.add(pid)
                proc = self._procs.get(pid)
                try:
                    if proc is None:
                        proc = self._procs[pid] = psutil.Process(pid)
                        proc.cpu_percent(interval=None)  # prime; counts from the next sample
                    with proc.oneshot():
                        rss += proc.memory_info().rss
                        cpu += proc.cpu_percent(interval=None)
                except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                    self._procs.pop(pid, None)
            host["server_rss_bytes"][slot] = rss
            host["server_cpu_pct"][slot] = round(cpu, 1)
        for pid in list(self._procs):
            if pid not in wanted:
                del self._procs[pid]
        return host
