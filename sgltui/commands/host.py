"""CLI: `sgltui host init [--tp N] [--simulated-gpus N] [--force]` and `sgltui host show`: the
host's placement (host.toml: slots on GPUs, pools behind one endpoint; core/placement.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from sgltui.commands import CliError, Subparsers
from sgltui.core import placement
from sgltui.core.files import private_dir, write_atomic
from sgltui.core.placement import PlacementError


def register(sub: Subparsers) -> None:
    p = sub.add_parser("host", help="this host's GPUs as slots and pools (host.toml)")
    hs = p.add_subparsers(dest="host_command", metavar="ACTION")
    init = hs.add_parser(
        "init", help="write host.toml: one slot per GPU (or per --tp group), a pool 'all' of them"
    )
    init.add_argument("--tp", type=int, default=1, metavar="N", help="GPUs per slot (default 1)")
    init.add_argument(
        "--simulated-gpus",
        type=int,
        default=None,
        metavar="N",
        help="a simulated host of N GPUs (the simulator), whatever this host has",
    )
    init.add_argument(
        "--simulated-gpu", default=None, metavar="PRESET", help="their preset (sim --sim-gpu)"
    )
    init.add_argument("--pool-port", type=int, default=placement.DEFAULT_POOL_PORT, metavar="PORT")
    init.add_argument(
        "--file", default=None, help="where to write (default ~/.config/sgltui/host.toml)"
    )
    init.add_argument("--force", action="store_true", help="replace an existing file")
    init.set_defaults(handler=cmd_init)
    show = hs.add_parser("show", help="print the layout host.toml describes")
    show.add_argument(
        "--file", default=None, help="read this file (default ~/.config/sgltui/host.toml)"
    )
    show.set_defaults(handler=cmd_show)
    p.set_defaults(handler=cmd_show, file=None)


def detected_gpus() -> int | None:
    """GPUs NVML sees here, or None without a driver (then GPU indices are not checked)."""
    from sgltui.agent.gpu import nvml

    with nvml.session() as ok:
        if not ok:
            return None
        try:
            return nvml.count()
        except nvml.NVMLError:
            return None


def _path(args: argparse.Namespace) -> Path:
    return Path(args.file).expanduser() if args.file else placement.default_path()


def cmd_init(args: argparse.Namespace) -> int:
    target = _path(args)
    if target.exists() and not args.force:
        raise CliError(f"{target} exists; sgltui host show prints it, --force replaces it")
    if args.simulated_gpus is not None:
        if not 1 <= args.simulated_gpus <= 64:
            raise CliError(f"--simulated-gpus {args.simulated_gpus}: give 1 to 64")
        count, simulated = args.simulated_gpus, True
    else:
        found = detected_gpus()
        if not found:
            raise CliError(
                "no NVIDIA GPU found on this host; "
                "sgltui host init --simulated-gpus N writes a simulated host of N GPUs"
            )
        count, simulated = found, False
    if args.simulated_gpu is not None:
        from sgltui.sim.hardware import GPU_PRESETS

        if args.simulated_gpu not in GPU_PRESETS:
            raise CliError(
                f"--simulated-gpu {args.simulated_gpu!r}: choose one of {', '.join(GPU_PRESETS)}"
            )
    try:
        layout = placement.layout(
            count,
            tp=args.tp,
            simulated=simulated,
            simulated_gpu=args.simulated_gpu,
            pool_port=args.pool_port,
        )
    except PlacementError as exc:
        raise CliError(str(exc)) from None
    private_dir(target.parent)
    write_atomic(target, layout.to_toml(), mode=0o644)
    print(f"wrote {target}")
    for line in placement.describe(layout):
        print(f"  {line}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    target = _path(args)
    try:
        layout = placement.load(target, gpu_count=detected_gpus())
    except PlacementError as exc:
        raise CliError(str(exc)) from None
    if layout is None:
        print(
            f"no {target}: one slot, as before (sgltui host init writes one slot per GPU "
            "and a pool of them)"
        )
        return 0
    print(str(target))
    for line in placement.describe(layout):
        print(f"  {line}")
    return 0
