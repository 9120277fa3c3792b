"""Mamba state slots per request on hybrid models, as SGLang 0.5.23 counts them.

One module so that the simulator's memory plan, the capacity card and the insight card cannot
disagree. The derivation, with source references, is docs/architecture.md, "Mamba state slots". `args` is anything
that carries SGLang's resolved argument names: an argparse Namespace or a dict (server_info).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _get(args: Any, name: str, default: Any = None) -> Any:
    if isinstance(args, Mapping):
        value = args.get(name, default)
    else:
        value = getattr(args, name, default)
    return default if value is None else value


def strategy(args: Any) -> str:
    """The radix strategy SGLang runs with: "auto" becomes extra_buffer when overlap scheduling
    is on or pages are larger than 1, else no_buffer (sglang/srt/arg_groups/overrides.py);
    "off" without a radix cache."""
    if _get(args, "disable_radix_cache", False):
        return "off"
    chosen = _get(args, "mamba_radix_cache_strategy", "auto")
    if chosen == "auto":
        overlap = not _get(args, "disable_overlap_schedule", False)
        paged = int(_get(args, "page_size", 1) or 1) > 1
        return "extra_buffer" if overlap or paged else "no_buffer"
    return str(chosen)


def tracking_slots(args: Any) -> int:
    """Ping-pong tracking slots a request starts with (mem_cache/allocation_sizing.py,
    get_mamba_tracking_slots): 2 for extra_buffer with overlap, 1 without overlap or lazy."""
    s = strategy(args)
    if s == "extra_buffer_lazy":
        return 1
    if s == "extra_buffer":
        return 1 if _get(args, "disable_overlap_schedule", False) else 2
    return 0


def per_request(args: Any) -> int:
    """S, the slots budgeted per running request and the divisor of the cap MRR <= K // S
    (KVCacheConfigurator._calculate_mamba_ratio): 1 without radix cache, else 3 plus the
    tracking slots. Speculative decoding does not change S; its draft states are a separate
    buffer (see draft_states)."""
    if strategy(args) == "off":
        return 1
    return 3 + tracking_slots(args)


def held_per_request(args: Any) -> int:
    """Slots a running request holds from the allocator: one working slot plus its tracking
    slots (HybridReqToTokenPool.alloc, _alloc_ping_pong_buffer). S minus this is headroom for
    the radix cache's checkpoints and the prefill->decode peak."""
    if strategy(args) == "off":
        return 1
    return 1 + tracking_slots(args)


def draft_states(mrr: int, k: int, s: int, draft_tokens: int) -> int:
    """Per-draft-token state copies reserved beside the K slots under speculative decoding:
    (min(MRR, K // S) + 1) x D (kv_cache_configurator._handle_max_mamba_cache)."""
    if not draft_tokens:
        return 0
    return (min(max(1, mrr), k // s) + 1) * draft_tokens


def cap(k: int, args: Any) -> int:
    """The most running requests K state slots admit."""
    return k // per_request(args)


def describe(args: Any) -> str:
    """ "extra_buffer: 5 slots per request (3 held)" for cards."""
    s, held = per_request(args), held_per_request(args)
    name = strategy(args)
    label = "no radix cache" if name == "off" else name
    return f"{label}: {s} slot{'s' * (s != 1)} per request ({held} held)"
