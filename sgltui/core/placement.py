"""Where servers run on this host: `host.toml`, its slots (GPUs, port) and pools (one endpoint).

A profile says how to serve; a slot says where. `~/.config/sgltui/host.toml`:

    simulated_gpus = 2          # optional: a simulated host of N GPUs (the simulator's)
    simulated_gpu = "h100-80gb" # optional: their preset (sim --sim-gpu)
    [[slot]]
    name = "a"
    gpus = [0]
    # port = 31000              # optional; else assigned (see assign_ports)
    [[pool]]
    name = "all"
    slots = ["a", "b"]
    port = 30080                # the pool's stable endpoint
    # host = "127.0.0.1"        # the address it binds (loopback unless told)

Every mistake is one line naming the file, the slot or pool and the fix (PlacementError); the
caller refuses the whole file, so nothing that runs is touched by a bad edit.

Ports: SGLang takes more than `--port`. With DP attention it derives its dist-init and
scheduler ports from `--port` + 233..240 (ZMQ_TCP_PORT_DELTA in SGLang's server args), so a slot
owns that range too, and no other slot's or pool's port may fall in it.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

import tomli_w

from sgltui.core import config as env_config
from sgltui.core.locations import config_dir

FILE_NAME = "host.toml"
SLOT_PORT_BASE = 31000  # where assigned slot ports start (sglang_router's habit too)
SLOT_PORT_STEP = 10
DP_PORT_OFFSETS = range(233, 241)  # --port + 233..240: SGLang's DP-attention ports
DEFAULT_POOL = "all"
DEFAULT_POOL_PORT = 30080  # today's single-slot front port: clients keep their URL
SIM_HOST_ENV = env_config.SIM_HOST_ENV  # the simulator's --simulated-gpus default
SIM_GPU_ENV = env_config.SIM_GPU_ENV  # the simulator's --sim-gpu default
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")
_SLOT_KEYS = {"name", "gpus", "port"}
_POOL_KEYS = {"name", "slots", "port", "host", "policy"}
# smg's policies. least_load by default: it sends each request to the worker with the fewest in
# flight, so a batch job fills every GPU; cache_aware (smg's own default) keeps requests that
# share a prefix on one worker, which left the demo's similar prompts on one GPU. power_of_two
# is left out: smg 1.13 refuses to start it with fewer than two workers, and a pool's gateway
# starts with its first ready slot (and restarts with whichever are left).
POLICIES = ("least_load", "cache_aware", "round_robin", "random")
DEFAULT_POLICY = "least_load"
_TOP_KEYS = {"slot", "pool", "simulated_gpus", "simulated_gpu"}


class PlacementError(ValueError):
    """One line: what is wrong in host.toml and how to fix it."""


@dataclass(frozen=True)
class SlotPlace:
    name: str
    gpus: tuple[int, ...]
    port: int  # the server's --port (given in host.toml or assigned)
    # A simulated host (host.toml's simulated_gpus/simulated_gpu): the simulator publishes its
    # memory on this slot's GPUs of a host of that many (env SGLTUI_SIMULATED_GPUS/_SIM_GPU).
    simulated_gpus: int | None = None
    simulated_gpu: str | None = None

    @property
    def cuda_visible_devices(self) -> str:
        return ",".join(str(g) for g in self.gpus)

    def footprint(self) -> set[int]:
        """Every port the slot's server may bind."""
        return footprint(self.port)


@dataclass(frozen=True)
class PoolPlace:
    name: str
    slots: tuple[str, ...]
    port: int
    host: str = "127.0.0.1"
    policy: str = DEFAULT_POLICY  # the gateway's routing policy (smg --policy)

    @property
    def endpoint(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


@dataclass(frozen=True)
class Placement:
    slots: tuple[SlotPlace, ...]
    pools: tuple[PoolPlace, ...]
    simulated_gpus: int | None = None
    simulated_gpu: str | None = None
    path: Path | None = field(default=None, compare=False)

    def slot(self, name: str) -> SlotPlace:
        for s in self.slots:
            if s.name == name:
                return s
        raise PlacementError(
            f"no slot {name!r} in {self.where()}; slots: {', '.join(self.slot_names())} "
            "(sgltui host show)"
        )

    def pool(self, name: str) -> PoolPlace:
        for p in self.pools:
            if p.name == name:
                return p
        raise PlacementError(
            f"no pool {name!r} in {self.where()}; pools: "
            f"{', '.join(p.name for p in self.pools) or 'none'} (sgltui host show)"
        )

    def pool_of(self, slot: str) -> PoolPlace | None:
        return next((p for p in self.pools if slot in p.slots), None)

    def slot_names(self) -> list[str]:
        return [s.name for s in self.slots]

    def gpu_count(self) -> int:
        return sum(len(s.gpus) for s in self.slots)

    def where(self) -> str:
        return str(self.path) if self.path is not None else FILE_NAME

    def to_toml(self) -> str:
        """host.toml text that reads back as this placement (ports written out). Written by
        hand, not by tomli_w, to keep each slot's lists on one line, as a person writes them."""
        out = ["# sgltui's placement of servers on this host (sgltui host show prints it)"]
        if self.simulated_gpus is not None:
            out.append(f"simulated_gpus = {self.simulated_gpus}")
        if self.simulated_gpu is not None:
            out.append(f"simulated_gpu = {_toml_str(self.simulated_gpu)}")
        for s in self.slots:
            gpus = ", ".join(str(g) for g in s.gpus)
            out += ["", "[[slot]]", f"name = {_toml_str(s.name)}", f"gpus = [{gpus}]"]
            out.append(f"port = {s.port}")
        for p in self.pools:
            members = ", ".join(_toml_str(m) for m in p.slots)
            out += ["", "[[pool]]", f"name = {_toml_str(p.name)}", f"slots = [{members}]"]
            out.append(f"port = {p.port}")
            if p.host != "127.0.0.1":
                out.append(f"host = {_toml_str(p.host)}")
            if p.policy != DEFAULT_POLICY:
                out.append(f"policy = {_toml_str(p.policy)}")
        return "\n".join(out) + "\n"


HOST_FILE_ENV = env_config.HOST_FILE_ENV  # another host.toml (`sgltui demo --gpus N` sets it)


def default_path() -> Path:
    """$SGLTUI_HOST_FILE, else ~/.config/sgltui/host.toml."""
    env = env_config.host_file()
    return Path(env).expanduser() if env else config_dir() / FILE_NAME


def footprint(port: int) -> set[int]:
    return {port} | {port + d for d in DP_PORT_OFFSETS}


def load(path: Path | None = None, *, gpu_count: int | None = None) -> Placement | None:
    """The host's placement, or None when there is no host.toml (today's single slot).
    `gpu_count`: GPUs the host has (NVML), None when unknown; a simulated host's count wins."""
    target = path or default_path()
    try:
        text = target.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise PlacementError(f"{target}: cannot read ({exc}); fix or remove it") from None
    return parse(text, path=target, gpu_count=gpu_count)


def parse(text: str, *, path: Path | None = None, gpu_count: int | None = None) -> Placement:
    where = str(path) if path is not None else FILE_NAME

    def fail(problem: str, fix: str) -> PlacementError:
        return PlacementError(f"{where}: {problem}; {fix}")

    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise fail(f"not valid TOML ({exc})", "fix the line it names") from None
    except RecursionError:
        raise fail("values nested too deeply to read", "flatten the value") from None
    unknown = sorted(set(doc) - _TOP_KEYS)
    if unknown:
        raise fail(
            f"unknown key {unknown[0]!r}",
            "the file holds [[slot]], [[pool]], simulated_gpus, simulated_gpu",
        )
    simulated = doc.get("simulated_gpus")
    if simulated is not None and (not _is_int(simulated) or not 1 <= simulated <= 64):
        raise fail(f"simulated_gpus = {simulated!r}", "give a whole number of GPUs, 1 to 64")
    preset = doc.get("simulated_gpu")
    if preset is not None and not isinstance(preset, str):
        raise fail(f"simulated_gpu = {preset!r}", 'give a preset name, e.g. "h100-80gb"')
    if simulated is not None:
        gpu_count = simulated
    raw_slots = doc.get("slot", [])
    if not isinstance(raw_slots, list) or not raw_slots:
        raise fail("no [[slot]]", "add one [[slot]] per server (sgltui host init writes them)")
    raw_pools = doc.get("pool", [])
    if not isinstance(raw_pools, list):
        raise fail("`pool` is not a list of tables", "write each pool as [[pool]]")

    slots: list[tuple[str, tuple[int, ...], int | None]] = []
    gpu_owner: dict[int, str] = {}
    for i, entry in enumerate(raw_slots, start=1):
        if not isinstance(entry, dict):
            raise fail(f"slot {i} is not a table", "write each slot as [[slot]]")
        extra = sorted(set(entry) - _SLOT_KEYS)
        if extra:
            raise fail(f"slot {i}: unknown key {extra[0]!r}", "a slot has name, gpus, port")
        name = entry.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise fail(
                f"slot {i}: name {name!r}",
                "give a name of letters, digits, '-' or '_' (at most 32)",
            )
        if any(s[0] == name for s in slots):
            raise fail(f"two slots are named {name!r}", "give each slot its own name")
        gpus = entry.get("gpus")
        if not isinstance(gpus, list) or not gpus or not all(_is_int(g) and g >= 0 for g in gpus):
            raise fail(f"slot {name!r}: gpus = {gpus!r}", "give a list of GPU indices, e.g. [0]")
        if len(set(gpus)) != len(gpus):
            raise fail(f"slot {name!r} lists a GPU twice ({gpus})", "list each GPU once")
        for g in gpus:
            if gpu_count is not None and g >= gpu_count:
                have = f"GPUs 0-{gpu_count - 1}" if gpu_count > 1 else "GPU 0"
                if gpu_count == 0:
                    have = "no GPU"
                raise fail(
                    f"slot {name!r}: GPU {g} does not exist (this host has {have})",
                    "fix its gpus, or rewrite the file with sgltui host init --force",
                )
            if g in gpu_owner:
                raise fail(
                    f"slots {gpu_owner[g]!r} and {name!r} share GPU {g}",
                    "give each GPU to one slot",
                )
            gpu_owner[g] = name
        port = entry.get("port")
        if port is not None and (not _is_int(port) or not 1 <= port <= 65535 - 240):
            raise fail(f"slot {name!r}: port = {port!r}", "give a port from 1 to 65295, or none")
        slots.append((name, tuple(gpus), port))

    slot_names = {s[0] for s in slots}
    pools: list[PoolPlace] = []
    member_of: dict[str, str] = {}
    for i, entry in enumerate(raw_pools, start=1):
        if not isinstance(entry, dict):
            raise fail(f"pool {i} is not a table", "write each pool as [[pool]]")
        extra = sorted(set(entry) - _POOL_KEYS)
        if extra:
            raise fail(
                f"pool {i}: unknown key {extra[0]!r}", "a pool has name, slots, port, host, policy"
            )
        name = entry.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise fail(
                f"pool {i}: name {name!r}",
                "give a name of letters, digits, '-' or '_' (at most 32)",
            )
        if any(p.name == name for p in pools):
            raise fail(f"two pools are named {name!r}", "give each pool its own name")
        members = entry.get("slots")
        if (
            not isinstance(members, list)
            or not members
            or not all(isinstance(m, str) for m in members)
        ):
            raise fail(f"pool {name!r}: slots = {members!r}", 'list its slots, e.g. ["a", "b"]')
        for m in members:
            if m not in slot_names:
                raise fail(
                    f"pool {name!r} names an unknown slot {m!r}",
                    f"use one of: {', '.join(s[0] for s in slots)}",
                )
            if m in member_of:
                raise fail(
                    f"slot {m!r} is in pools {member_of[m]!r} and {name!r}",
                    "put each slot in one pool",
                )
            member_of[m] = name
        port = entry.get("port")
        if not _is_int(port) or not 1 <= port <= 65535:
            raise fail(f"pool {name!r}: port = {port!r}", "give the pool's port, e.g. 30080")
        host = entry.get("host", "127.0.0.1")
        if not isinstance(host, str) or not host:
            raise fail(f"pool {name!r}: host = {host!r}", 'give an address, e.g. "127.0.0.1"')
        policy = entry.get("policy", DEFAULT_POLICY)
        if policy not in POLICIES:
            raise fail(f"pool {name!r}: policy = {policy!r}", f"use one of: {', '.join(POLICIES)}")
        pools.append(PoolPlace(name, tuple(members), port, host, policy))

    taken: dict[int, str] = {}
    for p in pools:
        if p.port in taken:
            raise fail(
                f"pools {taken[p.port].split()[-1]!r} and {p.name!r} both use port {p.port}",
                "give each pool its own port",
            )
        taken[p.port] = f"pool {p.name}"
    for name, _, port in slots:
        if port is None:
            continue
        for q in sorted(footprint(port)):
            if q in taken:
                what = "its port" if q == port else f"port {q} (--port + {q - port}, DP attention)"
                raise fail(
                    f"slot {name!r} port {port}: {what} clashes with {taken[q]}",
                    "pick a slot port at least 241 away from the others, or leave it out",
                )
        taken[port] = f"slot {name}"
        for d in DP_PORT_OFFSETS:
            taken[port + d] = (
                f"slot {name}'s DP-attention ports {port + DP_PORT_OFFSETS[0]}-"
                f"{port + DP_PORT_OFFSETS[-1]} (--port + 233..240)"
            )
    assigned = assign_ports([(n, p) for n, _, p in slots], taken)
    return Placement(
        tuple(SlotPlace(n, g, assigned[n], simulated, preset) for n, g, _ in slots),
        tuple(pools),
        simulated,
        preset,
        path,
    )


def assign_ports(
    slots: Iterable[tuple[str, int | None]], taken: Mapping[int, str], base: int = SLOT_PORT_BASE
) -> dict[str, int]:
    """A port per slot: its own, else the first from `base` (in steps of 10) whose footprint
    (the port and +233..240) meets nothing taken. `taken` maps port -> holder."""
    used = set(taken)
    out: dict[str, int] = {}
    candidate = base
    for name, port in slots:
        if port is not None:
            out[name] = port
            continue
        while footprint(candidate) & used:
            candidate += SLOT_PORT_STEP
        out[name] = candidate
        used |= footprint(candidate)
        candidate += SLOT_PORT_STEP
    return out


def layout(
    gpu_count: int,
    *,
    tp: int = 1,
    simulated: bool = False,
    simulated_gpu: str | None = None,
    pool_port: int = DEFAULT_POOL_PORT,
    taken: Mapping[int, str] | None = None,
) -> Placement:
    """`sgltui host init`: one slot per GPU (or per group of `tp`), all in pool "all". Slot
    ports keep clear of `taken` (port -> holder: the demo's busy ports) and of the pool's."""
    if gpu_count < 1:
        raise PlacementError(
            "no GPU found on this host; try sgltui host init --simulated-gpus N for a simulated one"
        )
    if tp < 1 or gpu_count % tp:
        raise PlacementError(
            f"{gpu_count} GPUs do not split into groups of --tp {tp}; "
            f"pick a --tp that divides {gpu_count}"
        )
    groups = [tuple(range(i, i + tp)) for i in range(0, gpu_count, tp)]
    names = [slot_name(i) for i in range(len(groups))]
    ports = assign_ports([(n, None) for n in names], {**(taken or {}), pool_port: "pool"})
    slots = tuple(
        SlotPlace(
            n,
            g,
            ports[n],
            gpu_count if simulated else None,
            simulated_gpu if simulated else None,
        )
        for n, g in zip(names, groups)
    )
    pool = PoolPlace(DEFAULT_POOL, tuple(names), pool_port)
    return Placement(
        slots,
        (pool,),
        gpu_count if simulated else None,
        simulated_gpu if simulated else None,
    )


def slot_name(i: int) -> str:
    """a, b, ... z, then s26, s27, ..."""
    return chr(ord("a") + i) if i < 26 else f"s{i}"


def describe(placement: Placement) -> list[str]:
    """`sgltui host show`: one line per slot and per pool."""
    lines = []
    if placement.simulated_gpus is not None:
        preset = f" ({placement.simulated_gpu})" if placement.simulated_gpu else ""
        lines.append(f"simulated host: {placement.simulated_gpus} GPUs{preset}")
    for s in placement.slots:
        pool = placement.pool_of(s.name)
        gpus = ",".join(str(g) for g in s.gpus)
        lines.append(
            f"slot {s.name:<8} GPU {gpus:<8} port {s.port}"
            + (f"  pool {pool.name}" if pool else "  (no pool)")
        )
    for p in placement.pools:
        front = "gateway (smg)" if len(p.slots) > 1 else "front"
        lines.append(f"pool {p.name:<8} {p.endpoint}  slots {', '.join(p.slots)}  via {front}")
    return lines


# --- a profile on a slot ------------------------------------------------------------------------


def gpus_needed(server: Mapping[str, Any]) -> int:
    """GPUs one server of these [server] flags occupies: tp x pp, times dp when DP is not
    attention DP (which runs inside the TP group)."""
    tp = _flag_int(server, "tp-size", "tensor-parallel-size")
    pp = _flag_int(server, "pp-size", "pipeline-parallel-size")
    dp = _flag_int(server, "dp-size", "data-parallel-size")
    if server.get("enable-dp-attention"):
        dp = 1
    return tp * pp * dp


def tp_problem(profile_name: str, server: Mapping[str, Any], slot: SlotPlace) -> str | None:
    """Preflight: a profile that needs another number of GPUs than the slot has, or None."""
    need = gpus_needed(server)
    have = len(slot.gpus)
    if need == have:
        return None
    how = f"tp-size {_flag_int(server, 'tp-size', 'tensor-parallel-size')}"
    if need != _flag_int(server, "tp-size", "tensor-parallel-size"):
        how = "tp-size x pp-size x dp-size"
    return (
        f"profile {profile_name!r} needs {need} GPU{'s' if need != 1 else ''} ({how}) but slot "
        f"{slot.name!r} has {have} (GPU {slot.cuda_visible_devices}): set tp-size = {have} in the "
        f"profile, or place it on a slot of {need} GPUs (sgltui host init --tp {need})"
    )


def overrides(server: Mapping[str, Any], env: Mapping[str, str]) -> list[str]:
    """What a slot replaces in a profile (for `profiles validate`): the profile's own port and
    CUDA_VISIBLE_DEVICES, which host.toml sets per slot."""
    notes = []
    if "port" in server:
        notes.append(f"port = {server['port']} is replaced by each slot's port (host.toml)")
    if "CUDA_VISIBLE_DEVICES" in env:
        notes.append(
            f"CUDA_VISIBLE_DEVICES = {env['CUDA_VISIBLE_DEVICES']!r} is replaced by each slot's "
            "GPUs (host.toml)"
        )
    return notes


def apply_to(
    server: Mapping[str, Any], env: Mapping[str, str], slot: SlotPlace
) -> tuple[dict[str, Any], dict[str, str]]:
    """The [server] flags and [env] of a profile as it runs on `slot`."""
    placed_server = dict(server)
    placed_server["port"] = slot.port
    placed_env = dict(env)
    placed_env["CUDA_VISIBLE_DEVICES"] = slot.cuda_visible_devices
    if slot.simulated_gpus is not None:
        # Read by the simulator only (sim/cli.py): a real server ignores them.
        placed_env[SIM_HOST_ENV] = str(slot.simulated_gpus)
        if slot.simulated_gpu:
            placed_env[SIM_GPU_ENV] = slot.simulated_gpu
    return placed_server, placed_env


def _flag_int(server: Mapping[str, Any], *names: str) -> int:
    for n in names:
        v = server.get(n)
        if _is_int(v) and v > 0:
            return int(v)
        if isinstance(v, str) and v.isdigit() and int(v) > 0:
            return int(v)
    return 1


def _toml_str(text: str) -> str:
    return tomli_w.dumps({"k": text})[4:].strip()


def _is_int(v: object) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)
