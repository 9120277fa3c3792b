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
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import httpx
import psutil

from sgltui import protocol
from sgltui.agent import discovery, procs
from sgltui.agent.errors import OpError
from sgltui.agent.lifecycle import IDLE, READY, RUNNING
from sgltui.agent.slot import Slot, SlotHost
from sgltui.core import locations, provenance
from sgltui.core.launch_secrets import SECRET_FLAGS
from sgltui.core.profile_import import profile_to_toml
from sgltui.core.profiles import ProfileError, name_problem

if TYPE_CHECKING:
    from sgltui.agent.provenance import ProvenanceKeeper
    from sgltui.agent.resolved import Resolved


class AttachHost(SlotHost, Protocol):
    """What attach / adopt / detach need of the agent (the Supervisor is one): what a slot
    needs (it makes slots), and its slots, profiles and provenance."""

    slots: dict[str, Slot]
    provenance: ProvenanceKeeper
    profiles_dirs: list[Path]

    def slot_for(self, args: protocol.Args) -> Slot: ...

    def get_profile(self, name: str | None, args: protocol.Args | None) -> Resolved: ...


log = logging.getLogger(__name__)
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
            f"{op} it; `sgltui detach --slot {slot.id}` lets it go"
        )
    raise OpError(
        f"slot {slot.id} watches {ext.url} (pid {ext.pid}), which sgltui did not start: "
        f"`sgltui adopt --slot {slot.id}` takes it over (then {op} works), "
        f"or `sgltui detach --slot {slot.id}` lets it go"
    )


def fetch_info(url: str, api_key: str | None, timeout: float = 10.0) -> dict[str, Any]:
    """The server's /server_info, or OpError with one line saying why not (blocking)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        r = httpx.get(url + "/server_info", headers=headers, timeout=timeout)
    except httpx.HTTPError as exc:
        raise OpError(
            f"cannot attach {url}: no answer ({type(exc).__name__}); is a server listening there?"
        ) from None
    if r.status_code in (401, 403):
        raise OpError(f"cannot attach {url}: it needs an API key; pass --api-key-file FILE")
    if r.status_code != 200:
        raise OpError(f"cannot attach {url}: /server_info answered {r.status_code}")
    try:
        info = r.json()
    except ValueError:
        info = None
    if not isinstance(info, dict):
        raise OpError(f"cannot attach {url}: /server_info is not a JSON object (not SGLang?)")
    return info


def split_url(url: str) -> tuple[str, str, int]:
    """(normalised url, host, port) or OpError."""
    parts = urlsplit(url.rstrip("/"))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OpError(f"not a server URL: {url!r}; give http://HOST:PORT")
    port = parts.port or (443 if parts.scheme == "https" else 80)
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

    OPS = ("attach", "adopt", "detach")

    def __init__(self, sup: AttachHost) -> None:
        self.sup = sup

    # ---- attach ---------------------------------------------------------------------------------

    async def op_attach(self, args: protocol.AttachArgs, client: str | None) -> protocol.Attached:
        url, host, port = split_url(args.url)
        local = await asyncio.to_thread(is_local, host)  # a name lookup: not on the loop
        for s in self.sup.slots.values():
            if s.external is not None and s.external.url == url and s.state in RUNNING:
                raise OpError(f"{url} is already attached as slot {s.id}")
            if s.external is None and s.state in RUNNING and s.port == port and local:
                raise OpError(f"slot {s.id} runs the server on :{port}; sgltui launched it")
        if args.api_key:
            self.sup.add_secret(args.api_key)
        info = await asyncio.to_thread(fetch_info, url, args.api_key)
        pid, cmdline = (await asyncio.to_thread(listener, port)) if local else (None, [])
        slot = self._pick(args.slot, port)
        tree = None
        if pid is not None:
            try:
                tree = procs.ProcTree.of(pid)
            except (psutil.Error, OSError):
                pid = None
        rec = provenance.record(info, await asyncio.to_thread(self.sup.provenance.gpu))
        ext = External(
            url=url,
            pid=pid,
            model=discovery.model_of(info, cmdline),
            version=info.get("version"),
            attached_at=time.time(),
            info=info,
            cmdline=cmdline,
            info_hash=rec["hash"],
        )
        try:
            started = psutil.Process(pid).create_time() if pid else time.time()
        except psutil.Error:
            started = time.time()
        launch_id = time.strftime("%Y%m%d-%H%M%S") + f"-attach-{port}"
        slot.describe_external(
            name=f"ext:{Path(ext.model or 'server').name}"[:40],
            host=host,
            port=port,
            api_key=args.api_key,
            launch_id=launch_id,
            client=client,
            command=cmdline or [str(info.get("launch_command") or url)],
            command_hash=rec["hash"],
            tp_size=int(info.get("tp_size") or 1),
            started_at=started,
        )
        note = (
            f"[sgltui] {url} was started outside sgltui"
            + (f" (pid {pid})" if pid else " (remote)")
            + ": its log lines are not ours to read; they go where it was started"
        )
        # `sgltui logs` reads the launch's file: it holds that one line
        log_path = await asyncio.to_thread(_note_file, self.sup, launch_id, note)
        slot.watch_external(ext, tree, self._watch(slot, ext), note, log_path)
        self.sup.push_log(slot.id, launch_id, [note])  # the log pane says so
        self.sup.bus.publish(
            protocol.SlotAttached(
                client=client,
                slot=slot.id,
                action="attached",
                url=url,
                pid=pid,
                model=ext.model,
                version=ext.version,
                info_hash=rec["hash"],
            )
        )
        self.sup.bus.changed()
        return protocol.Attached(
            slot=slot.id,
            url=url,
            pid=pid,
            model=ext.model,
            version=ext.version,
            info_hash=rec["hash"],
        )

    def _pick(self, name: str | None, port: int) -> Slot:
        slots = self.sup.slots
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
                    f"slot {name} is {slot.state} with {slot.profile_name}; name another with --slot"
                )
            if slot.place is not None:
                raise OpError(
                    f"slot {name} is a host.toml slot (GPUs {slot.place.gpus}); name a new one with --slot"
                )
            return slot
        problem = name_problem(name)
        if problem:
            raise OpError(f"--slot {name!r}: {problem}")
        slot = slots[name] = Slot(name, self.sup)
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
        slot = self._external(args)
        ext = slot.external
        slot.external_gone(None)
        self.sup.bus.publish(
            protocol.SlotAttached(
                client=client, slot=slot.id, action="detached", url=ext.url, pid=ext.pid
            )
        )
        return protocol.Attached(slot=slot.id, url=ext.url, pid=ext.pid, model=ext.model)

    def _external(self, args: protocol.SlotArgs) -> Slot:
        if args.slot is None:
            ext = [s for s in self.sup.slots.values() if s.external is not None]
            if len(ext) == 1:
                return ext[0]
            if not ext:
                raise OpError("no slot watches an attached server; `sgltui status` lists them")
            raise OpError(
                f"several attached servers; name one with --slot: {', '.join(s.id for s in ext)}"
            )
        slot = self.sup.slot_for(args)
        if slot.external is None:
            raise OpError(f"slot {slot.id} does not watch an attached server")
        return slot

    # ---- adopt ----------------------------------------------------------------------------------

    async def op_adopt(self, args: protocol.AdoptArgs, client: str | None) -> protocol.Attached:
        slot = self._external(args)
        ext: External = slot.external
        if ext.pid is None or slot.tree is None:
            raise OpError(
                f"{ext.url} is not a process on this host: it can be watched, not adopted"
            )
        if slot.state != READY:
            raise OpError(f"slot {slot.id} is {slot.state}; adopt a ready server")
        name = args.name or f"ext-{slot.port}"
        problem = name_problem(name)
        if problem:
            raise OpError(f"profile name {name!r}: {problem}")
        info = await asyncio.to_thread(fetch_info, ext.url, slot.api_key)
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
        if slot.api_key:  # the key is kept the way sgltui keeps keys (never in the file)
            profile.server["api-key"] = slot.api_key
        # where the agent finds it (a --profiles folder wins over the user's own)
        dirs = self.sup.profiles_dirs
        folder = dirs[-1] if dirs else locations.config_dir() / "profiles"
        path = folder / f"{name}.toml"
        if path.exists():
            raise OpError(f"{path} exists; name the profile with --name NAME")
        text = profile_to_toml(_without_secrets(profile))
        await asyncio.to_thread(_write, path, text)
        resolved = await asyncio.to_thread(self.sup.get_profile, name, None)
        if slot.api_key:
            resolved = _with_key(resolved, slot.api_key)
        record = {
            "profile": name,
            "state": READY,
            "tree": slot.tree.to_json(),
            "launch_id": slot.launch_id,
            "log_path": str(self.sup.server_log_path(slot.launch_id or name)),
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
        self.sup.bus.publish(
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
        self.sup.bus.changed()
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


def _gone(ext: External, why: str) -> dict[str, Any]:
    return {
        "kind": "exited",
        "summary": f"the attached server {ext.url} is gone ({why})",
        "fix": f"start it again, then `sgltui attach {ext.url}`",
        "lines": [],
    }


async def _healthy(url: str, api_key: str | None) -> bool:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        async with httpx.AsyncClient(timeout=3.0) as client:
            r = await client.get(url + "/health", headers=headers)
        return r.status_code < 500
    except httpx.HTTPError:
        return False


def _without_secrets(profile: Any) -> Any:
    server = {k: v for k, v in profile.server.items() if k not in SECRET_FLAGS}
    return dataclasses.replace(profile, server=server)


def _with_key(resolved: Any, key: str) -> Any:
    """The adopted profile as it runs: with the server's key, which the file leaves out."""
    server = dict(resolved.profile.server, **{"api-key": key})
    return dataclasses.replace(
        resolved, profile=dataclasses.replace(resolved.profile, server=server)
    )


def _note_file(sup: AttachHost, launch_id: str, note: str) -> Path:
    path = sup.server_log_path(launch_id)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(note + "\n")
    return path


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".toml.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
