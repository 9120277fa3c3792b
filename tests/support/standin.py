"""Stand-in hosts for scale tests and benches (issue 49): many agent-like hosts in one process.

A real host is `ssh HOST sgltui agent bridge` to an agent running 8 servers; this machine (2
cores) holds a handful of those, not 64. A stand-in host answers the same protocol over the
same pipes at a real host's rate, scripted:

- `hello`, `status` (8 slots on 8 GPUs, a pool `all` over them, engine figures that move with
  time; every 16th host (h6, h22 ...) has a failed slot, a quarter (h3, h7 ...) are idle),
  `subscribe`, `logs`;
  any other op is refused ("invalid"), as an agent refuses an op it does not know.
- once subscribed, what an agent with 8 busy slots pushes: a `sample` each second (8 GPUs, 8
  slots' engine figures) and one `logs` push a second carrying a line per busy slot (the
  agent's tick batching), and an `event` every 10 s.

One `serve` process holds every stand-in host on one unix socket. The fleet reaches it through
its usual ssh transport: fleet.toml's `[ssh] command` is a wrapper (written by `fleet_file`)
that runs standin_ssh.py, a stdlib-only relay that sends the host's destination as a first
line, then copies bytes both ways. So the fleet side (HostClient's subprocess and pipes,
HostLink, FleetSource, the app, `fleet status`) runs unchanged; only the far end is scripted.
Destinations: `standin:NAME` (answers), `dead:NAME` (ssh's "Connection refused", exit 255, at
once), `slow:NAME` (connects, never answers: a host that hangs).

Not a product feature: used by bench/bench_fleet_scale.py and tests/fleet/test_fleet_scale.py.

    python tests/support/standin.py serve --socket /tmp/x/standin.sock
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sgltui import __version__, protocol  # noqa: E402
from tests.support.scripted import (  # noqa: E402
    LOG_LINES,
    make_engine,
    make_host_status,
    slot_names,
)

SLOTS = 8
SAMPLE_S = 1.0  # an agent's sample interval
EVENT_EVERY_S = 10.0
RELAY = Path(__file__).with_name("standin_ssh.py")


def host_index(name: str) -> int:
    digits = "".join(c for c in name if c.isdigit())
    return int(digits) if digits else 0


class StandinHost:
    """One host's scripted state: its STATUS, moving with time."""

    def __init__(self, name: str, slots: int = SLOTS) -> None:
        self.name, self.k = name, host_index(name)
        self.names = slot_names(slots)
        self.idle = self.k % 4 == 3
        self.status = make_host_status(slots)
        self.failed: set[str] = set()
        for i, s in enumerate(self.status["slots"]):
            if self.k % 16 == 6 and i == slots - 1:
                s.update(state="failed", ready_at=None, uptime_s=None, capacity=None)
                self.failed.add(s["id"])
        self.t0 = time.monotonic()

    def engine(self, t: float) -> dict[str, Any]:
        if self.idle:
            return {}
        busy = 0.5 + (self.k % 8) / 8
        out = {}
        for i, sid in enumerate(self.names):
            if sid in self.failed:
                continue
            e = make_engine(t + 3 * i + self.k, running=4 - i % 3)
            e["gen_throughput"] = round(e["gen_throughput"] * busy, 2)
            out[sid] = e
        return out

    def now(self) -> float:
        return time.monotonic() - self.t0

    def status_now(self) -> dict[str, Any]:
        st = self.status
        tel = st["telemetry"]
        tel["ts"] = time.time()
        tel["engine"] = self.engine(self.now())
        return st

    def sample(self) -> dict[str, Any]:
        tel = self.status["telemetry"]
        return {
            "v": 1,
            "ts": time.time(),
            "gpus": tel["gpus"],
            "host": tel["host"],
            "engine": self.engine(self.now()),
        }

    def log_tick(self) -> list[dict[str, Any]]:
        if self.idle:
            return []
        return [
            {"slot": sid, "launch_id": f"20261202-154000-demo-mtp-{sid}", "lines": [LOG_LINES[-1]]}
            for sid in self.names
        ]


_decode = msgspec.json.Decoder()


async def serve_connection(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    hosts: dict[str, StandinHost],
    name: str | None = None,
) -> None:
    pusher: asyncio.Task | None = None
    try:
        if name is None:  # the relay's first line says which host
            name = (await reader.readline()).decode().strip()
        host = hosts.get(name) or hosts.setdefault(name, StandinHost(name))
        while True:
            line = await reader.readline()
            if not line:
                return
            try:
                req = _decode.decode(line)
            except msgspec.DecodeError:
                continue
            op, rid, args = req.get("op"), req.get("id"), req.get("args") or {}
            if op == "subscribe" and pusher is None:
                pusher = asyncio.get_running_loop().create_task(push_loop(host, writer))
            reply = answer(host, op, args)
            writer.write(protocol.encode(reply | {"id": rid}))
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        if pusher is not None:
            pusher.cancel()
        writer.close()


def answer(host: StandinHost, op: str | None, args: dict[str, Any]) -> dict[str, Any]:
    if op == "hello":
        hello = {"version": __version__, "protocol": protocol.PROTOCOL_VERSION, "pid": os.getpid()}
        return {"ok": True, "result": hello}
    if op == "status":
        return {"ok": True, "result": host.status_now()}
    if op == "subscribe":
        return {"ok": True, "result": {"subscribed": True}}
    if op == "logs":
        sid = str(args.get("slot") or "a")
        lid = f"20261202-154000-demo-mtp-{sid}"
        lines = LOG_LINES[-int(args.get("lines") or 20) :]
        return {"ok": True, "result": {"lines": lines, "path": "/tmp/x.log", "launch_id": lid}}
    if op == "ping":
        return {"ok": True, "result": {}}
    error = {"code": "invalid", "message": f"stand-in host: no op {op!r}"}
    return {"ok": False, "error": error}


async def push_loop(host: StandinHost, writer: asyncio.StreamWriter) -> None:
    """A subscribed connection's pushes at an agent's rate."""
    n = 0
    with contextlib.suppress(ConnectionError, OSError):
        while True:
            await asyncio.sleep(SAMPLE_S)
            n += 1
            writer.write(protocol.encode({"push": "sample", "data": host.sample()}))
            lines = host.log_tick()
            if lines:
                writer.write(protocol.encode({"push": "logs", "data": lines}))
            if n % int(EVENT_EVERY_S / SAMPLE_S) == 0:
                ev = {
                    "type": "log.rotated",
                    "ts": time.time(),
                    "slot": host.names[0],
                    "file": "x.log",
                }
                writer.write(protocol.encode({"push": "event", "data": ev}))
            await writer.drain()


async def serve(
    socket_path: Path,
    ready: asyncio.Event | None = None,
    tcp_names: list[str] | None = None,
    ports_file: Path | None = None,
) -> None:
    """Every host on one unix socket (the relay names it), and each of `tcp_names` on a
    loopback TCP port of its own too (`ssh -W 127.0.0.1:PORT`: sshd connects it, nothing runs
    on the far side), written to `ports_file` as NAME PORT lines once all listen."""
    hosts: dict[str, StandinHost] = {}
    with contextlib.suppress(FileNotFoundError):
        socket_path.unlink()
    servers = [
        await asyncio.start_unix_server(
            lambda r, w: serve_connection(r, w, hosts), str(socket_path), limit=2**24
        )
    ]
    ports = []
    for n in tcp_names or ():
        srv = await asyncio.start_server(
            lambda r, w, n=n: serve_connection(r, w, hosts, n), "127.0.0.1", 0, limit=2**24
        )
        servers.append(srv)
        ports.append(f"{n} {srv.sockets[0].getsockname()[1]}\n")
    if ports_file is not None:
        tmp = ports_file.with_suffix(".tmp")
        tmp.write_text("".join(ports))
        tmp.replace(ports_file)  # whole or absent: the reader waits for it
    if ready is not None:
        ready.set()
    await asyncio.gather(*(s.serve_forever() for s in servers))


def fleet_file(
    root: Path, socket_path: Path, names: list[str], dead: set[str] = frozenset(), slow=frozenset()
) -> Path:
    """A fleet.toml of stand-in hosts under `root`, with the ssh wrapper it names."""
    wrapper = root / "standin-ssh"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"SGLTUI_STANDIN_SOCKET='{socket_path}' exec '{sys.executable}' -I -S '{RELAY}' \"$@\"\n"
    )
    wrapper.chmod(0o755)
    lines = ["[ssh]", f'command = "{wrapper}"', ""]
    for n in names:
        kind = "dead" if n in dead else "slow" if n in slow else "standin"
        lines += ["[[host]]", f'name = "{n}"', f'ssh = "{kind}:{n}"', ""]
    path = root / f"fleet-{len(names)}.toml"
    path.write_text("\n".join(lines))
    return path


def ssh_fleet_file(
    root: Path, ssh_config: Path, dest: str, ports: dict[str, int], multiplex: bool
) -> Path:
    """A fleet.toml of stand-in hosts reached over real OpenSSH (a loopback sshd: `dest` with
    `ssh_config`). Its [ssh] command is a wrapper named `ssh` (so the fleet treats it as
    OpenSSH's and shares connections) that runs ssh with every option the fleet gives it, but
    `-W 127.0.0.1:PORT` (the host's stand-in port) for the remote `sgltui agent bridge`: sshd
    connects the port itself, so nothing runs on the far side (a real host's far side runs on
    that host, not on the operator's). The port reaches the wrapper as the bridge's --state-dir."""
    bindir = root / "bin"
    bindir.mkdir(exist_ok=True)
    wrapper = bindir / "ssh"
    wrapper.write_text(
        "#!/bin/bash\n"
        "# argv: OPTIONS DEST -- REMOTE (REMOTE: 'sgltui --state-dir PORT agent bridge')\n"
        'a=("$@"); n=${#a[@]}; r=${a[n-1]}; port=${r#*--state-dir }; port=${port%% *}\n'
        'exec ssh "${a[@]:0:n-3}" -W "127.0.0.1:$port" "${a[n-3]}"\n'
    )
    wrapper.chmod(0o755)
    lines = ["[ssh]", f'command = "{wrapper}"', f'options = ["-F", "{ssh_config}"]']
    lines += [f"multiplex = {'true' if multiplex else 'false'}", ""]
    for n, port in ports.items():
        lines += ["[[host]]", f'name = "{n}"', f'ssh = "{dest}"', f'state_dir = "{port}"', ""]
    path = root / f"fleet-ssh-{len(ports)}-{'mux' if multiplex else 'nomux'}.toml"
    path.write_text("\n".join(lines))
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--socket", required=True, type=Path)
    s.add_argument("--tcp-hosts", type=int, default=0, help="h1 .. hN on TCP ports too")
    s.add_argument("--ports", type=Path, help="where to write their NAME PORT lines")
    args = ap.parse_args()
    names = [f"h{i}" for i in range(1, args.tcp_hosts + 1)]
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.socket, tcp_names=names, ports_file=args.ports))
    return 0


if __name__ == "__main__":
    sys.exit(main())
