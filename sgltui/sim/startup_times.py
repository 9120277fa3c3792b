"""How long each start-up phase takes at time scale 1, in seconds.

T = T_proc + T_weights + T_pools + T_graphs + T_warmup, one after another. The constants sit in
the middle of published ranges for a bare-metal host with the checkpoint on local NVMe, so a
27B model starts in about a minute, like the real thing (1-3 minutes is typical).
"""

from __future__ import annotations

MAIN_IMPORTS_S = 6.0  # main process: imports, argument resolution (part of T_proc)
SCHEDULER_INIT_S = 14.0  # scheduler spawn, torch/NCCL init (rest of T_proc: 10-40 s in all)
WEIGHT_READ_BYTES_S = 4e9  # checkpoint read: 2-7 GB/s NVMe, 5-15 GB/s page cache
WEIGHT_FIXED_S = 0.5
DRAFT_FIXED_S = 0.5
POOLS_FIXED_S = 0.4  # memory profiling (0.4-8 s with allocation)
POOL_INIT_BYTES_S = 100e9  # device pool initialisation
HOST_PIN_BYTES_S = 20e9  # pinned host allocation for HiCache ("seconds to tens of seconds")
GRAPH_FIXED_S = 1.0
GRAPH_PER_BS_S = 0.25  # one decode graph: 0.1-0.5 s
WARMUP_S = 7.0  # first forward: JIT/Triton compilation (5-10 s)


def weights_s(bytes_per_rank: float) -> float:
    return bytes_per_rank / WEIGHT_READ_BYTES_S + WEIGHT_FIXED_S


def draft_s(bytes_per_rank: float) -> float:
    return bytes_per_rank / WEIGHT_READ_BYTES_S + DRAFT_FIXED_S


def pools_s(device_bytes: float, host_bytes: float) -> float:
    return POOLS_FIXED_S + device_bytes / POOL_INIT_BYTES_S + host_bytes / HOST_PIN_BYTES_S


def graphs_s(num_graphs: int) -> float:
    return GRAPH_FIXED_S + GRAPH_PER_BS_S * num_graphs
