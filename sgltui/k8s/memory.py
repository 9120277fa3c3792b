"""The agent pod's memory limit: what its servers and standbys hold in host RAM, said term by
term (the manifest's comment) and checked against a limit the user gives.

A pod over its limit is OOM-killed by the kubelet, which on a GPU node takes the whole agent
and its warm standbys with it, so the limit must cover what the profiles pin:
- each server's own processes (tokenizer, scheduler, detokenizer, CUDA host allocations):
  SERVER_HOST_BYTES, serving or asleep;
- each standby's weights, and its MTP draft's, in pinned host RAM (--enable-weights-cpu-backup
  keeps them while the GPU memory is released): agent/swap/standby_memory.py's reckoning;
- each HiCache host pool (--enable-hierarchical-cache), serving or asleep: core/host_pool.py;
- the agent itself: AGENT_BYTES.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from sgltui.core import host_pool
from sgltui.core.profiles import Profile
from sgltui.core.units import GIB, gib

AGENT_BYTES = 2 * GIB  # the agent, its runners, the fronts
SERVER_HOST_BYTES = 12 * GIB  # one SGLang server's processes beside the GPU, per node


class MemoryError_(ValueError):
    """A profile whose host RAM cannot be told here, or a limit under what is needed."""


@dataclass(frozen=True)
class Term:
    what: str
    bytes: int


def weights_bytes(profile: Profile, given: Mapping[str, float]) -> int | None:
    """Bytes of a profile's weights (and its draft's), per node: `given` (GB, --weights-gb)
    first, then the simulator's model table, then the local hub cache; None: unknown."""
    if profile.name in given:
        return int(given[profile.name] * 1e9)
    from sgltui.agent.swap.standby_memory import weights_bytes as known

    return known(profile)


def gpu_bytes(profile: Profile, gpu_memory_gb: float) -> int:
    if profile.launcher == "sim":
        from sgltui.sim.hardware import DEFAULT_GPU, GPU_PRESETS, get_gpu

        name = str(profile.server.get("sim-gpu") or DEFAULT_GPU)
        return get_gpu(name if name in GPU_PRESETS else DEFAULT_GPU).total_bytes
    return int(gpu_memory_gb * 1e9)


def hicache_bytes(
    profile: Profile, weights: int | None, gpu_memory_gb: float, nodes: int = 1
) -> int | None:
    """The profile's HiCache host pool on one node (0 when off); None when it follows the
    device pool and the weights are unknown."""
    server = profile.server
    if not host_pool.enabled(server):
        return 0
    ranks = host_pool.ranks(server)
    per_node = max(1, ranks // max(1, nodes))
    device = None
    if not host_pool.sized_by_ratio(server):
        pool = host_pool.host_pool(server)
    else:
        if weights is None:
            return None
        frac = host_pool.as_number(server.get("mem-fraction-static")) or 0.88
        device = host_pool.device_pool_estimate(
            gpu_bytes(profile, gpu_memory_gb), frac, weights / ranks
        )
        pool = host_pool.host_pool(server, device or 0.0)
    return int(pool.per_rank_bytes * per_node) if pool else 0


def terms(
    serving: list[Profile],
    standbys: list[Profile],
    given_weights: Mapping[str, float],
    gpu_memory_gb: float,
    nodes: int = 1,
) -> list[Term]:
    """What the pod holds in host RAM, each term named."""
    out = [Term("the agent", AGENT_BYTES)]
    for p, asleep in [(p, False) for p in serving] + [(p, True) for p in standbys]:
        role = "standby" if asleep else "serving"
        out.append(Term(f"{role} {p.name}: its server's processes", SERVER_HOST_BYTES))
        w = weights_bytes(p, given_weights)
        if asleep:
            if w is None:
                raise MemoryError_(
                    f"standby {p.name}: the size of its weights is unknown here (model not in "
                    f"the local hub cache); pass --weights-gb {p.name}=GB"
                )
            out.append(Term(f"standby {p.name}: pinned weights (and draft)", int(w / nodes)))
        pool = hicache_bytes(p, w, gpu_memory_gb, nodes)
        if pool is None:
            raise MemoryError_(
                f"{role} {p.name}: its HiCache pool follows the device pool, which needs the "
                f"size of its weights; pass --weights-gb {p.name}=GB (or set hicache-size)"
            )
        if pool:
            out.append(Term(f"{role} {p.name}: HiCache host pool", pool))
    return out


def limit_gib(needed: list[Term], given_gib: float | None) -> int:
    """The limit in whole GiB: the one given (checked: at least what is needed), else what is
    needed rounded up."""
    need = sum(t.bytes for t in needed)
    if given_gib is None:
        return max(1, math.ceil(need / GIB))
    if given_gib * GIB < need:
        raise MemoryError_(
            f"--memory-limit {given_gib:g}Gi is under what the pod holds ({gib(need)}: "
            f"{', '.join(f'{t.what} {gib(t.bytes)}' for t in needed)}); raise it or drop a "
            "standby"
        )
    return math.ceil(given_gib)


def comment(needed: list[Term], limit: int) -> list[str]:
    lines = [f"memory limit {limit}Gi covers (host RAM of this pod):"]
    lines += [f"  {t.what}: {gib(t.bytes)}" for t in needed]
    lines.append(f"  total {gib(sum(t.bytes for t in needed))}")
    return lines
