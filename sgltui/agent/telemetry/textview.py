"""A plain-text rendering of STATUS.telemetry and the slots, for `sgltui top` (scripts, dumb
terminals, logs). ASCII only; one reading per line so that grep/awk can pick fields."""

from __future__ import annotations

import time
from typing import Any

from sgltui.core import units
from sgltui.core.charts import filled_cells


def gib(b: Any) -> str:
    """A size as a bare GiB number (the line says GiB once): '72.0'."""
    return units.gib(b if isinstance(b, (int, float)) else None, unit=False)


def rate(bps: Any) -> str:
    return units.byte_rate(bps if isinstance(bps, (int, float)) else None)


def pct(v: Any, scale: float = 1.0) -> str:
    return f"{v * scale:.0f}%" if isinstance(v, (int, float)) else "-"


def num(v: Any, fmt: str = "{:.0f}") -> str:
    return fmt.format(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else "-"


def bar(frac: float | None, width: int = 20) -> str:
    if not isinstance(frac, (int, float)):
        return "[" + "?" * width + "]"
    n = filled_cells(frac, width)
    return "[" + "#" * n + "." * (width - n) + "]"


def duration(s: Any) -> str:
    return units.duration(s if isinstance(s, (int, float)) else None)


def render_gpus(tel: dict[str, Any]) -> list[str]:
    src = tel.get("gpu_source") or {}
    kind, msg = src.get("kind") or "none", src.get("message") or ""
    head = {"nvml": "GPU (NVML)", "sim": "GPU (SIMULATED)", "none": "GPU (none)"}.get(
        kind, f"GPU ({kind})"
    )
    lines = [head + (f"  {msg}" if msg else "")]
    for g in tel.get("gpus") or []:
        total, used = g.get("total_bytes"), g.get("used_bytes")
        frac = (
            used / total
            if isinstance(total, (int, float)) and total and isinstance(used, (int, float))
            else None
        )
        label = g.get("name") or f"GPU {g.get('index')}"
        if g.get("simulated") and "simulated" not in label.lower():
            label += " (simulated)"
        temp = g.get("temperature_c")
        lines.append(
            f"  {g.get('index')}  {label}  mem {gib(used)}/{gib(total)} GiB {pct(frac, 100)} {bar(frac)}"
            f"  util {pct(g.get('utilization_pct'))}  {num(g.get('power_w'))} W"
            f"  {num(temp)} C  pcie rx {rate(g.get('pcie_rx_bytes_s'))} tx {rate(g.get('pcie_tx_bytes_s'))}"
        )
        for slot, b in sorted((g.get("server_bytes") or {}).items()):
            bd = g.get("breakdown_bytes") or {}
            parts = ", ".join(f"{k} {gib(v)}" for k, v in bd.items() if v)
            lines.append(f"     slot {slot}: {gib(b)} GiB" + (f"  ({parts})" if parts else ""))
        strays = [
            p for p in g.get("processes") or [] if p.get("slot") is None and p.get("used_bytes")
        ]
        for p in strays:
            lines.append(
                f"     other pid {p.get('pid')}: {gib(p.get('used_bytes'))} GiB"
                + (f" ({p['name']})" if p.get("name") else "")
            )
    return lines


def render_host(host: dict[str, Any] | None) -> list[str]:
    if not host:
        return ["HOST  (no reading yet)"]
    lines = [
        f"HOST  ram {gib(host.get('ram_used_bytes'))}/{gib(host.get('ram_total_bytes'))} GiB used"
        f" ({gib(host.get('ram_available_bytes'))} available)  swap {gib(host.get('swap_used_bytes'))}/"
        f"{gib(host.get('swap_total_bytes'))} GiB  cpu {pct(host.get('cpu_pct'))}"
    ]
    rss, cpu, pinned = (
        host.get("server_rss_bytes") or {},
        host.get("server_cpu_pct") or {},
        host.get("server_pinned_bytes") or {},
    )
    for slot in sorted(set(rss) | set(cpu)):
        extra = f"  pinned {gib(pinned[slot])} GiB" if pinned.get(slot) else ""
        lines.append(
            f"     slot {slot}: rss {gib(rss.get(slot))} GiB  cpu {pct(cpu.get(slot))}{extra}"
        )
    return lines


def render_engine(e: dict[str, Any] | None, now: float) -> str:
    if not e:
        return "     engine: no reading yet"
    age = now - e["ts"] if isinstance(e.get("ts"), (int, float)) else None
    mrr = e.get("max_running_requests")
    running = num(e.get("num_running_reqs")) + (f"/{mrr}" if isinstance(mrr, int) else "")
    line = (
        f"     engine ({e.get('source')}, {num(age, '{:.1f}')} s ago): running {running}"
        f"  queued {num(e.get('num_queue_reqs'))}  gen {units.tok_s(e.get('gen_throughput'))}"
        f"  token usage {pct(e.get('token_usage'), 100)}  accept {num(e.get('accept_length'), '{:.2f}')}"
        f"  cache hit {pct(e.get('cache_hit_rate'), 100)}"
    )
    if e.get("error"):
        line += f"  [{e['error']}]"
    return line


def cap_gib(value: Any, unit: float = units.GIB) -> str:
    """A capacity-card figure (SGLang's GiB, or decimal GB for hicache: core/capacity.py) in GiB."""
    return units.gib(value * unit if isinstance(value, (int, float)) else None)


def render_capacity(card: dict[str, Any] | None) -> list[str]:
    if not card:
        return []
    bs = card.get("cuda_graph_bs") or []
    graphs = f"{bs[0]}..{bs[-1]} ({len(bs)} sizes)" if bs else "-"
    kv_tokens = card.get("kv_pool_tokens")
    lines = [
        f"     capacity: weights {cap_gib(card.get('weights_gb'))}"
        + (
            f" + draft {cap_gib(card.get('draft_weights_gb'))}"
            if card.get("draft_weights_gb")
            else ""
        )
        + f" | KV {f'{kv_tokens:,}' if isinstance(kv_tokens, int) else '-'} tok ({cap_gib(card.get('kv_pool_gb'))})"
        + f" | max running {num(card.get('max_running_requests'))}"
        + f" (requested {num(card.get('requested_max_running_requests'))})"
        + f" | mamba slots {num(card.get('mamba_state_slots'))}"
        + f" | hicache host {cap_gib(card.get('hicache_host_gb'), units.GB)}"
        + f" | graphs bs {graphs} | ctx {num(card.get('context_length'))}"
    ]
    for note in card.get("notes") or []:
        lines.append(f"       note: {note}")
    return lines


def render(status: dict[str, Any], now: float | None = None) -> str:
    now = time.time() if now is None else now
    tel = status.get("telemetry") or {}
    agent = status.get("agent") or {}
    out = [
        f"sgltui top  {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(now))}  agent pid {agent.get('pid', '-')}"
    ]
    out += render_gpus(tel)
    out += render_host(tel.get("host"))
    slots = status.get("slots") or []
    engines = tel.get("engine") or {}
    out.append("SLOTS" if slots else "SLOTS  (none: start one with `sgltui start PROFILE`)")
    for s in slots:
        sid = str(s.get("id"))
        state = s.get("state") or "-"
        if state == "launching" and s.get("phase"):
            state += f" ({s['phase']})"
        out.append(
            f"  {sid}  {s.get('profile') or '-'}  {state}  {s.get('host') or '-'}:{s.get('port') or '-'}"
            f"  pid {s.get('pid') or '-'}  up {duration(s.get('uptime_s'))}"
        )
        if sid in engines or state.startswith(("ready", "draining", "launching")):
            out.append(render_engine(engines.get(sid), now))
        out += render_capacity(s.get("capacity"))
    return "\n".join(out)
