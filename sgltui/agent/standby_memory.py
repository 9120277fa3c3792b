"""What a standby costs, said before it is spent: host RAM it pins, GPU room beside the server.

A sleeping SGLang server (its memory released with the memory saver) keeps its weights, and the
MTP draft's, in pinned host RAM (--enable-weights-cpu-backup), and on the GPU its CUDA context
and untagged buffers. A standby is refused when it would leave the host less than the reserve
(agent.toml `standby_reserve_gb`), or when some profile of the slot, serving, would not fit
beside the others' GPU remainders. Blocking (file reads): call from a worker thread.

On the simulator, host RAM is the simulated host's (`sim-host-memory-gb`, default a GPU
server's 512 GB), so the demo works on a laptop.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import psutil

from sgltui.agent import gpu
from sgltui.agent.gpu import sim as sim_gpu
from sgltui.core import host_pool
from sgltui.core.units import GIB, gib

# A sleeper's GPU remainder before it was measured: the CUDA context (~0.6 GiB) and untagged
# buffers (graph pools ~0.8 GiB per rank were measured upstream).
DEFAULT_REMAINDER = int(1.5 * GIB)
DEFAULT_SIM_HOST_GB = 512.0  # the simulator's --sim-host-memory-gb default
OWN_OVERHEAD = host_pool.CUDA_CONTEXT_BYTES + int(0.4 * GIB)  # a server's context + activations


@dataclass
class Member:
    """A profile on the slot's GPUs: the one serving or a sleeper."""

    name: str
    mem_fraction: float
    remainder: int  # on the GPU while it sleeps


def weights_bytes(target: Any) -> int | None:
    """Bytes a sleeper of `target` pins on the host: its weights and its MTP draft's (per host,
    all ranks). None when they cannot be told before it starts."""
    server = target.server
    model = server.get("model-path") or server.get("model")
    if not isinstance(model, str):
        return None
    if target.launcher == "sim":
        from sgltui.sim.models import ModelNotFound, resolve_draft, resolve_model

        try:
            spec = resolve_model(model)
        except ModelNotFound:
            return None
        total = spec.weights_bytes
        algo = server.get("speculative-algorithm")
        if algo:
            try:
                draft_path = server.get("speculative-draft-model-path")
                total += resolve_draft(str(algo), spec, draft_path).weights_bytes
            except (ModelNotFound, ValueError, KeyError):
                pass
        return int(total)
    from sgltui.agent.preflight import model_weights_bytes

    return model_weights_bytes(model)


def mem_fraction(target: Any) -> float:
    value = host_pool.as_number(target.server.get("mem-fraction-static"))
    return float(value) if value else 0.88  # SGLang's choice on an 80 GB GPU, near enough


def gpu_total(target: Any) -> int | None:
    if target.launcher == "sim":
        from sgltui.core.placement import SIM_GPU_ENV
        from sgltui.sim.hardware import DEFAULT_GPU, GPU_PRESETS, get_gpu

        name = target.server.get("sim-gpu") or target.env.get(SIM_GPU_ENV) or DEFAULT_GPU
        return get_gpu(name if name in GPU_PRESETS else DEFAULT_GPU).total_bytes
    visible = target.env.get("CUDA_VISIBLE_DEVICES") or os.environ.get("CUDA_VISIBLE_DEVICES")
    return gpu.smallest_total_bytes(visible)


def host_available(target: Any, pinned_by_standbys: int) -> int:
    """Host RAM a new sleeper may pin. Simulated: the simulated host's RAM less what the
    standbys pin already; real: what the OS says is available (their pinned pages are in use)."""
    if target.launcher == "sim":
        gb = host_pool.as_number(target.server.get("sim-host-memory-gb")) or DEFAULT_SIM_HOST_GB
        return int(gb * 1e9) - pinned_by_standbys
    return int(psutil.virtual_memory().available)


def refuse_host(
    name: str, need: int | None, available: int, reserve: int, pinned: dict[str, int]
) -> str | None:
    """The host-RAM refusal line, or None when `need` leaves at least `reserve`."""
    if need is None or available - need >= reserve:
        return None
    each = ", ".join(f"{k} {gib(v)}" for k, v in pinned.items()) or "none yet"
    return (
        f"standby {name} refused: it pins {gib(need)} of host RAM (its weights, and its draft's) "
        f"and would leave {gib(max(0, available - need))}, under the {gib(reserve)} reserve "
        f"(standbys pin now: {each}); remove one with `sgltui standby remove PROFILE` or lower "
        "standby_reserve_gb in agent.toml"
    )


def refuse_gpu(name: str, total: int | None, members: list[Member]) -> str | None:
    """The GPU-room refusal line: some member, serving, would not fit beside the others asleep."""
    if not total:
        return None
    for m in members:
        room = int(total * (1.0 - m.mem_fraction)) - OWN_OVERHEAD
        beside = sum(o.remainder for o in members if o is not m)
        if beside > room:
            return (
                f"standby {name} refused: no GPU room: while {m.name} serves it takes "
                f"{m.mem_fraction:.2f} of {gib(total)}, leaving {gib(max(0, room))} and the "
                f"sleepers beside it keep {gib(beside)} (CUDA context and buffers, about "
                f"{gib(DEFAULT_REMAINDER)} each); lower mem-fraction-static of {m.name} or remove "
                "a standby"
            )
    return None


def measured_host_bytes(pid: int) -> int | None:
    """Host RAM a simulated sleeper says it pins (its publication); None for a real server."""
    for pub in sim_gpu.read_publications():
        if pub.get("pid") == pid:
            value = pub.get("host_pinned_bytes")
            return int(value) if isinstance(value, (int, float)) else None
    return None


def held_bytes(pids: set[int]) -> int | None:
    """GPU bytes a server's processes hold (NVML, or the simulated GPU); None: no GPU source."""
    held = gpu.held_by(pids)
    if held is None:
        return None
    return sum(held.values())
