"""The agent's GPU questions, answered in one place: NVML on real GPUs, the simulators'
publications otherwise, nothing when neither exists.

Used by the slots (what a stopped server still holds, who else holds the target GPUs),
preflight (will the target fit) and the release wait after a stop. The telemetry samplers
(telemetry/gpu_source.py) read the same two sources for the GPU pane.

Release after a stop is checked one of two ways, and the stop report says which:

* ``pid``: NVML lists the compute processes with their memory, and their pids are ours: wait
  until no process of the stopped server's tree holds any.
* ``used-memory``: in a container (another PID namespace) NVML's pids are the host's and match
  nothing here, or NVML lists no processes at all. Then wait until each target GPU's used memory
  is back to what it was just before the server was launched (recorded at launch), within
  RELEASE_SLACK_BYTES (CUDA contexts of other processes come and go).
* ``simulated`` for simulators (their published files), ``none`` with no GPU source at all.

Every function blocks (NVML, files, /proc): call them from a worker thread.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType

import psutil
import pynvml

from sgltui.core import locations

log = logging.getLogger(__name__)

RELEASE_SLACK_BYTES = 512 * 2**20
# Forces the release method (tests; a check on a real GPU of the container path).
RELEASE_METHOD_ENV = "SGLTUI_GPU_RELEASE"


@contextlib.contextmanager
def nvml() -> Iterator[ModuleType | None]:
    """pynvml, initialised for the block, or None without a driver or GPU. NVML counts its
    initialisations, so this nests with the telemetry sampler's own session."""
    try:
        pynvml.nvmlInit()
    except (pynvml.NVMLError, OSError) as exc:
        log.debug("NVML unavailable: %s", exc)
        yield None
        return
    try:
        yield pynvml
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def device_indexes(cuda_visible: str | None, count: int) -> list[int]:
    """The GPU indexes a server with this CUDA_VISIBLE_DEVICES uses (all when unset or not
    plain indexes, e.g. UUIDs)."""
    if cuda_visible:
        try:
            return [int(x) for x in cuda_visible.split(",") if x.strip()]
        except ValueError:
            pass
    return list(range(count))


def _processes(nv: ModuleType, index: int) -> list[tuple[int, int]]:
    """(pid, bytes) of the compute processes on GPU `index` (bytes 0 where NVML cannot say)."""
    handle = nv.nvmlDeviceGetHandleByIndex(index)
    return [
        (int(p.pid), int(p.usedGpuMemory or 0))
        for p in nv.nvmlDeviceGetComputeRunningProcesses(handle)
    ]


# ---- what processes hold ------------------------------------------------------------------------


def held_by(pids: set[int]) -> dict[int, int] | None:
    """Bytes of GPU memory held per pid among `pids`; None when no GPU source exists at all."""
    held = _nvml_held(pids)
    sim = _sim_held(pids)
    if held is None and sim is None:
        return None
    out: dict[int, int] = {}
    for part in (held or {}, sim or {}):
        for pid, b in part.items():
            out[pid] = out.get(pid, 0) + b
    return out


def _nvml_held(pids: set[int]) -> dict[int, int] | None:
    with nvml() as nv:
        if nv is None:
            return None
        out: dict[int, int] = {}
        try:
            for i in range(nv.nvmlDeviceGetCount()):
                for pid, used in _processes(nv, i):
                    if pid in pids:
                        out[pid] = out.get(pid, 0) + used
        except nv.NVMLError as exc:
            log.warning("NVML: reading GPU processes failed: %s", exc)
        return out


def _sim_held(pids: set[int]) -> dict[int, int] | None:
    folder = locations.sim_gpu_dir()
    if not folder.is_dir():
        return None
    out: dict[int, int] = {}
    for path in folder.glob("*.json"):
        try:
            data = json.loads(path.read_text())
            pid = int(data.get("pid", 0))
            owners = {pid, *[int(p) for p in data.get("pids", [])]}
            used = sum(int(g.get("used_bytes", 0)) for g in data.get("gpus", []))
        except (OSError, ValueError, TypeError, AttributeError):
            continue  # being replaced, or not a publication: the next poll reads it again
        if not owners & pids or not psutil.pid_exists(pid):
            continue
        out[pid] = out.get(pid, 0) + used
    return out


def sglang_on_gpus(cuda_visible: str | None, exclude: set[int]) -> list[int] | None:
    """pids of sglang:: processes (not in `exclude`) holding memory on the target GPUs; None
    without NVML, where nothing says which GPU a process holds."""
    with nvml() as nv:
        if nv is None:
            return None
        found: list[int] = []
        try:
            count = nv.nvmlDeviceGetCount()
            for i in device_indexes(cuda_visible, count):
                if i >= count:
                    continue
                for pid, _used in _processes(nv, i):
                    if pid in exclude or pid in found:
                        continue
                    with contextlib.suppress(psutil.Error):
                        if psutil.Process(pid).name().startswith("sglang::"):
                            found.append(pid)
        except nv.NVMLError as exc:
            log.warning("NVML: reading GPU processes failed: %s", exc)
        return found


def free_check(cuda_visible: str | None, need_fraction: float) -> str | None:
    """A one-line reason when the target GPUs lack `need_fraction` of their memory free (NVML
    only; None when it fits or nothing can tell)."""
    from sgltui.agent.procs import describe

    with nvml() as nv:
        if nv is None:
            return None
        try:
            count = nv.nvmlDeviceGetCount()
            for i in device_indexes(cuda_visible, count):
                if i >= count:
                    return (
                        f"GPU {i} from CUDA_VISIBLE_DEVICES does not exist (this host has "
                        f"{count}); fix [env] in the profile"
                    )
                mem = nv.nvmlDeviceGetMemoryInfo(nv.nvmlDeviceGetHandleByIndex(i))
                if mem.total and mem.free / mem.total < need_fraction:
                    users = [pid for pid, _ in _processes(nv, i)]
                    who = f"; held by {describe(users)}" if users else ""
                    return (
                        f"GPU {i} has only {mem.free / 2**30:.1f} of {mem.total / 2**30:.1f} GiB "
                        f"free, the profile needs {need_fraction:.0%}{who}; stop those processes "
                        "or lower mem-fraction-static"
                    )
        except nv.NVMLError as exc:
            log.warning("NVML: reading GPU memory failed: %s", exc)
        return None


def free_after_release(
    cuda_visible: str | None, need: float, freed_pids: set[int]
) -> tuple[str, str] | None:
    """(problem, fix) when a target GPU lacks `need` of its memory, counting what the replaced
    server's processes (`freed_pids`) hold as free: it is released before the launch (preflight).
    None when it fits or nothing can tell (no NVML)."""
    from sgltui.agent.procs import describe

    with nvml() as nv:
        if nv is None:
            return None
        try:
            count = nv.nvmlDeviceGetCount()
            for i in device_indexes(cuda_visible, count):
                if i >= count:
                    return (
                        f"GPU {i} from CUDA_VISIBLE_DEVICES does not exist (this host has {count})",
                        "fix CUDA_VISIBLE_DEVICES in the profile's [env]",
                    )
                mem = nv.nvmlDeviceGetMemoryInfo(nv.nvmlDeviceGetHandleByIndex(i))
                users = _processes(nv, i)
                free = mem.free + sum(b for pid, b in users if pid in freed_pids)
                if mem.total and free / mem.total < need:
                    others = [pid for pid, _ in users if pid not in freed_pids]
                    who = f" (held by {describe(others)})" if others else ""
                    return (
                        f"GPU {i} will have {free / 2**30:.1f} of {mem.total / 2**30:.1f} GiB "
                        f"free, the profile needs {need:.0%}{who}",
                        "stop those processes or lower mem-fraction-static",
                    )
        except nv.NVMLError as exc:
            log.warning("preflight gpu-memory: NVML: %s", exc)
        return None


def smallest_total_bytes(cuda_visible: str | None) -> int | None:
    """The total memory of the smallest target GPU (NVML), or None without NVML: the ranks of
    one server size their pools alike, so the smallest GPU bounds them all."""
    with nvml() as nv:
        if nv is None:
            return None
        try:
            count = nv.nvmlDeviceGetCount()
            totals = [
                int(nv.nvmlDeviceGetMemoryInfo(nv.nvmlDeviceGetHandleByIndex(i)).total)
                for i in device_indexes(cuda_visible, count)
                if i < count
            ]
        except nv.NVMLError as exc:
            log.warning("NVML: reading GPU memory failed: %s", exc)
            return None
        return min(totals) if totals else None


# ---- release after a stop -----------------------------------------------------------------------


def used_bytes(cuda_visible: str | None) -> dict[int, int] | None:
    """Used memory per target GPU index (NVML), or None without NVML: the launch baseline."""
    with nvml() as nv:
        if nv is None:
            return None
        try:
            count = nv.nvmlDeviceGetCount()
            return {
                i: int(nv.nvmlDeviceGetMemoryInfo(nv.nvmlDeviceGetHandleByIndex(i)).used)
                for i in device_indexes(cuda_visible, count)
                if i < count
            }
        except nv.NVMLError as exc:
            log.warning("NVML: reading GPU memory failed: %s", exc)
            return None


@dataclass(frozen=True)
class Release:
    """How much of a stopped server's GPU memory is still held, and how that was told."""

    method: str  # "pid" | "used-memory" | "simulated" | "none"
    held_bytes: int


def release_state(
    pids: set[int], baseline: dict[int, int] | None, cuda_visible: str | None, simulated: bool
) -> Release:
    """What the stopped server with these pids still holds (see the module docstring)."""
    if simulated:
        return Release("simulated", sum((_sim_held(pids) or {}).values()))
    forced = os.environ.get(RELEASE_METHOD_ENV, "").strip()
    with nvml() as nv:
        if nv is not None:
            try:
                return _nvml_release(nv, pids, baseline, cuda_visible, forced)
            except nv.NVMLError as exc:
                log.warning("NVML: reading GPU memory failed: %s", exc)
    return Release("none", 0)


def _nvml_release(
    nv: ModuleType,
    pids: set[int],
    baseline: dict[int, int] | None,
    cuda_visible: str | None,
    forced: str,
) -> Release:
    count = nv.nvmlDeviceGetCount()
    indexes = [i for i in device_indexes(cuda_visible, count) if i < count]
    listed = {i: _processes(nv, i) for i in indexes}
    ours = sum(b for procs in listed.values() for pid, b in procs if pid in pids)
    everyone = [pid for procs in listed.values() for pid, _ in procs]
    foreign = any(not psutil.pid_exists(p) for p in everyone)
    # NVML's pids are not this namespace's, or it lists nobody: pids cannot tell what is held.
    by_memory = foreign or not everyone
    if forced in ("pid", "used-memory"):
        by_memory = forced == "used-memory"
    if not by_memory or not baseline:
        return Release("pid", ours)
    held = 0
    for i in indexes:
        if i not in baseline:
            continue
        used = int(nv.nvmlDeviceGetMemoryInfo(nv.nvmlDeviceGetHandleByIndex(i)).used)
        over = used - baseline[i]
        if over > RELEASE_SLACK_BYTES:
            held += over
    return Release("used-memory", held)
