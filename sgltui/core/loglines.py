"""Parse SGLang's scheduler log lines: periodic batch lines and start-up memory lines.

Formats are SGLang's prefix (`[time TP0]`), its periodic batch lines and its start-up lines,
for 0.5.23 and the older 0.5.12 wording. Parsing is deliberately tolerant: batch lines are split
into `key: value` parts and unknown keys are kept but never required, because fields are
conditional (speculative, hybrid pools, PD, HiSparse) and new ones appear between versions.
Nothing here raises on odd input: an unrecognised line gives None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# "[2026-10-01 12:00:03 DP1 TP0] message" (tags only for dimensions > 1; ms only with SGLANG_LOG_MS).
_PREFIX = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)((?: [A-Z_]+\d+)*)\] ?(.*)$")
_TAG = re.compile(r"([A-Z_]+?)(\d+)$")
_NUM = r"(-?\d+(?:\.\d+)?)"


@dataclass
class LogLine:
    """A log line split into its prefix and message."""

    message: str
    time_text: str | None = None
    ranks: dict[str, int] = field(
        default_factory=dict
    )  # {"TP": 0, "DP": 1, ...}; absent dimension = 0

    @property
    def tp_rank(self) -> int:
        return self.ranks.get("TP", 0)

    @property
    def dp_rank(self) -> int:
        return self.ranks.get("DP", 0)

    @property
    def is_rank0(self) -> bool:
        """Rank 0 of its TP group (each DP group has its own rank 0)."""
        return all(v == 0 for k, v in self.ranks.items() if k not in ("DP",))


def split_prefix(line: str) -> LogLine:
    line = line.rstrip("\r\n")
    m = _PREFIX.match(line)
    if not m:
        return LogLine(message=line.strip())
    ranks: dict[str, int] = {}
    for tag in m.group(2).split():
        t = _TAG.match(tag)
        if t:
            ranks[t.group(1)] = int(t.group(2))
    return LogLine(message=m.group(3), time_text=m.group(1), ranks=ranks)


def _value(text: str) -> Any:
    text = text.strip()
    if text in ("True", "False"):
        return text == "True"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


# ---------------------------------------------------------------------------------------------
# Periodic batch lines (`Prefill batch. ...`, `Decode batch. ...`)

_BATCH = re.compile(r"(Prefill|Decode) batch(?: \[\d+\])?, (.*)$")
# Pool usage keys in a batch line; the bottleneck pool (the largest) is what sglang:token_usage reports.
_USAGE_KEYS = ("token usage", "full token usage", "swa token usage", "mamba usage")


@dataclass
class BatchLine:
    kind: str  # "prefill" | "decode"
    fields: dict[str, Any]
    ranks: dict[str, int] = field(default_factory=dict)
    time_text: str | None = None

    def _num(self, key: str) -> float | None:
        v = self.fields.get(key)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    @property
    def dp_rank(self) -> int:
        return self.ranks.get("DP", 0)

    @property
    def num_running_reqs(self) -> int | None:
        v = self._num("#running-req")
        return None if v is None else int(v)

    @property
    def num_queue_reqs(self) -> int | None:
        v = self._num("#queue-req")
        return None if v is None else int(v)

    @property
    def token_usage(self) -> float | None:
        vals = [v for v in (self._num(k) for k in _USAGE_KEYS) if v is not None]
        return max(vals) if vals else None

    @property
    def gen_throughput(self) -> float | None:
        return self._num("gen throughput (token/s)")

    @property
    def input_throughput(self) -> float | None:
        return self._num("input throughput (token/s)")

    @property
    def accept_length(self) -> float | None:
        return self._num("accept len")

    @property
    def accept_rate(self) -> float | None:
        return self._num("accept rate")

    @property
    def cache_hit_rate(self) -> float | None:
        """Prefill only: share of this batch's prompt tokens served from the prefix cache."""
        new, cached = self._num("#new-token"), self._num("#cached-token")
        if new is None or cached is None or new + cached <= 0:
            return None
        return cached / (new + cached)


def parse_batch_line(line: str) -> BatchLine | None:
    """A `Prefill batch, ...` / `Decode batch, ...` line, or None."""
    if "batch" not in line:  # cheap reject: most lines are not batch lines
        return None
    ll = split_prefix(line)
    m = _BATCH.search(ll.message)
    if not m:
        return None
    fields: dict[str, Any] = {}
    for part in m.group(2).split(", "):
        key, sep, val = part.rpartition(": ")
        if not sep:
            continue
        fields[key.strip()] = _value(val)
    if not fields:
        return None
    return BatchLine(kind=m.group(1).lower(), fields=fields, ranks=ll.ranks, time_text=ll.time_text)


# ---------------------------------------------------------------------------------------------
# Start-up lines (memory and pool sizes, per scheduler rank)


@dataclass
class StartupLine:
    kind: str
    values: dict[str, Any]
    ranks: dict[str, int] = field(default_factory=dict)

    @property
    def is_rank0(self) -> bool:
        return all(v == 0 for v in self.ranks.values())


def _f(pattern: str, text: str) -> float | None:
    m = re.search(pattern, text)
    return float(m.group(1)) if m else None


def _bs_list(text: str) -> list[int] | None:
    m = re.search(r"bs=\[([\d,\s]*)\]", text)
    if not m:
        return None
    return [int(x) for x in m.group(1).replace(",", " ").split()]


# Warnings that explain capacity; kept verbatim (first sentence) as card notes.
_NOTE_MARKERS = (
    "Max running requests is reset to",
    "max_running_requests is capped to",
    "KV pool holds",
    "is smaller than the device pool",
    "The memory capacity is unbalanced",
    "Not enough space for mamba cache",
    "Post-capture KV sizing: max_running_requests",
)

_SERVER_ARGS_KEYS = (
    "max_running_requests",
    "tp_size",
    "dp_size",
    "context_length",
    "speculative_algorithm",
    "speculative_num_draft_tokens",
    "enable_hierarchical_cache",
    "hicache_ratio",
    "hicache_size",
    "max_mamba_cache_size",
    "mem_fraction_static",
    "chunked_prefill_size",
)


def _parse_server_args(msg: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in _SERVER_ARGS_KEYS:
        m = re.search(r"[(,\s]" + key + r"=('[^']*'|[^,)]*)", msg)
        if m:
            raw = m.group(1).strip()
            if raw.startswith("'"):
                out[key] = raw.strip("'")
            elif raw == "None":
                out[key] = None
            else:
                out[key] = _value(raw)
    return out


def parse_startup_line(line: str) -> StartupLine | None:
    """One of the start-up lines that reveal memory and capacity, or None."""
    ll = split_prefix(line)
    msg = ll.message

    def mk(kind: str, **values: Any) -> StartupLine:
        return StartupLine(kind=kind, values=values, ranks=ll.ranks)

    if msg.startswith("max_total_num_tokens="):
        vals: dict[str, Any] = {}
        for part in msg.split(", "):
            k, sep, v = part.partition("=")
            if sep:
                v = v.strip()
                if v.endswith(" GB"):
                    k, v = k + "_gb", v[:-3]
                vals[k.strip()] = _value(v)
        return mk("summary", **vals)
    if msg.startswith("Load weight begin"):
        return mk("weights_begin", avail_gb=_f(r"avail mem=" + _NUM, msg))
    if msg.startswith("Load weight end"):
        t = re.search(r"type=([^,\s]+)", msg)
        return mk(
            "weights_end",
            mem_gb=_f(r"mem usage=" + _NUM, msg),
            avail_gb=_f(r"avail mem=" + _NUM, msg),
            elapsed_s=_f(r"elapsed=" + _NUM, msg),
            type=t.group(1) if t else None,
        )
    if "Mamba Cache is allocated" in msg:
        return mk(
            "mamba_cache",
            slots=int(_f(r"max_mamba_cache_size: " + _NUM, msg) or 0),
            conv_gb=_f(r"conv_state size: " + _NUM, msg),
            ssm_gb=_f(r"\bssm_state size: " + _NUM, msg),
            intermediate_ssm_gb=_f(r"intermediate_ssm_state_cache size: " + _NUM, msg),
            intermediate_conv_gb=_f(r"intermediate_conv_window_cache size: " + _NUM, msg),
        )
    # Unified sizing: "... KV Cache VA upper bound ..." first (not a pool), then the real figure.
    m = re.match(r"Post-capture KV sizing: (?:(\S+) )?KV cache allocated\.", msg)
    if m:
        return mk(
            "kv_cache",
            label=m.group(1),
            dtype=_dtype(msg),
            tokens=_int(r"#tokens: (\d+)", msg),
            kv_gb=_f(r"KV size: " + _NUM, msg),
            avail_gb=_f(r"avail mem=" + _NUM, msg),
        )
    m = re.match(r"(?:(.*?) )?KV Cache is allocated\.", msg)
    if m:
        k_gb = _f(r"\bK size: " + _NUM, msg)
        v_gb = _f(r"\bV size: " + _NUM, msg)
        kv = _f(r"\bKV size: " + _NUM, msg)
        total = (
            kv
            if kv is not None
            else (None if k_gb is None and v_gb is None else (k_gb or 0.0) + (v_gb or 0.0))
        )
        return mk(
            "kv_cache",
            label=m.group(1) or None,
            dtype=_dtype(msg),
            tokens=_int(r"#tokens: (\d+)", msg),
            kv_gb=total,
        )
    if msg.startswith("Use sliding window memory pool"):
        return mk(
            "swa_pool",
            full_tokens=_int(r"full_layer_tokens=(\d+)", msg),
            swa_tokens=_int(r"swa_layer_tokens=(\d+)", msg),
        )
    # "Allocating kv hierarchical KV host pool: N tokens, X GB host memory." and token-less variants
    # for state pools ("Allocating mamba hierarchical host pool: X GB host memory.").
    m = re.match(
        r"Allocating (?:(\S+) )?hierarchical (?:KV )?host pool:? (?:(\d+) tokens, )?"
        + _NUM
        + " GB host memory",
        msg,
    )
    if m:
        return mk(
            "hicache_host",
            label=m.group(1),
            tokens=int(m.group(2)) if m.group(2) else None,
            gb=float(m.group(3)),
        )
    # 0.5.12 KV wording, and 0.5.23's host state pool of hybrid models:
    # "Allocating 22.17 GB host memory for hierarchical Mamba cache (51 state slots, layout=...)."
    m = re.match(
        r"Allocating "
        + _NUM
        + r" GB host memory for hierarchical (\S+) cache(?: \((\d+) state slots)?",
        msg,
    )
    if m:
        label = None if m.group(2) == "KV" else m.group(2).lower()
        return mk(
            "hicache_host",
            label=label,
            tokens=None,
            gb=float(m.group(1)),
            state_slots=int(m.group(3)) if m.group(3) else None,
        )
    if msg.startswith("Memory pool end"):
        return mk("memory_pool_end", avail_gb=_f(r"avail mem=" + _NUM, msg))
    m = re.match(r"Capture (.*?)\s*(?:CUDA|cuda) graph (begin|end)", msg)
    if m:
        which = m.group(1).strip() or "decode"  # 0.5.12: "Capture cuda graph begin." (decode)
        if m.group(2) == "begin":
            return mk("graph_begin", which=which, avail_gb=_f(r"avail mem=" + _NUM, msg))
        return mk(
            "graph_end",
            which=which,
            bs=_bs_list(msg),
            mem_gb=_f(r"mem usage=" + _NUM, msg),
            avail_gb=_f(r"avail mem=" + _NUM, msg),
        )
    if msg.startswith("Engine startup timings (s):"):
        vals = {}
        for k, v in re.findall(r"(\w+)=([\d.]+)", msg.split(":", 1)[1]):
            vals.setdefault(k, float(v))
        return mk("startup_timings", **vals)
    if msg.startswith("server_args=ServerArgs("):
        return mk("server_args", **_parse_server_args(msg))
    for marker in _NOTE_MARKERS:
        if marker in msg:
            return mk("note", text=msg.strip())
    return None


def _int(pattern: str, text: str) -> int | None:
    m = re.search(pattern, text)
    return int(m.group(1)) if m else None


def _dtype(text: str) -> str | None:
    m = re.search(r"dtype: ([\w.]+)", text)
    return m.group(1) if m else None
