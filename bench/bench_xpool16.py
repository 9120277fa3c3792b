#!/usr/bin/env python3
"""Issue 49 item 4, measured in one run: a cross-host pool of 16 workers behind one smg, rolled
to another profile under streaming clients with 0 errors.

No cluster, no GPUs: the hosts are "pods" of tests/fleet/fake_kubectl.py (each the real
`sgltui agent bridge`: a real agent per pod, its own state, config and simulated-GPU
directories; every pod's IP is 127.0.0.1) and, with --ssh N, local users behind a real OpenSSH
server on 127.0.0.1 (tests/fleet/sshd.py; root needed). Each host's host.toml gives it
--slots simulated GPUs with one slot on each; fleet.toml's [[pool]] takes every slot of every
host, its gateway (the real smg) on the first pod. The simulators run at a fifth of real time
(a 64-token stream ~0.4 s) and start at a hundredth, so 16 of them fit a small machine.

    [sudo] python bench/bench_xpool16.py [--pods 4] [--ssh 0] [--slots 4] [--clients 8]

Then: `sgltui fleet pool up xp --profile xa`; N streaming clients through the gateway while
`sgltui fleet pool swap xp xb` rolls every member one at a time; the gateway's workers (from
`fleet pool status --json`) before and after. Prints the figures and met/OVER; exit 0 whatever
they are (they are the output), 1 when the pool did not come up, 2 when it cannot run here.
"""

from __future__ import annotations

import argparse
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

FAKE = ROOT / "tests" / "fleet" / "fake_kubectl.py"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
PROFILE = """name = "{name}"
launcher = "sim"
[server]
model-path = "{model}"
sim-time-scale = 0.2
sim-slow-start = 0.01
max-running-requests = 64
"""


def write_config(config_home: Path, slots: int) -> list[Path]:
    """The two profiles and a host.toml of `slots` simulated GPUs, a slot on each (named by its
    GPU's index); every path made, for chown on an ssh user's home."""
    d = config_home / "sgltui" / "profiles"
    d.mkdir(parents=True, exist_ok=True)
    made = [config_home, d.parent, d]
    for name in ("xa", "xb"):
        p = d / f"{name}.toml"
        p.write_text(PROFILE.format(name=name, model=MODEL))
        made.append(p)
    host = d.parent / "host.toml"
    host.write_text(
        f"simulated_gpus = {slots}\n"
        + "".join(
            f'[[slot]]\nname = "{i}"\ngpus = [{i}]\nport = {free_port()}\n' for i in range(slots)
        )
    )
    made.append(host)
    return made


def fake_kube(root: Path, pods: list[str], slots: int) -> Path:
    """bin/kubectl (the fake) and bin/sgltui (this interpreter, this checkout) and the fake's
    cluster: the pods behind one label, each with its config."""
    bin_ = root / "bin"
    bin_.mkdir(parents=True)
    for name, line in (
        ("kubectl", f'exec {sys.executable} {FAKE} "$@"'),
        ("sgltui", f'exec {sys.executable} -m sgltui "$@"'),
    ):
        (bin_ / name).write_text(f"#!/bin/sh\n{line}\n")
        (bin_ / name).chmod(0o755)
    items = [
        {"name": p, "namespace": "ml", "labels": {"app": "sgltui"}, "podIP": "127.0.0.1"}
        for p in pods
    ]
    cfg = root / "kube.json"
    cfg.write_text(json.dumps({"root": str(root), "pods": items}))
    for pod in pods:
        write_config(root / pod / "config", slots)
    return cfg


def fleet_file(root: Path, s, members: list[str], gateway: str, pool_port: int) -> Path:
    lines = ["[ssh]", f'options = ["-F", "{s.ssh_config}"]', ""] if s else []
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
    for i, u in enumerate(s.users if s else [], 1):
        lines += [
            "[[host]]",
            f'name = "h{i}"',
            f'ssh = "{u.name}@127.0.0.1"',
            f'sgltui = "{s.sgltui}"',
            'address = "127.0.0.1"',
            "",
        ]
    lines += ["[[pool]]", 'name = "xp"', f"slots = {json.dumps(members)}"]
    lines += [f'gateway = "{gateway}"', f"port = {pool_port}", ""]
    path = root / "fleet.toml"
    path.write_text("\n".join(lines))
    return path


def sgltui(path: Path, *words: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sgltui", "--fleet", str(path), *words],
        capture_output=True,
        text=True,
        timeout=timeout,
        start_new_session=True,
    )


def workers(path: Path) -> list[dict]:
    r = sgltui(path, "fleet", "pool", "status", "xp", "--json")
    try:
        return json.loads(r.stdout).get("workers") or []
    except json.JSONDecodeError:
        print(f"(pool status: {r.stdout.strip()} {r.stderr.strip()})")
        return []


def ready(ws: list[dict]) -> int:
    return sum(1 for w in ws if w.get("gateway_status") == "ready")


def swap_timings(states: list[Path]) -> str:
    """The members' own swaps, from their hosts' sessions (swap.done's timings_s): the mean of
    each step over the swaps found, so the roll's time per member can be split into the host's
    swap and what the fleet side adds (the gateway's removal, re-registration and ready wait,
    each step a call over the host's link)."""
    done: list[dict] = []
    for state in states:
        for f in state.glob("**/sessions/*/events.jsonl"):
            for line in f.read_text(errors="replace").splitlines():
                try:
                    ev = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if ev.get("type") == "swap.done" and ev.get("ok"):
                    done.append(ev.get("timings_s") or {})
    if not done:
        return "no swap.done found in the hosts' sessions"
    keys = [k for k in done[0] if isinstance(done[0][k], (int, float))]
    means = {k: sum(float(t.get(k) or 0) for t in done) / len(done) for k in keys}
    return f"{len(done)} host swaps, mean " + ", ".join(f"{k} {v:.2f} s" for k, v in means.items())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=4, help="fake-kubectl pods (default 4)")
    ap.add_argument("--ssh", type=int, default=0, help="ssh hosts on a loopback sshd (default 0)")
    ap.add_argument("--slots", type=int, default=4, help="slots per host (default 4)")
    ap.add_argument("--clients", type=int, default=8, help="streaming clients (default 8)")
    args = ap.parse_args()
    if not gw_mod.smg_available():
        print(f"cannot run here: {gw_mod.NOT_INSTALLED}", file=sys.stderr)
        return 2
    sshd_mod = None
    if args.ssh:
        from tests.fleet import sshd as sshd_mod

        if why := sshd_mod.unavailable():
            print(f"cannot run here: {why}", file=sys.stderr)
            return 2
    t_start = time.monotonic()
    pods = [f"sgltui-{i}" for i in range(args.pods)]
    s = sshd_mod.start(args.ssh) if sshd_mod else None
    hosts = [f"k.{p}" for p in pods] + [f"h{i}" for i in range(1, args.ssh + 1)]
    members = [f"{h}/{i}" for h in hosts for i in range(args.slots)]
    n = len(members)
    with tempfile.TemporaryDirectory(prefix="bench-xpool16-") as d:
        root = Path(d) / "kube"
        path = root / "fleet.toml"
        os.environ["FAKE_KUBE"] = str(fake_kube(root, pods, args.slots))
        try:
            for u in s.users if s else []:
                pw = pwd.getpwnam(u.name)
                for p in write_config(u.home / ".config", args.slots):
                    os.chown(p, pw.pw_uid, pw.pw_gid)
            path = fleet_file(root, s, members, hosts[0], pool_port := free_port())
            t0 = time.monotonic()
            r = sgltui(path, "fleet", "pool", "up", "xp", "--profile", "xa")
            up_s = time.monotonic() - t0
            print(f"pool up: {n} members on {len(hosts)} hosts in {up_s:.1f} s (rc {r.returncode})")
            if r.returncode != 0:
                print(r.stdout.strip() + "\n" + r.stderr.strip())
                for log in root.glob("*/state/**/servers/*.log"):  # why a server exited
                    lines = log.read_text(errors="replace").splitlines()
                    if any("error" in x.lower() for x in lines):
                        print(f"{log.relative_to(root)}:\n  " + "\n  ".join(lines[-8:]))
                return 1
            before = workers(path)
            print(f"gateway before the roll: {ready(before)}/{len(before)} workers ready")
            with Streams(f"http://127.0.0.1:{pool_port}", args.clients) as streams:
                time.sleep(2)
                t0 = time.monotonic()
                roll = sgltui(path, "fleet", "pool", "swap", "xp", "xb")
                took = time.monotonic() - t0
                time.sleep(2)  # the clients go on through the rolled pool
            print("roll: " + " | ".join((roll.stdout + roll.stderr).strip().splitlines()[-6:]))
            after = workers(path)
            r = sgltui(path, "fleet", "status", "--json")
            slots = {x["id"]: x for h in json.loads(r.stdout)["hosts"] for x in h["slots"]}
            rolled = sum(
                1
                for m in members
                if slots.get(m, {}).get("profile") == "xb"
                and slots.get(m, {}).get("state") == "ready"
            )
            states = list(root.glob("*/state")) + [u.state_dir for u in (s.users if s else [])]
            print("the hosts' own swaps: " + swap_timings(states))
            met = (
                roll.returncode == 0
                and streams.errors == 0
                and streams.truncated == 0
                and rolled == n
                and ready(after) == n
            )
            kinds = f"{args.pods} pods" + (f" + {args.ssh} ssh hosts" if args.ssh else "")
            print(
                f"\nbudget: a pool of {n} simulated workers ({kinds} x {args.slots} slots) behind "
                f"one smg rolled xa -> xb in {took:.1f} s ({took / n:.1f} s a member, "
                f"rc {roll.returncode}) under {args.clients} streaming clients: "
                f"{streams.ok} streams ok, {streams.errors} client errors, "
                f"{streams.truncated} truncated"
                + (f" (first: {streams.first_error})" if streams.first_error else "")
                + f"; gateway workers ready {ready(before)}/{len(before)} before, "
                f"{ready(after)}/{len(after)} after; {rolled}/{n} members on xb and ready: "
                f"{'met' if met else 'OVER'} (goal: 0 errors, 0 truncated, all {n} rolled)"
            )
        finally:
            sgltui(path, "fleet", "pool", "down", "xp", timeout=120)
            for state in root.glob("*/state"):
                AgentHandle(state, state).kill_everything()
            if s and sshd_mod:
                sshd_mod.stop_agents(s)
                sshd_mod.stop(s)
    print(f"(whole run {time.monotonic() - t_start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
