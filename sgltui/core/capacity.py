"""The capacity card of one launch: what the server actually allocated, from its own words.

Built from the start-up lines (core/loglines.py) and, once the server
answers, from GET /server_info. The card answers the operator's question "why does this
profile run only N requests at once?": the *effective* max_running_requests (start-up summary
line / server_info internal_states), next to the requested one (the server_args echo), the pools
that bound it (KV tokens, mamba state slots) and what hicache added (host pool GB, which does not
change max_running_requests: SGLang computes that cap before HiCache exists).

Memory figures are per GPU as rank 0 reports them (TP ranks hold equal shares).
The `*_gb` figures keep SGLang's own units: weights, KV pool, graphs and mamba state are GiB
(SGLang divides by 2**30 though it prints "GB"); hicache_host_gb is decimal GB (SGLang's host
pool is sized and logged in 1e9 bytes). Whoever shows them to a person converts with core/units.
"""

from __future__ import annotations

from typing import Any

from sgltui.core import mamba_slots
from sgltui.core.loglines import StartupLine, parse_startup_line

CARD_FIELDS = (
    "weights_gb",
    "kv_pool_tokens",
    "kv_pool_gb",
    "max_running_requests",
    "requested_max_running_requests",
    "mamba_state_slots",
    "hicache_host_gb",
    "cuda_graph_bs",
    "context_length",
    "draft_weights_gb",
    "notes",
)


class CapacityBuilder:
    """Accumulates one launch's start-up lines and /server_info into a capacity card."""

    def __init__(self) -> None:
        self._weights: list[float] = []  # first "Load weight end" = target, later ones = draft
        self._kv: dict[str, Any] = {}
        self._draft_kv_gb: float | None = None
        self._mamba: dict[str, Any] = {}
        self._hicache_gb: dict[str, float] = {}
        self._hicache_tokens: dict[str, int] = {}
        self._graphs: dict[str, dict[str, Any]] = {}
        self._summary: dict[str, Any] = {}
        self._server_args: dict[str, Any] = {}
        self._server_info: dict[str, Any] | None = None
        self._timings: dict[str, float] = {}
        self._notes: list[str] = []
        self.summary_seen = False
        # The card as last built, until an input changes it: telemetry reads it for every
        # slot's engine figures each second, and building it walks all of /server_info's args.
        self._card: dict[str, Any] | None = None
        self._card_built = False

    # -- inputs ---------------------------------------------------------------------------------
    def feed_line(self, line: str) -> StartupLine | None:
        """Feed one raw log line; returns the parsed start-up line when it counted."""
        parsed = parse_startup_line(line)
        if parsed is None:
            return None
        return parsed if self.feed(parsed) else None

    def feed(self, sl: StartupLine) -> bool:
        # Every scheduler rank prints its own start-up lines; rank 0 speaks for all of them.
        if not sl.is_rank0 and sl.kind != "note":
            return False
        self._card_built = False
        v = sl.values
        if sl.kind == "weights_end" and v.get("mem_gb") is not None:
            self._weights.append(v["mem_gb"])
        elif sl.kind == "kv_cache":
            label = (v.get("label") or "").lower()
            if label and ("draft" in label):
                self._draft_kv_gb = (self._draft_kv_gb or 0.0) + (v.get("kv_gb") or 0.0)
            else:
                # A post-capture re-sizing replaces the first figure.
                self._kv = {k: v.get(k) for k in ("tokens", "kv_gb", "dtype")}
        elif sl.kind == "mamba_cache":
            self._mamba = dict(v)
        elif sl.kind == "hicache_host":
            label = v.get("label") or "kv"
            self._hicache_gb[label] = v.get("gb") or 0.0
            if v.get("tokens") is not None:
                self._hicache_tokens[label] = v["tokens"]
        elif sl.kind == "graph_end":
            self._graphs[v.get("which") or "decode"] = dict(v)
        elif sl.kind == "summary":
            self._summary = dict(v)
            self.summary_seen = True
        elif sl.kind == "server_args":
            self._server_args = dict(v)
        elif sl.kind == "startup_timings":
            self._timings = dict(v)
        elif sl.kind == "note":
            text = v.get("text") or ""
            if text and text not in self._notes and len(self._notes) < 20:
                self._notes.append(text)
        else:
            return False
        return True

    def feed_server_info(self, info: dict[str, Any]) -> None:
        if isinstance(info, dict):
            self._server_info = info
            self._card_built = False

    @property
    def has_data(self) -> bool:
        return bool(self._weights or self._kv or self._summary or self._server_info)

    # -- output ---------------------------------------------------------------------------------
    def card(self) -> dict[str, Any] | None:
        """The capacity card (a new dict each call: callers may keep or change it)."""
        if not self._card_built:
            self._card = self._build()
            self._card_built = True
        return None if self._card is None else dict(self._card)

    def _build(self) -> dict[str, Any] | None:
        if not self.has_data:
            return None
        si = self._server_info or {}
        states = si.get("internal_states") if isinstance(si.get("internal_states"), list) else []
        st0 = states[0] if states and isinstance(states[0], dict) else {}
        usage = st0.get("memory_usage")
        mem: dict[str, Any] = usage if isinstance(usage, dict) else {}

        weights_gb = self._weights[0] if self._weights else _num(mem.get("weight"))
        draft_gb = sum(self._weights[1:]) if len(self._weights) > 1 else None
        kv_tokens = self._kv.get("tokens")
        if kv_tokens is None:
            kv_tokens = _int(self._summary.get("max_total_num_tokens")) or _int(
                si.get("max_total_num_tokens")
            )
        kv_gb = self._kv.get("kv_gb")
        if kv_gb is None:
            kv_gb = _num(mem.get("kvcache"))

        # Effective max_running_requests: what the scheduler really admits (summary line, or the
        # per-DP effective value in server_info), never the requested flag.
        effective = _int(self._summary.get("max_running_requests"))
        if states:
            per_dp = [
                _int(s.get("effective_max_running_requests_per_dp"))
                for s in states
                if isinstance(s, dict)
            ]
            if per_dp and all(p is not None for p in per_dp):
                effective = sum(per_dp)  # type: ignore[arg-type]
        requested = self._server_args.get("max_running_requests") if self._server_args else None
        if requested is None and not self._server_args:
            # /server_info's top-level args are resolved values; only a differing value says "requested".
            requested = _int(si.get("max_running_requests"))

        ctx = _int(self._summary.get("context_len")) or _int(si.get("context_length"))
        graph_bs = None
        for which, g in self._graphs.items():
            if "decode" in which and "draft" not in which and g.get("bs"):
                graph_bs = g["bs"]
                break
        if graph_bs is None:
            for which, g in self._graphs.items():
                if "draft" not in which and "prefill" not in which and g.get("bs"):
                    graph_bs = g["bs"]
                    break
        if graph_bs is None and isinstance(st0.get("decode_cuda_graph_bs"), list):
            graph_bs = [int(x) for x in st0["decode_cuda_graph_bs"]]

        notes = list(self._notes)
        if effective is not None and isinstance(requested, int) and effective < requested:
            notes.append(
                f"effective max_running_requests {effective} is below the requested {requested}"
            )
        tp = _int(self._server_args.get("tp_size")) or _int(si.get("tp_size")) or 1
        if tp > 1:
            notes.append(f"memory figures are per GPU (TP rank 0 of {tp})")

        args: dict[str, Any] = {
            k: v for k, v in si.items() if not isinstance(v, (dict, list)) or k == "internal_states"
        }
        args.update(self._server_args)
        slots = _int(self._mamba.get("slots")) if self._mamba else None
        if slots is None:
            slots = _int(si.get("max_mamba_cache_size"))
        hybrid = slots is not None
        reset_to_48 = any("reset to 48 for speculative decoding" in n for n in notes)

        card: dict[str, Any] = {
            "weights_gb": weights_gb,
            "kv_pool_tokens": kv_tokens,
            "kv_pool_gb": kv_gb,
            "max_running_requests": effective,
            "requested_max_running_requests": requested,
            "mamba_state_slots": slots,
            "hicache_host_gb": round(sum(self._hicache_gb.values()), 3)
            if self._hicache_gb
            else None,
            "cuda_graph_bs": graph_bs,
            "context_length": ctx,
            "draft_weights_gb": draft_gb,
            "notes": notes,
            # Extra detail (fields may be added, never removed: viewers read it).
            "draft_kv_gb": self._draft_kv_gb,
            "kv_dtype": self._kv.get("dtype"),
            "mamba_state_gb": _mamba_gb(self._mamba),
            "hicache_host_tokens": sum(self._hicache_tokens.values())
            if self._hicache_tokens
            else None,
            "graph_gb": round(sum((g.get("mem_gb") or 0.0) for g in self._graphs.values()), 3)
            if self._graphs
            else None,
            "available_gpu_mem_gb": _num(self._summary.get("available_gpu_mem_gb")),
            "chunked_prefill_size": _int(self._summary.get("chunked_prefill_size"))
            or _int(si.get("chunked_prefill_size")),
            "speculative_algorithm": self._server_args.get("speculative_algorithm")
            or si.get("speculative_algorithm"),
            "tp_size": tp,
            "startup_timings_s": self._timings or None,
            "mamba_strategy": mamba_slots.strategy(args) if hybrid else None,
            "mamba_slots_per_request": mamba_slots.per_request(args) if hybrid else None,
            "mamba_slots_held_per_request": mamba_slots.held_per_request(args) if hybrid else None,
            "sources": [
                s
                for s, ok in (
                    ("log", bool(self._summary or self._kv or self._weights)),
                    ("server_info", self._server_info is not None),
                )
                if ok
            ],
        }
        card["bound"] = bound(card, args, speculative_default=reset_to_48)
        return card


def bound(
    card: dict[str, Any], args: dict[str, Any] | None = None, speculative_default: bool = False
) -> dict[str, Any] | None:
    """What bounds max running requests, as {"by": kv | mamba | flag | speculative | pool,
    "text": one line}. `args` are the server's resolved arguments (mamba strategy, ...)."""
    effective = card.get("max_running_requests")
    if not isinstance(effective, int):
        return None
    args = args or {}
    requested = card.get("requested_max_running_requests")
    slots = card.get("mamba_state_slots")
    kv = card.get("kv_pool_tokens")
    if isinstance(slots, int) and slots > 0:
        s = mamba_slots.per_request(args)
        cap = slots // s
        if effective == cap and not (isinstance(requested, int) and requested == cap):
            return {
                "by": "mamba",
                "text": f"mamba state slots: {slots} slots / {s} per request "
                f"({mamba_slots.strategy(args)}) = {cap} running",
            }
    if isinstance(requested, int) and effective == requested:
        if speculative_default:
            return {
                "by": "speculative",
                "text": "speculative cap: SGLang sets 48 when max-running-requests is unset",
            }
        return {"by": "flag", "text": f"the flag: max-running-requests = {requested}"}
    if isinstance(kv, int) and kv > 0 and effective == kv // 2:
        return {"by": "kv", "text": f"KV pool: {kv} tokens / 2 = {effective} running"}
    return {
        "by": "pool",
        "text": f"request pool: {effective} (sized from the KV pool and the context length)",
    }


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return None


def _mamba_gb(m: dict[str, Any]) -> float | None:
    if not m:
        return None
    keys = ("conv_gb", "ssm_gb", "intermediate_ssm_gb", "intermediate_conv_gb")
    parts = [float(p) for p in (m.get(k) for k in keys) if isinstance(p, (int, float))]
    return round(sum(parts), 3) if parts else None


def build_card(
    lines: list[str], server_info: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """Convenience: a card from a whole log (e.g. a finished launch's log file)."""
    b = CapacityBuilder()
    for line in lines:
        b.feed_line(line)
    if server_info is not None:
        b.feed_server_info(server_info)
    return b.card()
