"""Simulated GPU presets (--sim-gpu): the figures the memory and speed models need.

Totals are what `nvidia-smi` reports (MiB), because SGLang's memory heuristic keys off that
number; bandwidths are the datasheet figures the speed model scales by its efficiency
constants. PCIe figures are measured pinned host-to-device rates (about 50-56 GB/s on Gen5 x16),
not the theoretical link rate.
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1 << 20
GIB = 1 << 30


@dataclass(frozen=True)
class GpuPreset:
    key: str
    name: str  # as nvidia-smi / NVML print it
    total_mib: int  # total device memory as reported by the driver
    hbm_bytes_s: float  # device memory bandwidth
    bf16_flops: float  # dense BF16 tensor throughput
    pcie_bytes_s: float  # measured pinned host<->device rate, one direction
    tdp_w: float
    idle_w: float

    @property
    def total_bytes(self) -> int:
        return self.total_mib * MIB


GPU_PRESETS: dict[str, GpuPreset] = {
    p.key: p
    for p in (
        GpuPreset("h100-80gb", "NVIDIA H100 80GB HBM3", 81559, 3.35e12, 989e12, 55e9, 700, 70),
        GpuPreset("h200-141gb", "NVIDIA H200", 143771, 4.8e12, 989e12, 55e9, 700, 75),
        GpuPreset(
            "rtx-pro-6000-96gb",
            "NVIDIA RTX PRO 6000 Blackwell Server Edition",
            97887,
            1.792e12,
            504e12,
            55e9,
            600,
            30,
        ),
        GpuPreset("a100-80gb", "NVIDIA A100-SXM4-80GB", 81920, 2.039e12, 312e12, 25e9, 400, 55),
        GpuPreset("l40s-48gb", "NVIDIA L40S", 46068, 0.864e12, 362e12, 25e9, 350, 35),
    )
}

DEFAULT_GPU = "h100-80gb"


def get_gpu(key: str) -> GpuPreset:
    try:
        return GPU_PRESETS[key]
    except KeyError:
        raise ValueError(
            f"unknown --sim-gpu {key!r}; choose one of: {', '.join(GPU_PRESETS)}"
        ) from None
