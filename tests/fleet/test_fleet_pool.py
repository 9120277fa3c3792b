"""A pool across hosts (fleet.toml [[pool]]) on a real OpenSSH server: two local users stand
for two hosts; h1's agent runs the gateway (smg), each host serves its slot on its address with
a key its own agent generated. A job goes through the pool while a rolling swap crosses both
hosts, and every custom_id comes back exactly once."""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from sgltui.agent.pools import gateway as gw_mod
from sgltui.fleet import config as fleet_config
from sgltui.fleet.client import HostClient
from tests.fleet import sshd as sshd_mod
from tests.ports import server_port

why = sshd_mod.unavailable() or (None if gw_mod.smg_available() else gw_mod.NOT_INSTALLED)
pytestmark = [pytest.mark.skipif(why is not None, reason=why or ""), pytest.mark.slow]  # real sshd

# Tokens in real time, start-up at a hundredth: the servers come up in a moment, and the job
# (one request at a time until the roll is over: 256 tokens, ~1.7 s each here whatever the CPU,
# so ~200 s for the whole job against ~25 s for the roll) cannot finish before the roll does;
# then 64 at a time finish the rest in a few seconds.
PROFILE = """name = "{name}"
launcher = "sim"
[server]
model-path = "meta-llama/Llama-3.1-8B-Instruct"
port = {port}
sim-time-scale = 1.0
sim-slow-start = 0.01
"""
N = 120
MAX_TOKENS = 256


@pytest.fixture(scope="module")
def hosts():
    s = sshd_mod.start(2)
    try:
        for u in s.users:
            prof = u.home / ".config" / "sgltui" / "profiles"
            prof.mkdir(parents=True)
            for name in ("xa", "xb"):
                (prof / f"{name}.toml").write_text(PROFILE.format(name=name, port=server_port()))
            pw = pwd.getpwnam(u.name)
            for p in [u.home / ".config", *(u.home / ".config").rglob("*")]:
                os.chown(p, pw.pw_uid, pw.pw_gid)
        yield s
    finally:
        sshd_mod.stop_agents(s)
        sshd_mod.stop(s)


def _fleet_file(s: sshd_mod.Sshd, path: Path, port: int) -> Path:
    lines = ["[ssh]", f'options = ["-F", "{s.ssh_config}"]', ""]
    for i, u in enumerate(s.users, 1):
        lines += [
            "[[host]]",
            f'name = "h{i}"',
            f'ssh = "{u.name}@127.0.0.1"',
            f'sgltui = "{s.sgltui}"',
            'address = "127.0.0.1"',
            "",
        ]
    lines += ["[[pool]]", 'name = "xp"', 'slots = ["h1/0", "h2/0"]', 'gateway = "h1"']
    lines += [f"port = {port}", ""]
    path.write_text("\n".join(lines))
    return path


def sgltui(fleet_file: Path, *words: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sgltui", "--fleet", str(fleet_file), *words],
        capture_output=True,
        text=True,
        timeout=timeout,
        start_new_session=True,
    )


def _logs(fleet_file: Path) -> str:
    """Each member's server log, for a failure's message: what CI cannot be asked later."""
    out = []
    for host in ("h1", "h2"):
        r = sgltui(fleet_file, "--host", host, "logs", "--slot", "0", "-n", "40", timeout=60)
        out.append(f"\n--- {host}/0 log ---\n{r.stdout}{r.stderr}")
    return "".join(out)


def _keys(s: sshd_mod.Sshd) -> list[str]:
    out = []
    for u in s.users:
        path = u.state_dir / "secrets" / "exposed.json"
        assert path.stat().st_mode & 0o777 == 0o600
        out += [e["api_key"] for e in json.loads(path.read_text()).values()]
    return out


def test_a_pool_across_two_hosts_serves_a_job_exactly_once_through_a_rolling_swap(hosts, tmp_path):
    fleet_file = _fleet_file(hosts, tmp_path / "fleet.toml", server_port())
    fleet = fleet_config.load(fleet_file)
    r = sgltui(fleet_file, "fleet", "pool", "up", "xp", "--profile", "xa")
    assert r.returncode == 0, r.stdout + r.stderr + _logs(fleet_file)
    assert "h1/0 ready, h2/0 ready" in r.stdout, r.stdout
    r = sgltui(fleet_file, "fleet", "status")  # the pool under the host that runs its gateway
    assert r.returncode == 0, r.stderr
    assert "  pool xp on h1 http://127.0.0.1:" in r.stdout, r.stdout

    # Each host generated its own key: kept 0600, required by its server, in no process's argv.
    keys = _keys(hosts)
    assert len(keys) == 2 and keys[0] != keys[1]
    for p in psutil.process_iter(["cmdline"]):
        line = " ".join(p.info["cmdline"] or [])
        assert not any(k in line for k in keys), line

    # The job file and its output are h1's (its agent runs the job and the gateway).
    u1 = hosts.users[0]
    work = u1.home / "job"
    work.mkdir()
    inp, out = work / "in.jsonl", work / "out.jsonl"
    with inp.open("w") as f:
        for i in range(N):
            body = {"model": "default", "prompt": f"p{i}", "max_tokens": MAX_TOKENS}
            row = {"custom_id": f"r{i}", "method": "POST", "url": "/v1/completions", "body": body}
            f.write(json.dumps(row) + "\n")
    pw = pwd.getpwnam(u1.name)
    for p in (work, inp):
        os.chown(p, pw.pw_uid, pw.pw_gid)

    async def run() -> None:
        h1 = HostClient(fleet, fleet.host("h1"))
        await h1.connect()
        try:
            # A direct request without the key is refused by h2's server.
            st2 = (await _status(fleet, "h2"))["slots"][0]
            proc = await asyncio.create_subprocess_exec(
                "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                f"http://127.0.0.1:{st2['port']}/v1/models", stdout=asyncio.subprocess.PIPE,
            )  # fmt: skip
            code, _ = await proc.communicate()
            assert code.decode() == "401"

            job = await h1.call(
                "job_run", input=str(inp), output=str(out), pool="xp", concurrency=1
            )
            jid = job["id"]

            async def view() -> dict:
                return dict(await h1.call("job_status", job=jid))

            deadline = time.monotonic() + 60
            while int((await view()).get("answered") or 0) < 2:
                assert time.monotonic() < deadline, await view()
                await asyncio.sleep(0.1)
            began = time.monotonic()
            roll = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "sgltui", "--fleet", str(fleet_file),
                "fleet", "pool", "swap", "xp", "xb",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )  # fmt: skip
            stdout, stderr = await asyncio.wait_for(roll.communicate(), 180)
            assert roll.returncode == 0, stdout.decode() + stderr.decode()
            text = stdout.decode()
            assert "h1/0: out of the gateway" in text and "h2/0: back in the gateway" in text
            v = await view()
            # The roll crossed the job: it was sending before and is not done after.
            took = time.monotonic() - began
            assert v["state"] == "running" and int(v.get("answered") or 0) < N, (took, v)
            await h1.call("job_set", job=jid, concurrency=64)  # the rest, quickly
            deadline = time.monotonic() + 120
            while (v := await view())["state"] != "done":
                assert v["state"] in ("running", "checking"), v
                assert time.monotonic() < deadline, v
                await asyncio.sleep(0.2)
            for host in ("h1", "h2"):
                slot = (await _status(fleet, host))["slots"][0]
                assert (slot["profile"], slot["state"]) == ("xb", "ready"), slot
            # Its segments are what the pool's workers ran, as each host said (the gateway's
            # agent knows them only by URL): xa, then (mid-roll) both, then xb.
            segs = v["segments"]
            profiles = [s["profile"] for s in segs]
            assert profiles[0] == "xa" and profiles[-1] == "xb", segs
            assert set(profiles) <= {"xa", "xb", "mixed: xa, xb"}, segs
            assert sum(s["completions"] for s in segs) == N, segs
        finally:
            await h1.close()

    asyncio.run(run())
    r = subprocess.run(
        [sys.executable, "-m", "sgltui", "job", "verify", str(inp), str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    ids = [json.loads(line)["custom_id"] for line in out.read_text().splitlines()]
    assert sorted(ids) == sorted(f"r{i}" for i in range(N))
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(row.get("error") is None for row in rows), [x for x in rows if x.get("error")][:3]

    # h1's agent killed -9: the next one (its keeper's, or the next command's) takes the
    # running gateway over from secrets/remote-pools.json; the pool keeps its workers.
    r = sgltui(fleet_file, "fleet", "pool", "status", "xp", "--json")
    gw_pid = json.loads(r.stdout)["gateway"]["pid"]
    old_agent = _agent_pid(u1)
    os.kill(old_agent, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while True:
        r = sgltui(fleet_file, "fleet", "pool", "status", "xp", "--json")
        st = json.loads(r.stdout) if r.returncode == 0 else {}
        pid = _agent_pid(u1)
        seen = [w.get("gateway_status") for w in st.get("workers") or []]
        if pid != old_agent and seen == ["ready", "ready"]:
            break
        assert time.monotonic() < deadline, (r.stdout, r.stderr)
        time.sleep(0.5)
    assert st["gateway"]["pid"] == gw_pid, st  # the same smg: taken over, not restarted

    r = sgltui(fleet_file, "fleet", "pool", "down", "xp")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no gateway" in r.stdout or "stopped" in r.stdout, r.stdout


async def _status(fleet: fleet_config.Fleet, host: str) -> dict:
    c = HostClient(fleet, fleet.host(host))
    await c.connect()
    try:
        return dict(await c.call("status"))
    finally:
        await c.close()


def _agent_pid(u: sshd_mod.User) -> int:
    try:
        return int((u.state_dir / "agent.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0  # between two agents


def test_a_roll_cut_short_by_ctrl_c_is_mended_by_running_it_again(hosts, tmp_path):
    """^C while the first member is out of the gateway: the roll says how to put it back, the
    pool serves on the other meanwhile, and the same roll run again routes to it first (the
    gateway's agent would refuse to take out the only one it routes to), then rolls the
    other."""
    fleet_file = _fleet_file(hosts, tmp_path / "fleet.toml", server_port())
    fleet = fleet_config.load(fleet_file)
    r = sgltui(fleet_file, "fleet", "pool", "up", "xp", "--profile", "xa")
    assert r.returncode == 0, r.stdout + r.stderr + _logs(fleet_file)
    # `up` starts stopped members with xa; running ones (the test before rolled them to xb)
    # keep what they run: roll to the other one.
    was = asyncio.run(_status(fleet, "h1"))["slots"][0]["profile"]
    to = "xb" if was == "xa" else "xa"

    def workers() -> list:
        r = sgltui(fleet_file, "fleet", "pool", "status", "xp", "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        return [(w["slot"], w.get("gateway_status")) for w in json.loads(r.stdout)["workers"]]

    try:
        roll = subprocess.Popen(
            [sys.executable, "-m", "sgltui", "--fleet", str(fleet_file), "fleet", "pool", "swap",
             "xp", to],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        said = []
        assert roll.stdout is not None
        for line in roll.stdout:  # h1/0 is rolled first: cut the roll there
            said.append(line.strip())
            if line.startswith("h1/0: out of the gateway"):
                # Cut once h1's agent has the swap (the line comes just before it is sent).
                deadline = time.monotonic() + 30
                while True:
                    s = asyncio.run(_status(fleet, "h1"))["slots"][0]
                    if (s["state"], s["profile"]) != ("ready", was):
                        break
                    assert time.monotonic() < deadline, s
                    time.sleep(0.05)
                os.killpg(roll.pid, signal.SIGINT)
                break
        out, err = roll.communicate(timeout=60)
        said += out.splitlines()
        assert roll.returncode == 130 and "interrupted" in err, (said, err)
        assert any(s.startswith("h1/0 is out of the gateway until the roll is run again (sgltui "
                                f"fleet pool swap xp {to})") for s in said), said  # fmt: skip

        # h1's agent finishes the swap it was asked for; the gateway routes to h2/0 alone.
        deadline = time.monotonic() + 60
        while (s := asyncio.run(_status(fleet, "h1"))["slots"][0])["state"] != "ready":
            assert time.monotonic() < deadline, s
            time.sleep(0.2)
        assert s["profile"] == to, s
        assert [w for w, _ in workers()] == ["h2/0"]

        r = sgltui(fleet_file, "fleet", "pool", "swap", "xp", to)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "h1/0: out of" not in r.stdout and "h2/0: back in the gateway" in r.stdout
        assert sorted(workers()) == [("h1/0", "ready"), ("h2/0", "ready")]
        for host in ("h1", "h2"):
            assert asyncio.run(_status(fleet, host))["slots"][0]["profile"] == to
    finally:
        sgltui(fleet_file, "fleet", "pool", "down", "xp")


def test_a_member_that_cannot_start_is_named_with_its_cause_and_what_to_do(hosts, tmp_path):
    """h2's profile port held by another process: `pool up` says which member, why and what to
    do, in one line: the pre-check's refusal, then, with the --force it offers, the server that
    fails after its launch, with the cause its agent read in its log. Then it is up."""
    fleet_file = _fleet_file(hosts, tmp_path / "fleet.toml", server_port())
    r = sgltui(fleet_file, "--host", "h2", "stop", "--slot", "0", "--force")
    assert r.returncode == 0, r.stdout + r.stderr
    prof = (hosts.users[1].home / ".config/sgltui/profiles/xa.toml").read_text()
    port = int(prof.split("port = ")[1].split()[0])

    def one_error(r: subprocess.CompletedProcess) -> str:
        assert r.returncode == 1, r.stdout + r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, r.stderr
        return lines[0]

    up = ("fleet", "pool", "up", "xp", "--profile", "xa")
    try:
        with socket.socket() as holder:
            holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # its last server's
            holder.bind(("127.0.0.1", port))
            holder.listen()
            err = one_error(sgltui(fleet_file, *up))
            assert err.startswith("sgltui: error: pool xp: h2/0 not started: preflight port: "
                                  f"port {port} is already in use"), err  # fmt: skip
            assert err.endswith("(or skip this check: --force port)"), err
            # Past the check, as the hint says: the server loads, then cannot bind (SGLang's
            # Errno 98 after loading); the cause its agent read in the log, in the line.
            err = one_error(sgltui(fleet_file, *up, "--force", "port"))
            assert err.startswith("sgltui: error: pool xp: h2/0 is failed, not serving on "
                                  "127.0.0.1: a port the server needs is already in use"), err  # fmt: skip
            assert err.endswith("; see sgltui --host h2 logs --slot 0"), err
            assert "address already in use" in _logs(fleet_file).split("--- h2/0 log ---")[1]

        r = sgltui(fleet_file, *up)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "h1/0 ready, h2/0 ready" in r.stdout, r.stdout
    finally:
        sgltui(fleet_file, "fleet", "pool", "down", "xp")
