"""The GPU service's NVML backend (package nvidia-ml-py, module pynvml): the one place that
talks to NVML.

`session()` opens NVML for one question (preflight, release waits); `open_nvml()` opens it for the
sampler, whose NvmlSource reads per GPU: memory total/used/free, utilization, power, temperature, PCIe rx/tx, and the compute
processes with their memory, attributed to the managed servers' process trees (every TP rank is a
process of the tree). In a container NVML may report host PIDs that do not exist in our PID
namespace; then processes are matched by name instead (SGLang names its schedulers
"sglang::scheduler_TP<r>") and the message says so.
Every optional reading may be unsupported on a given GPU: it becomes None, not an error.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import psutil
import pynvml

from sgltui.agent.gpu.reading import GpuReading, GpuSourceError, empty_gpu
from sgltui.agent.slot.procs import ProcTree

log = logging.getLogger(__name__)
NVMLError = pynvml.NVMLError


@contextlib.contextmanager
def session() -> Iterator[bool]:
    """NVML initialised for the block: True, or False without a driver or GPU. NVML counts its
    initialisations, so this nests with the sampler's own (open_nvml)."""
    try:
        pynvml.nvmlInit()
    except (pynvml.NVMLError, OSError) as exc:  # OSError: a broken driver library
        log.debug("NVML unavailable: %s", exc)
        yield False
        return
    try:
        yield True
    finally:
        _shutdown()


def count() -> int:
    return int(pynvml.nvmlDeviceGetCount())


def processes(index: int) -> list[tuple[int, int]]:
    """(pid, bytes) of the compute processes on GPU `index` (bytes 0 where NVML cannot say)."""
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    return [
        (int(p.pid), int(p.usedGpuMemory or 0))
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
    ]


def memory(index: int) -> tuple[int, int, int]:
    """(total, used, free) bytes of GPU `index`."""
    mem = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(index))
    return int(mem.total), int(mem.used), int(mem.free)


def _text(v: Any) -> str:
    return v.decode(errors="replace") if isinstance(v, bytes) else str(v)


def init_failure_message(exc: Exception) -> str:
    """A one-line, plain message for an NVML start-up failure."""
    if isinstance(exc, pynvml.NVMLError_LibraryNotFound):
        return "no NVIDIA driver found: GPU pane disabled"
    if isinstance(exc, pynvml.NVMLError_DriverNotLoaded):
        return "NVIDIA driver not loaded (is the kernel module up?): GPU pane disabled"
    if isinstance(exc, pynvml.NVMLError_NoPermission):
        return "no permission to query the NVIDIA driver: GPU pane disabled"
    return f"NVML error: {exc}: GPU pane disabled"


def open_nvml() -> tuple[NvmlSource | None, str]:
    """Start NVML. Returns (source, "") or (None, message saying why the GPU pane is off)."""
    try:
        pynvml.nvmlInit()
    except (pynvml.NVMLError, OSError) as exc:  # OSError: a broken driver library
        return None, init_failure_message(exc)
    try:
        count = pynvml.nvmlDeviceGetCount()
    except pynvml.NVMLError as exc:
        _shutdown()
        return None, init_failure_message(exc)
    if count <= 0:
        _shutdown()
        return None, "no NVIDIA GPU found: GPU pane disabled"
    return NvmlSource(count), ""


def _shutdown() -> None:
    with contextlib.suppress(pynvml.NVMLError):
        pynvml.nvmlShutdown()


class NvmlSource:
    kind = "nvml"

    def __init__(self, count: int) -> None:
        self.count = count
        self._static: dict[int, tuple[str, str | None]] = {}  # index -> (name, uuid): read once
        self.foreign_pids = False  # NVML pids seen that do not exist here (container PID namespace)

    def close(self) -> None:
        _shutdown()

    def _opt(self, fn, *args) -> Any:
        """An optional reading: None when unsupported or failing on this GPU."""
        try:
            return fn(*args)
        except pynvml.NVMLError as exc:
            if isinstance(exc, pynvml.NVMLError_GpuIsLost):
                raise GpuSourceError(f"NVML: GPU is lost ({exc})") from exc
            return None

    def sample(self, trees: dict[str, ProcTree]) -> GpuReading:
        gpus = []
        notes: list[str] = []
        try:
            for i in range(self.count):
                gpus.append(self._device(i, trees))
        except GpuSourceError:
            raise
        except pynvml.NVMLError as exc:
            raise GpuSourceError(f"NVML error: {exc}") from exc
        if self.foreign_pids:
            notes.append(
                "NVML reports PIDs from another PID namespace (container): "
                "server processes matched by process name"
            )
        return GpuReading("nvml", "; ".join(notes), gpus)

    def _device(self, i: int, trees: dict[str, ProcTree]) -> dict[str, Any]:
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        if i not in self._static:
            name = self._opt(pynvml.nvmlDeviceGetName, h)
            uuid = self._opt(pynvml.nvmlDeviceGetUUID, h)
            self._static[i] = (
                _text(name) if name is not None else f"GPU {i}",
                _text(uuid) if uuid is not None else None,
            )
        name, uuid = self._static[i]
        g = empty_gpu(i, name, simulated=False)
        g["uuid"] = uuid
        mem = pynvml.nvmlDeviceGetMemoryInfo(h)  # a failure here is a source failure, not optional
        g["total_bytes"], g["used_bytes"], g["free_bytes"] = (
            int(mem.total),
            int(mem.used),
            int(mem.free),
        )
        util = self._opt(pynvml.nvmlDeviceGetUtilizationRates, h)
        g["utilization_pct"] = float(util.gpu) if util is not None else None
        power_mw = self._opt(pynvml.nvmlDeviceGetPowerUsage, h)
        g["power_w"] = power_mw / 1000.0 if power_mw is not None else None
        temp = self._opt(pynvml.nvmlDeviceGetTemperature, h, pynvml.NVML_TEMPERATURE_GPU)
        g["temperature_c"] = float(temp) if temp is not None else None
        # NVML reports PCIe throughput in KB/s over a ~20 ms window.
        rx = self._opt(pynvml.nvmlDeviceGetPcieThroughput, h, pynvml.NVML_PCIE_UTIL_RX_BYTES)
        tx = self._opt(pynvml.nvmlDeviceGetPcieThroughput, h, pynvml.NVML_PCIE_UTIL_TX_BYTES)
        g["pcie_rx_bytes_s"] = rx * 1024.0 if rx is not None else None
        g["pcie_tx_bytes_s"] = tx * 1024.0 if tx is not None else None
        procs = self._opt(pynvml.nvmlDeviceGetComputeRunningProcesses, h) or []
        g["processes"], g["server_bytes"] = self._attribute(procs, trees)
        return g

    def _attribute(
        self, procs: list, trees: dict[str, ProcTree]
    ) -> tuple[list[dict], dict[str, int]]:
        out: list[dict[str, Any]] = []
        per_slot: dict[str, int] = {}
        for p in procs:
            pid = int(p.pid)
            used = p.usedGpuMemory  # None or negative: not available (MIG, Windows)
            used = int(used) if isinstance(used, int) and used >= 0 else None
            slot, how = None, None
            for slot_id, tree in trees.items():
                if pid in tree.pids:
                    slot, how = slot_id, "pid"
                    break
            nvml_name = None
            if slot is None and not self._pid_is_local(pid):
                self.foreign_pids = True
                nvml_name = self._opt(pynvml.nvmlSystemGetProcessName, pid)
                nvml_name = _text(nvml_name) if nvml_name is not None else None
                matches = [
                    s for s, t in trees.items() if nvml_name and t.match_name(nvml_name) is not None
                ]
                if len(matches) == 1:  # a name shared by two servers' trees says nothing
                    slot, how = matches[0], "name"
            if slot is not None and used is not None:
                per_slot[slot] = per_slot.get(slot, 0) + used
            out.append(
                {"pid": pid, "used_bytes": used, "slot": slot, "match": how, "name": nvml_name}
            )
        return out, per_slot

    @staticmethod
    def _pid_is_local(pid: int) -> bool:
        return psutil.pid_exists(pid)
