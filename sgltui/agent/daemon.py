"""Running the agent as a detached, single, per-state-dir process.

`python -m sgltui.agent --state-dir D [--profiles DIR] [--foreground]`. Detached by a double
fork into a new session (so closing the SSH terminal or SIGHUP cannot reach it), stdin/stdout/
stderr on /dev/null, its own log in D/agent.log. An flock on D/agent.lock makes it one agent
per state dir; whoever holds the lock owns agent.sock and agent.pid, so a socket or pid file
left by a dead agent is removed by the next one.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import faulthandler
import logging
import logging.handlers
import os
import signal
import sys
import time
from pathlib import Path

from sgltui.agent import config as agent_config
from sgltui.agent import keeper
from sgltui.client.paths import paths
from sgltui.core import locations, placement
from sgltui.core.files import keep_private, private_dir, write_atomic


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="sgltui-agent", description="sgltui agent (normally started on demand)"
    )
    p.add_argument("--state-dir")
    p.add_argument("--profiles", action="append", default=[], metavar="DIR")
    p.add_argument("--session-dir", help="record into this session directory instead of a new one")
    p.add_argument(
        "--foreground", action="store_true", help="do not detach (for debugging and tests)"
    )
    p.add_argument("--kept", action="store_true", help=argparse.SUPPRESS)  # the keeper's child
    p.add_argument(
        "--slots",
        default="",
        help="comma-separated slot names (default: agent.toml's slots, $SGLTUI_SLOTS, or 0)",
    )
    return p.parse_args(argv)


def _detach() -> None:
    """Double fork: the first child starts a new session, the grandchild can never reacquire a
    controlling terminal. The caller (a CLI process) only waits for the first child."""
    if os.fork() > 0:
        os._exit(0)
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    if devnull > 2:
        os.close(devnull)


def _kept_argv(argv: list[str] | None) -> list[str]:
    """The command line of the keeper's agent: this one's arguments plus --kept."""
    return [
        sys.executable,
        "-m",
        "sgltui.agent",
        *(sys.argv[1:] if argv is None else argv),
        "--kept",
    ]


def _setup_logging(log_path: Path, foreground: bool) -> None:
    handler = logging.handlers.RotatingFileHandler(log_path, maxBytes=5 << 20, backupCount=2)
    handler.setFormatter(logging.Formatter(keeper.LOG_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    if foreground:
        root.addHandler(logging.StreamHandler(sys.stderr))
    root.setLevel(logging.INFO)
    # One line per telemetry poll would bury the agent's own story.
    for noisy in ("httpx", "httpcore", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    keep_private()
    state_dir = locations.state_dir(args.state_dir)
    try:
        private_dir(state_dir)
    except OSError as exc:
        print(f"sgltui agent: cannot create state dir {state_dir}: {exc.strerror}", file=sys.stderr)
        return 1
    p = paths(state_dir)
    # Read before detaching: a bad file is one line on the starting command's stderr, not a
    # crash in agent.log that nobody reads.
    try:
        args.config = agent_config.load()
        args.placement = placement.load()
        mcfg = args.config.metrics
        if mcfg.port and not args.kept:  # a kept agent's own metrics may still be closing
            from sgltui.agent.telemetry.metrics import port_problem

            taken = port_problem(mcfg.host, mcfg.port)
            if taken:
                raise agent_config.ConfigError(taken)
    except (agent_config.ConfigError, placement.PlacementError) as exc:
        print(f"sgltui agent: {exc}", file=sys.stderr)
        if args.kept:  # the keeper's child has no terminal: its log is where this is read
            with contextlib.suppress(OSError), open(p["log"], "a") as fh:
                fh.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} ERROR sgltui.agent: {exc}\n")
        return 2
    if args.config.gpu_release != "auto":  # read where a release is judged (agent/gpu/)
        os.environ["SGLTUI_GPU_RELEASE"] = args.config.gpu_release
    if not args.foreground and not args.kept:
        _detach()
        if keeper.enabled():
            # This detached process becomes the keeper; the agent runs as its child and is
            # started again when it dies by accident (agent/keeper.py).
            return keeper.run(state_dir, _kept_argv(argv))
    lock_fd = keeper.take_lock(p["lock"])
    if lock_fd is None:
        return 0  # another agent owns this state dir; clients will talk to it
    _setup_logging(p["log"], args.foreground)
    # A crash in C code (NVML, psutil) would otherwise leave no trace at all.
    crash_log = open(p["log"], "a")
    faulthandler.enable(crash_log)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # an SSH drop must not end the agent
    for stale in (p["socket"], p["pid"]):
        try:
            stale.unlink()
        except FileNotFoundError:
            pass
    try:
        return asyncio.run(_run(state_dir, p, args))
    except Exception:
        logging.getLogger("sgltui.agent").exception("agent crashed")
        return 1
    finally:
        for f in (p["socket"], p["pid"]):
            try:
                if f == p["pid"] and f.read_text().strip() != str(os.getpid()):
                    continue
                f.unlink()
            except (FileNotFoundError, OSError):
                pass
        os.close(lock_fd)


async def _run(state_dir: Path, p: dict[str, Path], args: argparse.Namespace) -> int:
    from sgltui.agent.server import AgentServer
    from sgltui.agent.supervisor import Supervisor

    log = logging.getLogger("sgltui.agent")
    sup = Supervisor(
        state_dir,
        p["socket"],
        profiles_dirs=[Path(d).expanduser() for d in args.profiles],
        session_dir=Path(args.session_dir) if args.session_dir else None,
        config=getattr(args, "config", None),
        slot_ids=tuple(x.strip() for x in args.slots.split(",") if x.strip()) or None,
        placement=getattr(args, "placement", None),
    )
    await sup.start()
    metrics = None
    mcfg = sup.agent_config.metrics
    if mcfg.port:  # opt-in (agent.toml [metrics] port): Prometheus on loopback
        from sgltui.agent.telemetry.metrics import MetricsService

        metrics = MetricsService(sup.status, sup.pushes, mcfg.port, mcfg.host)
        metrics.start()
    server = AgentServer(sup.handle, sup.pushes, sup.agent_config.send_timeout_s, p["socket"])
    await server.start()
    write_atomic(p["pid"], f"{os.getpid()}\n")
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, sup.shutdown_requested.set)
    log.info(
        "agent %s listening on %s (session %s)", os.getpid(), p["socket"], sup.ctx.session.path
    )
    await sup.shutdown_requested.wait()
    log.info("agent shutting down (stop_servers=%s)", sup.stop_servers_on_exit)
    await server.close()
    if metrics is not None:
        await metrics.close()
    await sup.close()
    return 0
