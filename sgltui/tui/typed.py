"""The agent's STATUS read into protocol's Structs, leniently.

A STATUS comes from an agent of this version, a newer one, or a replayed session; a field this
version cannot read (a newer agent's value, a replay's missing pid) must cost that field, never
the slot, the profile or the whole screen. Each reader here converts what it can and leaves the
rest at its default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec

from sgltui import protocol
from sgltui.core.safe_text import printable_profile_row

S = TypeVar("S", bound=msgspec.Struct)


def lenient(cls: type[S], data: Any, **required: Any) -> S:
    """`data` as a `cls`: unknown keys ignored, a value of the wrong type left at its default.
    `required` fills the fields `cls` has no default for when `data` lacks them."""
    src = dict(data) if isinstance(data, Mapping) else {}
    for name, value in required.items():
        if src.get(name) is None:
            src[name] = value
    try:
        return msgspec.convert(src, cls, strict=False)
    except msgspec.ValidationError:
        pass
    good = {k: src[k] for k in required if k in src}
    for f in msgspec.structs.fields(cls):
        key = f.encode_name
        if key in src and key not in good:
            try:
                msgspec.convert({**good, key: src[key]}, cls, strict=False)
                good[key] = src[key]
            except msgspec.ValidationError:
                continue
    return msgspec.convert(good, cls, strict=False)


def slot(data: Any) -> protocol.SlotStatus:
    """A STATUS slot. The agent names it by `id` (today) or `name` (host.toml's slots)."""
    src = dict(data) if isinstance(data, Mapping) else {}
    sid = src.get("id") if src.get("id") is not None else src.get("name")
    src["id"] = str(sid if sid is not None else "?")
    if "capacity" in src:  # an odd figure costs that figure, not the card
        src["capacity"] = protocol.capacity_card(src["capacity"])
    return lenient(protocol.SlotStatus, src, id=src["id"])


def as_status_slot(view: protocol.SlotView) -> protocol.SlotStatus:
    """A slot the events created (a SlotView) as a STATUS slot, with no live-only fields."""
    if isinstance(view, protocol.SlotStatus):
        return view
    fields = {f: getattr(view, f) for f in view.__struct_fields__}
    return protocol.SlotStatus(**fields)


def profile(data: Any) -> protocol.ProfileRow:
    """A profile row, its text made printable and cut (a profile file is anyone's text)."""
    row = printable_profile_row(dict(data) if isinstance(data, Mapping) else {})
    return lenient(protocol.ProfileRow, row, name=str(row.get("name") or "?"))


def agent(data: Any) -> protocol.AgentInfo:
    """The agent's line; a replay's agent may have no pid or version (no agent.start)."""
    return lenient(
        protocol.AgentInfo, data, pid=0, version="", started=0.0, state_dir="", session_dir=""
    )


def unmanaged(data: Any) -> protocol.Unmanaged:
    """A server the agent found and did not start (its model name is anyone's text)."""
    pid = data.get("pid") if isinstance(data, Mapping) else None
    return lenient(protocol.Unmanaged, data, pid=int(pid) if isinstance(pid, int) else 0)


def pool(data: Any) -> protocol.PoolStatus:
    name = data.get("name") if isinstance(data, Mapping) else None
    return lenient(protocol.PoolStatus, data, name=str(name or "?"))


def endpoint(data: Any) -> protocol.EndpointView | None:
    """The agent endpoint of STATUS (agent/endpoint/endpoint.py); None: an older agent, or unreadable."""
    if not isinstance(data, Mapping):
        return None
    try:
        return msgspec.convert(data, protocol.EndpointView, strict=False)
    except msgspec.ValidationError:
        return None


def job(data: Any) -> protocol.JobView | None:
    """A job of STATUS, or None when it cannot be read (the Jobs tab asks for it again)."""
    try:
        return msgspec.convert(data, protocol.JobView, strict=False)
    except msgspec.ValidationError:
        return None


def bench_run(data: Any) -> protocol.BenchRun | None:
    if not isinstance(data, Mapping) or not data.get("run_id"):
        return None
    return lenient(
        protocol.BenchRun, data, run_id=str(data["run_id"]), state="running", started=0.0
    )
