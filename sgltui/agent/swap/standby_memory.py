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


@dataclass
class Member:
    """A profile on the slot's GPUs: the one serving or a sleeper."""

    name: str
    mem_fraction: float
    remainder: int  # on the GPU while it sleeps
    reserve: int = 0  # SGLang's own reserve for its activations and graphs while it serves
    fraction_from: str = "its profile"  # where mem_fraction was read
    measured: bool = False  # remainder measured after its release (else estimated)


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
    from sgltui.agent.swap.preflight import model_weights_bytes

    return model_weights_bytes(model)


def mem_fraction(target: Any, total: int | None = None) -> tuple[float, str]:
    """(mem-fraction-static, where it comes from): the profile's, else SGLang's own rule for
    the GPU's size (arg_groups/memory_hook.py; the simulator applies the same)."""
    value = host_pool.as_number(target.server.get("mem-fraction-static"))
    if value:
        return float(value), "its profile"
    if not total:
        return 0.88, "a guess (no GPU size)"
    from sgltui.sim.memory import default_mem_fraction, gpu_defaults

    tp = host_pool.ranks(target.server)
    chunk, graph_bs = gpu_defaults(total >> 20, tp)
    return default_mem_fraction(total >> 20, chunk, graph_bs, tp), "SGLang's default"


def activation_reserve(target: Any, total: int | None) -> int:
    """What a serving SGLang uses outside its static pool (its reserve): the activations of
    one prefill chunk (~0.75 MiB a token), its CUDA graphs (~3.5 MiB a captured batch size,
    three sets with a draft) and the CUDA context, as the simulator models them. A sleeper's
    remainder may not eat it: a woken server that OOMs inside its resume exits."""
    from sgltui.sim.memory import capture_batch_sizes, gpu_defaults

    server = target.server
    tp = host_pool.ranks(server)
    chunk, graph_bs = gpu_defaults((total or 80 * GIB) >> 20, tp)
    chunk = int(host_pool.as_number(server.get("chunked-prefill-size")) or chunk)
    graph_bs = int(host_pool.as_number(server.get("cuda-graph-max-bs")) or graph_bs)
    spec = bool(server.get("speculative-algorithm"))
    graphs = len(capture_batch_sizes(graph_bs, spec)) * (3 if spec else 1) * 3.5 + 64
    mib = 0.75 * max(chunk, 2048) + graphs
    return int(mib * (1 << 20)) + host_pool.CUDA_CONTEXT_BYTES


def host_pool_bytes(target: Any) -> int:
    """A hicache server's pinned host KV pool (core/host_pool.py sizes it): pinned at launch,
    released by nothing, so a sleeper keeps it as well as its weights."""
    if not host_pool.enabled(target.server):
        return 0
    from sgltui.agent.swap.preflight import host_pool_fit

    pool = host_pool_fit(target).pool
    return int(pool.total_bytes) if pool is not None else 0


def pins_estimate(target: Any) -> int | None:
    """Host bytes a sleeper of `target` pins, said before it starts: its weights and its
    draft's (the CPU backup) and its hicache host pool. None: the weights cannot be told."""
    weights = weights_bytes(target)
    return None if weights is None else weights + host_pool_bytes(target)


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
    name: str, need: dict[str, int], available: int, reserve: int, pinned: dict[str, int]
) -> str | None:
    """The host-RAM refusal line, or None when what this add pins (`need`: the standby's
    copy and host pool, the serving profile's first copy) leaves at least `reserve`."""
    total = sum(need.values())
    if available - total >= reserve:
        return None
    parts = " + ".join(f"{k} {gib(v)}" for k, v in need.items())
    each = ", ".join(f"{k} {gib(v)}" for k, v in pinned.items()) or "none yet"
    return (
        f"standby {name} refused: it pins {gib(total)} of host RAM ({parts}: weights, draft "
        f"and hicache host pool) and would leave {gib(max(0, available - total))}, under the "
        f"{gib(reserve)} reserve (standbys pin now: {each}); remove one with `sgltui standby "
        "remove PROFILE` or lower standby_reserve_gb in agent.toml"
    )


def refuse_gpu(name: str, total: int | None, members: list[Member]) -> str | None:
    """The GPU-room refusal line, with its arithmetic: some member, serving, would not keep
    SGLang's own reserve beside the others asleep."""
    if not total:
        return None
    for m in members:
        outside = int(total * (1.0 - m.mem_fraction))
        room = outside - m.reserve
        others = [o for o in members if o is not m]
        beside = sum(o.remainder for o in others)
        if beside > room:
            each = ", ".join(
                f"{o.name} {gib(o.remainder)} ({'measured' if o.measured else 'estimated'})"
                for o in others
            )
            return (
                f"standby {name} refused: no GPU room: while {m.name} serves, {gib(total)} x "
                f"(1 - {m.mem_fraction:.3f} mem_fraction_static, {m.fraction_from}) = "
                f"{gib(outside)} outside its static pool, less SGLang's reserve for activations, "
                f"graphs and the CUDA context {gib(m.reserve)} = {gib(max(0, room))}; the "
                f"sleepers beside it keep {gib(beside)} ({each}); lower mem-fraction-static of "
                f"{m.name} or remove a standby"
            )
    return None


def measured_host_bytes(pid: int, pids: set[int] | None = None) -> int | None:
    """Host RAM a sleeper holds, measured: its process tree's resident memory (the pinned
    backup and the hicache host pool are resident), or what a simulated one says it pins when
    that is more (a simulator pins nothing real). The larger of the two: the project's fake
    SGLang on a GPU is both, a simulator whose holder really pins the bytes. None when neither
    can be read."""
    published: int | None = None
    for pub in sim_gpu.read_publications():
        if pub.get("pid") == pid:
            value = pub.get("host_pinned_bytes")
            published = int(value) if isinstance(value, (int, float)) else None
    total, seen = 0, False
    for p in pids or {pid}:
        try:
            total += psutil.Process(p).memory_info().rss
            seen = True
        except psutil.Error:
            continue
    found = [x for x in (published, total if seen else None) if x is not None]
    return max(found) if found else None


def held_bytes(pids: set[int]) -> int | None:
    """GPU bytes a server's processes hold (NVML, or the simulated GPU); None: no GPU source."""
    held = gpu.held_by(pids)
    if held is None:
        return None
    return sum(held.values())
