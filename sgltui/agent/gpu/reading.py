"""What the GPU service answers with: one sample of every GPU (`GpuReading`, each GPU a dict of
the telemetry sample's GPU shape), and the error a backend raises when it fails mid-run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class GpuReading:
    kind: str  # "nvml" | "sim" | "none"
    message: str
    gpus: list[dict[str, Any]] = field(default_factory=list)
    # slot -> bytes of pinned host memory (simulated hicache pools)
    host_pinned_bytes: dict[str, int] = field(default_factory=dict)


class GpuSourceError(Exception):
    """The source failed mid-run (e.g. NVML lost the GPU); str() is one line."""


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
