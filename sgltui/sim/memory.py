"""Memory sizing as SGLang 0.5.23 does it (sglang/srt/server_args.py, model_executor/model_runner.py): a pure function of the flags,
the GPU preset and the model, so tests can check each figure against a hand computation.

The order matters and follows SGLang: defaults from GPU size -> static fraction -> weights ->
KV/state budget -> state slots -> KV tokens -> request pool -> max_running_requests. HiCache is
sized last, from the device pool, and changes none of the device figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sgltui.core import host_pool, mamba_slots
from sgltui.sim.hardware import GIB, MIB, GpuPreset
from sgltui.sim.models import DraftSpec, ModelSpec, vit_mfs_factor

# CUDA context + allocator overhead present before any weight is loaded: the gap between the
# driver's total and the "pre" free memory SGLang measures (95.6 vs 95.0 GiB on a 96 GB RTX PRO 6000).
CONTEXT_BYTES = host_pool.CUDA_CONTEXT_BYTES

SPEC_ALGOS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO")


class StartupFailure(Exception):
    """A start-up that SGLang would refuse; `lines` are the log lines it prints (last = the error)."""

    def __init__(self, lines: list[str], phase: str = "kv"):
        super().__init__(lines[-1])
        self.lines = lines
        self.phase = phase


@dataclass
class SpecConfig:
    algorithm: str
    num_steps: int
    eagle_topk: int
    num_draft_tokens: int
    draft: DraftSpec


@dataclass
class MemoryPlan:
    gpu_total_bytes: int
    pre_bytes: int  # free before load (M_pre)
    mem_fraction_static: float
    chunked_prefill_size: int
    cuda_graph_max_bs: int
    weights_bytes: float
    draft_weights_bytes: float
    free_after_load: float
    rest_bytes: float  # KV + state budget
    kv_cell_bytes: int  # target cell_size
    kv_cell_eff_bytes: float  # cell_size incl. draft KV share
    max_total_num_tokens: int
    kv_pool_bytes: float
    draft_kv_bytes: float
    state_bytes_per_slot: int
    mamba_slots: int  # K (0 for dense models)
    mamba_slots_per_req: int  # S (budgeted per request: the MRR cap is K // S)
    mamba_slots_held_per_req: int  # slots a running request holds (working + tracking)
    mamba_pool_bytes: float
    requested_max_running_requests: int | None
    req_pool_size: int
    max_running_requests: int  # effective
    context_len: int
    max_prefill_tokens: int
    cuda_graph_bs: list[int]
    graph_bytes: float
    activation_bytes: float
    hicache_host_tokens: int
    hicache_host_bytes: float
    hicache_state_host_bytes: float
    spec: SpecConfig | None
    hicache_host_mamba_states: int = 0  # host mamba pool slots (hybrid + HiCache)
    warnings: list[str] = field(default_factory=list)

    @property
    def used_bytes(self) -> float:
        return (
            CONTEXT_BYTES
            + self.weights_bytes
            + self.draft_weights_bytes
            + self.kv_pool_bytes
            + self.draft_kv_bytes
            + self.mamba_pool_bytes
            + self.graph_bytes
            + self.activation_bytes
        )

    @property
    def available_after_pools(self) -> float:
        return (
            self.pre_bytes
            - self.weights_bytes
            - self.draft_weights_bytes
            - self.kv_pool_bytes
            - self.draft_kv_bytes
            - self.mamba_pool_bytes
        )

    def breakdown(self) -> dict[str, int]:
        return {
            "weights": int(self.weights_bytes),
            "kv_cache": int(self.kv_pool_bytes),
            "draft": int(self.draft_weights_bytes + self.draft_kv_bytes),
            "state": int(self.mamba_pool_bytes),
            "cuda_graph": int(self.graph_bytes),
            "other": int(CONTEXT_BYTES + self.activation_bytes),
        }


def gpu_defaults(total_mib: int, tp: int) -> tuple[int, int]:
    """(chunked_prefill_size, cuda_graph_max_bs) by GPU size (SGLang's table; 0.5.23 = main)."""
    g = total_mib / 1024
    big_tp = tp >= 4
    if g < 20:
        return 2048, 8
    if g < 35:
        return 4096, 160 if big_tp else 48
    if g < 60:
        return 4096, 160 if big_tp else 32
    if g < 90:
        return 8192, 512 if big_tp else 256
    if g < 160:
        return 8192, 512 if big_tp else 256
    return 16384, 512


def default_mem_fraction(total_mib: int, chunk: int, graph_bs: int, tp: int, pp: int = 1) -> float:
    reserved = 512 + 1.5 * max(chunk, 2048) + 2 * graph_bs + 1024 * tp * pp / 8
    if total_mib > 60 * 1024:
        reserved = max(reserved, 10240)
    return round((total_mib - reserved) / total_mib, 3)


def capture_batch_sizes(max_bs: int, speculative: bool) -> list[int]:
    """Decode CUDA-graph batch sizes, clamped to max_bs."""
    if speculative:
        sizes = (
            list(range(1, 9))
            + list(range(10, 33, 2))
            + list(range(40, 65, 4))
            + list(range(72, 257, 8))
        )
    else:
        sizes = [1, 2, 4, 8, 12] + list(range(16, 257, 8))
    sizes += list(range(272, 513, 16)) + list(range(544, 1025, 32))
    return [b for b in sizes if b <= max_bs] or [1]


def parse_context_length(value) -> int | None:
    """'32768', '32Ki' (x1024) or '32k' (x1000, SI) as SGLang accepts them."""
    if value is None or value == "":
        return None
    s = str(value).strip()
    mult = 1
    for suffix, m in (("Ki", 1024), ("Mi", 1024**2), ("k", 1000), ("K", 1000), ("M", 10**6)):
        if s.endswith(suffix):
            s, mult = s[: -len(suffix)], m
            break
    return int(float(s) * mult)


def mamba_strategy(args) -> str:
    """The radix strategy SGLang runs with (core/mamba_slots.py; docs/architecture.md, "Mamba state slots")."""
    return mamba_slots.strategy(args)


def hicache_ratio(args) -> float:
    """--hicache-ratio, or SGLang's default for the host memory mode (core/host_pool.py)."""
    mode = getattr(args, "hicache_host_memory_mode", None)
    return getattr(args, "hicache_ratio", None) or host_pool.default_ratio(
        {"hicache-host-memory-mode": mode}
    )


def device_pool_bytes(plan: MemoryPlan) -> float:
    """What --hicache-ratio multiplies: the device KV pool plus the state pool (hybrid)."""
    return plan.kv_pool_bytes + plan.mamba_pool_bytes


def resolve_spec(
    args, model: ModelSpec, draft: DraftSpec | None, warnings: list[str]
) -> SpecConfig | None:
    algo = getattr(args, "speculative_algorithm", None)
    if not algo:
        return None
    algo = str(algo).upper()
    steps = args.speculative_num_steps
    topk = args.speculative_eagle_topk
    ndraft = args.speculative_num_draft_tokens
    if steps is None and (topk is not None or ndraft is not None):
        raise StartupFailure(
            [
                "Traceback (most recent call last):",
                '  File "sglang/srt/arg_groups/speculative_hook.py", line 88, in resolve',
                "AssertionError",
            ],
            phase="args",
        )
    if steps is None:
        steps, topk, ndraft = model.spec_default
    topk = topk or 1
    if topk == 1 and ndraft != steps + 1:
        if ndraft is not None:
            warnings.append(
                "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 "
                "when speculative_eagle_topk == 1"
            )
        ndraft = steps + 1
    ndraft = ndraft or steps + 1
    assert draft is not None
    return SpecConfig(algo, steps, topk, ndraft, draft)


def plan_memory(
    args, gpu: GpuPreset, model: ModelSpec, draft: DraftSpec | None, host_ram_bytes: float
) -> MemoryPlan:
    """Size every pool; raise StartupFailure with SGLang's message when it does not fit."""
    warnings: list[str] = []
    tp = max(1, int(getattr(args, "tp_size", 1) or 1))
    spec = resolve_spec(args, model, draft, warnings)
    total_mib = gpu.total_mib
    chunk_default, graph_bs_default = gpu_defaults(total_mib, tp)
    chunk = args.chunked_prefill_size if args.chunked_prefill_size is not None else chunk_default
    graph_max_bs = getattr(args, "cuda_graph_max_bs_decode", None) or graph_bs_default
    mfs = args.mem_fraction_static
    if mfs is None:
        mfs = default_mem_fraction(total_mib, chunk if chunk > 0 else 2048, graph_max_bs, tp)
        mfs = (
            round(mfs * vit_mfs_factor(model), 3)
            if not getattr(args, "language_only", False)
            else mfs
        )

    total = gpu.total_bytes
    pre = total - CONTEXT_BYTES
    weights = model.weights_bytes / tp
    draft_weights = (spec.draft.weights_bytes / tp) if spec else 0.0
    if weights + draft_weights > pre:
        raise StartupFailure(
            [
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total "
                f"capacity of {total / GIB:.2f} GiB of which {max(0.0, pre - weights) / GIB:.2f} GiB is free. "
                f"Of the allocated memory {min(weights, pre) / GIB:.2f} GiB is allocated by PyTorch."
            ],
            phase="weights",
        )
    free_after_load = pre - weights - draft_weights
    rest = free_after_load - pre * (1 - mfs)
    if rest <= 0:
        minimum = 1 - free_after_load / pre
        raise StartupFailure(
            [
                f"Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static={mfs}. "
                f"Raise --mem-fraction-static above {minimum:.3f} (minimum viable = 1 - available/pre = "
                f"{minimum:.3f}). If using speculative decoding, draft weights are now counted."
            ],
            phase="kv",
        )

    kv_dtype = str(getattr(args, "kv_cache_dtype", "auto") or "auto")
    dtype_bytes = 1 if kv_dtype.startswith("fp8") else 2
    cell = model.kv_bytes_per_token(tp, dtype_bytes)
    draft_layers = spec.draft.layers if spec else 0
    cell_eff = cell * (1 + draft_layers / model.full_attn_layers) if spec else float(cell)

    ctx_model = model.context_length
    ctx = parse_context_length(getattr(args, "context_length", None)) or ctx_model

    requested_mrr = args.max_running_requests
    if spec and requested_mrr is None:
        requested_mrr = 48
        warnings.append(
            "Max running requests is reset to 48 for speculative decoding. You can override "
            "this by explicitly setting --max-running-requests."
        )

    # Hybrid state pool: split the budget, solve for state slots K jointly with draft states.
    state_b = 0
    slots = 0
    per_req = 0
    mamba_bytes = 0.0
    radix_off = bool(getattr(args, "disable_radix_cache", False))
    held = 0
    if model.is_hybrid:
        ssm_dtype = getattr(args, "mamba_ssm_dtype", None) or "float32"
        state_b = model.state_bytes_per_slot(tp, 4 if ssm_dtype == "float32" else 2)
        per_req = mamba_slots.per_request(args)
        held = mamba_slots.held_per_request(args)
        d = spec.num_draft_tokens if spec else 0
        pinned = getattr(args, "max_mamba_cache_size", None)
        if pinned:
            slots = int(pinned)
        elif radix_off and requested_mrr:
            slots = int(requested_mrr)
        else:
            ratio = getattr(args, "mamba_full_memory_ratio", None) or 0.9
            budget = rest * ratio / (1 + ratio)
            per_budget = budget / state_b
            if d:
                # Joint solve of main slots and draft states (docs/architecture.md, "Mamba state slots", 2.); a small
                # MRR does not enlarge K: the unused draft share goes back to the KV pool.
                slots = math.floor((per_budget - (1 + d)) / (1 + d / per_req))
            else:
                slots = math.floor(per_budget - 1)
        cap_reqs = (
            min(requested_mrr, slots // per_req) if requested_mrr is not None else slots // per_req
        )
        mamba_bytes = (slots + 1) * state_b + ((cap_reqs + 1) * d * state_b if d else 0)
        if slots <= 0 or cap_reqs < 1 or mamba_bytes >= rest:
            raise StartupFailure(
                [
                    "Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed "
                    f"max_mamba_cache_size={slots}. Reduce --max-running-requests, raise "
                    "--mem-fraction-static, or reduce --speculative-num-draft-tokens."
                ],
                phase="kv",
            )

    kv_budget = rest - mamba_bytes
    tokens = int(kv_budget // cell_eff)
    page = int(getattr(args, "page_size", None) or 1)
    tokens = tokens // page * page
    if args.max_total_tokens:
        tokens = min(tokens, int(args.max_total_tokens))
    if tokens <= 0:
        raise StartupFailure(
            [
                f"Not enough memory. Please try to increase --mem-fraction-static. Current value: "
                f"mem_fraction_static={mfs}"
            ],
            phase="kv",
        )
    kv_bytes = tokens * cell
    draft_kv = tokens * (cell_eff - cell)

    if args.max_running_requests:
        pool = int(args.max_running_requests)
    else:
        pool = int(min(max(tokens / ctx * 512, 2048), 4096))
        pool = max(1, min(pool, tokens // 2))
    effective = min(requested_mrr if requested_mrr is not None else tokens // 2, pool)
    if model.is_hybrid and per_req:
        cap = slots // per_req
        if cap < effective:
            warnings.append(
                f"max_running_requests is capped to {cap} by the mamba state cache "
                f"(max_mamba_cache_size={slots}, {per_req} slots per request)."
            )
            effective = cap
    effective = max(1, effective)
    if tokens < ctx:
        warnings.append(
            f"KV pool holds {tokens} tokens, fewer than --context-length {ctx}. One full-length "
            "request cannot fit, lower --context-length or raise --mem-fraction-static."
        )

    graph_bs = capture_batch_sizes(min(graph_max_bs, effective), spec is not None)
    graph_sets = 3 if spec else 1
    graph_bytes = len(graph_bs) * graph_sets * 3.5 * MIB + 64 * MIB
    # Runtime slack in use: activations for one prefill chunk and the request-to-token table.
    activation = (
        1.5 * MIB * max(chunk, 2048) * 0.5
        + pool * (ctx + 4 + (spec.num_draft_tokens if spec else 0)) * 4
    )

    host_tokens = 0
    host_bytes = 0.0
    host_state = 0.0
    host_states = 0
    if getattr(args, "enable_hierarchical_cache", False):
        if getattr(args, "hicache_size", 0):
            host_tokens = int(args.hicache_size * 1e9 / cell)
            if model.is_hybrid:
                kv_share = kv_bytes / (kv_bytes + mamba_bytes)
                host_tokens = int(host_tokens * kv_share)
                host_state = args.hicache_size * 1e9 * (1 - kv_share)
        else:
            ratio = hicache_ratio(args)
            host_tokens = int(ratio * tokens)
            host_state = ratio * mamba_bytes if model.is_hybrid else 0.0
        host_tokens = host_tokens // page * page
        host_bytes = host_tokens * cell
        if model.is_hybrid and state_b:
            # MambaPoolHost: hicache-size GB / state bytes, else device slots (K) x hicache-ratio;
            # page size 1, plus one page (sglang/srt/mem_cache/pool_host/mamba.py).
            if getattr(args, "hicache_size", 0):
                host_states = int(host_state // state_b) + 1
            else:
                host_states = int(slots * hicache_ratio(args)) + 1
        need = host_bytes + host_state
        avail = host_pool.usable_bytes(host_ram_bytes)
        if need > avail:
            raise StartupFailure(
                [
                    f"Not enough host memory available. Requesting {need / 1e9:.2f} GB but only have "
                    f"{avail / 1e9:.2f} GB free. Please reduce the size of the hierarchical cache."
                ],
                phase="kv",
            )
        if host_tokens <= tokens:
            warnings.append(
                f"HiCache kv host pool ({host_tokens} tokens) is smaller than the device pool "
                f"({tokens} tokens);L2 cache effectiveness is reduced.Consider increasing "
                "--hicache-ratio (or --hicache-size) ..."
            )

    max_prefill = int(getattr(args, "max_prefill_tokens", None) or 16384)
    return MemoryPlan(
        gpu_total_bytes=total,
        pre_bytes=pre,
        mem_fraction_static=mfs,
        chunked_prefill_size=chunk,
        cuda_graph_max_bs=graph_max_bs,
        weights_bytes=weights,
        draft_weights_bytes=draft_weights,
        free_after_load=free_after_load,
        rest_bytes=rest,
        kv_cell_bytes=cell,
        kv_cell_eff_bytes=cell_eff,
        max_total_num_tokens=tokens,
        kv_pool_bytes=kv_bytes,
        draft_kv_bytes=draft_kv,
        state_bytes_per_slot=state_b,
        mamba_slots=slots,
        mamba_slots_per_req=per_req,
        mamba_slots_held_per_req=held,
        mamba_pool_bytes=mamba_bytes,
        requested_max_running_requests=requested_mrr,
        req_pool_size=pool,
        max_running_requests=effective,
        context_len=ctx,
        max_prefill_tokens=max_prefill,
        cuda_graph_bs=graph_bs,
        graph_bytes=graph_bytes,
        activation_bytes=activation,
        hicache_host_tokens=host_tokens,
        hicache_host_bytes=host_bytes,
        hicache_state_host_bytes=host_state,
        hicache_host_mamba_states=host_states,
        spec=spec,
        warnings=warnings,
    )


def device_pool_for(argv: list[str]) -> float | None:
    """The device pool per rank (KV plus state, bytes) the simulator sizes for these flags,
    worked out before it starts: what --hicache-ratio multiplies (the agent's preflight and
    Profiles pane ask). None when the flags do not parse or the start fails before the pools."""
    from sgltui.sim.cli import parse_args
    from sgltui.sim.hardware import get_gpu
    from sgltui.sim.models import ModelNotFound, resolve_draft, resolve_model

    try:
        args = parse_args(argv)
    except SystemExit:  # argparse refused a flag: the flags check reports it
        return None
    if not args.model_path:
        return None
    try:
        model = resolve_model(args.model_path)
        draft = None
        if args.speculative_algorithm:
            draft = resolve_draft(
                args.speculative_algorithm, model, args.speculative_draft_model_path
            )
        plan = plan_memory(args, get_gpu(args.sim_gpu), model, draft, math.inf)
    except (ModelNotFound, StartupFailure, ValueError):
        return None
    return device_pool_bytes(plan)
