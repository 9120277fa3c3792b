"""The simulator's info bodies: /server_info (with the flags as SGLang resolved them) and
/v1/loads, as SGLang 0.5.23 answers them, from the running SimServer (sim/server.py)."""

from __future__ import annotations

import datetime
from typing import Any

from sgltui.sim.memory import hicache_ratio, mamba_strategy

SGLANG_VERSION = "0.5.23"


def resolved_args(server: Any) -> dict:
    out = {k: v for k, v in vars(server.args).items() if not k.startswith("sim_")}
    p = server.the_plan
    out.update(
        {
            "served_model_name": server.model_name,
            "tokenizer_path": server.args.tokenizer_path or server.args.model_path,
            "mem_fraction_static": p.mem_fraction_static,
            "chunked_prefill_size": p.chunked_prefill_size,
            "max_prefill_tokens": p.max_prefill_tokens,
            "context_length": p.context_len,
            "max_running_requests": p.requested_max_running_requests,
            "cuda_graph_max_bs_decode": p.cuda_graph_max_bs,
            "page_size": int(server.args.page_size or 1),
        }
    )
    if p.spec is not None:
        out.update(
            {
                "speculative_algorithm": p.spec.algorithm,
                "speculative_num_steps": p.spec.num_steps,
                "speculative_eagle_topk": p.spec.eagle_topk,
                "speculative_num_draft_tokens": p.spec.num_draft_tokens,
            }
        )
    if server.args.enable_hierarchical_cache and not server.args.hicache_size:
        out["hicache_ratio"] = hicache_ratio(server.args)
    if server.the_model.is_hybrid:
        out["mamba_full_memory_ratio"] = server.args.mamba_full_memory_ratio or 0.9
        out["max_mamba_cache_size"] = p.mamba_slots
        strategy = mamba_strategy(server.args)
        if strategy != "off":
            out["mamba_radix_cache_strategy"] = strategy
            if strategy == "no_buffer":
                out["disable_overlap_schedule"] = True
    return out


def server_info(server: Any) -> dict:
    p = server.the_plan
    s = server.the_engine.stats
    args = resolved_args(server)
    startup = round(server.sim_startup_s, 2) if server.ready_at else None
    memory = {
        "weight": round(p.weights_bytes / (1 << 30), 2),
        "kvcache": round(p.kv_pool_bytes / (1 << 30), 2),
        "startup_available": round(p.available_after_pools / (1 << 30), 2),
        "token_capacity": p.max_total_num_tokens,
        "token_capacity_swa": None,
        "graph": {"decode": round(p.graph_bytes / (1 << 30), 2)},
    }
    state = dict(args)
    state.update(
        {
            "world_size": int(server.args.tp_size or 1),
            "effective_max_running_requests_per_dp": p.max_running_requests,
            "last_gen_throughput": s.get("gen_throughput", 0.0),
            "memory_usage": memory,
            "startup_time": startup,
            "decode_cuda_graph_bs": p.cuda_graph_bs,
            "disaggregation_mode": "null",
        }
    )
    if p.spec is not None:
        state["avg_spec_accept_length"] = s.get("spec_accept_length", 0.0)
    info = dict(args)
    info.update(
        {
            "launch_command": " ".join(
                ["python", "-m", "sglang.launch_server"] + argv_sglang(server.argv)
            ),
            "status": server.status if not server.draining else "Draining",
            "max_total_num_tokens": p.max_total_num_tokens,
            "max_req_input_len": p.context_len - 5,
            "hicache_object_layout": None,
            "kv_events": None,
            "startup_time": startup,
            "internal_states": [state],
            "version": SGLANG_VERSION,
            "frontend": "python",
        }
    )
    return info


def argv_sglang(argv: list[str]) -> list[str]:
    """The command line less the simulator's own flags, each with its value (every --sim-*
    flag takes one): what SGLang's launch_command would show."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a.startswith("--sim-"):
            skip = "=" not in a
        else:
            out.append(a)
    return out


def loads(server: Any, include: str, dp_rank: str | None) -> dict:
    p, s = server.the_plan, server.the_engine.stats
    sections = {x.strip() for x in include.split(",") if x.strip()}
    if "all" in sections:
        sections = {"core", "memory", "spec", "lora", "disagg", "queues"}
    ts = datetime.datetime.now(datetime.timezone.utc).isoformat()
    load: dict = {"timestamp": ts, "dp_rank": 0}
    if "core" in sections or not sections:
        load.update(
            {
                "num_running_reqs": s.get("num_running_reqs", 0),
                "num_waiting_reqs": s.get("num_queue_reqs", 0),
                "num_waiting_uncached_tokens": s.get("num_waiting_uncached_tokens", 0),
                "num_used_tokens": s.get("num_used_tokens", 0),
                "num_total_tokens": p.max_total_num_tokens,
                "num_active_tokens": s.get("kv_used_tokens", 0),
                "num_prealloc_ready_tokens": 0,
                "max_total_num_tokens": p.max_total_num_tokens,
                "max_running_requests": p.max_running_requests,
                "token_usage": round(s.get("token_usage", 0.0), 4),
                "gen_throughput": round(s.get("gen_throughput", 0.0), 2),
                "cache_hit_rate": round(s.get("cache_hit_rate", 0.0), 4),
                "utilization": round(s.get("utilization", 0.0), 4),
                "total_prefill_uncached_tokens": s.get("total_prefill_uncached_tokens", 0),
                "total_prefill_busy_us": s.get("total_prefill_busy_us", 0),
                "decode_moments": None,
            }
        )
    if "memory" in sections:
        load["memory"] = {
            "weight_gb": round(p.weights_bytes / (1 << 30), 2),
            "kv_cache_gb": round(p.kv_pool_bytes / (1 << 30), 2),
            "graph_gb": round(p.graph_bytes / (1 << 30), 2),
            "token_capacity": p.max_total_num_tokens,
        }
    if "spec" in sections and p.spec is not None:
        load["speculative"] = {
            "accept_length": round(s.get("spec_accept_length", 0.0), 3),
            "accept_rate": round(s.get("spec_accept_rate", 0.0), 3),
        }
    if "queues" in sections:
        load["queues"] = {
            "waiting": s.get("num_queue_reqs", 0),
            "grammar": 0,
            "paused": 0,
            "retracted": 0,
            "prealloc_ready": 0,
        }
    loads = [load]
    if dp_rank not in (None, "", "0"):
        loads = []
    return {
        "timestamp": ts,
        "version": SGLANG_VERSION,
        "accelerator": "cuda",
        "num_accelerators": int(server.args.tp_size or 1),
        "loads": loads,
    }
