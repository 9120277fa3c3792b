"""`sgltui k8s render`: Kubernetes manifests for this host's placement and profiles
(sgltui/k8s/render.py), multi-document YAML on stdout or in -o FILE; apply is the user's own
`kubectl apply -f -`. docs/kubernetes.md."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sgltui.commands import CliError, Subparsers


def register(sub: Subparsers) -> None:
    p = sub.add_parser("k8s", help="Kubernetes manifests: sgltui k8s render")
    ks = p.add_subparsers(dest="k8s_command", metavar="ACTION")
    r = ks.add_parser(
        "render",
        help="print the manifests (StatefulSet, Services, ConfigMap) as YAML",
        description="Manifests that run the agent in one pod per GPU node, from host.toml, the "
        "profiles and these options. Nothing is applied: pipe it to kubectl apply -f -.",
    )
    r.add_argument("--image", default=None, help="the image with sgltui and SGLang")
    r.add_argument("-o", "--output", default=None, metavar="FILE", help="write here, not stdout")
    r.add_argument("--namespace", default="sgltui")
    r.add_argument("--name", default="sgltui", help="the StatefulSet's (and its pods') name")
    r.add_argument("--gpus-per-node", type=int, default=None, metavar="N")
    r.add_argument("--nodes", type=int, default=1, metavar="N", help="agent pods (GPU nodes)")
    r.add_argument(
        "--profile",
        action="append",
        default=[],
        metavar="[SLOT=]NAME",
        help="the profile a slot serves (its memory counted; repeatable)",
    )
    r.add_argument(
        "--standby",
        action="append",
        default=[],
        metavar="[SLOT=]NAME",
        help="a profile kept warm on a slot: its pinned weights count in the memory limit",
    )
    r.add_argument("--memory-limit", type=float, default=None, metavar="GIB")
    r.add_argument("--gpu-memory-gb", type=float, default=80.0, metavar="GB")
    r.add_argument(
        "--weights-gb",
        action="append",
        default=[],
        metavar="NAME=GB",
        help="a profile's weights, when the model is not in the local hub cache",
    )
    r.add_argument("--models-size", default="500Gi", help="the models volume (HF_HOME)")
    r.add_argument("--sessions-size", default="20Gi", help="the agent's state volume")
    r.add_argument("--storage-class", default=None)
    r.add_argument("--host-file", default=None, help="host.toml (default: this host's)")
    r.set_defaults(handler=cmd_render)
    p.set_defaults(handler=lambda args: _help(p))


def _help(p: argparse.ArgumentParser) -> int:
    p.print_help()
    return 0


def _pairs(values: list[str]) -> tuple[tuple[str, str], ...]:
    out = []
    for v in values:
        slot, sep, name = v.partition("=")
        out.append((slot, name) if sep else ("", v))
    return tuple(out)


def _weights(values: list[str]) -> tuple[tuple[str, float], ...]:
    out = []
    for v in values:
        name, _, gb = v.partition("=")
        try:
            out.append((name, float(gb)))
        except ValueError:
            raise CliError(f"--weights-gb {v!r}: write NAME=GB, e.g. llama-70b=141") from None
    return tuple(out)


def cmd_render(args: argparse.Namespace) -> int:
    from sgltui.core import placement
    from sgltui.core.profiles import load_profiles
    from sgltui.k8s import render as k8s_render
    from sgltui.k8s.yaml_out import dump_all

    try:
        place = placement.load(Path(args.host_file).expanduser() if args.host_file else None)
    except placement.PlacementError as exc:
        raise CliError(str(exc)) from None
    opts = k8s_render.Options(
        image=args.image or k8s_render.DEFAULT_IMAGE,
        namespace=args.namespace,
        name=args.name,
        gpus_per_node=args.gpus_per_node,
        nodes=args.nodes,
        serving=_pairs(args.profile),
        standbys=_pairs(args.standby),
        models_size=args.models_size,
        sessions_size=args.sessions_size,
        storage_class=args.storage_class,
        memory_limit_gib=args.memory_limit,
        gpu_memory_gb=args.gpu_memory_gb,
        weights_gb=_weights(args.weights_gb),
    )
    profiles = load_profiles(getattr(args, "profiles", None) or ())
    try:
        docs = k8s_render.render(place, profiles, opts)
    except k8s_render.RenderError as exc:
        raise CliError(str(exc)) from None
    text = dump_all(docs)
    if args.output:
        Path(args.output).expanduser().write_text(text, encoding="utf-8")
        print(f"wrote {len(docs)} manifests to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
