"""The simulated-GPU file (read by sgltui/agent/gpu/sim.py).

Telemetry cannot ask NVML about a GPU that does not exist, so each simulator writes what
nvidia-smi would show into sim_gpu_dir()/<main pid>.json about once a second (tmp + rename, so a
reader never sees half a file) and removes it at exit.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable

from sgltui.core.files import private_dir, write_json_atomic
from sgltui.core.locations import sim_gpu_dir
from sgltui.sim.hardware import GpuPreset
from sgltui.sim.memory import CONTEXT_BYTES, MemoryPlan

# Memory present at each start-up phase, as shares of the final breakdown.
_PHASE_PARTS = {
    "spawned": (),
    "loading weights": ("weights_partial",),
    "allocating KV cache": ("weights", "draft_weights"),
    "capturing CUDA graphs": ("weights", "draft_weights", "pools"),
    "warming up": ("weights", "draft_weights", "pools", "graphs"),
    "ready": ("weights", "draft_weights", "pools", "graphs", "activations"),
}


def published_indexes(tp: int, host_gpus: int | None, visible: str | None) -> list[int]:
    """The GPU indexes a simulator's ranks sit on. On a simulated host of N GPUs, the ones
    CUDA_VISIBLE_DEVICES names (as the agent gives each slot its own), the first `tp` of them;
    otherwise 0..tp-1, as before."""
    if host_gpus and visible:
        try:
            picked = [int(x) for x in visible.split(",") if x.strip()]
        except ValueError:
            picked = []
        picked = [i for i in picked if 0 <= i < host_gpus][:tp]
        if picked:
            return picked
    return list(range(tp))


class GpuPublisher:
    def __init__(
        self,
        gpu: GpuPreset,
        tp_size: int,
        port: int,
        host_gpus: int | None = None,
        visible: str | None = None,
    ):
        self.gpu = gpu
        self.tp = max(1, tp_size)
        self.port = port
        self.host_gpus = host_gpus
        self.indexes = published_indexes(self.tp, host_gpus, visible)
        self.dir = sim_gpu_dir()
        self.path = self.dir / f"{os.getpid()}.json"
        self.phase = "spawned"
        self.phase_started = time.monotonic()
        self.phase_expected_s = 1.0
        self.plan: MemoryPlan | None = None
        self._last_io: tuple[float, float, float] | None = None
        # The memory saver's view (sim/memory_saver.py): released parts taken out, pinned backup.
        self.adjust: Callable[[dict[str, int]], dict[str, int]] | None = None
        self.backup_bytes: Callable[[], int] | None = None

    def breakdown(self) -> dict[str, int]:
        parts = _PHASE_PARTS.get(self.phase, _PHASE_PARTS["ready"])
        zero = {
            "weights": 0,
            "kv_cache": 0,
            "draft": 0,
            "state": 0,
            "cuda_graph": 0,
            "other": CONTEXT_BYTES,
        }
        p = self.plan
        if p is None:
            return zero
        out = dict(zero)
        if "weights_partial" in parts:
            frac = min(
                1.0, (time.monotonic() - self.phase_started) / max(1e-3, self.phase_expected_s)
            )
            out["weights"] = int(p.weights_bytes * frac)
        if "weights" in parts:
            out["weights"] = int(p.weights_bytes)
        if "draft_weights" in parts:
            out["draft"] = int(p.draft_weights_bytes)
        if "pools" in parts:
            out["kv_cache"] = int(p.kv_pool_bytes)
            out["state"] = int(p.mamba_pool_bytes)
            out["draft"] = int(p.draft_weights_bytes + p.draft_kv_bytes)
        if "graphs" in parts:
            out["cuda_graph"] = int(p.graph_bytes)
        if "activations" in parts:
            out["other"] = int(CONTEXT_BYTES + p.activation_bytes)
        return out

    def write(self, pids: list[int], stats: dict | None) -> None:
        stats = stats or {}
        util = (
            float(stats.get("utilization", 0.0))
            if self.phase == "ready"
            else (0.35 if self.phase in ("capturing CUDA graphs", "warming up") else 0.0)
        )
        rx = tx = 0.0
        now = time.monotonic()
        io = (
            now,
            float(stats.get("pcie_rx_total_bytes", 0.0)),
            float(stats.get("pcie_tx_total_bytes", 0.0)),
        )
        if self._last_io is not None and now > self._last_io[0]:
            dt = now - self._last_io[0]
            rx = max(0.0, (io[1] - self._last_io[1]) / dt)
            tx = max(0.0, (io[2] - self._last_io[2]) / dt)
        self._last_io = io
        if self.phase == "loading weights" and self.plan is not None:
            rx += self.plan.weights_bytes / max(1e-3, self.phase_expected_s)
        bd = self.breakdown()
        if self.adjust is not None:
            bd = self.adjust(bd)
        used = min(self.gpu.total_bytes, sum(bd.values()))
        gpus = []
        for i in self.indexes:
            gpus.append(
                {
                    "index": i,
                    "name": f"{self.gpu.name} (simulated)",
                    "preset": self.gpu.key,
                    "total_bytes": self.gpu.total_bytes,
                    "used_bytes": used,
                    "breakdown_bytes": bd,
                    "utilization_pct": round(util * 100, 1),
                    "power_w": round(
                        self.gpu.idle_w + util * (self.gpu.tdp_w - self.gpu.idle_w) * 0.9, 1
                    ),
                    "temperature_c": round(32 + util * 38, 1),
                    "pcie_rx_bytes_s": rx,
                    "pcie_tx_bytes_s": tx,
                }
            )
        host_pinned = 0
        if self.plan is not None and self.phase in ("capturing CUDA graphs", "warming up", "ready"):
            host_pinned = int(self.plan.hicache_host_bytes + self.plan.hicache_state_host_bytes)
        if self.backup_bytes is not None:
            host_pinned += self.backup_bytes()
        doc = {
            "v": 1,
            "pid": os.getpid(),
            "pids": pids,
            "port": self.port,
            "simulated": True,
            "ts": time.time(),
            "gpus": gpus,
            "host_pinned_bytes": host_pinned,
        }
        if self.host_gpus:
            doc["host_gpus"] = self.host_gpus  # the agent shows the idle GPUs of the host too
            doc["idle_gpu"] = {"power_w": self.gpu.idle_w, "temperature_c": 32.0}
        try:
            private_dir(self.dir)
            # Rewritten every second and worthless after a crash: no fsync.
            write_json_atomic(self.path, doc, indent=None, fsync=False)
        except OSError:
            pass  # telemetry is best effort; serving must go on

    def pinned_by_others(self) -> int:
        """Host memory the other simulators of this host (their files beside ours, their
        processes alive) say they pin: what a new pinned allocation competes with."""
        total = 0
        with contextlib.suppress(OSError):
            for path in self.dir.glob("*.json"):
                if path == self.path:
                    continue
                try:
                    doc = json.loads(path.read_text())
                    os.kill(int(doc["pid"]), 0)
                    total += int(doc.get("host_pinned_bytes") or 0)
                except (OSError, ValueError, KeyError, TypeError):
                    continue  # gone, half-read or not ours: it pins nothing we can count
        return total

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()
