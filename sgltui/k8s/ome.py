"""`sgltui profiles export --ome PROFILE`: a measured profile as an OME ClusterServingRuntime and
an InferenceService (ome.io/v1beta1, the SGLang project's operator), for teams that hand a
winner to production.

The runtime runs SGLang with the profile's own flags (the model comes from OME's
ClusterBaseModel, `$(MODEL_PATH)`; host and port are OME's); the annotations say where the
numbers came from: `sgltui.io/provenance`, the hash of what the server ran when it was measured
(core/provenance.py: the newest bench result of this profile that carries one, "unmeasured"
when none does), and `sgltui.io/command-hash`, the profile's flags.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from sgltui import __version__
from sgltui.core import placement
from sgltui.core.profiles import Profile, render_flags
from sgltui.k8s import memory

SGLANG_IMAGE = "docker.io/lmsysorg/sglang:latest"
PORT = 8080
# Flags OME sets itself (or that only the simulator knows)
_DROPPED = {"model-path", "model", "host", "port"}
_DROPPED_ENV = {"CUDA_VISIBLE_DEVICES"}  # the kubelet gives the pod its GPUs


class ExportError(ValueError):
    """One line: why this profile cannot be exported, and what to do."""


def k8s_name(text: str) -> str:
    """A DNS-1123 name from a profile or model name (lowercase, dashes, at most 63)."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return name[:63].rstrip("-") or "model"


def measured_hash(state_dir: Path, profile: str) -> str | None:
    """The provenance hash of the newest bench result of `profile` (sessions/*/bench/*.json)."""
    best: tuple[float, str] | None = None
    for path in (state_dir / "sessions").glob("*/bench/*.json"):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            mtime = path.stat().st_mtime
        except (OSError, ValueError):
            continue
        for res in doc.get("results") or [] if isinstance(doc, dict) else []:
            h = res.get("server_info_hash") if isinstance(res, dict) else None
            if res.get("profile") == profile and isinstance(h, str) and h:
                if best is None or mtime > best[0]:
                    best = (mtime, h)
    return best[1] if best else None


def export(
    profile: Profile,
    provenance: str | None,
    namespace: str = "default",
    image: str = SGLANG_IMAGE,
    weights_gb: dict[str, float] | None = None,
) -> list[tuple[list[str], dict[str, Any]]]:
    if profile.launcher == "sim":
        raise ExportError(
            f"profile {profile.name} runs the simulator (launcher = sim); export the real "
            f"profile it stands for (its extends: {profile.extends or 'none'})"
        )
    server = {k: v for k, v in profile.server.items() if k not in _DROPPED}
    model = profile.server.get("model-path") or profile.server.get("model")
    if not isinstance(model, str) or not model:
        raise ExportError(f"profile {profile.name} names no model-path; add it under [server]")
    gpus = placement.gpus_needed(profile.server)
    try:
        needed = memory.terms([profile], [], weights_gb or {}, 80.0)
    except memory.MemoryError_ as exc:
        raise ExportError(str(exc)) from None
    mem = f"{memory.limit_gib(needed, None)}Gi"
    runtime = f"sgltui-{k8s_name(profile.name)}"
    annotations = {
        "sgltui.io/profile": profile.name,
        "sgltui.io/provenance": provenance or "unmeasured",
        "sgltui.io/command-hash": profile.command_hash(),
        "sgltui.io/exported-by": f"sgltui {__version__}",
    }
    argv = ["python3", "-m", "sglang.launch_server", "--host", "0.0.0.0", "--port", str(PORT)]
    argv += ["--model-path", "$(MODEL_PATH)", *render_flags(server)]
    env = [{"name": k, "value": v} for k, v in profile.env.items() if k not in _DROPPED_ENV]
    container: dict[str, Any] = {
        "name": "ome-container",
        "image": image,
        "ports": [{"containerPort": PORT, "name": "http1", "protocol": "TCP"}],
        "command": argv,
        "volumeMounts": [{"mountPath": "/dev/shm", "name": "dshm"}],
        "resources": {
            "requests": {"memory": mem, "nvidia.com/gpu": gpus},
            "limits": {"memory": mem, "nvidia.com/gpu": gpus},
        },
        "readinessProbe": {"httpGet": {"path": "/health_generate", "port": PORT}},
        "livenessProbe": {"httpGet": {"path": "/health", "port": PORT}},
    }
    if env:
        container["env"] = env
    csr = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "ClusterServingRuntime",
        "metadata": {"name": runtime, "annotations": annotations},
        "spec": {
            "disabled": False,
            "supportedModelFormats": [
                {"modelFormat": {"name": "safetensors"}, "autoSelect": False, "priority": 1}
            ],
            "protocolVersions": ["openAI"],
            "engineConfig": {
                "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
                "runner": container,
            },
        },
    }
    base_model = k8s_name(model.rsplit("/", 1)[-1])
    isvc: dict[str, Any] = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {
            "name": k8s_name(profile.name),
            "namespace": namespace,
            "annotations": annotations,
        },
        "spec": {
            "model": {"name": base_model},
            "runtime": {"name": runtime},
            "engine": {"minReplicas": 1, "maxReplicas": 1},
        },
    }
    said = f"measured as {provenance}" if provenance else "not measured yet: sgltui bench it"
    return [
        ([f"profile {profile.name}, {said}, as an OME runtime: {gpus} GPU(s), {mem}"], csr),
        ([f"serves the ClusterBaseModel {base_model} (create it for {model})"], isvc),
    ]
