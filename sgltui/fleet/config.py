"""fleet.toml (~/.config/sgltui/fleet.toml): the hosts one sgltui drives.

    [ssh]                       # optional: the user's own ssh, and options for every host
    command = "ssh"
    options = ["-F", "/home/alice/.ssh/fleet_config"]
    multiplex = true            # one kept connection per host (fleet/mux.py; false: none)

    [[host]]
    name = "gpu1"
    ssh = "alice@gpu1"          # any ssh destination; options come from ~/.ssh/config
    sgltui = "/opt/venvs/sgl/bin/sgltui"   # the remote command, when not on the remote PATH
    address = "10.0.0.11"       # where other hosts reach its servers (cross-host pools)
    state_dir = "..."           # the remote agent's state dir, when not the default

    [[host]]                    # a Kubernetes pod (docs/kubernetes.md): kubectl exec -i
    name = "k1"
    kind = "kubernetes"
    context = "prod"            # kubectl's context (default: its current one)
    namespace = "ml"            # default: the context's namespace
    pod = "sgltui-0"            # one pod, or:
    selector = "app=sgltui"     # every pod the label selector lists, each a host (k1.POD)
    container = "agent"         # when the pod has several
    kubectl = "/usr/local/bin/kubectl"     # default: kubectl on PATH

    [[pool]]                    # a pool across hosts: one gateway, servers on several hosts
    name = "xp"
    slots = ["gpu1/a", "gpu2/a"]
    gateway = "gpu1"            # the host whose agent runs the gateway (smg)
    port = 30090                # the pool's endpoint on that host
    host = "127.0.0.1"          # where that endpoint listens (loopback unless told)
    policy = "power_of_two"     # the gateway's routing policy

Every bad value is one FleetConfigError line naming the file, the key and the fix.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from sgltui.core import locations

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
HOST_KEYS = {"name", "ssh", "sgltui", "address", "state_dir"}
KUBE_KEYS = {"kind", "context", "namespace", "pod", "selector", "container", "kubectl"}
KINDS = ("ssh", "kubernetes")
SSH_KEYS = {"command", "options", "multiplex"}
POOL_KEYS = {"name", "slots", "gateway", "port", "host", "policy"}
POOL_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,32}$")  # the agent's pool names (protocol.SlotId)
DEFAULT_POOL_PORT = 30090


class FleetConfigError(Exception):
    """One line: which file, which key, what to write instead."""


class _Named(Protocol):
    @property
    def name(self) -> str: ...


_N = TypeVar("_N", bound=_Named)


def _named(items: tuple[_N, ...], name: str, kind: str, path: Path) -> _N:
    """The [[kind]] entry called `name`; an unknown name is one line listing the known ones."""
    for item in items:
        if item.name == name:
            return item
    known = ", ".join(i.name for i in items) or "none"
    raise FleetConfigError(
        f"no {kind} named {name!r} in {path} ({kind}s: {known}); add a [[{kind}]] for it"
    )


@dataclass(frozen=True)
class Host:
    name: str
    ssh: str  # the ssh destination ([user@]host[:port] is ssh's own syntax: user@host)
    sgltui: str = "sgltui"
    address: str | None = None
    state_dir: str | None = None
    kind: str = "ssh"  # or "kubernetes": reached by `kubectl exec -i` (fleet/kube.py)
    context: str | None = None
    namespace: str | None = None
    pod: str | None = None
    selector: str | None = None  # a selector host not yet listed (or listing failed)
    container: str | None = None
    kubectl: str = "kubectl"
    pods_error: str | None = None  # why the selector lists no pod: what its link says

    @property
    def kube(self) -> bool:
        return self.kind == "kubernetes"

    @property
    def target(self) -> str:
        """Where it is, for a person: the ssh destination, or the pod (its namespace/context)."""
        if not self.kube:
            return self.ssh
        ns = self.namespace or "default namespace"
        what = f"pod {self.pod}" if self.pod else f"pods {self.selector}"
        return f"{what} in {ns}" + (f", context {self.context}" if self.context else "")

    def remote_argv(self, *words: str) -> list[str]:
        """The remote sgltui command with `words` (global options first)."""
        argv = [self.sgltui]
        if self.state_dir:
            argv += ["--state-dir", self.state_dir]
        return argv + list(words)


@dataclass(frozen=True)
class Pool:
    """A pool that spans hosts: `slots` are host/slot, its gateway runs on host `gateway`."""

    name: str
    slots: tuple[tuple[str, str], ...]  # (host, slot)
    gateway: str
    port: int = DEFAULT_POOL_PORT
    host: str = "127.0.0.1"
    policy: str | None = None


@dataclass(frozen=True)
class Fleet:
    path: Path
    hosts: tuple[Host, ...]
    ssh_command: str = "ssh"
    ssh_options: tuple[str, ...] = field(default_factory=tuple)
    ssh_multiplex: bool = True  # fleet/mux.py: ControlMaster, unless the user's config has its own
    pools: tuple[Pool, ...] = ()

    def pool(self, name: str) -> Pool:
        return _named(self.pools, name, "pool", self.path)

    def address(self, host: str) -> str:
        """Where the servers of `host` listen for a pool's gateway: its `address`, else
        loopback (allowed only on the gateway's own host: parse() checked)."""
        return self.host(host).address or "127.0.0.1"

    def host(self, name: str) -> Host:
        return _named(self.hosts, name, "host", self.path)


def default_path() -> Path:
    env = os.environ.get("SGLTUI_FLEET")
    return Path(env).expanduser() if env else locations.config_dir() / "fleet.toml"


Lister = Callable[[Host], list[Host]]  # a selector host -> a host per pod (fleet/kube.py)


def load(path: Path | None = None, pods: Lister | None = None) -> Fleet:
    """The fleet in `path`; `pods` lists each selector host's pods (None: left unlisted)."""
    path = path or default_path()
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FleetConfigError(
            f"no fleet file at {path}: write one with a [[host]] name = ..., ssh = ... per host"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise FleetConfigError(f"{path}: {exc}; fix the TOML syntax there") from None
    except RecursionError:
        raise FleetConfigError(f"{path}: values nested too deeply to read; flatten them") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FleetConfigError(f"{path}: cannot read it ({exc})") from None
    return parse(raw, path, pods)


def parse(raw: dict[str, Any], path: Path, pods: Lister | None = None) -> Fleet:
    unknown = set(raw) - {"host", "ssh", "pool"}
    if unknown:
        raise FleetConfigError(
            f"{path}: unknown table or key {sorted(unknown)[0]!r}; "
            f"fleet.toml holds [ssh] and [[host]] entries"
        )
    ssh = raw.get("ssh", {})
    if not isinstance(ssh, dict):
        raise FleetConfigError(f'{path}: ssh must be a table: [ssh] command = "ssh"')
    bad = set(ssh) - SSH_KEYS
    if bad:
        raise FleetConfigError(
            f"{path}: [ssh] has no key {sorted(bad)[0]!r}; use command, options, multiplex"
        )
    command = ssh.get("command", "ssh")
    options = ssh.get("options", [])
    if not isinstance(command, str) or not command:
        raise FleetConfigError(f'{path}: [ssh] command must be a string: command = "ssh"')
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        raise FleetConfigError(
            f'{path}: [ssh] options must be a list of strings: options = ["-F", "FILE"]'
        )
    multiplex = ssh.get("multiplex", True)
    if not isinstance(multiplex, bool):
        raise FleetConfigError(
            f"{path}: [ssh] multiplex must be true or false (false: no shared ssh connection)"
        )
    hosts_raw = raw.get("host", [])
    if not isinstance(hosts_raw, list) or not hosts_raw:
        raise FleetConfigError(
            f'{path}: no hosts; add one: [[host]] name = "gpu1", ssh = "you@gpu1"'
        )
    hosts = [_host(h, i, path) for i, h in enumerate(hosts_raw, 1)]
    if pods is not None and any(h.selector for h in hosts):
        # each selector listed at the same time: a dead cluster costs one listing's timeout
        with ThreadPoolExecutor(max_workers=8) as pool:
            listed = list(pool.map(lambda h: pods(h) if h.selector else [h], hosts))
        hosts = [h for group in listed for h in group]
    names = [h.name for h in hosts]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise FleetConfigError(f"{path}: two hosts are named {dup!r}; give each a name of its own")
    fleet = Fleet(
        path=path,
        hosts=tuple(hosts),
        ssh_command=command,
        ssh_options=tuple(options),
        ssh_multiplex=multiplex,
    )
    pools_raw = raw.get("pool", [])
    if not isinstance(pools_raw, list):
        raise FleetConfigError(f'{path}: write pools as [[pool]] name = "xp", slots = [...]')
    pools = [_pool(p, i, fleet) for i, p in enumerate(pools_raw, 1)]
    seen: dict[tuple[str, str], str] = {}
    for p in pools:
        if sum(q.name == p.name for q in pools) > 1:
            raise FleetConfigError(f"{path}: two pools are named {p.name!r}; rename one")
        for member in p.slots:
            if member in seen:
                raise FleetConfigError(
                    f"{path}: slot {'/'.join(member)} is in pools {seen[member]} and {p.name}; "
                    "a slot serves one pool"
                )
            seen[member] = p.name
    return dataclasses.replace(fleet, pools=tuple(pools))


def _table(entry: Any, where: str, keys: set[str], example: str) -> dict[str, Any]:
    """A [[pool]] or [[host]] entry as a table of known keys; else one line naming the entry and
    what to write."""
    if not isinstance(entry, dict):
        raise FleetConfigError(f"{where} must be a table: {example}")
    bad = set(entry) - keys
    if bad:
        raise FleetConfigError(
            f"{where} has no key {sorted(bad)[0]!r}; keys are {', '.join(sorted(keys))}"
        )
    return entry


def _pool(p: Any, i: int, fleet: Fleet) -> Pool:
    path = fleet.path
    where = f"{path}: pool #{i}"
    p = _table(p, where, POOL_KEYS, "[[pool]] name = ..., slots = [...]")
    name = p.get("name")
    if not isinstance(name, str) or not POOL_NAME_RE.match(name):
        raise FleetConfigError(
            f'{where} needs name = "xp" (letters, digits, "_" or "-", at most 32)'
        )
    where = f"{path}: pool {name!r}"
    slots = p.get("slots")
    if not isinstance(slots, list) or len(slots) < 2 or not all(isinstance(x, str) for x in slots):
        raise FleetConfigError(
            f'{where}: slots must list two or more host/slot: slots = ["gpu1/a", "gpu2/a"]'
        )
    members: list[tuple[str, str]] = []
    for x in slots:
        host, slot = split_address(x)
        if host is None or not slot:
            raise FleetConfigError(f"{where}: slot {x!r} names no host; write HOST/SLOT (gpu1/a)")
        _member(fleet, host, where)  # an unknown host: one line naming the hosts
        if (host, slot) in members:
            raise FleetConfigError(f"{where}: slot {x} is listed twice")
        members.append((host, slot))
    gateway = p.get("gateway")
    if not isinstance(gateway, str) or not gateway:
        raise FleetConfigError(
            f'{where}: gateway = "HOST" names the host that runs its gateway (smg)'
        )
    _member(fleet, gateway, where)
    for host, _ in members:
        if host != gateway and not fleet.host(host).address:
            raise FleetConfigError(
                f'{where}: host {host!r} has no address; add address = "..." to its [[host]] '
                f"(where {gateway} reaches its servers; never 0.0.0.0 unless you mean it)"
            )
    port = p.get("port", DEFAULT_POOL_PORT)
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        raise FleetConfigError(f"{where}: port must be a number 1-65535 (the pool's endpoint)")
    host_addr = p.get("host", "127.0.0.1")
    policy = p.get("policy")
    for key, v in (("host", host_addr), ("policy", policy)):
        if v is not None and (not isinstance(v, str) or not v):
            raise FleetConfigError(f"{where}: {key} must be a non-empty string")
    return Pool(name, tuple(members), gateway, port, host_addr, policy)


def _member(fleet: Fleet, name: str, where: str) -> Host:
    """A pool's host; a pod of a selector whose listing failed says why it is missing."""
    try:
        return fleet.host(name)
    except FleetConfigError:
        sel = next(
            (
                h
                for h in fleet.hosts
                if h.selector and h.pods_error and name.startswith(h.name + ".")
            ),
            None,
        )
        if sel is None:
            raise
        raise FleetConfigError(
            f"{where}: host {name} is a pod of selector host {sel.name}, which listed none "
            f"({sel.pods_error})"
        ) from None


def _host(h: Any, i: int, path: Path) -> Host:
    where = f"{path}: host #{i}"
    h = _table(h, where, HOST_KEYS | KUBE_KEYS, "[[host]] name = ..., ssh = ...")
    kind = h.get("kind", "ssh")
    if kind not in KINDS:
        raise FleetConfigError(f'{where}: kind must be "ssh" or "kubernetes", not {kind!r}')
    if kind == "kubernetes":
        return _kube_host(h, where)
    extra = sorted(set(h) & KUBE_KEYS - {"kind"})
    if extra:
        raise FleetConfigError(
            f'{where}: {extra[0]} is for kind = "kubernetes" hosts; add that or remove {extra[0]}'
        )
    for key in ("name", "ssh"):
        if not isinstance(h.get(key), str) or not h[key]:
            raise FleetConfigError(f'{where} needs {key} = "..." (a string)')
    name, dest = h["name"], h["ssh"]
    where = f"{path}: host {name!r}"
    if not NAME_RE.match(name):
        raise FleetConfigError(
            f"{where}: a name is letters, digits, '.', '_' or '-' (it prefixes slots: {name}/a)"
        )
    if dest.startswith("-"):  # ssh would read it as an option
        raise FleetConfigError(f"{where}: ssh = {dest!r} starts with '-'; write a destination")
    for key in ("sgltui", "address", "state_dir"):
        if key in h and (not isinstance(h[key], str) or not h[key]):
            raise FleetConfigError(f"{where}: {key} must be a non-empty string")
    return Host(
        name=name,
        ssh=dest,
        sgltui=h.get("sgltui", "sgltui"),
        address=h.get("address"),
        state_dir=h.get("state_dir"),
    )


def _kube_host(h: dict[str, Any], where: str) -> Host:
    """A kind = "kubernetes" host: a pod, or a label selector that lists pods."""
    if not isinstance(h.get("name"), str) or not NAME_RE.match(h["name"]):
        raise FleetConfigError(f'{where} needs name = "k1" (letters, digits, ".", "_" or "-")')
    where = f"{where.rsplit(':', 1)[0]}: host {h['name']!r}"
    if "ssh" in h:
        raise FleetConfigError(f"{where}: a kubernetes host has no ssh = ...; remove it")
    for key in KUBE_KEYS - {"kind"} | {"sgltui", "address", "state_dir"}:
        if key in h and (not isinstance(h[key], str) or not h[key] or h[key].startswith("-")):
            raise FleetConfigError(f"{where}: {key} must be a non-empty string (not an option)")
    if ("pod" in h) == ("selector" in h):
        raise FleetConfigError(
            f'{where}: give pod = "sgltui-0" or selector = "app=sgltui" (one of the two)'
        )
    if "selector" in h and "address" in h:
        raise FleetConfigError(
            f"{where}: address is each pod's own IP for a selector; remove address"
        )
    return Host(
        name=h["name"],
        ssh="",
        kind="kubernetes",
        sgltui=h.get("sgltui", "sgltui"),
        address=h.get("address"),
        state_dir=h.get("state_dir"),
        context=h.get("context"),
        namespace=h.get("namespace"),
        pod=h.get("pod"),
        selector=h.get("selector"),
        container=h.get("container"),
        kubectl=h.get("kubectl", "kubectl"),
    )


def split_address(target: str) -> tuple[str | None, str]:
    """`host/slot` -> (host, slot); a bare `slot` -> (None, slot)."""
    host, sep, slot = target.partition("/")
    return (host, slot) if sep else (None, target)
