"""core/host_pool.py: the HiCache host pool SGLang sizes, and the line when it does not fit."""

from __future__ import annotations

from sgltui.core import host_pool
from sgltui.core.units import GIB


def test_off_without_hierarchical_cache():
    assert host_pool.host_pool({"hicache-size": 100}) is None


def test_size_is_decimal_gb_per_rank_and_every_rank_allocates():
    pool = host_pool.host_pool(
        {"enable-hierarchical-cache": True, "hicache-size": 120, "tp-size": 2}
    )
    assert pool is not None and pool.per_rank_bytes == 120e9 and pool.total_bytes == 240e9
    assert pool.how() == "hicache-size 120 GB, 2 ranks"


def test_size_overrides_ratio():
    server = {"enable-hicache": True, "hicache-size": 40, "hicache-ratio": 5}
    pool = host_pool.host_pool(server, device_pool_bytes=100 * GIB)
    assert pool is not None and pool.sized_by == "hicache-size" and pool.total_bytes == 40e9


def test_ratio_multiplies_the_device_pool_and_needs_it():
    server = {"enable-hierarchical-cache": True, "hicache-ratio": 3.0}
    assert host_pool.host_pool(server) is None  # unknown device pool: nothing to say yet
    pool = host_pool.host_pool(server, device_pool_bytes=60 * GIB)
    assert pool is not None and pool.total_bytes == 180 * GIB
    assert pool.how() == "hicache-ratio 3 x device pool 60.0 GiB"


def test_default_ratio_follows_the_host_memory_mode():
    on = {"enable-hierarchical-cache": True}
    assert host_pool.host_pool(on, 10 * GIB).ratio == 2.0  # type: ignore[union-attr]
    buffer_only = {**on, "hicache-host-memory-mode": "buffer_only"}
    assert host_pool.host_pool(buffer_only, 10 * GIB).ratio == 1.2  # type: ignore[union-attr]


def test_shortfall_keeps_10_gib_back():
    pool = host_pool.host_pool({"enable-hierarchical-cache": True, "hicache-ratio": 2}, 120 * GIB)
    assert pool is not None
    assert host_pool.shortfall(pool, 197 * GIB) == "host pool 240 GiB > 187 GiB free RAM"
    assert host_pool.shortfall(pool, 250 * GIB) is None
    assert host_pool.shortfall(pool, 250 * GIB - 1) is not None  # 240 GiB + 10 GiB reserve
    assert host_pool.shortfall(pool, 5 * GIB, "simulated RAM") == (
        "host pool 240 GiB > 0 GiB free simulated RAM"
    )


def test_device_pool_estimate_is_the_static_share_less_the_weights():
    total = 96 * GIB
    est = host_pool.device_pool_estimate(total, 0.9, 50 * GIB)
    assert est == (total - host_pool.CUDA_CONTEXT_BYTES) * 0.9 - 50 * GIB
    assert host_pool.device_pool_estimate(total, 0.5, 60 * GIB) is None


def test_the_simulator_sizes_the_pool_the_same_way():
    """The simulator's memory plan and device_pool_for agree with the core sizing."""
    from sgltui.sim.cli import parse_args
    from sgltui.sim.hardware import get_gpu
    from sgltui.sim.memory import device_pool_bytes, device_pool_for, plan_memory
    from sgltui.sim.models import resolve_model

    argv = ["--model-path", "Qwen/Qwen3-32B", "--sim-gpu", "h200-141gb"]
    argv += ["--enable-hierarchical-cache", "--hicache-ratio", "2"]
    args = parse_args(argv)
    plan = plan_memory(args, get_gpu("h200-141gb"), resolve_model(args.model_path), None, 1e15)
    device = device_pool_for(argv)
    assert device == device_pool_bytes(plan)
    pool = host_pool.host_pool({"enable-hierarchical-cache": True, "hicache-ratio": 2}, device)
    assert pool is not None
    # Page rounding of the host tokens only.
    assert abs(pool.total_bytes - plan.hicache_host_bytes) <= plan.kv_cell_bytes * 64
