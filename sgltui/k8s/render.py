"""`sgltui k8s render`: the manifests that run sgltui's agent on Kubernetes, one pod per GPU
node, as a pure function of host.toml (the placement), the profiles and the options.

The agent owns the node's GPUs inside one container (all of them: `nvidia.com/gpu` = GPUs per
node), so a warm swap's two SGLang processes share a GPU as they do on an SSH host; no second
pod, no device plugin tricks. What is rendered:
- a ConfigMap: host.toml (its pools listening on the pod's address) and each profile;
- a StatefulSet of agent pods (stable names: fleet.toml's selector lists them), with a memory
  limit covering every standby's pinned weights and the HiCache pools (k8s/memory.py: the
  manifest's comment says each term), a volume for the models (HF_HOME) and one for the
  sessions (the agent's state dir);
- a headless Service (the StatefulSet's pod names) and a ClusterIP Service of the fronts and
  gateways (the slots' stable endpoints);
- a LeaderWorkerSet only for a slot whose profile spans nodes (`nnodes` > 1): its leader runs
  the agent with that slot, its workers SGLang's other ranks.
Nothing here needs cluster-admin rights: `kubectl apply -f -` into a namespace one may write.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sgltui import __version__
from sgltui.core import placement as placement_mod
from sgltui.core.placement import Placement, PoolPlace, SlotPlace
from sgltui.core.profile_import import profile_to_toml
from sgltui.core.profiles import Profile
from sgltui.k8s import memory

DEFAULT_IMAGE = f"ghcr.io/sgltui/sgltui:{__version__}"
FRONT_PORT = 30080  # agent/pools/front.py FrontConfig's default: slot i's front is on +i
STATE_DIR, CONFIG_DIR, MODELS_DIR = "/var/lib/sgltui", "/etc/sgltui", "/models"
DIST_PORT = 20000  # a multi-node slot's torch.distributed rendezvous on its leader
LABEL = "app.kubernetes.io/name"


class RenderError(ValueError):
    """One line: what cannot be rendered, and what to pass instead."""


@dataclass(frozen=True)
class Options:
    image: str = DEFAULT_IMAGE
    namespace: str = "sgltui"
    name: str = "sgltui"
    gpus_per_node: int | None = None  # None: what host.toml places
    nodes: int = 1  # agent pods (GPU nodes)
    serving: tuple[tuple[str, str], ...] = ()  # (slot, profile) each slot serves at start
    standbys: tuple[tuple[str, str], ...] = ()  # (slot, profile) kept warm beside it
    models_size: str = "500Gi"
    sessions_size: str = "20Gi"
    storage_class: str | None = None
    memory_limit_gib: float | None = None  # None: what the profiles need
    gpu_memory_gb: float = 80.0  # each GPU's memory (a real GPU; sim profiles know theirs)
    weights_gb: tuple[tuple[str, float], ...] = ()  # profile -> GB, when not knowable here
    shm_gib: int = 16


Doc = tuple[list[str], dict[str, Any]]


def render(
    placement: Placement | None, profiles: Mapping[str, Profile], opts: Options
) -> list[Doc]:
    """The documents, each with its comment lines; a RenderError names what to fix."""
    place = _placement(placement, opts)
    serving = _by_slot(place, profiles, opts.serving, "--profile")
    standbys = _by_slot(place, profiles, opts.standbys, "--standby")
    for slot_name, names in list(serving.items()) + list(standbys.items()):
        slot = place.slot(slot_name)
        for name in names:
            p = profiles[name]
            if _nnodes(p) > 1:
                continue
            problem = placement_mod.tp_problem(name, p.server, slot)
            if problem:
                raise RenderError(problem)
    spanning = {s: ns[0] for s, ns in serving.items() if _nnodes(profiles[ns[0]]) > 1}
    for s in spanning:
        if standbys.get(s):
            raise RenderError(f"slot {s} spans nodes: it keeps no standby; drop --standby {s}=...")
    local = [s for s in place.slots if s.name not in spanning]
    used = sorted({n for ns in list(serving.values()) + list(standbys.values()) for n in ns})
    shown = {n: profiles[n] for n in used} if used else dict(profiles)
    docs: list[Doc] = [_configmap(place, local, shown, spanning, profiles, opts)]
    if local:
        limit, comment = _memory(local, serving, standbys, profiles, opts)
        docs.append(_headless(opts))
        docs.append(_statefulset(place, local, sorted(shown), limit, comment, opts))
        ports = _ports(place, local)
        if ports:
            docs.append(_service(opts.name, {LABEL: opts.name}, ports, opts))
    for slot_name, prof in spanning.items():
        docs += _leader_worker_set(place.slot(slot_name), profiles[prof], serving, profiles, opts)
    return docs


# ---- inputs -----------------------------------------------------------------------------------


def _placement(placement: Placement | None, opts: Options) -> Placement:
    if opts.nodes < 1:
        raise RenderError("--nodes must be 1 or more")
    if placement is None:
        n = opts.gpus_per_node or 1
        try:
            return placement_mod.layout(n)
        except placement_mod.PlacementError as exc:
            raise RenderError(str(exc)) from None
    have = placement.gpu_count()
    if opts.gpus_per_node is not None and opts.gpus_per_node != have:
        raise RenderError(
            f"{placement.where()} places {have} GPU{'s' if have != 1 else ''} but --gpus-per-node "
            f"is {opts.gpus_per_node}; make them agree (sgltui host init --gpus ... writes one)"
        )
    return placement


def _by_slot(
    place: Placement, profiles: Mapping[str, Profile], pairs: tuple[tuple[str, str], ...], flag: str
) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for slot, name in pairs:
        slot = slot or (place.slots[0].name if len(place.slots) == 1 else "")
        if not slot:
            names = ", ".join(place.slot_names())
            raise RenderError(f"{flag} {name}: name its slot, {flag} SLOT={name} (slots: {names})")
        try:
            place.slot(slot)
        except placement_mod.PlacementError as exc:
            raise RenderError(f"{flag} {slot}={name}: {exc}") from None
        if name not in profiles:
            raise RenderError(
                f"{flag} {slot}={name}: no profile {name!r}; see sgltui profiles list"
            )
        if flag == "--profile" and slot in out:
            raise RenderError(f"--profile names slot {slot} twice; a slot serves one profile")
        out.setdefault(slot, []).append(name)
    return out


def _nnodes(p: Profile) -> int:
    try:
        return int(p.server.get("nnodes") or 1)
    except (TypeError, ValueError):
        return 1


# ---- the documents ----------------------------------------------------------------------------


def _meta(name: str, opts: Options, **extra: Any) -> dict[str, Any]:
    labels = {LABEL: opts.name, "app.kubernetes.io/managed-by": "sgltui"}
    return {"name": name, "namespace": opts.namespace, "labels": labels, **extra}


def _pod_host_toml(place: Placement, slots: list[SlotPlace]) -> str:
    """host.toml inside the pod: the slots it runs, its pools listening on the pod's address
    (the Service reaches them; loopback would not be reachable)."""
    names = {s.name for s in slots}
    pools = tuple(
        dataclasses.replace(p, host="0.0.0.0") for p in place.pools if set(p.slots) <= names
    )
    return Placement(tuple(slots), pools).to_toml()


def _configmap(
    place: Placement,
    local: list[SlotPlace],
    shown: Mapping[str, Profile],
    spanning: Mapping[str, str],
    profiles: Mapping[str, Profile],
    opts: Options,
) -> Doc:
    data: dict[str, str] = {}
    if local:
        data["host.toml"] = _pod_host_toml(place, local)
    for name in sorted(shown):
        data[f"profile.{name}.toml"] = profile_to_toml(shown[name])
    for slot_name, prof in spanning.items():
        lws = _lws_name(opts, slot_name)
        data[f"host.{lws}.toml"] = _pod_host_toml(place, [place.slot(slot_name)])
        data[f"profile.{prof}.toml"] = profile_to_toml(_leader_profile(profiles[prof], lws, opts))
    comments = ["the profiles and host.toml the agent pods read (XDG_CONFIG_HOME/sgltui)"]
    return comments, {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(f"{opts.name}-config", opts),
        "data": data,
    }


def _memory(
    local: list[SlotPlace],
    serving: Mapping[str, list[str]],
    standbys: Mapping[str, list[str]],
    profiles: Mapping[str, Profile],
    opts: Options,
) -> tuple[int, list[str]]:
    names = [s.name for s in local]
    try:
        needed = memory.terms(
            [profiles[n] for s in names for n in serving.get(s, [])],
            [profiles[n] for s in names for n in standbys.get(s, [])],
            dict(opts.weights_gb),
            opts.gpu_memory_gb,
        )
        limit = memory.limit_gib(needed, opts.memory_limit_gib)
    except memory.MemoryError_ as exc:
        raise RenderError(str(exc)) from None
    return limit, memory.comment(needed, limit)


def _headless(opts: Options) -> Doc:
    return ["the agent pods' stable names (NAME-0, NAME-1, ...: fleet.toml's selector)"], {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(f"{opts.name}-pods", opts),
        "spec": {"clusterIP": "None", "selector": {LABEL: opts.name}},
    }


def _ports(place: Placement, slots: list[SlotPlace]) -> list[tuple[str, int]]:
    """(name, port) of each slot's front and each pool's endpoint (agent/pools/slot_fronts.py's rule)."""
    out: list[tuple[str, int]] = []
    names = {s.name for s in slots}
    for i, s in enumerate(place.slots):
        if s.name not in names:
            continue
        pool: PoolPlace | None = place.pool_of(s.name)
        if pool is None:
            out.append((f"front-{s.name}", FRONT_PORT + i))
        elif len(pool.slots) == 1:
            out.append((f"pool-{pool.name}", pool.port))
    for p in place.pools:
        if len(p.slots) > 1 and set(p.slots) <= names:
            out.append((f"pool-{p.name}", p.port))
    return [(n[:15].rstrip("-").lower().replace("_", "-"), port) for n, port in out]


def _service(name: str, selector: dict, ports: list[tuple[str, int]], opts: Options) -> Doc:
    comments = [
        "the slots' stable endpoints (fronts, and gateways of pools): inside the cluster only;",
        "they take no API key, so expose them with care (an Ingress with auth, a NetworkPolicy)",
    ]
    return comments, {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(name, opts),
        "spec": {
            "type": "ClusterIP",
            "selector": selector,
            "ports": [{"name": n, "port": p, "targetPort": p, "protocol": "TCP"} for n, p in ports],
        },
    }


def _volumes(opts: Options, host_file: str) -> tuple[list[dict], list[dict]]:
    """(volumes, mounts): the ConfigMap as XDG_CONFIG_HOME/sgltui, shared memory for NCCL."""
    cm = {"name": f"{opts.name}-config"}
    volumes = [
        {"name": "config", "configMap": cm},
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{opts.shm_gib}Gi"}},
    ]
    mounts = [
        {"name": "config", "mountPath": f"{CONFIG_DIR}/sgltui/host.toml", "subPath": host_file},
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "models", "mountPath": MODELS_DIR},
    ]
    return volumes, mounts


def _agent_container(
    opts: Options, gpus: int, limit_gib: int, mounts: list[dict], ports: list
) -> dict:
    env = {
        "SGLTUI_STATE_DIR": STATE_DIR,
        "XDG_CONFIG_HOME": CONFIG_DIR,
        "HF_HOME": MODELS_DIR,
        "SGLTUI_FRONT_HOST": "0.0.0.0",  # the Service reaches the fronts on the pod's address
    }
    return {
        "name": "agent",
        "image": opts.image,
        # the agent in the foreground, no keeper of its own: the kubelet restarts it
        "command": ["python", "-m", "sgltui.agent", "--state-dir", STATE_DIR, "--foreground"]
        + ["--profiles", f"{CONFIG_DIR}/profiles"],
        "env": [{"name": k, "value": v} for k, v in env.items()],
        "ports": [{"name": n, "containerPort": p} for n, p in ports],
        "resources": {
            "limits": {"nvidia.com/gpu": gpus, "memory": f"{limit_gib}Gi"},
            "requests": {"memory": f"{limit_gib}Gi"},
        },
        "volumeMounts": mounts,
    }


def _profile_mounts(names: list[str]) -> list[dict]:
    return [
        {
            "name": "config",
            "mountPath": f"{CONFIG_DIR}/profiles/{n}.toml",
            "subPath": f"profile.{n}.toml",
        }
        for n in names
    ]


def _claims(opts: Options, with_sessions: bool) -> list[dict]:
    def claim(name: str, size: str) -> dict:
        spec: dict[str, Any] = {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": size}},
        }
        if opts.storage_class:
            spec["storageClassName"] = opts.storage_class
        return {"metadata": {"name": name}, "spec": spec}

    out = [claim("models", opts.models_size)]
    return out + [claim("sessions", opts.sessions_size)] if with_sessions else out


def _statefulset(
    place: Placement,
    local: list[SlotPlace],
    shown: list[str],
    limit: int,
    comment: list[str],
    opts: Options,
) -> Doc:
    volumes, mounts = _volumes(opts, "host.toml")
    mounts += [{"name": "sessions", "mountPath": STATE_DIR}] + _profile_mounts(shown)
    gpus = sum(len(s.gpus) for s in local)
    container = _agent_container(opts, gpus, limit, mounts, _ports(place, local))
    pod = {
        "metadata": {"labels": {LABEL: opts.name}},
        "spec": {
            "containers": [container],
            "volumes": volumes,
            "terminationGracePeriodSeconds": 60,  # the agent drains its fronts and jobs
        },
    }
    comments = [
        f"one agent pod per GPU node: {gpus} GPU{'s' if gpus != 1 else ''} each, "
        f"{opts.nodes} node{'s' if opts.nodes != 1 else ''}",
        *comment,
    ]
    return comments, {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _meta(opts.name, opts),
        "spec": {
            "serviceName": f"{opts.name}-pods",
            "replicas": opts.nodes,
            "selector": {"matchLabels": {LABEL: opts.name}},
            "template": pod,
            "volumeClaimTemplates": _claims(opts, with_sessions=True),
        },
    }


# ---- a slot that spans nodes ------------------------------------------------------------------


def _lws_name(opts: Options, slot: str) -> str:
    return f"{opts.name}-{slot}".lower().replace("_", "-")


def _leader_address(lws: str, opts: Options) -> str:
    """The leader's stable DNS name (LWS: pod NAME-0 under the headless Service NAME)."""
    return f"{lws}-0.{lws}.{opts.namespace}.svc:{DIST_PORT}"


def _leader_profile(p: Profile, lws: str, opts: Options) -> Profile:
    server = {**p.server, "dist-init-addr": _leader_address(lws, opts), "node-rank": 0}
    return dataclasses.replace(p, server=server, extends=None)


def _leader_worker_set(
    slot: SlotPlace,
    p: Profile,
    serving: Mapping[str, list[str]],
    profiles: Mapping[str, Profile],
    opts: Options,
) -> list[Doc]:
    lws = _lws_name(opts, slot.name)
    nnodes = _nnodes(p)
    per_node = len(slot.gpus)
    if placement_mod.gpus_needed(p.server) != per_node * nnodes:
        raise RenderError(
            f"profile {p.name!r} spans {nnodes} nodes and needs "
            f"{placement_mod.gpus_needed(p.server)} GPUs, but slot {slot.name} has {per_node} per "
            f"node ({per_node * nnodes} in all); set tp-size = {per_node * nnodes}"
        )
    try:
        needed = memory.terms([p], [], dict(opts.weights_gb), opts.gpu_memory_gb, nnodes)
        limit = memory.limit_gib(needed, opts.memory_limit_gib)
    except memory.MemoryError_ as exc:
        raise RenderError(str(exc)) from None
    volumes, mounts = _volumes(opts, f"host.{lws}.toml")
    leader_mounts = [*mounts, {"name": "sessions", "mountPath": STATE_DIR}]
    leader_mounts += _profile_mounts([p.name])
    ports = [("front", FRONT_PORT)]
    leader = _agent_container(opts, per_node, limit, leader_mounts, ports)
    worker_argv = ["python", "-m", "sglang.launch_server", *p.flag_argv()]
    worker_argv += ["--dist-init-addr", _leader_address(lws, opts), "--nnodes", str(nnodes)]
    worker_argv += ["--node-rank", "$(LWS_WORKER_INDEX)"]
    worker = {
        "name": "sglang",
        "image": opts.image,
        "command": worker_argv,
        "env": [{"name": "HF_HOME", "value": MODELS_DIR}],
        "resources": {
            "limits": {"nvidia.com/gpu": per_node, "memory": f"{limit}Gi"},
            "requests": {"memory": f"{limit}Gi"},
        },
        "volumeMounts": mounts[1:],  # shared memory and the models: no agent, no config
    }
    models = {"name": "models", "emptyDir": {}}  # LWS has no claim templates: a cache per pod
    sessions = {"name": "sessions", "emptyDir": {}}
    comments = [
        f"slot {slot.name} serves {p.name} across {nnodes} nodes ({per_node} GPUs each): the",
        "leader runs the agent with this slot, the workers SGLang's other node ranks",
        *memory.comment(needed, limit),
    ]
    doc = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": _meta(lws, opts),
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": nnodes,
                "leaderTemplate": {
                    "metadata": {"labels": {LABEL: lws, "role": "leader"}},
                    "spec": {"containers": [leader], "volumes": [*volumes, models, sessions]},
                },
                "workerTemplate": {
                    "metadata": {"labels": {LABEL: lws, "role": "worker"}},
                    "spec": {"containers": [worker], "volumes": [*volumes[1:], models]},
                },
            },
        },
    }
    selector = {LABEL: lws, "role": "leader"}
    return [(comments, doc), _service(lws + "-front", selector, ports, opts)]
