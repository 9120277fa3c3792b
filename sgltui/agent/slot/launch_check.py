"""The checks a slot runs before it spawns a server: the profile's flags, the port, leftover
SGLang on the target GPUs and their free memory. A refusal here costs seconds; the same problem
found by the server costs the minutes it spends loading first."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from sgltui.agent import gpu
from sgltui.agent.slot import procs
from sgltui.agent.slot.server_process import LaunchError
from sgltui.core import causes, host_pool

if TYPE_CHECKING:
    from sgltui.agent.slot.resolved import Resolved

# The slot's logger: these lines were the slot's and read the same in agent.log.
log = logging.getLogger("sgltui.agent.slot")


def validate(profile: Resolved) -> str | None:
    """The first error the flag validator finds in `profile` (one line), before anything stops
    or starts; None when it is valid or the validator is unavailable."""
    try:
        from sgltui.core.validate import check_profile

        issues = check_profile(profile.profile)  # the core Profile it resolved
    except Exception as exc:  # a validator problem must not block a launch that may work
        log.warning(
            "profile validation unavailable for %s: %s",
            getattr(profile, "name", "?"),
            exc,
            exc_info=True,
        )
        return None
    errors = [str(i).splitlines()[0] for i in issues if i.is_error]
    if not errors:
        return None
    more = (
        f" (+{len(errors) - 1} more: `sgltui profiles validate {profile.name}`)"
        if len(errors) > 1
        else ""
    )
    return errors[0] + more


def check_port(profile: Resolved, skip: frozenset[str] = frozenset()) -> None:
    """Refuse (LaunchError) a launch whose port is taken, unless `skip` (the preflight checks
    the command forced: `--force port`) says to go past it."""
    host, port = profile.host, profile.port
    if "port" not in skip and not procs.port_free(host, port):
        holder = procs.port_holder(port)
        raise LaunchError(
            causes._cause(
                "port",
                f"port {port} is already in use" + (f" by {holder}" if holder else ""),
                [],
                "stop what holds it or set `port` in the profile's [server]",
                None,
            )
        )


def check_gpus(
    profile: Resolved, exclude_pids: set[int], skip: frozenset[str] = frozenset()
) -> dict[int, int] | None:
    """Refuse (LaunchError) a launch whose GPUs hold leftover SGLang (always) or lack the
    memory it needs (unless `skip` has `gpu-memory`). -> the target GPUs' used bytes before
    the launch (None: simulated, or no NVML)."""
    if profile.launcher == "sim":
        return None  # simulated GPUs: nothing real to hold or to be short of
    visible = profile.env.get("CUDA_VISIBLE_DEVICES") or os.environ.get("CUDA_VISIBLE_DEVICES")
    holders = gpu.sglang_on_gpus(visible, exclude_pids)
    if holders is None:
        # No NVML: nothing says which GPU a process holds, so orphans only earn a warning.
        orphans = procs.orphan_sglang_processes(exclude_pids)
        if orphans:
            log.warning("orphaned SGLang processes on this host: %s", procs.describe(orphans))
    elif holders:
        raise LaunchError(
            causes._cause(
                "oom",
                f"leftover SGLang processes hold the target GPUs: {procs.describe(holders)}",
                [],
                f"end them (kill -9 {' '.join(map(str, holders))}) and start again",
                None,
            )
        )
    need = host_pool.as_number(profile.server.get("mem-fraction-static")) or 0.5
    problem = None if "gpu-memory" in skip else gpu.free_after_release(visible, need, set())
    if problem:
        raise LaunchError(causes._cause("oom", problem[0], [], problem[1], None))
    # What the target GPUs use before this server exists: where NVML's pids cannot be
    # matched to ours (a container), its release is this figure coming back (agent/gpu/).
    return gpu.used_bytes(visible)
