"""A fake NVML at the pynvml function boundary: the real module's functions are monkeypatched."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pynvml


@dataclass
class FakeGpu:
    name: str = "NVIDIA H200"
    uuid: str = "GPU-0000"
    total: int = 150_000_000_000
    used: int = 0
    util: int = 0
    power_mw: int | None = 100_000
    temp: int = 40
    rx_kbs: int | None = 1000
    tx_kbs: int | None = 500
    procs: list[tuple[int, int | None]] = field(default_factory=list)  # (pid, used bytes)


class FakeNvml:
    def __init__(
        self,
        monkeypatch,
        gpus: list[FakeGpu],
        init_error: int | None = None,
        process_names: dict[int, str] | None = None,
    ) -> None:
        self.gpus = gpus
        self.init_error = init_error
        self.lost = False
        self.process_names = process_names or {}
        self.inits = 0
        self.shutdowns = 0
        mp = monkeypatch
        mp.setattr(pynvml, "nvmlInit", self.init)
        mp.setattr(pynvml, "nvmlShutdown", self.shutdown)
        mp.setattr(pynvml, "nvmlDeviceGetCount", lambda: len(self.gpus))
        mp.setattr(pynvml, "nvmlDeviceGetHandleByIndex", self.handle)
        mp.setattr(pynvml, "nvmlDeviceGetName", lambda h: self.gpus[h].name)
        mp.setattr(pynvml, "nvmlDeviceGetUUID", lambda h: self.gpus[h].uuid)
        mp.setattr(pynvml, "nvmlDeviceGetMemoryInfo", self.memory)
        mp.setattr(
            pynvml,
            "nvmlDeviceGetUtilizationRates",
            lambda h: SimpleNamespace(gpu=self.gpus[h].util, memory=0),
        )
        mp.setattr(pynvml, "nvmlDeviceGetPowerUsage", lambda h: self._opt(self.gpus[h].power_mw))
        mp.setattr(pynvml, "nvmlDeviceGetTemperature", lambda h, sensor: self.gpus[h].temp)
        mp.setattr(pynvml, "nvmlDeviceGetPcieThroughput", self.pcie)
        mp.setattr(pynvml, "nvmlDeviceGetComputeRunningProcesses", self.procs)
        mp.setattr(pynvml, "nvmlSystemGetProcessName", self.proc_name)

    def init(self):
        self.inits += 1
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)

    def shutdown(self):
        self.shutdowns += 1

    def handle(self, i):
        if self.lost:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        return i

    def memory(self, h):
        g = self.gpus[h]
        return SimpleNamespace(total=g.total, used=g.used, free=g.total - g.used)

    @staticmethod
    def _opt(v):
        if v is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return v

    def pcie(self, h, counter):
        g = self.gpus[h]
        return self._opt(g.rx_kbs if counter == pynvml.NVML_PCIE_UTIL_RX_BYTES else g.tx_kbs)

    def procs(self, h):
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in self.gpus[h].procs]

    def proc_name(self, pid):
        if pid not in self.process_names:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return self.process_names[pid]
