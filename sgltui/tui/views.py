"""Pure renderers: protocol's Structs (and the telemetry's plain dicts) in, Textual markup out.

Colours are theme variables ($error, $success, ...) so every theme, light or dark, works, and
every state is also spelled out in words: a 256-colour terminal or a colour-blind operator must
not need the colour to read the screen.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import msgspec
from textual.markup import escape

from sgltui import protocol
from sgltui.core import units
from sgltui.core.charts import filled_cells
from sgltui.fleet.view import host_row
from sgltui.protocol import SlotState
from sgltui.tui import fmt

STATE_STYLE = {
    "ready": "$success",
    "launching": "$warning",
    "draining": "$warning",
    "stopping": "$warning",
    "stopped": "dim",
    "failed": "$error",
    "crashed": "$error",
}

STATE_MARK = {
    "ready": "●",
    "launching": "◐",
    "draining": "◑",
    "stopping": "◑",
    "stopped": "○",
    "failed": "✖",
    "crashed": "✖",
}


# A stopped slot shows a cause only when its stop had to SIGKILL work still running.
_ENDED = (SlotState.FAILED, SlotState.CRASHED, SlotState.STOPPED)


def state_label(state: str | None) -> str:
    state = state or "stopped"
    style = STATE_STYLE.get(state, "")
    mark = STATE_MARK.get(state, "?")
    return f"[{style}]{mark} {escape(state)}[/]" if style else f"{mark} {escape(state)}"


def progress_bar(progress: float | None, width: int = 20) -> str:
    p = min(1.0, max(0.0, progress or 0.0))
    filled = filled_cells(p, width)
    # The label rounds down as the bar does: "100%" only once it is done.
    return f"[$accent]{'█' * filled}[/][dim]{'░' * (width - filled)}[/] {filled_cells(p, 100):3d}%"


_TOML_DIR = re.compile(r"^\S*/(?=[^/\s]+\.toml:)")


def profile_mark(profile: protocol.ProfileRow) -> str:
    """✓ valid, ✗ invalid (its first error), ⚠ valid but its HiCache host pool does not fit
    in the RAM it would get: what a key press would refuse, before anyone presses it."""
    if not profile.valid:
        return "[$error]✗[/]"
    if profile.host_pool_problem:
        return "[$warning]⚠[/]"
    return "[$success]✓[/]"


def launcher_label(profile: protocol.ProfileRow) -> str:
    """'sim' (sgltui's simulator) or 'real' (SGLang itself)."""
    return "sim" if profile.launcher == "sim" else "real"


def profile_option(profile: protocol.ProfileRow, slots: list[protocol.SlotStatus]) -> str:
    """One row of the profile list: key, validity mark, name, launcher, the state where a slot
    runs it, then the description (the list cuts the row to its width with an ellipsis)."""
    key = profile.key
    keytxt = f"[b $accent]{escape(str(key))}[/]" if key else " "
    name = escape(profile.name)
    running = [s for s in slots if s.profile == profile.name and s.state != SlotState.STOPPED]
    state = ""
    if len(running) == 1:
        state = f"  {state_label(running[0].state)}"
    elif running:  # several slots run it: how many, in the state of the first
        state = f"  {state_label(running[0].state)} ×{len(running)}"
    launcher = f"  [dim]{launcher_label(profile)}[/]"
    # Kept warm beside a slot's server (agent/swap/standby.py): a swap to it takes seconds.
    warm = [sb for s in slots for sb in s.standbys if sb.profile == profile.name]
    if warm:
        state += (
            "  [$success]warm[/]" if warm[0].state == "asleep" else f"  [dim]{warm[0].state}[/]"
        )
    clash = profile.key_clash
    warn = ""
    if key and clash:
        # The key does nothing while another profile has it too (core/validate.py).
        keytxt = f"[b $error strike]{escape(str(key))}[/]"
        warn = f"  [$error]key {escape(str(key))} also on {escape(', '.join(map(str, clash)))}[/]"
    desc = profile.description
    desc_txt = f"  [dim]{escape(desc)}[/]" if desc else ""
    return f"{keytxt} {profile_mark(profile)} {name}{launcher}{state}{warn}{desc_txt}"


def profile_detail(profile: protocol.ProfileRow | None) -> str:
    """What the highlighted profile's row cannot hold: its first error, or its host pool
    against the RAM (and how it was sized). Empty when there is nothing wrong."""
    if not profile:
        return ""
    if not profile.valid:
        # The file's folder is known from the list; its name and line are what help here, and a
        # long path would wrap as one word onto a line of its own.
        problem = _TOML_DIR.sub("", profile.problem or "invalid", count=1)
        return f"[$error]✗ {escape(problem)}[/]"
    if profile.host_pool_problem:
        how = profile.host_pool_how
        how_txt = f" [dim]({escape(how)})[/]" if how else ""
        return f"[$warning]⚠ refused: {escape(profile.host_pool_problem)}[/]{how_txt}"
    return ""


def profile_tooltip(profile: protocol.ProfileRow) -> str:
    """The whole of a profile's row, for the mouse: description, launcher, problems."""
    lines = [
        f"{profile.name} ({launcher_label(profile)}"
        + (f", key {profile.key})" if profile.key else ")")
    ]
    if profile.description:
        lines.append(profile.description)
    if not profile.valid:
        lines.append(f"invalid: {profile.problem or '?'}")
    if profile.host_pool_problem:
        lines.append(f"{profile.host_pool_problem} ({profile.host_pool_how})")
    elif profile.host_pool_gib is not None:
        lines.append(f"HiCache host pool {profile.host_pool_gib:.0f} GiB ({profile.host_pool_how})")
    elif profile.host_pool_note:
        lines.append(profile.host_pool_note)
    return "\n".join(lines)


def slot_details(slot: protocol.SlotStatus | None) -> str:
    """State, phase progress with ETA, swap step, capacity card, cause and fix of one slot."""
    if not slot:
        return "[dim]No server. Press a profile's key or [b]s[/b] to start the highlighted one.[/]"
    lines: list[str] = []
    state = slot.state
    profile = escape(slot.profile or "-")
    head = f"slot {escape(slot.id)}  [b]{profile}[/]  {state_label(state)}"
    if state == SlotState.READY and slot.uptime_s is not None:
        head += f"  up {units.age(slot.uptime_s)}"
    if slot.port and state != SlotState.STOPPED:
        head += f"  [dim]:{slot.port} pid {slot.pid or '-'}[/]"
    lines.append(head)
    ext = slot.external
    if ext is not None and state != SlotState.STOPPED:
        owner = "a remote server" if ext.pid is None else "started outside sgltui"
        lines.append(
            f"[dim]external: {escape(ext.url)}, {owner}; its log lines are not ours to read"
            + (
                ""
                if ext.pid is None
                else f"; `sgltui adopt --slot {escape(slot.id)}` takes it over"
            )
            + "[/]"
        )
    front = slot.front
    if front is not None and (front.url or front.error):
        lines.append(front_line(front))
    swap = slot.swap
    if swap:
        elapsed = swap.elapsed_s
        el = f" ({units.duration(elapsed)})" if elapsed is not None else ""
        lines.append(
            f"[b $warning]swap[/] {escape(str(swap.from_))} → {escape(str(swap.to))}: "
            f"{escape(swap.step)}{el}"
        )
    drain = slot.drain
    if state == SlotState.DRAINING and drain is not None:
        # The stop waits for what was already sent (bounded): a countdown, not a frozen screen.
        lines.append(
            f"[b $warning]draining[/] {int(drain.requests or 0)} requests · "
            f"{float(drain.left_s or 0):.0f}s left of {float(drain.timeout_s or 0):.0f}s"
        )
    if state == SlotState.LAUNCHING:
        eta = slot.eta_s
        eta_txt = f" ETA {units.duration(eta)}" if eta is not None else ""
        lines.append(f"{escape(slot.phase or 'spawned')}")
        lines.append(f"{progress_bar(slot.progress)}{eta_txt}")
    if slot.restart:  # what the restart policy did after a crash (agent/slot/restart_policy.py)
        lines.append(f"[b $warning]restart[/] {escape(slot.restart)}")
    # A stopped slot keeps a cause only when its stop had to SIGKILL work still running.
    if state in _ENDED and slot.cause:
        lines.extend(cause_lines(slot.cause))
    if slot.capacity and state in (SlotState.READY, SlotState.DRAINING, SlotState.LAUNCHING):
        lines.extend(capacity_lines(slot.capacity))
    return "\n".join(lines)


def front_line(front: protocol.FrontView) -> str:
    """The slot's stable endpoint (agent/pools/front.py): where clients point, and what it does now."""
    if front.error:
        return f"[$error]front: {escape(front.error)}[/]"
    extra = ""
    if front.state == "holding":
        extra = f" [b $warning]holding {front.held_now}[/]"
    elif front.state == "no server":
        extra = " [dim](503 until a server is ready)[/]"
    return f"[dim]clients →[/] {escape(str(front.url))}{extra}"


def cause_lines(cause: protocol.Cause) -> list[str]:
    out = [f"[b $error]cause[/] [$error]{escape(cause.summary or cause.kind or 'unknown')}[/]"]
    if cause.fix:
        out.append(f"[b]fix[/]   {escape(cause.fix)}")
    for line in cause.lines[-3:]:
        out.append(f"[dim]  {escape(str(line))[:200]}[/]")
    if cause.exit_code is not None:
        out.append(f"[dim]  exit code {cause.exit_code}[/]")
    return out


def capacity_lines(card: protocol.CapacityCard) -> list[str]:
    """The capacity card: what fits, and why the effective limits differ from the asked ones."""
    parts = []
    mrr = card.max_running_requests
    req = card.requested_max_running_requests
    if mrr is not None:
        txt = f"max running [b]{mrr}[/]"
        if req is not None and req != mrr:
            txt += f" [$warning](asked {req})[/]"
        parts.append(txt)
    if card.kv_pool_tokens is not None:
        kv = f"KV {fmt.num(card.kv_pool_tokens)} tok"
        if card.kv_pool_gb is not None:
            kv += f" ({units.gib(card.kv_pool_gb * units.GIB)})"
        parts.append(kv)
    if card.weights_gb is not None:
        parts.append(f"weights {units.gib(card.weights_gb * units.GIB)}")
    if card.draft_weights_gb:
        parts.append(f"draft {units.gib(card.draft_weights_gb * units.GIB)}")
    if card.mamba_state_slots:
        parts.append(f"state slots {card.mamba_state_slots}")
    if card.hicache_host_gb:
        # SGLang sizes the host pool in decimal GB: shown in GiB like every other size
        parts.append(f"hicache host {units.gib(card.hicache_host_gb * units.GB)}")
    if card.context_length:
        parts.append(f"ctx {fmt.num(card.context_length)}")
    out = ["[b]capacity[/] " + " · ".join(parts)] if parts else []
    for note in card.notes[:2]:
        out.append(f"[$warning]  ! {escape(str(note))[:160]}[/]")
    return out


def gpu_lines(telemetry: protocol.TelemetryView, width: int, compact: bool = False) -> list[str]:
    """The GPUs' lines (`gpu_rows` each), or why there are none."""
    gpus = telemetry.gpus
    if not gpus:
        msg = (
            telemetry.gpu_source.message
            or "no GPU source on this host (no NVML, no simulator running)"
        )
        return [f"[dim]GPU: {escape(str(msg))}[/]"]
    return [line for g in gpus for line in gpu_rows(g, width, compact)]


COMPACT_GPUS = 4  # more GPUs than this: one line each (8 GPUs in two lines each fill a screen)
# A compact line's cells beside its bar: 'GPU0 ', ' 141.0/141.0 GiB', ' 100% 1000W 100°C (sim)'.
# The same for every line (the RAM's too), so the bars line up.
COMPACT_FIGURES = 5 + 16 + 23


def gpu_rows(g: protocol.GpuView, width: int, compact: bool = False) -> list[str]:
    """One GPU's lines as markup (`gpu_row_parts`, joined)."""
    return [joined(parts) for parts in gpu_row_parts(g, width, compact)]


# A memory line in three parts: styled markup, plain text (the figures: what changes from one
# sample to the next) and styled markup. The pane renders each styled part once and appends
# the figures as they are.
LineParts = tuple[str, str, str]


def joined(parts: LineParts) -> str:
    """The line as one markup string."""
    head, plain, tail = parts
    return head + escape(plain) + tail


def gpu_row_parts(
    g: protocol.GpuView, width: int, compact: bool = False, warm_pids: frozenset[int] = frozenset()
) -> list[LineParts]:
    """One GPU: a bar (the servers' share, sgltui's own standbys (`warm_pids`: asleep, what
    they keep on the GPU), other processes, free) and what the GPU is doing
    (utilization, power, temperature) with its name and each slot's share, abbreviated until
    it fits `width` (gpu_detail). `compact`: one line, the bar and the figures only (the
    slots view says whose share it is), '(sim)' kept for a simulated GPU."""
    total = g.total_bytes or 0
    used = g.used_bytes or 0
    server = min(sum(g.server_bytes.values()), used)
    label = f"GPU{g.index}"
    if total <= 0:
        return [(f"{label}: no memory figures", "", "")]
    figures = units.gib_of(used, total)
    tail = ""
    if compact:
        short = _stats(g)[1]
        figures = f"{figures} {short}" if short else figures
        if _simulated(g):
            figures, tail = f"{figures} ", "[b $warning](sim)[/]"
    bar_w = max(10, width - (COMPACT_FIGURES if compact else 26))
    warm = min(used - server, warm_bytes(g, warm_pids))
    cells = fmt.bar_cells([server / total, warm / total, (used - server - warm) / total], bar_w)
    free = bar_w - sum(cells)
    bar = (
        f"[$accent]{'█' * cells[0]}[/][$success]{'▒' * cells[1]}[/]"
        f"[$warning]{'▓' * cells[2]}[/][dim]{'░' * free}[/]"
    )
    first = (f"{label:<5}{bar}", f" {figures}", tail)
    return [first] if compact else [first, (gpu_detail(g, width), "", "")]


DETAIL_INDENT = "     "  # under the bar, past "GPU0 "


def _num(v: Any) -> float | None:
    if type(v) is float:  # (most readings: one test, no call)
        return v
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _simulated(g: protocol.GpuView) -> bool:
    return bool(g.simulated) or (g.name or "").endswith(" (simulated)")


def _stats(g: protocol.GpuView) -> tuple[str, str]:
    """Utilization, power and temperature, spelled out ('util 87% · 420 W · 61°C') and
    abbreviated ('87% 420W 61°C'); a reading the GPU does not give is left out."""
    util, power, temp = (_num(v) for v in (g.utilization_pct, g.power_w, g.temperature_c))
    long_stats = [
        f"util {util:.0f}%" if util is not None else "",
        f"{power:.0f} W" if power is not None else "",
        f"{temp:.0f}°C" if temp is not None else "",
    ]
    short_stats = [
        f"{util:.0f}%" if util is not None else "",
        f"{power:.0f}W" if power is not None else "",
        f"{temp:.0f}°C" if temp is not None else "",
    ]
    return " · ".join(p for p in long_stats if p), " ".join(p for p in short_stats if p)


def gpu_detail(g: protocol.GpuView, width: int) -> str:
    """The GPU's second line, the longest form that fits `width` cells.

    Utilization, power and temperature always show: at 100 columns as 'util 87% · 420 W ·
    61°C', at 80 abbreviated to '87% 420W 61°C'. The GPU's name goes first when room is short
    (only '(sim)' of it stays for a simulated GPU), then the slots' names in the shares, then
    the shares (the bar's accent part still shows them)."""
    name = g.name or ""
    simulated = _simulated(g)
    name = name.removesuffix(" (simulated)")  # the simulator names its GPU so; said once below
    short = name.removeprefix("NVIDIA ").strip()
    names = [  # (plain text, markup), longest first
        (name + (" (simulated)" if simulated else ""),
         f"[dim]{escape(name)}[/]" + (" [b $warning](simulated)[/]" if simulated else "")),
        (short + (" (sim)" if simulated else ""),
         f"[dim]{escape(short)}[/]" + (" [b $warning](sim)[/]" if simulated else "")),
        ("(sim)", "[b $warning](sim)[/]") if simulated else ("", ""),
    ]  # fmt: skip
    stats = list(_stats(g))
    shares_by_slot = dict(g.server_bytes)
    shares = [
        ", ".join(f"slot {k} {units.gib(v)}" for k, v in shares_by_slot.items()),
        # one server: its share needs no name; several: each slot's number
        units.gib(sum(shares_by_slot.values()))
        if len(shares_by_slot) == 1
        else " ".join(f"{k}:{units.gib(v, unit=False)}" for k, v in shares_by_slot.items())
        + " GiB",
        "",
    ] if shares_by_slot else ["", "", ""]  # fmt: skip
    # (name form, stats form, shares form), in the order they are tried
    order = (
        (0, 0, 0), (1, 0, 0), (2, 0, 0), (2, 0, 1),  # spelled out
        (1, 1, 0), (2, 1, 0), (2, 1, 1), (1, 1, 2), (2, 1, 2),  # abbreviated
    )  # fmt: skip
    room = width - len(DETAIL_INDENT)
    line = ""
    for n, st, sh in order:
        plain, markup = _detail(names[n], stats[st], shares[sh])
        line = markup
        if len(plain) <= room:
            break
    return DETAIL_INDENT + line


def _detail(name: tuple[str, str], stats: str, share: str) -> tuple[str, str]:
    """(plain, markup) of one form of the detail line: the parts present, ' · ' between."""
    parts = [(name[0], name[1]), (stats, escape(stats))]
    if share:
        parts.append((f"█ {share}", f"[$accent]█[/] {escape(share)}"))
    present = [p for p in parts if p[0]]
    if name[0] == "(sim)" and len(present) > 1:  # a bare mark reads as a prefix: no separator
        rest = present[1:]
        plain = " · ".join(p[0] for p in rest)
        return f"(sim) {plain}", f"{name[1]} " + " · ".join(p[1] for p in rest)
    return " · ".join(p[0] for p in present), " · ".join(p[1] for p in present)


def host_lines(telemetry: protocol.TelemetryView, width: int, compact: bool = False) -> list[str]:
    """The host's lines as markup (`host_line_parts`, joined)."""
    return [joined(parts) for parts in host_line_parts(telemetry, width, compact)]


def host_line_parts(
    telemetry: protocol.TelemetryView, width: int, compact: bool = False
) -> list[LineParts]:
    """The host's RAM bar (the servers' resident memory in the accent colour) and a line with
    the servers' share, the CPU figure and swap in use; `compact`: one line, the CPU figure and
    swap after the bar."""
    host = telemetry.host
    total = host.ram_total_bytes if host else 0
    if not host or not total:
        return [("[dim]RAM: no host figures yet[/]", "", "")]
    used = host.ram_used_bytes or 0
    rss = sum(host.server_rss_bytes.values())
    rss = min(rss, used)
    cpu = f"cpu {host.cpu_pct:.0f}%" if host.cpu_pct is not None else ""
    swap = f"swap {units.gib(host.swap_used_bytes)}" if host.swap_used_bytes else ""
    bar_w = max(10, width - (COMPACT_FIGURES if compact else 26))
    cells = fmt.bar_cells([rss / total, (used - rss) / total], bar_w)
    free = bar_w - sum(cells)
    bar = f"[$accent]{'█' * cells[0]}[/][$secondary]{'▓' * cells[1]}[/][dim]{'░' * free}[/]"
    figures = units.gib_of(used, total)
    swap_markup = f"[$warning]{swap}[/]" if swap else ""
    if compact:
        plain = " ".join(f for f in ("", figures, cpu) if f) + (" " if swap else "")
        return [(f"{'RAM':<5}{bar}", f" {plain}", swap_markup)]
    detail = " · ".join(f for f in (f"servers {units.gib(rss)}", cpu) if f)
    return [
        (f"{'RAM':<5}{bar}", f" {figures}", ""),
        (f"{DETAIL_INDENT}[$accent]█[/]", f" {detail}" + (" · " if swap else ""), swap_markup),
    ]


# ---- the slots view (several slots: one row each, a row per pool summing them) ----------------


# A slot's part of a sample as the slots view shows it: its row's figures as plain text
# (' 141    4/3  80/140G'), then the numbers a pool's row sums: tok/s, requests running and
# queued, its server's bytes on its GPUs and those GPUs' memory, each None where it has none.
# A plain tuple: made for every slot each sample, and compared in C with the last sample's.
SlotLine = tuple[str, float | None, int | None, int | None, float | None, float | None]
# A slot's GPU memory as its row shows it: the text ('80/140G'), its server's bytes on its
# GPUs and those GPUs' memory (None, None: it has none). Made again only when the GPUs' or
# the slots' placement changes (slot_mem_key): not each sample.
SlotMem = tuple[str, float | None, float | None]


def slot_line(
    slot: protocol.SlotStatus, engine: dict[str, Any] | None, gpus: list[protocol.GpuView]
) -> SlotLine:
    """A slot's throughput, requests and GPU memory (its share on the GPUs it is given, or,
    not placed, on the GPUs its server is seen on), as its row's text and as numbers: what
    `slot_lines` makes of one slot."""
    return slot_lines([slot], {slot.id: engine} if engine else {}, [slot_mem(slot, gpus)])[slot.id]


def slot_mem(slot: protocol.SlotStatus, gpus: list[protocol.GpuView]) -> SlotMem:
    """A slot's GPU memory: its server's bytes on the GPUs it is given (not placed: on those
    its server is seen on) and their memory, and the text of both."""
    # One loop, not a list and two sums of generators (each step of a generator is a call).
    # (Byte counts: the sums are exact.)
    sid, placed = slot.id, slot.gpus
    mine, used, total = False, 0.0, 0.0
    for g in gpus:
        if g.index in placed or (not placed and sid in g.server_bytes):
            mine = True
            used += float(g.server_bytes.get(sid) or 0)
            total += float(g.total_bytes or 0)
    if not mine:
        return (_mem(None, None), None, None)
    return (_mem(used, total), used, total)


def slot_mem_key(gpus: list[protocol.GpuView]) -> list[tuple[object, ...]]:
    """What a slot's GPU memory is made of, of every GPU: a sample whose GPUs read the same
    here (their utilization, power and temperature aside) changes no slot's memory."""
    return [(g.index, g.host, g.total_bytes, g.server_bytes) for g in gpus]


# What a slot's row reads of its engine reading: tok/s, requests running and queued.
_SLOT_READINGS = ("gen_throughput", "num_running_reqs", "num_queue_reqs")


def slot_lines(
    slots: Sequence[protocol.SlotStatus],
    engines: Mapping[str, dict[str, Any]],
    mems: Sequence[SlotMem],
) -> dict[str, SlotLine]:
    """Every slot's line (slot id -> its SlotLine) from the sample's engine readings (slot id
    -> reading) and each slot's memory (`slot_mem`, in the slots' order). One function, one
    f-string a slot, in one loop: with 8 busy slots a function a slot and its memory's loop
    over every GPU were most of a sample's slots view."""
    lines: dict[str, SlotLine] = {}
    for slot, (mem, used, total) in zip(slots, mems, strict=True):
        if slot.state not in _SERVING:
            lines[slot.id] = (f" {'-':>7}  {'-':>5}  {mem}", None, None, None, used, total)
            continue
        # (the three readings looked up by map, in C: a `get` each was three calls a slot)
        gen, run, waiting = map((engines.get(slot.id) or {}).get, _SLOT_READINGS)
        # (_num's first test here: a float, as most readings are, without its call)
        tok = gen if type(gen) is float else _num(gen)
        running, queued = int(run or 0), int(waiting or 0)
        text = f" {_sig3(tok):>7}  {f'{running}/{queued}':>5}  {mem}"
        lines[slot.id] = (text, tok, running, queued, used, total)
    return lines


def _sig3(value: float | None) -> str:
    """units.sig3 of a throughput, its usual ranges (0.001 to 999k) formatted at once where
    sig3 makes eight calls: `#.3g` is three significant digits with their trailing zeros, as
    sig3 writes them, and a point after a whole number, cut. Thousands are rounded to three
    digits first, as sig3 does (then divided: 1245 is 1.24k, not 1.245's 1.25k). The rest is
    sig3's (the same text: a tested equality)."""
    if value is None:
        return "-"
    if 0.001 <= value < 999.5:  # (999.5 and up round to 1.00k; NaN is in no range)
        text, suffix = f"{value:#.3g}", ""
    elif 999.5 <= value < 999_500:  # (999,500 and up round to 1.00M)
        text, suffix = f"{float(f'{value:.3g}') / 1000:#.3g}", "k"
    else:
        return units.sig3(value)
    return (text[:-1] if text[-1] == "." else text) + suffix


_SERVING = (SlotState.READY, SlotState.DRAINING)


SLOT_COLUMNS = (
    f"  {'slot':<8} {'GPU':<5} {'profile':<18} {'state':<11} {'tok/s':>7}  {'run/q':>5}  GPU mem"
)


def _mem(used: float | None, total: float | None) -> str:
    if used is None or not total:
        return "-"
    return f"{used / units.GIB:.0f}/{total / units.GIB:.0f}G"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _cut_name(text: str, width: int) -> str:
    """A host or slot name cut in the middle: what tells a fleet's names apart is at their end
    (k.sgltui-0, k.sgltui-1: a selector's pods; host/slot ids)."""
    if len(text) <= width:
        return text
    tail = width // 2
    return text[: width - 1 - tail] + "…" + text[-tail:]


def slot_row(
    slot: protocol.SlotStatus, line: SlotLine, selected: bool, down: str | None = None
) -> str:
    """One slot: name, GPUs, profile, state, tok/s, running/queued, GPU memory. `down`: its
    host is unreachable ('unreachable since 14:02'): the row is what the host said last, dimmed,
    with that line for its state and no figures."""
    return joined(slot_row_parts(slot, line, selected, down))


def slot_row_parts(
    slot: protocol.SlotStatus, line: SlotLine, selected: bool, down: str | None = None
) -> LineParts:
    """`slot_row` in parts: the styled head (its slot's name, GPUs, profile and state, which
    change with a STATUS), the figures as plain text (which change with every sample), and
    no tail. A down host's row is all head."""
    if down is not None:
        return (slot_head(slot, selected, down), "", "")
    return (slot_head(slot, selected), line[0], "")


def slot_head(slot: protocol.SlotStatus, selected: bool, down: str | None = None) -> str:
    """The styled part of a slot's row (see slot_row)."""
    gpus = ",".join(map(str, slot.gpus)) or "-"
    mark = "[b $accent]▸[/]" if selected else " "
    if down is not None:
        return (
            f"[dim]{mark} {escape(_cut_name(slot.id, 8)):<8} {escape(_cut(gpus, 5)):<5} "
            f"{escape(_cut(slot.profile or '-', 18)):<18} ○ {escape(down)}[/]"
        )
    state = slot.state
    if slot.swap is not None:
        shown = f"{STATE_MARK.get(state, '?')} swap"
        state_txt = f"[$warning]{escape(shown):<11}[/]"
    else:
        style = STATE_STYLE.get(state, "")
        text = f"{STATE_MARK.get(state, '?')} {state}"
        state_txt = f"[{style}]{escape(f'{text:<11}')}[/]" if style else escape(f"{text:<11}")
    return (
        f"{mark} {escape(_cut_name(slot.id, 8)):<8} {escape(_cut(gpus, 5)):<5} "
        f"{escape(_cut(slot.profile or '-', 18)):<18} {state_txt}"
    )


def unmanaged_row(u: protocol.Unmanaged, selected: bool) -> str:
    """A server of the user's the agent did not start: dimmed, with the key that attaches it."""
    mark = "[b $accent]▸[/]" if selected else " "
    where = f":{u.port}" if u.port else "-"
    what = f"{u.kind} pid {u.pid}"
    hint = "A attaches" if u.url and not u.note else (u.note or "")
    return (
        f"[dim]{mark} {escape(_cut(where, 8)):<8} {'':<5} "
        f"{escape(_cut(u.model or '-', 18)):<18} ◌ {'not managed':<11} "
        f"{escape(_cut(what, 16))}  {escape(_cut(hint, 40))}[/]"
    )


def pool_row(
    pool: protocol.PoolStatus,
    slots: list[protocol.SlotStatus],
    lines: Sequence[SlotLine],
    down: str | None = None,
    gone: Collection[str] = (),
) -> str:
    """A pool: its slots summed (throughput, requests, memory), how many are ready, whether
    they run one profile, and its gateway. `down`: its gateway's host is unreachable; `gone`:
    its slots whose host is (not counted ready: what they said last may no longer hold)."""
    return joined(pool_row_parts(pool, slots, lines, down, gone))


def pool_row_parts(
    pool: protocol.PoolStatus,
    slots: list[protocol.SlotStatus],
    lines: Sequence[SlotLine],
    down: str | None = None,
    gone: Collection[str] = (),
) -> LineParts:
    """`pool_row` in parts: the styled head (name, profile, ready count), the summed figures
    as plain text, the gateway's styled tail (a roll's progress is in it: plain text in the
    tail stays with it). The two spaces before the tail end the figures' plain text."""
    head, tail = pool_head_tail(pool, slots, down, gone)
    return (head, pool_figures_text(lines) + (POOL_GAP if tail else ""), tail)


POOL_GAP = "  "  # between a pool row's figures and its tail


def pool_head_tail(
    pool: protocol.PoolStatus,
    slots: list[protocol.SlotStatus],
    down: str | None = None,
    gone: Collection[str] = (),
) -> tuple[str, str]:
    """A pool row's styled head and tail (see pool_row_parts; the tail, if any, goes after
    POOL_GAP): what its STATUS says (its slots' states and profiles, its gateway or roll),
    not what a sample's figures do."""
    ready = sum(1 for s in slots if s.state == SlotState.READY and s.id not in gone)
    profiles = {s.profile for s in slots if s.profile and s.state != SlotState.STOPPED}
    what = (
        next(iter(profiles))
        if len(profiles) == 1
        else (f"mixed ({len(profiles)})" if profiles else "-")
    )
    state = f"{ready}/{len(slots)} ready"
    style = "$success" if slots and ready == len(slots) else "$warning"
    gw = ""
    roll = pool.roll
    at = roll.slot if roll is not None else None  # none: a fleet.toml pool's `up`
    if down is not None:
        gw = f"[dim]gateway's host {escape(down)}[/]"
    elif pool.error:
        gw = f"[$error]{escape(pool.error)}[/]"
    elif roll is not None and roll.state == "rolling" and roll.kind == "up":
        gw = f"[b $warning]starting {escape(str(roll.profile))} on {len(slots)} slots[/]"
    elif roll is not None and roll.state == "rolling":
        gw = (
            f"[b $warning]rolling → {escape(str(roll.profile))}[/]"
            f"{escape(f' slot {at}' if at else '')} ({len(roll.done)}/{len(slots)} done)"
        )
    elif roll is not None and roll.state == "stopped":
        what = "start" if roll.kind == "up" else "roll"
        gw = f"[$error]{what} stopped{escape(f' at {at}' if at else '')}: {escape(str(roll.error))}[/]"
    elif pool.gateway is not None and pool.gateway.state:
        gw = f"[dim]gateway {escape(pool.gateway.state)}[/]"
    head = (
        f"  [b]{escape(_cut('pool ' + pool.name, 14)):<14}[/] "
        f"{escape(_cut(what, 18)):<18} [{style}]{escape(f'{state:<11}')}[/]"
    )
    return head, gw


def pool_figures_text(lines: Sequence[SlotLine]) -> str:
    """A pool row's figures, plain: its slots' summed throughput, requests and memory (their
    `slot_line`s), each '-' where none of its slots has it. One loop (see slot_line): made
    each sample."""
    # (The throughputs summed by sum(), as before: from Python 3.12 it rounds less than a
    # loop's additions; byte and request counts are exact either way.)
    tok = [line[1] for line in lines if line[1] is not None]
    used = total = 0.0
    running = queued = 0
    has_run = has_used = has_total = False
    for _, _, run, waiting, mem_used, mem_total in lines:
        if run is not None:
            running, queued, has_run = running + run, queued + (waiting or 0), True
        if mem_used is not None:
            used, has_used = used + mem_used, True
        if mem_total is not None:
            total, has_total = total + mem_total, True
    req = f"{running}/{queued}" if has_run else "-"
    return (
        f" {_sig3(sum(tok)) if tok else '-':>7}  {req:>5}  "
        f"{_mem(used if has_used else None, total if has_total else None)}"
    )


HOST_NAME_WIDTH = 16  # the Hosts view's widest name column (a selector's pods: k.sgltui-0)


def host_name_width(names: Collection[str]) -> int:
    """The Hosts view's name column: as wide as the longest name, 8 to HOST_NAME_WIDTH."""
    return min(max([8, *map(len, names)]), HOST_NAME_WIDTH)


def host_line(h: Any, focused: bool, width: int = 8) -> str:
    """A host of the fleet (sgltui.fleet.view.HostState): reachable with its GPUs, running/all
    slots and tok/s; or "unreachable since 14:02, retrying" (why: a notification when it went
    down, and `sgltui fleet status`). `width`: the name column's (host_name_width)."""
    r = host_row(h)
    mark = "[b $accent]▸[/]" if focused else " "
    name = escape(f"{_cut_name(r.name, width):<{width}}")
    if not r.reachable:
        return f"{mark} {name} [$error]○ {escape(r.state)}[/]"
    tok = units.sig3(r.tok_s) if r.tok_s is not None else "-"
    return f"{mark} {name} [$success]●[/] {r.gpus} GPU  {r.running}/{r.slots} slots  {tok:>5} tok/s"


def slot_memory(
    tel: protocol.TelemetryView, slot: protocol.SlotStatus | None
) -> protocol.TelemetryView:
    """The memory pane where it has the chart's few rows (a short screen of several slots): the
    GPUs of the slot picked in the slots view and the host's RAM (eight GPUs take 16 rows)."""
    if slot is None or not slot.gpus:
        return tel
    mine = [g for g in tel.gpus if g.index in slot.gpus]
    return msgspec.structs.replace(tel, gpus=mine) if mine else tel


def per_request_rate(gen: list[float], running: list[float], last: int = 60) -> float | None:
    """Output tok/s per request over the last `last` samples (the total rate over the requests
    running): the bench dialog scales it by each concurrency. None: nothing ran."""
    pairs = [(g, r) for g, r in zip(gen[-last:], running[-last:]) if r and r > 0]
    total = sum(r for _, r in pairs)
    return sum(g for g, _ in pairs) / total if total else None


def measured_rates(runs: Collection[Any]) -> dict[str, tuple[dict[int, float], float | None]]:
    """profile -> ({concurrency: output tok/s}, when) from the newest bench of each profile in
    this session (the model's BenchRun results): the bench dialog's estimate for a profile
    already measured."""
    out: dict[str, tuple[dict[int, float], float | None]] = {}
    for run in runs:
        result = getattr(run, "result", None) or {}
        when = result.get("finished") or result.get("started")
        for r in result.get("results") or []:
            tok_s = (r.get("metrics") or {}).get("output_throughput")
            p, c = r.get("profile"), r.get("concurrency")
            if not (p and isinstance(c, int) and isinstance(tok_s, (int, float)) and tok_s > 0):
                continue
            rates, seen = out.get(p, ({}, None))
            if seen is not None and when is not None and when < seen:
                continue  # an older run of this profile
            rates = dict(rates) if seen == when else {}
            rates[c] = float(tok_s)
            out[p] = (rates, when)
    return out


def standby_pids(slots: list[protocol.SlotStatus]) -> dict[int, tuple[str, str]]:
    """pid -> (slot, profile) of each profile kept warm: sgltui's own sleepers, which a GPU's
    process list would otherwise show as someone else's."""
    return {sb.pid: (slot.id, sb.profile) for slot in slots for sb in slot.standbys if sb.pid}


def warm_bytes(g: protocol.GpuView, warm_pids: frozenset[int]) -> int:
    """What the standbys keep on GPU `g` (processes of no slot whose pid is a sleeper's)."""
    return sum(p.used_bytes for p in g.processes if p.slot is None and p.pid in warm_pids)


def standby_lines(slots: list[protocol.SlotStatus]) -> list[str]:
    """One memory-pane line per profile kept warm (agent/swap/standby.py): its slot and the server
    that serves there, what the sleeper keeps on the GPU and pins in host RAM."""
    out = []
    for slot in slots:
        for sb in slot.standbys:
            mark = (
                "[$success]warm[/]" if sb.state == "asleep" else f"[$warning]{escape(sb.state)}[/]"
            )
            out.append(
                f"[$success]▒[/] {mark} {escape(slot.id)}: {escape(sb.profile)} beside "
                f"{escape(slot.profile or '-')} · GPU {units.gib(sb.gpu_bytes)} · "
                f"host {units.gib(sb.host_bytes)} pinned{_said_before(sb)}"
            )
    return out


def _said_before(sb: protocol.StandbyView) -> str:
    """How a sleeper's figures were come by: measured after its release, beside what was said
    before it was added when that differs by more than a tenth; else the estimate itself."""
    if not sb.measured:
        return " (estimate)"
    off = [
        f"{what} {units.gib(said)}"
        for what, said, now in (
            ("host", sb.host_estimate_bytes, sb.host_bytes),
            ("GPU", sb.gpu_estimate_bytes, sb.gpu_bytes),
        )
        if said and abs(now - said) > 0.1 * max(now, said)
    ]
    return f" (measured; said {', '.join(off)})" if off else " (measured)"


def endpoint_note(ep: protocol.EndpointView | None) -> str:
    """The agent endpoint's queue per profile and who holds each lease, for the Profiles pane's
    border; empty when nothing waits and nothing is leased (agent/endpoint/endpoint.py)."""
    if ep is None or (not ep.queue and not ep.leases):
        return ""
    parts = [f"{name}: {n} waiting" for name, n in ep.queue.items()]
    parts += [f"{x.profile} leased by {x.holder}" for x in ep.leases]
    return escape("endpoint · " + " · ".join(parts))
