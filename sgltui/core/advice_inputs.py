"""The advice's inputs (core/advice.py Situation) from what the agent's status carries: the
slot's capacity card and live reading, the host's RAM less what the standbys pin, the slot's
GPU, the job's mean prompt and output lengths, and how much its input's prompts share prefixes. One function for `sgltui advise` and the
TUI's Insight pane, so both propose the same thing from the same status."""

from __future__ import annotations

from typing import Any

from sgltui import protocol
from sgltui.core import host_pool, job_input
from sgltui.core.profiles import Profile
from sgltui.core.situation import Situation

DEFAULT_SIM_HOST_GB = 512.0  # the simulator's --sim-host-memory-gb default


def host_free_bytes(
    profile: Profile, slot: protocol.SlotStatus, host: protocol.HostView | None
) -> float | None:
    """Host RAM a new host pool could take. Simulated: the simulated host's RAM less what the
    standbys and the server pin; real: what the OS says is available (pinned pages are in use,
    so the standbys' pins are already out of it)."""
    if profile.launcher == "sim":
        gb = host_pool.as_number(profile.server.get("sim-host-memory-gb")) or DEFAULT_SIM_HOST_GB
        pinned = sum(sb.host_bytes for sb in slot.standbys)
        if host is not None:
            pinned += host.server_pinned_bytes.get(slot.id, 0)
        return max(0.0, gb * 1e9 - pinned)
    if host is None or host.ram_available_bytes is None:
        return None
    return float(host.ram_available_bytes)


def gpu_total_bytes(slot: protocol.SlotStatus, gpus: list[protocol.GpuView]) -> float | None:
    mine = [g for g in gpus if not slot.gpus or g.index in slot.gpus]
    totals = [g.total_bytes for g in mine if g.total_bytes]
    return float(min(totals)) if totals else None


def job_lengths(job: protocol.JobView | None) -> tuple[float | None, float | None]:
    """(mean prompt tokens, mean output tokens) of the job's answers so far."""
    if job is None:
        return None, None
    done = sum(s.completions for s in job.segments)
    if done <= 0:
        return None, None
    prompt = sum(s.in_tokens for s in job.segments)
    output = sum(s.out_tokens for s in job.segments)
    return (prompt / done if prompt else None), (output / done if output else None)


def job_for(
    slot_id: str, jobs: list[protocol.JobView], job_id: str | None
) -> protocol.JobView | None:
    """The job named, else the newest unfinished job on the slot."""
    if job_id:
        return next((j for j in jobs if j.id == job_id), None)
    live = [j for j in jobs if j.slot == slot_id and j.finished is None]
    return max(live, key=lambda j: j.created, default=None)


def situation(
    profile: Profile,
    slot: protocol.SlotStatus,
    telemetry: protocol.TelemetryView,
    job: protocol.JobView | None = None,
    accept_by_c: dict[int, float] | None = None,
    overrides: dict[str, Any] | None = None,
) -> Situation:
    """`overrides`: prompt_tokens, output_tokens, concurrency, host_free_bytes given by hand
    (`sgltui advise --prompt-tokens ...`: a job not started yet)."""
    prompt, output = job_lengths(job)
    card = protocol.to_builtins(slot.capacity) if slot.capacity is not None else None
    s = Situation(
        serving=profile.name,
        server=dict(profile.server),
        card=card if isinstance(card, dict) else None,
        engine=telemetry.engine.get(slot.id),
        accept_by_c=dict(accept_by_c or {}),
        host_free_bytes=host_free_bytes(profile, slot, telemetry.host),
        gpu_total_bytes=gpu_total_bytes(slot, telemetry.gpus),
        prompt_tokens=prompt,
        output_tokens=output,
        concurrency=job.concurrency if job is not None else None,
    )
    if job is not None and job.input:
        # how much the job's prompts share prefixes, from its input (read once per version)
        s.prefix = job_input.cached_sample(job.input).prefix
    for key, value in (overrides or {}).items():
        if value is not None:
            setattr(s, key, value)
    return s
