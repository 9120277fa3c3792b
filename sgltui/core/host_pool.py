"""HiCache's host pool (--enable-hierarchical-cache): how big SGLang makes it, and whether the
host can hold it. One computation for the preflight check, the Profiles pane and the simulator.

SGLang 0.5.23 (`mem_cache/memory_pool_host.py`, `HostKVCache.__init__`) sizes the pool per TP
rank: `--hicache-size` GB (decimal: size x 1e9 bytes) when it is set, else `--hicache-ratio`
(default 2.0) times the rank's device pool (the KV cache, plus the mamba state pool on hybrid
models). Each rank refuses to start ("Not enough host memory available ...") when its pool is
more than the host's available RAM less 10 GiB; the ranks allocate at the same time, so all of
them must fit together.

Sizes are bytes in and GiB out (core/units.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sgltui.core.units import GIB, gib

DEFAULT_RATIO = 2.0  # --hicache-ratio when the flag is not given
BUFFER_ONLY_RATIO = 1.2  # its default with --hicache-host-memory-mode buffer_only
RESERVE_BYTES = 10 * GIB  # host RAM SGLang leaves for everything else
CUDA_CONTEXT_BYTES = int(0.6 * GIB)  # held on each GPU before any weight is loaded


@dataclass(frozen=True)
class HostPool:
    """The host pool one launch asks for."""

    per_rank_bytes: float
    ranks: int
    sized_by: str  # "hicache-size" | "hicache-ratio"
    ratio: float | None = None
    device_pool_bytes: float | None = None  # per rank; what the ratio multiplies

    @property
    def total_bytes(self) -> float:
        return self.per_rank_bytes * self.ranks

    def how(self) -> str:
        """How it was sized, e.g. 'hicache-ratio 2.0 x device pool 60.0 GiB, 2 ranks'."""
        if self.sized_by == "hicache-size":
            what = f"hicache-size {self.per_rank_bytes / 1e9:g} GB"
        else:
            what = f"hicache-ratio {self.ratio:g} x device pool {gib(self.device_pool_bytes)}"
        return what + (f", {self.ranks} ranks" if self.ranks > 1 else "")


def enabled(server: Mapping[str, Any]) -> bool:
    """Whether a profile's [server] flags turn the hierarchical cache on."""
    return bool(server.get("enable-hierarchical-cache") or server.get("enable-hicache"))


def ranks(server: Mapping[str, Any]) -> int:
    """TP ranks on this host: each one allocates a host pool of its own."""
    value = as_number(server.get("tp-size") or server.get("tensor-parallel-size"))
    return max(1, int(value or 1))


def sized_by_ratio(server: Mapping[str, Any]) -> bool:
    """True when the pool follows the device pool (no positive --hicache-size)."""
    return not (as_number(server.get("hicache-size")) or 0.0) > 0


def host_pool(server: Mapping[str, Any], device_pool_bytes: float | None = None) -> HostPool | None:
    """The pool a profile's [server] flags ask for; None when hicache is off, or when it is
    sized by --hicache-ratio and the device pool per rank (`device_pool_bytes`) is unknown."""
    if not enabled(server):
        return None
    n = ranks(server)
    size_gb = as_number(server.get("hicache-size")) or 0.0
    if size_gb > 0:
        return HostPool(size_gb * 1e9, n, "hicache-size")
    if device_pool_bytes is None:
        return None
    ratio = as_number(server.get("hicache-ratio")) or default_ratio(server)
    return HostPool(ratio * device_pool_bytes, n, "hicache-ratio", ratio, device_pool_bytes)


def default_ratio(server: Mapping[str, Any]) -> float:
    """--hicache-ratio when the flag is not given."""
    if server.get("hicache-host-memory-mode") == "buffer_only":
        return BUFFER_ONLY_RATIO
    return DEFAULT_RATIO


def usable_bytes(available_bytes: float) -> float:
    """What a host pool may take of the host's available RAM."""
    return max(0.0, available_bytes - RESERVE_BYTES)


def shortfall(pool: HostPool, available_bytes: float, ram: str = "RAM") -> str | None:
    """'host pool 240 GiB > 187 GiB free RAM' when the pool does not fit in the available RAM
    less the reserve; None when it fits. `ram` names what was measured ("simulated RAM")."""
    usable = usable_bytes(available_bytes)
    if pool.total_bytes <= usable:
        return None
    return f"host pool {gib(pool.total_bytes, 0)} > {gib(usable, 0)} free {ram}"


def device_pool_estimate(
    gpu_total_bytes: float, mem_fraction_static: float, weights_bytes_per_rank: float
) -> float | None:
    """The KV (and state) pool of one rank before it starts: the static share of the GPU less
    the CUDA context, minus the rank's weights (what SGLang's profile run leaves for the pools);
    None when nothing would be left (the start fails on the GPU first)."""
    budget = (gpu_total_bytes - CUDA_CONTEXT_BYTES) * mem_fraction_static - weights_bytes_per_rank
    return budget if budget > 0 else None


def as_number(value: Any) -> float | None:
    """A profile value as a float; None for a bool, a missing or a non-numeric value."""
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
