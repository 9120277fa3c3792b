#!/usr/bin/env python3
"""Issue 50's fleet budget, measured in one run: a fleet of 4 Kubernetes pods and 2 SSH hosts in
one fleet TUI, with a cross-host pool over two of each rolling under streaming clients with 0
errors.

No cluster here (no container daemon, no registry): the pods are tests/fleet/fake_kubectl.py,
which runs the real `sgltui agent bridge` for each pod name (a real agent per pod, its own state,
config and simulated-GPU directories; every pod's IP is 127.0.0.1). The SSH hosts are two local
users behind a real OpenSSH server on 127.0.0.1 (tests/fleet/sshd.py; root needed). The pool is
fleet.toml's [[pool]] over k.sgltui-0/0, k.sgltui-1/0, h1/0 and h2/0 with its gateway (the real
smg) on the pod k.sgltui-0; the other two pods are idle agents (no simulator: the machine is
small). Then, with the fleet TUI open (headless, the real app over its links), N streaming
clients through the gateway while `sgltui fleet pool swap xp xb` rolls every member.

    sudo python bench/bench_kube_fleet.py [--clients 8]

Prints the figures and met/OVER; exit 0 whatever they are (they are the output), 2 when it
cannot run here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pwd
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_loadgen import free_port  # noqa: E402
from bench_pool import Streams  # noqa: E402

from sgltui.agent.pools import gateway as gw_mod  # noqa: E402
from tests.fixtures.agent import AgentHandle  # noqa: E402
from tests.fleet import sshd as sshd_mod  # noqa: E402

FAKE = ROOT / "tests" / "fleet" / "fake_kubectl.py"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
PODS = [f"sgltui-{i}" for i in range(4)]
POOL = ["k.sgltui-0/0", "k.sgltui-1/0", "h1/0", "h2/0"]
# Tokens at a fifth of real time (a 64-token stream ~0.4 s), start-up at a hundredth.
PROFILE = """name = "{name}"
launcher = "sim"
[server]
model-path = "{model}"
port = {port}
sim-time-scale = 0.2
sim-slow-start = 0.01
max-running-requests = 64
"""


def write_profiles(config_home: Path) -> list[Path]:
    d = config_home / "sgltui" / "profiles"
    d.mkdir(parents=True, exist_ok=True)
    made = [d.parent, d]
    for name in ("xa", "xb"):
        p = d / f"{name}.toml"
        p.write_text(PROFILE.format(name=name, model=MODEL, port=free_port()))
        made.append(p)
    return made


def fake_kube(root: Path) -> Path:
    """bin/kubectl (the fake) and bin/sgltui (this interpreter, this checkout) and the fake's
    cluster: 4 pods behind one label."""
    bin_ = root / "bin"
    bin_.mkdir(parents=True)
    for name, line in (
        ("kubectl", f'exec {sys.executable} {FAKE} "$@"'),
        ("sgltui", f'exec {sys.executable} -m sgltui "$@"'),
    ):
        (bin_ / name).write_text(f"#!/bin/sh\n{line}\n")
        (bin_ / name).chmod(0o755)
    pods = [
        {"name": p, "namespace": "ml", "labels": {"app": "sgltui"}, "podIP": "127.0.0.1"}
        for p in PODS
    ]
    cfg = root / "kube.json"
    cfg.write_text(json.dumps({"root": str(root), "pods": pods}))
    for pod in PODS[:2]:  # the pool's pods; the other two serve nothing
        write_profiles(root / pod / "config")
    return cfg


def fleet_file(root: Path, s: sshd_mod.Sshd, pool_port: int) -> Path:
    lines = ["[ssh]", f'options = ["-F", "{s.ssh_config}"]', ""]
    lines += [
        "[[host]]",
        'name = "k"',
        'kind = "kubernetes"',
        'namespace = "ml"',
        'selector = "app=sgltui"',
        f'kubectl = "{root / "bin" / "kubectl"}"',
        f'sgltui = "{root / "bin" / "sgltui"}"',
        "",
    ]
    for i, u in enumerate(s.users, 1):
        lines += [
            "[[host]]",
            f'name = "h{i}"',
            f'ssh = "{u.name}@127.0.0.1"',
            f'sgltui = "{s.sgltui}"',
            'address = "127.0.0.1"',
            "",
        ]
    lines += ["[[pool]]", 'name = "xp"', f"slots = {json.dumps(POOL)}"]
    lines += ['gateway = "k.sgltui-0"', f"port = {pool_port}", ""]
    path = root / "fleet.toml"
    path.write_text("\n".join(lines))
    return path


def sgltui(path: Path, *words: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sgltui", "--fleet", str(path), *words],
        capture_output=True,
        text=True,
        timeout=timeout,
        start_new_session=True,
    )


async def roll_in_the_tui(path: Path, url: str, clients: int) -> dict:
    """The fleet TUI open on the fleet (headless) while the clients stream and the pool rolls:
    what its Hosts view said, and what the clients and the roll did."""
    from sgltui.fleet import config as fleet_config
    from sgltui.fleet import kube
    from sgltui.tui.app import make_app
    from sgltui.tui.config import TuiConfig
    from sgltui.tui.fleetsource import FleetSource
    from sgltui.tui.widgets.hosts import HostsPane

    fleet = fleet_config.load(path, pods=kube.pod_hosts)
    src = FleetSource.from_fleet(fleet, interval_s=1.0)
    app = make_app(src, config=TuiConfig())
    seen: dict = {"min_reachable": None, "hosts_text": ""}

    def reachable() -> int:
        return sum(1 for h in src.hosts if h.reachable)

    async with app.run_test(size=(140, 45)) as pilot:
        deadline = time.monotonic() + 120
        while reachable() < len(src.hosts) or len(app.model.slots) < len(POOL):
            if time.monotonic() > deadline:
                raise SystemExit(f"the TUI never saw every host: {[h.line() for h in src.hosts]}")
            await pilot.pause(0.2)
        seen["hosts"] = len(src.hosts)
        seen["before"] = app.query_one(HostsPane).text
        with Streams(url, clients) as streams:
            await asyncio.sleep(2)
            t0 = time.monotonic()
            roll = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "sgltui", "--fleet", str(path),
                "fleet", "pool", "swap", "xp", "xb",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )  # fmt: skip
            wait = asyncio.ensure_future(roll.communicate())
            low = reachable()
            while not wait.done():
                low = min(low, reachable())
                await asyncio.sleep(0.2)
            out, err = wait.result()
            took = time.monotonic() - t0
            await asyncio.sleep(2)  # the clients go on through the rolled pool
        seen.update(min_reachable=low, after=app.query_one(HostsPane).text)
    await src.close()
    seen.update(
        roll_rc=roll.returncode,
        roll_out=out.decode() + err.decode(),
        roll_s=took,
        ok=streams.ok,
        errors=streams.errors,
        truncated=streams.truncated,
        first_error=streams.first_error,
    )
    return seen


def plain(markup: str) -> str:
    from rich.text import Text

    return "\n".join(Text.from_markup(line.replace("$", "")).plain for line in markup.splitlines())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=8, help="streaming clients (default 8)")
    args = ap.parse_args()
    why = sshd_mod.unavailable() or (None if gw_mod.smg_available() else gw_mod.NOT_INSTALLED)
    if why:
        print(f"cannot run here: {why}", file=sys.stderr)
        return 2
    t_start = time.monotonic()
    s = sshd_mod.start(2)
    with tempfile.TemporaryDirectory(prefix="bench-kube-fleet-") as d:
        root = Path(d) / "kube"
        path = root / "fleet.toml"
        os.environ["FAKE_KUBE"] = str(fake_kube(root))
        try:
            for u in s.users:
                pw = pwd.getpwnam(u.name)
                for p in [u.home / ".config", *write_profiles(u.home / ".config")]:
                    os.chown(p, pw.pw_uid, pw.pw_gid)
            path = fleet_file(root, s, pool_port := free_port())
            t0 = time.monotonic()
            r = sgltui(path, "fleet", "pool", "up", "xp", "--profile", "xa")
            up_s = time.monotonic() - t0
            print(f"pool up over {', '.join(POOL)} in {up_s:.1f} s: {r.stdout.strip()}")
            if r.returncode != 0:
                print(r.stderr.strip())
                return 1
            r = sgltui(path, "fleet", "status", "--json")
            hosts = json.loads(r.stdout)["hosts"]
            kinds = {h["name"]: ("pod" if h["ssh"].startswith("pod ") else "ssh") for h in hosts}
            print(
                f"fleet status: {sum(h['reachable'] for h in hosts)}/{len(hosts)} reachable: "
                + ", ".join(f"{n} ({k})" for n, k in kinds.items())
            )
            seen = asyncio.run(roll_in_the_tui(path, f"http://127.0.0.1:{pool_port}", args.clients))
            print("fleet TUI, Hosts view before the roll:\n" + plain(seen["before"]))
            print("... and after:\n" + plain(seen["after"]))
            print("roll: " + " | ".join(seen["roll_out"].strip().splitlines()))
            r = sgltui(path, "fleet", "pool", "status", "xp", "--json")
            workers = json.loads(r.stdout).get("workers") or []
            r = sgltui(path, "fleet", "status", "--json")
            slots = {x["id"]: x for h in json.loads(r.stdout)["hosts"] for x in h["slots"]}
            profiles = [f"{m} {slots[m]['profile']} {slots[m]['state']}" for m in POOL]
            pods = sum(1 for k in kinds.values() if k == "pod")
            sshs = len(kinds) - pods
            met = (
                pods == 4
                and sshs == 2
                and seen["min_reachable"] == seen["hosts"] == 6
                and seen["roll_rc"] == 0
                and seen["errors"] == 0
                and seen["truncated"] == 0
                and all(" xb ready" in p for p in profiles)
            )
            print(
                f"\nbudget: {pods} pods + {sshs} ssh hosts in one fleet TUI "
                f"({seen['min_reachable']}/{seen['hosts']} reachable at the roll's worst), "
                f"pool of 2 pods + 2 ssh hosts rolled xa -> xb in {seen['roll_s']:.1f} s "
                f"(rc {seen['roll_rc']}) under {args.clients} streaming clients: "
                f"{seen['ok']} streams ok, {seen['errors']} client errors, "
                f"{seen['truncated']} truncated"
                + (f" (first: {seen['first_error']})" if seen["first_error"] else "")
                + f"; members now: {', '.join(profiles)}; gateway workers "
                + ", ".join(f"{w['slot']} {w.get('gateway_status')}" for w in workers)
                + f": {'met' if met else 'OVER'} (goal: 0 errors)"
            )
        finally:
            sgltui(path, "fleet", "pool", "down", "xp", timeout=120)
            for state in root.glob("*/state"):
                AgentHandle(state, state).kill_everything()
            sshd_mod.stop_agents(s)
            sshd_mod.stop(s)
    print(f"(whole run {time.monotonic() - t_start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
