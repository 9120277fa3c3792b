"""One small interface for GPU data, and the choice between its implementations.

Implementations: NvmlSource (real NVIDIA GPUs, nvml_source.py) and SimGpuSource (the GPUs that
running simulators publish, sim_source.py). On a host with NVIDIA GPUs NVML is used; otherwise
simulated GPUs are shown when a simulator publishes them; otherwise the state is kind "none" with
a plain message. No driver, no GPU or an NVML error is a shown state, never an exception.
`SGLTUI_GPU_SOURCE=auto|nvml|sim|none` forces a choice (demos on GPU hosts, tests).
All methods block (NVML, files, /proc): the Telemetry class calls them from a worker thread.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from sgltui.agent.telemetry.proctree import ProcTree


@dataclass
class GpuReading:
    kind: str  # "nvml" | "sim" | "none"
    message: str
    gpus: list[dict[str, Any]] = field(default_factory=list)
    host_pinned_bytes: dict[str, int] = field(
        default_factory=dict
    )  # slot -> bytes (simulated hicache pools)


class GpuSourceError(Exception):
    """The source failed mid-run (e.g. NVML lost the GPU); str() is one line."""


class GpuSource(Protocol):
    kind: str

    def sample(self, trees: dict[str, ProcTree]) -> GpuReading: ...

    def close(self) -> None: ...


def empty_gpu(index: int, name: str, simulated: bool) -> dict[str, Any]:
    """A GPU dict (the GPU shape of a telemetry sample) with every reading unknown."""
    return {
        "index": index,
        "name": name,
        "uuid": None,
        "simulated": simulated,
        "total_bytes": None,
        "used_bytes": None,
        "free_bytes": None,
        "utilization_pct": None,
        "power_w": None,
        "temperature_c": None,
        "pcie_rx_bytes_s": None,
        "pcie_tx_bytes_s": None,
        "server_bytes": {},
        "breakdown_bytes": None,
        "processes": [],
    }


class GpuSelector:
    """Picks the source per sample: NVML if it works, else published simulated GPUs, else none."""

    NVML_RETRY_S = 60.0

    def __init__(self, prefer: str | None = None) -> None:
        self.prefer = (prefer or os.environ.get("SGLTUI_GPU_SOURCE") or "auto").lower()
        if self.prefer not in ("auto", "nvml", "sim", "none"):
            self.prefer = "auto"
        self._nvml: GpuSource | None = None
        self._nvml_message = ""
        self._nvml_tried_at: float | None = None
        self._sim: GpuSource | None = None

    def _ensure_nvml(self) -> None:
        if self._nvml is not None or self.prefer in ("sim", "none"):
            return
        now = time.monotonic()
        if self._nvml_tried_at is not None and now - self._nvml_tried_at < self.NVML_RETRY_S:
            return
        self._nvml_tried_at = now
        from sgltui.agent.telemetry.nvml_source import open_nvml

        self._nvml, self._nvml_message = open_nvml()

    def sample(self, trees: dict[str, ProcTree]) -> GpuReading:
        if self.prefer == "none":
            return GpuReading("none", "GPU sampling turned off (SGLTUI_GPU_SOURCE=none)")
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
            from sgltui.agent.telemetry.sim_source import SimGpuSource

            self._sim = SimGpuSource()
        reading = self._sim.sample(trees)
        if reading.gpus:
            return reading
        if self.prefer == "sim":
            return GpuReading(
                "none", "no simulator is publishing GPUs: GPU pane empty until one runs"
            )
        return GpuReading("none", self._nvml_message or "no GPU source: GPU pane disabled")

    def close(self) -> None:
        if self._nvml is not None:
            self._nvml.close()
            self._nvml = None
