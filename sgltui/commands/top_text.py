"""A plain-text rendering of STATUS.telemetry and the slots, for `sgltui top` (scripts, dumb
terminals, logs). ASCII only; one reading per line so that grep/awk can pick fields."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from sgltui import protocol
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


def render_gpus(
    tel: protocol.TelemetryView, warm: Mapping[int, tuple[str, str]] | None = None
) -> list[str]:
    """The GPUs; `warm`: pid -> (slot, profile) of the standbys (sgltui's own sleepers, not
    "other" processes)."""
    warm = warm or {}
    kind, msg = tel.gpu_source.kind or "none", tel.gpu_source.message
    head = {"nvml": "GPU (NVML)", "sim": "GPU (SIMULATED)", "none": "GPU (none)"}.get(
        kind, f"GPU ({kind})"
    )
    lines = [head + (f"  {msg}" if msg else "")]
    for g in tel.gpus:
        total, used = g.total_bytes, g.used_bytes
        frac = used / total if total and used is not None else None
        label = g.name or f"GPU {g.index}"
        if g.simulated and "simulated" not in label.lower():
            label += " (simulated)"
        lines.append(
            f"  {g.index}  {label}  mem {gib(used)}/{gib(total)} GiB {pct(frac, 100)} {bar(frac)}"
            f"  util {pct(g.utilization_pct)}  {num(g.power_w)} W"
            f"  {num(g.temperature_c)} C  pcie rx {rate(g.pcie_rx_bytes_s)} tx {rate(g.pcie_tx_bytes_s)}"
        )
        for slot, b in sorted(g.server_bytes.items()):
            bd = g.breakdown_bytes or {}
            parts = ", ".join(f"{k} {gib(v)}" for k, v in bd.items() if v)
            lines.append(f"     slot {slot}: {gib(b)} GiB" + (f"  ({parts})" if parts else ""))
        for p in g.processes:
            if p.slot is None and p.used_bytes and p.pid in warm:
                sid, profile = warm[p.pid]
                lines.append(
                    f"     slot {sid}'s standby {profile} (asleep) pid {p.pid}: "
                    f"{gib(p.used_bytes)} GiB"
                )
            elif p.slot is None and p.used_bytes:
                lines.append(
                    f"     other pid {p.pid}: {gib(p.used_bytes)} GiB"
                    + (f" ({p.name})" if p.name else "")
                )
    return lines


def render_host(host: protocol.HostView | None) -> list[str]:
    if not host:
        return ["HOST  (no reading yet)"]
    lines = [
        f"HOST  ram {gib(host.ram_used_bytes)}/{gib(host.ram_total_bytes)} GiB used"
        f" ({gib(host.ram_available_bytes)} available)  swap {gib(host.swap_used_bytes)}/"
        f"{gib(host.swap_total_bytes)} GiB  cpu {pct(host.cpu_pct)}"
    ]
    rss, cpu, pinned = host.server_rss_bytes, host.server_cpu_pct, host.server_pinned_bytes
    for slot in sorted(set(rss) | set(cpu)):
        extra = f"  pinned {gib(pinned[slot])} GiB" if pinned.get(slot) else ""
        lines.append(
            f"     slot {slot}: rss {gib(rss.get(slot))} GiB  cpu {pct(cpu.get(slot))}{extra}"
        )
    return lines


def render_engine(e: dict[str, Any] | None, now: float) -> str:
    """An engine reading: SGLang's own figures, as JSON values (protocol.TelemetryView)."""
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


def render_capacity(card: protocol.CapacityCard | None) -> list[str]:
    if not card:
        return []
    bs = card.cuda_graph_bs or []
    bs = [bs] if isinstance(bs, int) else bs
    graphs = f"{bs[0]}..{bs[-1]} ({len(bs)} sizes)" if bs else "-"
    kv_tokens = card.kv_pool_tokens
    lines = [
        f"     capacity: weights {cap_gib(card.weights_gb)}"
        + (f" + draft {cap_gib(card.draft_weights_gb)}" if card.draft_weights_gb else "")
        + f" | KV {f'{kv_tokens:,}' if isinstance(kv_tokens, int) else '-'} tok ({cap_gib(card.kv_pool_gb)})"
        + f" | max running {num(card.max_running_requests)}"
        + f" (requested {num(card.requested_max_running_requests)})"
        + f" | mamba slots {num(card.mamba_state_slots)}"
        + f" | hicache host {cap_gib(card.hicache_host_gb, units.GB)}"
        + f" | graphs bs {graphs} | ctx {num(card.context_length)}"
    ]
    for note in card.notes:
        lines.append(f"       note: {note}")
    return lines


def render(status: protocol.StatusReply, now: float | None = None) -> str:
    now = time.time() if now is None else now
    tel = status.telemetry
    out = [
        f"sgltui top  {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(now))}  agent pid {status.agent.pid or '-'}"
    ]
    warm = {sb.pid: (s.id, sb.profile) for s in status.slots for sb in s.standbys if sb.pid}
    out += render_gpus(tel, warm)
    out += render_host(tel.host)
    engines = tel.engine
    out.append("SLOTS" if status.slots else "SLOTS  (none: start one with `sgltui start PROFILE`)")
    for s in status.slots:
        sid = s.id
        state = str(s.state.value)
        if state == "launching" and s.phase:
            state += f" ({s.phase})"
        out.append(
            f"  {sid}  {s.profile or '-'}  {state}  {s.host or '-'}:{s.port or '-'}"
            f"  pid {s.pid or '-'}  up {duration(s.uptime_s)}"
        )
        if sid in engines or state.startswith(("ready", "draining", "launching")):
            out.append(render_engine(engines.get(sid), now))
        out += render_capacity(s.capacity)
    return "\n".join(out)
