"""`sgltui fleet report`: every host's session report (`sgltui report --format json` run there)
merged on one clock.

Each host records its own session with its own clock. The merge moves each host's times onto
this host's clock by the offset measured over the bridge: the far agent's STATUS carries its
time (telemetry.ts), taken between our send and our receive, so offset = far - midpoint, good
to half the round trip (a millisecond on a LAN). The timeline then says which host, which slot,
which profile, when.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

from sgltui.fleet import transport
from sgltui.fleet.client import HostClient, HostError, stop_group
from sgltui.fleet.config import Fleet, Host
from sgltui.fleet.link import FANOUT

TIMEOUT_S = 120.0


async def clock_offset(fleet: Fleet, host: Host) -> float | None:
    """The far host's clock minus ours, in seconds (None: no STATUS with a time)."""
    client = HostClient(fleet, host, "fleet-report")
    try:
        await client.connect()
        best: tuple[float, float] | None = None
        for _ in range(3):  # the shortest round trip of three bounds the error best
            t0 = time.time()
            st = await client.call("status")
            t1 = time.time()
            far = (st.get("telemetry") or {}).get("ts")
            if isinstance(far, (int, float)) and (best is None or t1 - t0 < best[0]):
                best = (t1 - t0, float(far) - (t0 + t1) / 2)
        return best[1] if best else None
    except HostError:
        return None
    finally:
        await client.close()


async def fetch_report(fleet: Fleet, host: Host, session: str | None) -> dict[str, Any]:
    """The host's report as JSON, or {"error": one line}."""
    words = ["report", "--format", "json"] + ([session] if session else [])
    unlisted = transport.not_listed(host)
    if unlisted:
        return {"error": unlisted}
    proc = await asyncio.create_subprocess_exec(
        *transport.argv(fleet, host, *words),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT_S)
    except asyncio.TimeoutError:
        await stop_group(proc)
        return {"error": f"host {host.name}: no report within {TIMEOUT_S:.0f}s"}
    text = err.decode(errors="replace")
    if transport.failed(host, proc.returncode, text):
        return {"error": transport.explain(host, proc.returncode, text)}
    if proc.returncode != 0:
        last = text.strip().splitlines()[-1] if text.strip() else f"exit {proc.returncode}"
        return {"error": f"host {host.name}: {last}"}
    try:
        rep = json.loads(out)
    except ValueError:
        return {"error": f"host {host.name}: its report is not JSON (another sgltui version?)"}
    return rep if isinstance(rep, dict) else {"error": f"host {host.name}: an empty report"}


async def gather(fleet: Fleet, session: str | None = None) -> dict[str, Any]:
    async def one(h: Host) -> tuple[str, dict[str, Any], float | None]:
        rep, off = await asyncio.gather(fetch_report(fleet, h, session), clock_offset(fleet, h))
        return h.name, rep, off

    gate = asyncio.Semaphore(FANOUT)  # ssh sessions at once, whatever the fleet's size

    async def bounded(h: Host) -> Any:
        async with gate:
            return await one(h)

    results = await asyncio.gather(*(bounded(h) for h in fleet.hosts))
    return merge({name: (rep, off) for name, rep, off in results})


def merge(per_host: dict[str, tuple[dict[str, Any], float | None]]) -> dict[str, Any]:
    """One report: hosts (their session, clock offset, error) and one timeline on our clock."""
    hosts: list[dict[str, Any]] = []
    timeline: list[dict[str, Any]] = []
    time_in_profile: list[dict[str, Any]] = []
    for name, (rep, offset) in per_host.items():
        if "error" in rep:
            hosts.append({"name": name, "error": rep["error"], "offset_s": offset})
            continue
        off = offset or 0.0
        sess = rep.get("session") or {}
        hosts.append(
            {
                "name": name,
                "session": sess.get("name"),
                "started": _shift(sess.get("started"), off),
                "duration_s": sess.get("duration_s"),
                "offset_s": offset,
                "error": None,
            }
        )

        def add(
            ts: Any,
            slot: Any,
            what: str,
            profile: Any,
            detail: str,
            name: str = name,
            off: float = off,
        ) -> None:
            at = _shift(ts, off)
            if at is not None:
                timeline.append(
                    {
                        "ts": at,
                        "host": name,
                        "slot": f"{name}/{slot}",
                        "what": what,
                        "profile": profile,
                        "detail": detail,
                    }
                )

        for x in rep.get("launches") or []:
            start = x.get("start_s")
            took = f" in {start:.1f}s" if isinstance(start, (int, float)) else ""
            add(x.get("ts"), x.get("slot"), "launch", x.get("profile"), f"{x.get('outcome')}{took}")
        for x in rep.get("swaps") or []:
            total = (x.get("timings_s") or {}).get("total")
            took = f" in {total:.1f}s" if isinstance(total, (int, float)) else ""
            how = "ok" if x.get("ok") else "rolled back" if x.get("rolled_back") else "failed"
            add(
                x.get("ts"),
                x.get("slot"),
                "swap",
                x.get("to"),
                f"from {x.get('from')}: {how}{took}",
            )
        for x in rep.get("crashes") or []:
            add(x.get("ts"), x.get("slot"), "crash", x.get("profile"), str(x.get("cause") or ""))
        for x in rep.get("time_in_profile") or []:
            time_in_profile.append({"host": name, **x, "slot": f"{name}/{x.get('slot')}"})
    timeline.sort(key=lambda e: e["ts"])
    return {"hosts": hosts, "timeline": timeline, "time_in_profile": time_in_profile}


def _shift(ts: Any, off: float) -> float | None:
    # A far time minus the far clock's lead is the same moment on our clock.
    return float(ts) - off if isinstance(ts, (int, float)) else None


def render_markdown(r: dict[str, Any]) -> str:
    lines = [
        "# Fleet report",
        "",
        "| host | session | started | clock offset | note |",
        "|---|---|---|---|---|",
    ]
    for h in r["hosts"]:
        off = h.get("offset_s")
        offs = f"{off * 1000:+.1f} ms" if isinstance(off, (int, float)) else "unknown"
        started = _clock(h.get("started"))
        lines.append(
            f"| {h['name']} | {h.get('session') or '-'} | {started} | {offs} | {h.get('error') or ''} |"
        )
    lines += ["", "## Timeline (this host's clock)", ""]
    if not r["timeline"]:
        lines.append("Nothing launched, swapped or crashed in these sessions.")
    else:
        lines += ["| time | slot | what | profile | detail |", "|---|---|---|---|---|"]
        for e in r["timeline"]:
            lines.append(
                f"| {_clock(e['ts'])} | {e['slot']} | {e['what']} | {e.get('profile') or '-'} "
                f"| {e['detail']} |"
            )
    return "\n".join(lines) + "\n"


def _clock(ts: Any) -> str:
    with contextlib.suppress(TypeError, ValueError, OverflowError, OSError):
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(ts)))
    return "-"
