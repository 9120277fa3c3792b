"""A server sgltui did not start, in a slot (issue 38): attach, adopt, detach.

Attached, it is watched like any other (memory of its processes by pid, throughput, running and
queued, its capacity card from /server_info; bench and jobs go through it and are recorded in
the session), but its lifecycle is not ours: start/stop/restart/swap are refused with the way
forward, and its log lines are not ours to read. `adopt` writes its effective configuration as a
profile (core/provenance.py) and hands the server to the slot as if sgltui had launched it, so
that a stop sends its process tree SIGTERM after the drain and a failed swap relaunches it from
that profile. A remote URL can be attached too: no process, no GPU, no adoption.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import logging
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
import psutil

from sgltui import protocol
from sgltui.agent.errors import OpError
from sgltui.agent.slot import discovery, info_fetch, procs
from sgltui.agent.slot.lifecycle import IDLE, READY, RUNNING
from sgltui.agent.slot.slot import Slot, SlotHost
from sgltui.core import locations, provenance
from sgltui.core.launch_secrets import SECRET_FLAGS, read_key_file
from sgltui.core.profile_import import profile_to_toml
from sgltui.core.profiles import ProfileError, name_problem
from sgltui.core.safe_text import printable

if TYPE_CHECKING:
    from sgltui.agent.context import AgentContext
    from sgltui.agent.provenance import ProvenanceKeeper
    from sgltui.core import profiles as core_profiles


log = logging.getLogger(__name__)
# attach and adopt are given up when the client that asked leaves (agent/server.py): their
# question to a slow server must not run on for no one
GIVEN_UP_WITHOUT_CLIENT = frozenset({"attach", "adopt"})
CHECK_S = 2.0  # how often an attached server is looked at (its pid, or /health for a remote)
REMOTE_MISSES = 3  # a remote server is gone after this many unanswered looks in a row


@dataclasses.dataclass
class External:
    """What the slot knows of a server it watches but did not start."""

    url: str
    pid: int | None
    model: str | None
    version: str | None
    attached_at: float
    info: dict[str, Any]
    cmdline: list[str]
    info_hash: str | None = None
    # secret flag -> the file holding it (given to attach): what an adopted profile names
    key_files: dict[str, str] = dataclasses.field(default_factory=dict)

    def view(self) -> protocol.ExternalView:
        return protocol.ExternalView(
            url=self.url,
            pid=self.pid,
            model=self.model,
            version=self.version,
            attached_at=self.attached_at,
            info_hash=self.info_hash,
        )


def refuse(slot: Slot, op: str) -> None:
    """Operations' hook: a lifecycle command on an attached server is refused, with the way on."""
    ext = slot.external
    if ext is None or slot.state not in RUNNING:
        return
    if ext.pid is None:
        raise OpError(
            f"slot {slot.id} watches {ext.url}, a remote server sgltui did not start: it cannot "
            f"{op} it",
            fix=f"`sgltui detach --slot {slot.id}` lets it go",
        )
    raise OpError(
        f"slot {slot.id} watches {ext.url} (pid {ext.pid}), which sgltui did not start",
        fix=f"`sgltui adopt --slot {slot.id}` takes it over (then {op} works), "
        f"or `sgltui detach --slot {slot.id}` lets it go",
    )


async def fetch_info(url: str, api_key: str | None) -> dict[str, Any]:
    """The server's /server_info (bounded in time and size, coerced: agent/slot/info_fetch.py), or
    OpError with one line saying why not."""
    try:
        return await info_fetch.fetch(url, api_key)
    except info_fetch.FetchError as exc:
        raise _refusal(url, exc) from None


def fetch_info_blocking(url: str, api_key: str | None) -> dict[str, Any]:
    """fetch_info for a thread or the CLI."""
    try:
        return info_fetch.fetch_blocking(url, api_key)
    except info_fetch.FetchError as exc:
        raise _refusal(url, exc) from None


def _refusal(url: str, exc: info_fetch.FetchError) -> OpError:
    if exc.needs_key:
        return OpError(f"cannot attach {url}: it needs an API key; pass --api-key-file FILE")
    if exc.unanswered:
        return OpError(f"cannot attach {url}: {exc}; is a server listening there?")
    return OpError(f"cannot attach {url}: {exc}")


def split_url(url: str) -> tuple[str, str, int]:
    """(normalised url, host, port) or OpError."""
    parts = urlsplit(url.rstrip("/"))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OpError(f"not a server URL: {printable(url, 200)!r}", fix="give http://HOST:PORT")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:  # urllib: "Port out of range 0-65535", or not a number
        raise OpError(
            f"not a server URL: {printable(url, 200)!r}: its port is not a number 1-65535",
            fix="give http://HOST:PORT",
        ) from None
    host = parts.hostname
    shown = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{shown}:{port}", host, port


def is_local(host: str) -> bool:
    """True when `host` is this machine (loopback, or one of its own addresses)."""
    try:
        addrs = {ai[4][0] for ai in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    own = {"127.0.0.1", "::1"}
    for nic in psutil.net_if_addrs().values():
        own |= {
            a.address.split("%")[0] for a in nic if a.family in (socket.AF_INET, socket.AF_INET6)
        }
    return any(ipaddress.ip_address(a).is_loopback or a in own for a in addrs)


def listener(port: int) -> tuple[int | None, list[str]]:
    """(pid, cmdline) of this user's process listening on `port` (blocking)."""
    for found in discovery.scan(timeout=1.0):
        if found.port == port:
            try:
                return found.pid, psutil.Process(found.pid).cmdline()
            except psutil.Error:
                continue
    try:
        conns = psutil.net_connections(kind="inet")
    except (psutil.Error, OSError):
        return None, []
    for c in conns:
        if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid:
            try:
                return c.pid, psutil.Process(c.pid).cmdline()
            except psutil.Error:
                return c.pid, []
    return None, []


class Attacher:
    """The agent's attach / adopt / detach ops (Supervisor dispatches them here)."""

    def __init__(
        self,
        ctx: AgentContext,
        slot_host: SlotHost,
        provenance: ProvenanceKeeper,
        command_lock: asyncio.Lock,
    ) -> None:
        self.ctx = ctx
        self.slot_host = slot_host  # what a slot needs of the agent: attach makes slots
        self.provenance = provenance  # the GPU an attached server's provenance names
        # the lock of the agent's commands that are not a slot's lifecycle (agent stop among
        # them): attach and adopt take it only once the server has answered, never while asking
        self.command_lock = command_lock

    # ---- attach ---------------------------------------------------------------------------------

    async def op_attach(self, args: protocol.AttachArgs, client: str | None) -> protocol.Attached:
        # The server is asked before the agent's lock is taken (it may be slow or hostile: its
        # answer is bounded, and given up when the client leaves); the slot is made under it.
        url, host, port = split_url(args.url)
        local = await asyncio.to_thread(is_local, host)  # a name lookup: not on the loop
        self._refuse_taken(url, port, local)
        if args.api_key:
            self.ctx.add_secret(args.api_key)
        info = await fetch_info(url, args.api_key)
        pid, cmdline = (await asyncio.to_thread(listener, port)) if local else (None, [])
        tree = None
        if pid is not None:
            try:
                tree = procs.ProcTree.of(pid)
            except (psutil.Error, OSError):
                pid = None
        rec = provenance.record(info, await asyncio.to_thread(self.provenance.gpu))
        model = discovery.model_of(info, cmdline)
        ext = External(
            url=url,
            pid=pid,
            model=printable(model, 200) if model else None,
            version=printable(info["version"], 64) if info.get("version") else None,
            attached_at=time.time(),
            info=info,
            cmdline=cmdline,
            info_hash=rec["hash"],
            key_files=_key_files(args),
        )
        try:
            started = psutil.Process(pid).create_time() if pid else time.time()
        except psutil.Error:
            started = time.time()
        # made whole even if the client leaves now: a half-made slot is worse than a made one
        return await asyncio.shield(
            self._attach(args, client, ext, tree, host, port, local, started, rec["hash"])
        )

    def _refuse_taken(self, url: str, port: int, local: bool) -> None:
        for s in self.ctx.slots.values():
            if s.external is not None and s.external.url == url and s.state in RUNNING:
                raise OpError(f"{url} is already attached as slot {s.id}")
            if s.external is None and s.state in RUNNING and s.port == port and local:
                raise OpError(f"slot {s.id} runs the server on :{port}; sgltui launched it")

    async def _attach(
        self,
        args: protocol.AttachArgs,
        client: str | None,
        ext: External,
        tree: procs.ProcTree | None,
        host: str,
        port: int,
        local: bool,
        started: float,
        info_hash: str,
    ) -> protocol.Attached:
        async with self.command_lock:
            self._refuse_taken(ext.url, port, local)  # again: another client may have been first
            slot = self._pick(args.slot, port)
            launch_id = time.strftime("%Y%m%d-%H%M%S") + f"-attach-{port}"
            slot.describe_external(
                name=f"ext:{Path(ext.model or 'server').name}"[:40],
                host=host,
                port=port,
                api_key=args.api_key,
                launch_id=launch_id,
                client=client,
                command=ext.cmdline or [printable(ext.info.get("launch_command") or ext.url, 512)],
                command_hash=info_hash,
                tp_size=int(ext.info.get("tp_size") or 1),
                started_at=started,
            )
            pid = ext.pid
            note = (
                f"[sgltui] {ext.url} was started outside sgltui"
                + (f" (pid {pid})" if pid else " (remote)")
                + ": its log lines are not ours to read; they go where it was started"
            )
            # `sgltui logs` reads the launch's file: it holds that one line
            log_path = await asyncio.to_thread(_note_file, self.ctx, launch_id, note)
            slot.watch_external(ext, tree, self._watch(slot, ext), note, log_path)
            self.slot_host.push_log(slot.id, launch_id, [note])  # the log pane says so
            self.ctx.bus.publish(
                protocol.SlotAttached(
                    client=client,
                    slot=slot.id,
                    action="attached",
                    url=ext.url,
                    pid=pid,
                    model=ext.model,
                    version=ext.version,
                    info_hash=info_hash,
                )
            )
            self.ctx.bus.changed()
            return protocol.Attached(
                slot=slot.id,
                url=ext.url,
                pid=pid,
                model=ext.model,
                version=ext.version,
                info_hash=info_hash,
            )

    def _pick(self, name: str | None, port: int) -> Slot:
        slots = self.ctx.slots
        if name is None:
            # A first try: the agent's one slot, idle and not placed by host.toml, becomes it.
            if len(slots) == 1:
                only = next(iter(slots.values()))
                if only.state in IDLE and only.place is None and only.tree is None:
                    return only
            name = f"ext-{port}"
        if name in slots:
            slot = slots[name]
            if slot.state not in IDLE or slot.tree is not None:
                raise OpError(
                    f"slot {name} is {slot.state} with {slot.profile_name}",
                    fix="name another with --slot",
                )
            if slot.place is not None:
                raise OpError(
                    f"slot {name} is a host.toml slot (GPUs {slot.place.gpus})",
                    fix="name a new one with --slot",
                )
            return slot
        problem = name_problem(name)
        if problem:
            raise OpError(f"--slot {name!r}: {problem}")
        slot = slots[name] = Slot(name, self.slot_host)
        return slot

    async def _watch(self, slot: Slot, ext: External) -> None:
        """Until the server goes (its pid, or a remote's /health): then the slot says so."""
        misses = 0
        try:
            while slot.external is ext and slot.state in RUNNING:
                await asyncio.sleep(CHECK_S)
                if slot.external is not ext:
                    return
                if slot.tree is not None:
                    slot.note_live_pids(await asyncio.to_thread(slot.tree.refresh))
                    if not slot.tree.main_alive():
                        slot.external_gone(_gone(ext, f"pid {ext.pid} ended"))
                        return
                    continue
                ok = await _healthy(ext.url, slot.api_key)
                misses = 0 if ok else misses + 1
                if misses >= REMOTE_MISSES:
                    slot.external_gone(_gone(ext, f"{REMOTE_MISSES} health checks unanswered"))
                    return
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("slot %s: watching %s", slot.id, ext.url)

    # ---- detach ---------------------------------------------------------------------------------

    async def op_detach(self, args: protocol.SlotArgs, client: str | None) -> protocol.Attached:
        async with self.command_lock:
            slot = self._external(args)
            ext = slot.external
            slot.external_gone(None)
            self.ctx.bus.publish(
                protocol.SlotAttached(
                    client=client, slot=slot.id, action="detached", url=ext.url, pid=ext.pid
                )
            )
            return protocol.Attached(slot=slot.id, url=ext.url, pid=ext.pid, model=ext.model)

    def _external(self, args: protocol.SlotArgs) -> Slot:
        if args.slot is None:
            ext = [s for s in self.ctx.slots.values() if s.external is not None]
            if len(ext) == 1:
                return ext[0]
            if not ext:
                raise OpError(
                    "no slot watches an attached server",
                    fix="`sgltui status` lists them",
                    tui="the Slots pane lists them",
                )
            raise OpError(
                "several attached servers",
                fix=f"name one with --slot: {', '.join(s.id for s in ext)}",
                tui="select its slot in the Slots pane first",
            )
        slot = self.ctx.slot_for(args)
        if slot.external is None:
            raise OpError(f"slot {slot.id} does not watch an attached server")
        return slot

    # ---- adopt ----------------------------------------------------------------------------------

    async def op_adopt(self, args: protocol.AdoptArgs, client: str | None) -> protocol.Attached:
        slot = self._external(args)
        ext: External = slot.external
        if ext.pid is None or slot.tree is None:
            raise OpError(
                f"{ext.url} is not a process on this host",
                fix="it can be watched, not adopted",
            )
        if slot.state != READY:
            raise OpError(f"slot {slot.id} is {slot.state}", fix="adopt a ready server")
        name = args.name or f"ext-{slot.port}"
        problem = name_problem(name)
        if problem:
            raise OpError(f"profile name {name!r}: {problem}")
        # asked before the agent's lock is taken (agent/slot/info_fetch.py bounds the answer)
        info = await fetch_info(ext.url, slot.api_key)
        key_files = {**ext.key_files, **_key_files(args)}
        await asyncio.to_thread(_check_keys, ext.url, info, slot.api_key, key_files)
        return await asyncio.shield(self._adopt(slot, ext, name, info, key_files, client))

    async def _adopt(
        self,
        slot: Slot,
        ext: External,
        name: str,
        info: dict[str, Any],
        key_files: dict[str, str],
        client: str | None,
    ) -> protocol.Attached:
        async with self.command_lock:
            if slot.external is not ext or slot.state != READY or slot.tree is None:
                raise OpError(
                    f"slot {slot.id} changed while its server was asked", fix="adopt again"
                )
            kind = discovery.server_kind(ext.cmdline)
            python = ext.cmdline[0] if kind == "sglang" and ext.cmdline else None
            try:
                profile, _catalog = provenance.profile_from_info(
                    info,
                    name,
                    launcher="sim" if kind == "sim" else "sglang",
                    python=python,
                    cmdline=ext.cmdline,
                )
            except ProfileError as exc:
                raise OpError(f"cannot adopt {ext.url}: {exc}") from None
            # The keys stay where they are: the profile names their files (read at each launch),
            # never holds them.
            profile = dataclasses.replace(_without_secrets(profile), key_files=key_files)
            # where the agent finds it (a --profiles folder wins over the user's own)
            dirs = self.ctx.catalog.dirs
            folder = dirs[-1] if dirs else locations.config_dir() / "profiles"
            path = folder / f"{name}.toml"
            if path.exists():
                raise OpError(f"{path} exists", fix="name the profile with --name NAME")
            text = profile_to_toml(profile)
            await asyncio.to_thread(_write, path, text)
            try:  # its keys read from their files, as a restart will
                resolved = await asyncio.to_thread(self.ctx.get_profile, name, None)
            except ProfileError as exc:
                await asyncio.to_thread(path.unlink, True)
                raise OpError(f"cannot adopt {ext.url}: {exc}") from None
            record = {
                "profile": name,
                "state": READY,
                "tree": slot.tree.to_json(),
                "launch_id": slot.launch_id,
                "log_path": str(self.ctx.server_log_path(slot.launch_id or name)),
                "started_at": slot.started_at,
                "ready_at": slot.ready_at,
                "host": slot.server_host,
                "port": slot.port,
                "command": slot.command,
                "command_hash": resolved.command_hash(),
                "tp_size": slot.tp_size,
            }
            await slot.close()  # the attach watcher; the slot's own takes over
            slot.unwatch_for_adoption()
            if not slot.adopt(record, resolved):
                raise OpError(f"cannot adopt {ext.url}: pid {ext.pid} is gone")
            self.ctx.bus.publish(
                protocol.SlotAttached(
                    client=client,
                    slot=slot.id,
                    action="adopted",
                    url=ext.url,
                    pid=ext.pid,
                    model=ext.model,
                    version=ext.version,
                    profile=name,
                    info_hash=ext.info_hash,
                )
            )
            self.ctx.bus.changed()
            return protocol.Attached(
                slot=slot.id,
                url=ext.url,
                pid=ext.pid,
                model=ext.model,
                version=ext.version,
                profile=name,
                path=str(path),
                info_hash=ext.info_hash,
            )


def _key_files(args: protocol.AttachArgs | protocol.AdoptArgs) -> dict[str, str]:
    files = {"api-key": args.api_key_file, "admin-api-key": args.admin_api_key_file}
    return {flag: path for flag, path in files.items() if path}


# what /server_info calls the keys (SGLang's server_args, which the simulator copies)
_INFO_KEYS = {"api-key": "api_key", "admin-api-key": "admin_api_key"}


def _check_keys(
    url: str, info: dict[str, Any], api_key: str | None, key_files: dict[str, str]
) -> None:
    """Refuse to adopt a server whose keys its profile could not give back at a relaunch: one
    that runs with a key for which no file is named, or a file that holds another key."""
    for flag, field in _INFO_KEYS.items():
        known = api_key if flag == "api-key" else None
        had = known or (info.get(field) if isinstance(info.get(field), str) else None)
        path = key_files.get(flag)
        if had and not path:
            raise OpError(
                f"cannot adopt {url}: it runs with an {flag.replace('-', ' ')} and sgltui knows no "
                "file holding it, so a restart would bring it back answering anyone",
                fix=f"adopt with --{flag}-file FILE (the profile names the file, never the key)",
            )
        if path is None:
            continue
        try:
            key = read_key_file(path)
        except ValueError as exc:
            raise OpError(f"cannot adopt {url}: --{flag}-file: {exc}") from None
        if had and key != had:
            raise OpError(
                f"cannot adopt {url}: --{flag}-file {path} holds another key than the one the "
                "server runs with",
                fix="give the file that holds the server's key",
            )


def _gone(ext: External, why: str) -> dict[str, Any]:
    return {
        "kind": "exited",
        "summary": f"the attached server {ext.url} is gone ({why})",
        "fix": f"start it again, then `sgltui attach {ext.url}`",
        "lines": [],
    }


async def _healthy(url: str, api_key: str | None) -> bool:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    async def status() -> int:  # the status is all it needs: the body is not read
        async with httpx.AsyncClient(timeout=3.0, trust_env=False) as c:
            async with c.stream("GET", url + "/health", headers=headers) as r:
                return r.status_code

    try:  # the whole answer bounded in time
        return await asyncio.wait_for(status(), 3.0) < 500
    except (httpx.HTTPError, asyncio.TimeoutError):
        return False


def _without_secrets(profile: core_profiles.Profile) -> core_profiles.Profile:
    server = {k: v for k, v in profile.server.items() if k not in SECRET_FLAGS}
    return dataclasses.replace(profile, server=server)


def _note_file(ctx: AgentContext, launch_id: str, note: str) -> Path:
    path = ctx.server_log_path(launch_id)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(note + "\n")
    return path


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".toml.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
