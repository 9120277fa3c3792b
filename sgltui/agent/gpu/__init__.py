"""The agent's one GPU service: NVML on real GPUs (gpu/nvml.py), the simulators' publications
(gpu/sim.py), or nothing when neither exists.

`GpuService.sample()` feeds the telemetry samplers (the GPU pane); its questions answer the slots
(what a stopped server still holds, who else holds the target GPUs), preflight (will the target
fit) and the release wait after a stop. The module-level functions are the questions of the
agent's one service, `SERVICE`.

Sampling picks its backend per sample: NVML if it works, else published simulated GPUs, else
kind "none" with a plain message. No driver, no GPU or an NVML error is a shown state, never an
exception. `SGLTUI_GPU_SOURCE=auto|nvml|sim|none` forces a choice (demos on GPU hosts, tests).

Release after a stop is checked one of two ways, and the stop report says which:

* ``pid``: NVML lists the compute processes with their memory, and their pids are ours: wait
  until no process of the stopped server's tree holds any.
* ``used-memory``: in a container (another PID namespace) NVML's pids are the host's and match
  nothing here, or NVML lists no processes at all. Then wait until each target GPU's used memory
  is back to what it was just before the server was launched (recorded at launch), within
  RELEASE_SLACK_BYTES (CUDA contexts of other processes come and go).
* ``simulated`` for simulators (their published files), ``none`` with no GPU source at all.

Every method blocks (NVML, files, /proc): call them from a worker thread.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import psutil

from sgltui.agent.gpu import nvml, sim
from sgltui.agent.gpu.reading import GpuReading, GpuSourceError, empty_gpu
from sgltui.agent.slot.procs import ProcTree, describe
from sgltui.core import config as env_config
from sgltui.core import units

__all__ = [
    "SERVICE",
    "GpuReading",
    "GpuService",
    "GpuSourceError",
    "Release",
    "device_indexes",
    "empty_gpu",
]

log = logging.getLogger(__name__)

RELEASE_SLACK_BYTES = 512 * 2**20
# Forces the release method (tests; a check on a real GPU of the container path).
RELEASE_METHOD_ENV = env_config.GPU_RELEASE_ENV
SOURCE_ENV = env_config.GPU_SOURCE_ENV


def device_indexes(cuda_visible: str | None, count: int) -> list[int]:
    """The GPU indexes a server with this CUDA_VISIBLE_DEVICES uses (all when unset or not
    plain indexes, e.g. UUIDs)."""
    if cuda_visible:
        try:
            return [int(x) for x in cuda_visible.split(",") if x.strip()]
        except ValueError:
            pass
    return list(range(count))


@dataclass(frozen=True)
class Release:
    """How much of a stopped server's GPU memory is still held, and how that was told."""

    method: str  # "pid" | "used-memory" | "simulated" | "none"
    held_bytes: int
    why: str = field(default="", compare=False)  # why "used-memory" (for the agent log)


class GpuService:
    """The GPUs as the agent sees them: sampled for the pane, asked by slots and preflight."""

    NVML_RETRY_S = 60.0

    def __init__(self, prefer: str | None = None) -> None:
        self.prefer = (prefer or env_config.gpu_source() or "auto").lower()
        if self.prefer not in ("auto", "nvml", "sim", "none"):
            self.prefer = "auto"
        self._nvml: nvml.NvmlSource | None = None
        self._nvml_message = ""
        self._nvml_tried_at: float | None = None
        self._sim: sim.SimGpuSource | None = None
        self._sim_gpus: list[dict[str, Any]] = []  # the simulator's GPUs when one last ran

    # ---- sampling (the GPU pane) ----------------------------------------------------------------

    def _ensure_nvml(self) -> None:
        if self._nvml is not None or self.prefer in ("sim", "none"):
            return
        now = time.monotonic()
        if self._nvml_tried_at is not None and now - self._nvml_tried_at < self.NVML_RETRY_S:
            return
        self._nvml_tried_at = now
        self._nvml, self._nvml_message = nvml.open_nvml()

    def sample(self, trees: dict[str, ProcTree]) -> GpuReading:
        if self.prefer == "none":
            return GpuReading("none", f"GPU sampling turned off ({SOURCE_ENV}=none)")
        self._ensure_nvml()
        if self._nvml is not None:
            try:
                return self._nvml.sample(trees)
            except GpuSourceError as exc:
                self._nvml.close()
                self._nvml = None
                self._nvml_message = (
                    f"{exc}: GPU pane paused, retrying every {int(self.NVML_RETRY_S)} s"
                )
                self._nvml_tried_at = time.monotonic()
                return GpuReading("none", self._nvml_message)
        if self.prefer == "nvml":
            return GpuReading("none", self._nvml_message)
        if self._sim is None:
            self._sim = sim.SimGpuSource()
        reading = self._sim.sample(trees)
        if reading.gpus:
            self._sim_gpus = reading.gpus
            return reading
        if self._sim_gpus:
            # The simulator ran and none runs now (a swap between two, a stop): its GPUs, with
            # nothing on them, not "no NVIDIA driver found" flashing in the pane for a second.
            idle = [_idle(g) for g in self._sim_gpus]
            return GpuReading("sim", "simulated GPUs: no simulator running on them now", idle)
        if self.prefer == "sim":
            return GpuReading(
                "none", "no simulator is publishing GPUs: GPU pane empty until one runs"
            )
        return GpuReading("none", self._nvml_message or "no GPU source: GPU pane disabled")

    def close(self) -> None:
        if self._nvml is not None:
            self._nvml.close()
            self._nvml = None

    # ---- what processes hold --------------------------------------------------------------------

    def held_by(self, pids: set[int]) -> dict[int, int] | None:
        """Bytes of GPU memory held per pid among `pids`; None when no GPU source exists at all."""
        held = self._nvml_held(pids)
        simulated = sim.held_by(pids)
        if held is None and simulated is None:
            return None
        out: dict[int, int] = {}
        for part in (held or {}, simulated or {}):
            for pid, b in part.items():
                out[pid] = out.get(pid, 0) + b
        return out

    @staticmethod
    def _nvml_held(pids: set[int]) -> dict[int, int] | None:
        with nvml.session() as ok:
            if not ok:
                return None
            out: dict[int, int] = {}
            try:
                for i in range(nvml.count()):
                    for pid, used in nvml.processes(i):
                        if pid in pids:
                            out[pid] = out.get(pid, 0) + used
            except nvml.NVMLError as exc:
                log.warning("NVML: reading GPU processes failed: %s", exc)
            return out

    def sglang_on_gpus(self, cuda_visible: str | None, exclude: set[int]) -> list[int] | None:
        """pids of sglang:: processes (not in `exclude`) holding memory on the target GPUs; None
        without NVML, where nothing says which GPU a process holds."""
        with nvml.session() as ok:
            if not ok:
                return None
            found: list[int] = []
            try:
                count = nvml.count()
                for i in device_indexes(cuda_visible, count):
                    if i >= count:
                        continue
                    for pid, _used in nvml.processes(i):
                        if pid in exclude or pid in found:
                            continue
                        with contextlib.suppress(psutil.Error):
                            if psutil.Process(pid).name().startswith("sglang::"):
                                found.append(pid)
            except nvml.NVMLError as exc:
                log.warning("NVML: reading GPU processes failed: %s", exc)
            return found

    # ---- will it fit (preflight, launch) --------------------------------------------------------

    def free_after_release(
        self, cuda_visible: str | None, need: float, freed_pids: set[int]
    ) -> tuple[str, str] | None:
        """(problem, fix) when a target GPU lacks `need` of its memory, counting what the
        replaced server's processes (`freed_pids`) hold as free: it is released before the
        launch. None when it fits or nothing can tell (no NVML)."""
        with nvml.session() as ok:
            if not ok:
                return None
            try:
                count = nvml.count()
                for i in device_indexes(cuda_visible, count):
                    if i >= count:
                        return (
                            f"GPU {i} from CUDA_VISIBLE_DEVICES does not exist (this host has "
                            f"{count})",
                            "fix CUDA_VISIBLE_DEVICES in the profile's [env]",
                        )
                    total, _used, free = nvml.memory(i)
                    users = nvml.processes(i)
                    free += sum(b for pid, b in users if pid in freed_pids)
                    if total and free / total < need:
                        others = [pid for pid, _ in users if pid not in freed_pids]
                        who = f" (held by {describe(others)})" if others else ""
                        has = "will have" if freed_pids else "has only"
                        return (
                            f"GPU {i} {has} {units.gib(free, unit=False)} of {units.gib(total)} "
                            f"free, the profile needs {need:.0%}{who}",
                            "stop those processes or lower mem-fraction-static",
                        )
            except nvml.NVMLError as exc:
                log.warning("NVML: reading GPU memory failed: %s", exc)
            return None

    def smallest_total_bytes(self, cuda_visible: str | None) -> int | None:
        """The total memory of the smallest target GPU (NVML), or None without NVML: the ranks
        of one server size their pools alike, so the smallest GPU bounds them all."""
        with nvml.session() as ok:
            if not ok:
                return None
            try:
                count = nvml.count()
                totals = [
                    nvml.memory(i)[0] for i in device_indexes(cuda_visible, count) if i < count
                ]
            except nvml.NVMLError as exc:
                log.warning("NVML: reading GPU memory failed: %s", exc)
                return None
            return min(totals) if totals else None

    # ---- release after a stop -------------------------------------------------------------------

    def used_bytes(self, cuda_visible: str | None) -> dict[int, int] | None:
        """Used memory per target GPU index (NVML), or None without NVML: the launch baseline."""
        with nvml.session() as ok:
            if not ok:
                return None
            try:
                count = nvml.count()
                return {
                    i: nvml.memory(i)[1] for i in device_indexes(cuda_visible, count) if i < count
                }
            except nvml.NVMLError as exc:
                log.warning("NVML: reading GPU memory failed: %s", exc)
                return None

    def release_state(
        self,
        pids: set[int],
        baseline: dict[int, int] | None,
        cuda_visible: str | None,
        simulated: bool,
    ) -> Release:
        """What the stopped server with these pids still holds (see the module docstring)."""
        if simulated:
            return Release("simulated", sum((sim.held_by(pids) or {}).values()))
        forced = env_config.gpu_release()
        with nvml.session() as ok:
            if ok:
                try:
                    return self._nvml_release(pids, baseline, cuda_visible, forced)
                except nvml.NVMLError as exc:
                    log.warning("NVML: reading GPU memory failed: %s", exc)
        return Release("none", 0)

    @staticmethod
    def _nvml_release(
        pids: set[int], baseline: dict[int, int] | None, cuda_visible: str | None, forced: str
    ) -> Release:
        count = nvml.count()
        indexes = [i for i in device_indexes(cuda_visible, count) if i < count]
        listed = {i: nvml.processes(i) for i in indexes}
        ours = sum(b for procs in listed.values() for pid, b in procs if pid in pids)
        everyone = [pid for procs in listed.values() for pid, _ in procs]
        # A listed pid of the stopped server is ours even once it is gone: NVML lists a rank
        # that exited until the driver has freed its memory (seen on an H200 after every stop).
        foreign = any(p not in pids and not psutil.pid_exists(p) for p in everyone)
        # NVML's pids are not this namespace's, or it lists nobody: pids cannot tell what is held.
        by_memory = foreign or not everyone
        why = (
            "NVML's pids are not ours: container PID namespace"
            if foreign
            else "NVML lists no process on the target GPUs"
        )
        if forced in ("pid", "used-memory"):
            by_memory, why = forced == "used-memory", f"{RELEASE_METHOD_ENV}={forced}"
        if not by_memory or not baseline:
            return Release("pid", ours)
        held = 0
        for i in indexes:
            if i not in baseline:
                continue
            over = nvml.memory(i)[1] - baseline[i]
            if over > RELEASE_SLACK_BYTES:
                held += over
        return Release("used-memory", held, why)


# The agent's service for the slots' and preflight's questions (they keep no sampling state).
SERVICE = GpuService()
held_by = SERVICE.held_by
sglang_on_gpus = SERVICE.sglang_on_gpus
free_after_release = SERVICE.free_after_release
smallest_total_bytes = SERVICE.smallest_total_bytes
used_bytes = SERVICE.used_bytes
release_state = SERVICE.release_state


def _idle(gpu: dict[str, Any]) -> dict[str, Any]:
    """A simulated GPU as it is when no simulator runs on it: all its memory free."""
    total = gpu.get("total_bytes")
    return dict(
        gpu,
        used_bytes=0,
        free_bytes=total,
        utilization_pct=0.0,
        server_bytes={},
        breakdown_bytes=None,
        processes=[],
    )
