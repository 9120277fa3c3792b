"""A real agent on a temporary host of N simulated GPUs, for the benches that measure the agent
or a TUI on it (bench_tui_idle.py, bench_agent_slots.py).

One slot: the plain one-GPU setup (slot "0", no pool, demo load to its server). N slots: a
host.toml of N slots (a, b, c...) on N simulated GPUs in one pool "all" behind the gateway, and
the demo load goes through the pool's endpoint to all of them. Every server runs the same
simulator profile (demo-no-mtp on a free port per slot). The agent's fronts are off: two agents
of one bench (and other users of this machine) must not race for port 30080. `stop()` shuts the
agent and its servers down and removes the temporary directory.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# A slot's server may take --port + 233..240 (DP attention): the agent refuses slot ports
# closer than this (host.toml), so random free ports clashed now and then.
SLOT_PORT_GAP = 241


def spaced_ports(n: int) -> list[int]:
    """`n` free ports at least SLOT_PORT_GAP apart (and a free one above each's range)."""
    out: list[int] = []
    while len(out) < n:
        port = free_port()
        if all(abs(port - p) >= SLOT_PORT_GAP for p in out):
            out.append(port)
    return out


class AgentHost:
    def __init__(self, slots: int = 1, tag: str = "bench") -> None:
        self.n = slots
        self.tmp = Path(tempfile.mkdtemp(prefix=f"sgltui-{tag}-"))
        self.state = self.tmp / "state"
        self.config = self.tmp / "config"
        (self.config / "sgltui").mkdir(parents=True)
        profiles = self.tmp / "profiles"
        profiles.mkdir()
        self.ids = ["0"] if slots == 1 else [chr(ord("a") + i) for i in range(slots)]
        if slots == 1:
            (profiles / "bench-slot.toml").write_text(
                'name = "bench-slot"\nextends = "demo-no-mtp"\nkey = "9"\n'
                f"[server]\nport = {free_port()}\n",
                encoding="utf-8",
            )
        else:
            # A pool's slots each get their port from host.toml.
            (profiles / "bench-slot.toml").write_text(
                'name = "bench-slot"\nextends = "demo-no-mtp"\nkey = "9"\n', encoding="utf-8"
            )
            ports = spaced_ports(slots + 1)
            (self.config / "sgltui" / "host.toml").write_text(
                f"simulated_gpus = {slots}\n"
                + "".join(
                    f'[[slot]]\nname = "{sid}"\ngpus = [{i}]\nport = {ports[i]}\n'
                    for i, sid in enumerate(self.ids)
                )
                + f'[[pool]]\nname = "all"\nslots = {self.ids!r}\nport = {ports[-1]}\n'.replace(
                    "'", '"'
                ),
                encoding="utf-8",
            )
        self.dirs = [str(ROOT / "profiles"), str(ROOT / "profiles" / "demo"), str(profiles)]
        self.env = {
            "XDG_CONFIG_HOME": str(self.config),
            "SGLTUI_STATE_DIR": str(self.state),
            "SGLTUI_SIM_GPU_DIR": str(self.tmp / "simgpu"),
            "SGLTUI_FRONT_PORT": "off",
            "SGLTUI_SLOTS": "0",
        }
        self.pid: int | None = None

    def call(self, op: str, **args: Any) -> Any:
        from sgltui.client import call_sync

        return call_sync(
            self.state, op, autostart=False, profiles_dirs=self.dirs, client_name="bench", **args
        )

    def start(self) -> None:
        """Start the agent and every slot's server; return once all are ready."""
        from sgltui.client import AgentError, spawn_agent

        saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)  # the agent (and its servers) read these at start
        try:
            spawn_agent(self.state, self.dirs)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        for _ in range(300):
            try:
                self.pid = int(self.call("ping")["pid"])
                break
            except (AgentError, OSError):
                time.sleep(0.1)
        else:
            raise SystemExit(f"the bench agent did not answer (see {self.state}/agent.log)")
        if self.n == 1:
            self.call("start", profile="bench-slot", slot="0", wait=True)
        else:
            self.call("start", profile="bench-slot", pool="all", wait=True)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            slots = self.call("status")["slots"]
            states = [s.get("state") for s in slots]
            if all(st == "ready" for st in states) and len(states) == self.n:
                return
            bad = [s for s in slots if s.get("state") in ("failed", "stopped", "crashed")]
            if bad:
                raise SystemExit(
                    f"bench slot {bad[0].get('id')} did not start: {bad[0].get('cause')}"
                )
            time.sleep(0.5)
        raise SystemExit(f"the bench servers were not all ready in 180 s: {states}")

    def logs(self) -> list[Path]:
        """Every slot's server log (what a bare log tail reads: the lines the TUI gets)."""
        paths = [Path(s["log_path"]) for s in self.call("status")["slots"]]
        return list(dict.fromkeys(paths))  # (an older agent gave a pool's slots one log)

    def load(self, on: bool) -> None:
        self.call("demo_load", on=on)

    def stop(self) -> None:
        from sgltui.client import AgentError

        try:
            self.call("demo_load", on=False)
        except (AgentError, OSError):
            pass
        try:
            self.call("shutdown", stop_servers=True)
        except (AgentError, OSError):
            pass
        time.sleep(1.0)
        shutil.rmtree(self.tmp, ignore_errors=True)
