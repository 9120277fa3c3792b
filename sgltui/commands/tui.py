"""`sgltui` (no subcommand) / `sgltui tui`: open the TUI; `sgltui demo`: the simulator demo.

Textual is imported only when the app is about to open, so other commands stay fast to start.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from pathlib import Path
from typing import Any

from sgltui.commands import CliError, Subparsers


def register(sub: Subparsers) -> None:
    tui = sub.add_parser(
        "tui",
        help="open the terminal UI (the same as plain `sgltui`)",
        description="Open the terminal UI. It is a client of the agent: quitting leaves servers running.",
    )
    _add_common(tui)
    tui.add_argument(
        "--read-only",
        action="store_true",
        help="watch only: start, stop, swap, restart and bench are disabled",
    )
    # Set by `sgltui web` for each browser tab's app process (stdio are pipes to the browser).
    tui.add_argument("--web-tab", action="store_true", help=argparse.SUPPRESS)
    tui.set_defaults(handler=open_tui)
    demo = sub.add_parser(
        "demo",
        help="start the simulator demo and open the UI",
        description="Start the agent with the shipped demo profiles (simulated GPU, faster start-up), "
        "start the first one, send a light background load and open the UI.",
    )
    _add_common(demo)
    demo.add_argument(
        "--no-load", action="store_true", help="do not send the demo's background load"
    )
    demo.add_argument(
        "--stop",
        action="store_true",
        help="stop the demo (no UI): its background load, its servers and standbys, and an agent "
        "started on the demo's own host.toml with its gateway",
    )
    demo.add_argument(
        "--gpus",
        type=int,
        default=None,
        metavar="N",
        help="a simulated host of N GPUs: one slot each, all in pool 'all' behind the gateway",
    )
    demo.set_defaults(handler=open_demo)


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--theme",
        metavar="NAME",
        help="colour theme: a built-in Textual theme or one from themes/*.toml",
    )


def open_tui(args: argparse.Namespace) -> int:
    """Handler for plain `sgltui` too (set as the root parser's default_handler). With a
    fleet.toml (or --fleet), a bare `sgltui` opens the app on every host of the fleet: the
    Hosts view beside the slots view, slots as host/slot."""
    if getattr(args, "command", None) is None and not getattr(args, "web_tab", False):
        from sgltui.fleet import config as fleet_config

        path = getattr(args, "fleet_file", None)
        if path or fleet_config.default_path().exists():
            return open_fleet(args)
    return _run(args, demo=False)


def open_fleet(args: argparse.Namespace, interval_s: float = 2.0) -> int:
    """The app on a fleet (also `sgltui fleet tui`): each host over its own ssh link."""
    from sgltui.commands import fleet_file

    hosts = fleet_file.load(args)
    from sgltui.tui.fleetsource import FleetSource

    return _run(args, demo=False, source=FleetSource.from_fleet(hosts, interval_s=interval_s))


def open_demo(args: argparse.Namespace) -> int:
    if getattr(args, "stop", False):
        return stop_demo(args)
    _demo_endpoint(args)
    if getattr(args, "gpus", None) is not None:
        demo_pool(args)
    else:
        _demo_ports(args)
    return _run(args, demo=True)


def _demo_endpoint(args: argparse.Namespace) -> None:
    """The agent endpoint (one URL, the request's `model` picks the profile) on its usual port,
    else on the next free one when another demo holds it; the user's agent.toml or
    SGLTUI_ENDPOINT_PORT, and an agent already running, keep theirs."""
    from sgltui.agent import config as agent_config
    from sgltui.agent.endpoint.policy import EndpointConfig
    from sgltui.client import AgentError, call_sync
    from sgltui.commands import demo_ports

    if agent_config.env_value("endpoint", "port") or agent_config.default_path().exists():
        return
    try:
        call_sync(state_dir_of(args), "ping", autostart=False)
        return
    except AgentError:
        pass
    usual = EndpointConfig.port or 30070
    if not demo_ports.free(usual):
        os.environ[agent_config.ENV_NAMES[("endpoint", "port")]] = str(demo_ports.front_port(usual))


def _demo_ports(args: argparse.Namespace) -> None:
    """A demo of one slot whose usual ports are held (another user's demo on this host): the
    agent it starts gets free ones, a host.toml of the demo's own (slot and front port), so
    that the start is not refused over a port the user never chose. An agent already running
    keeps what it has; the usual ports free: nothing changes."""
    from sgltui.client import AgentError, call_sync
    from sgltui.commands import demo_ports

    state = state_dir_of(args)
    try:
        call_sync(state, "ping", autostart=False)
        return
    except AgentError:
        pass
    from sgltui.core import placement

    if placement.default_path().exists():
        return  # the user's own host.toml places the servers
    if demo_ports.free(demo_ports.SERVER_PORT) and demo_ports.free(placement.DEFAULT_POOL_PORT):
        return
    _write_demo_host(args, 1)


def state_dir_of(args: argparse.Namespace) -> Path:
    from sgltui.core.locations import state_dir

    return state_dir(getattr(args, "state_dir", None))


def _write_demo_host(args: argparse.Namespace, n: int) -> Any:
    """A host.toml of the demo's own (the user's is left alone) on free ports: n simulated GPUs,
    one slot each, in pool 'all' (of one: its front). The agent started next reads it."""
    from sgltui.commands import demo_ports
    from sgltui.core import placement
    from sgltui.core.files import private_dir, write_atomic

    state = state_dir_of(args)
    layout = placement.layout(
        n,
        simulated=True,
        simulated_gpu="rtx-pro-6000-96gb",
        pool_port=demo_ports.front_port(),
        taken=demo_ports.busy_slot_ports(),
    )
    path = state / f"demo-host-{n}.toml"
    private_dir(state)
    write_atomic(path, layout.to_toml())
    os.environ[placement.HOST_FILE_ENV] = str(path)  # the agent started below reads it
    return layout


def demo_pool(args: argparse.Namespace) -> None:
    """`sgltui demo --gpus N`: the agent on a simulated host of N GPUs (a host.toml of the
    demo's own in the state dir; the user's is left alone), the first demo profile started on
    every slot of pool 'all' (the TUI then sends the demo load to the pool's endpoint)."""
    from sgltui.client import AgentError, call_sync
    from sgltui.client.errors import Already
    from sgltui.core import placement
    from sgltui.core.locations import state_dir

    n = args.gpus
    if not 2 <= n <= 8:
        raise CliError(f"--gpus {n}: give 2 to 8 (one simulated GPU per slot)")
    from sgltui.agent.pools.gateway import smg_available, smg_missing

    if not smg_available():  # before anything starts: the pool would never serve
        raise CliError(f"demo --gpus {n}: {smg_missing()}")
    state = state_dir(getattr(args, "state_dir", None))
    try:
        running = call_sync(state, "status", autostart=False)
    except AgentError:
        running = None
    if running is not None:
        ids = [s.get("id") for s in running.get("slots") or []]
        wanted = [placement.slot_name(i) for i in range(n)]
        if ids != wanted:
            raise CliError(
                f"an agent already runs for {state} with slots {', '.join(map(str, ids))}; "
                "stop it (sgltui agent stop --stop-servers) or give --state-dir DIR"
            )
        pools = running.get("pools") or []
        endpoint = next((p.get("endpoint") for p in pools if p.get("name") == "all"), "")
    else:
        # Free ports, the usual ones first (another demo on a shared host holds them).
        endpoint = _write_demo_host(args, n).pools[0].endpoint
    dirs = [str(Path(p).expanduser()) for p in (getattr(args, "profiles", None) or [])]
    try:
        call_sync(
            state, "start", autostart=True, profiles_dirs=dirs, profile="demo-base", pool="all"
        )
    except Already:
        pass  # the pool's slots run already: the demo goes on with them
    except AgentError as exc:
        raise CliError(str(exc)) from None
    print(f"sgltui: demo pool 'all' of {n} simulated GPUs on {endpoint}")


def stop_demo(args: argparse.Namespace) -> int:
    """`sgltui demo --stop`: what `q` in the demo leaves running (the load, the demo server)."""
    from sgltui import protocol
    from sgltui.client import AgentError, call_sync, decode_reply
    from sgltui.core.locations import state_dir

    state = state_dir(getattr(args, "state_dir", None))
    try:
        decode_reply("demo_load", call_sync(state, "demo_load", autostart=False, on=False))
        st: protocol.StatusReply = decode_reply(
            "status", call_sync(state, "status", autostart=False)
        )
    except (AgentError, OSError) as exc:
        raise CliError(f"no demo to stop: {exc}") from None
    print("sgltui: demo load stopped.")
    # Every slot the demo started (one, or each of a `demo --gpus N` pool), not only the first,
    # and the demo profiles kept warm beside them (a standby pins its weights in host RAM):
    # a slot or standby of anything but a demo profile is the user's and is left alone.
    idle = (protocol.SlotState.STOPPED, protocol.SlotState.FAILED, protocol.SlotState.CRASHED)
    for slot in st.slots:
        for sb in slot.standbys:
            if not sb.profile.startswith("demo-"):
                continue
            try:
                call_sync(
                    state, "standby_remove", autostart=False, slot=slot.id, profile=sb.profile
                )
            except (AgentError, OSError) as exc:
                raise CliError(
                    f"could not stop the standby {sb.profile} on slot {slot.id}: {exc}"
                ) from None
            print(f"sgltui: stopped the standby {sb.profile} (slot {slot.id}).")
    left = []
    for slot in st.slots:
        if slot.state in idle:
            continue
        if not (slot.profile or "").startswith("demo-"):
            left.append(slot.id)
            continue
        try:
            call_sync(state, "stop", autostart=False, slot=slot.id, drain="force", wait=True)
        except (AgentError, OSError) as exc:
            raise CliError(f"could not stop {slot.profile} on slot {slot.id}: {exc}") from None
        print(f"sgltui: stopped {slot.profile} (slot {slot.id}).")
    if _on_demo_host(st.agent.host_file, state) and not left:
        # The agent runs on the demo's own simulated host (a host.toml `sgltui demo` wrote):
        # it ends too, and the pool's gateway with it; a later `sgltui` starts the user's.
        from sgltui.commands.server import stop_agent_and_wait

        stop_agent_and_wait(state, st.agent.pid)
        print("sgltui: stopped the demo's agent (its simulated host and the pool's gateway).")
    return 0


def _on_demo_host(host_file: str | None, state: Path) -> bool:
    """Whether the agent reads a host.toml that `sgltui demo` wrote (_write_demo_host)."""
    if not host_file:
        return False
    path = Path(host_file)
    return path.name.startswith("demo-host-") and path.parent == state


def _refuse_another_version(state: Path) -> None:
    """An agent of another version would leave the app retrying under a header too narrow for
    the fix: the one line the CLI gives instead, before the screen is taken. No agent: the app
    starts one (of this version)."""
    from sgltui.client import AgentError, VersionMismatch, call_sync, decode_reply

    try:
        decode_reply("ping", call_sync(state, "ping", autostart=False))
    except VersionMismatch as exc:
        raise CliError(str(exc)) from None
    except AgentError:
        pass


def _run(args: argparse.Namespace, demo: bool, source: Any = None) -> int:
    from sgltui.core.locations import state_dir

    if source is None:  # a fleet's hosts say their version over the bridge, each its own
        _refuse_another_version(state_dir(getattr(args, "state_dir", None)))
    web_tab = bool(getattr(args, "web_tab", False))
    if not web_tab and not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise CliError(
            "the UI needs a terminal; for scripts use `sgltui status --json` or `sgltui top`"
        )
    from sgltui.tui.config import ConfigError, load_config

    try:
        config = load_config()
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    from sgltui.tui.app import make_app
    from sgltui.tui.source import LiveSource
    from sgltui.tui.themes import unknown_theme_message

    if source is None:
        source = LiveSource(
            state_dir(getattr(args, "state_dir", None)),
            profiles_dirs=[Path(p) for p in (getattr(args, "profiles", None) or [])],
            # A browser tab's commands are attributed to it in the session log: "web:<id>:...".
            client_name=f"web:{secrets.token_hex(4)}" if web_tab else "tui",
            read_only=bool(getattr(args, "read_only", False)),
        )
    app = make_app(source, config=config, theme=getattr(args, "theme", None), demo=demo)
    if demo and getattr(args, "no_load", False):
        app.demo_load = False
    wanted = getattr(args, "theme", None) or config.theme
    if wanted and wanted not in app.available_themes and wanted not in app.user_theme_names:
        raise CliError(
            unknown_theme_message(
                wanted, sorted(set(app.available_themes) | set(app.user_theme_names))
            )
        )
    for problem in app.theme_errors:
        print(f"sgltui: warning: {problem}", file=sys.stderr)
    note = app.run()
    if note:
        print(note)
    return 0
