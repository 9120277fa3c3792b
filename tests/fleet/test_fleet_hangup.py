"""A hung far `sgltui` ends when the client gives up (#35 item 12).

Over a real sshd (one local user standing for a host) whose agent is SIGSTOPped, so that every
far command hangs waiting for its hello: the local client gives up (Ctrl-C, a SIGTERM, the fleet
link's connect timeout), and within a few seconds no far sgltui of that user remains. Before the
fix sshd closed the far command's pipes but sent no SIGHUP (no pty), and the command, blocked on
its agent, ran on for ever; a SIGTERM to the local client left its ssh running too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import signal
import subprocess
import sys
import time

import psutil
import pytest

from sgltui.fleet import config as fleet_config
from sgltui.fleet.client import HostClient, HostError
from tests.fleet import sshd as sshd_mod

why = sshd_mod.unavailable()
pytestmark = [pytest.mark.skipif(why is not None, reason=why or ""), pytest.mark.slow]  # real sshd

ENDS_WITHIN_S = 8.0  # sshd closes the pipes at once; the far end's watcher needs a poll wakeup


@pytest.fixture(scope="module")
def hung_host(tmp_path_factory):
    """(sshd, fleet.toml) with the one user's agent started, then SIGSTOPped."""
    s = sshd_mod.start(1)
    agent = None
    try:
        f = s.fleet_toml(tmp_path_factory.mktemp("hangup") / "fleet.toml")
        r = _local(f, "--host", "h1", "agent", "start").communicate(timeout=120)
        uid = pwd.getpwnam(s.users[0].name).pw_uid
        said = r[0].split("pid", 1)  # "agent: running, pid N"
        assert len(said) == 2, r
        agent = psutil.Process(int(said[1].strip()))
        assert agent.uids().real == uid
        agent.send_signal(signal.SIGSTOP)
        yield s, f, uid
    finally:
        if agent is not None:
            with contextlib.suppress(psutil.Error):
                agent.send_signal(signal.SIGCONT)
        sshd_mod.stop_agents(s)
        sshd_mod.stop(s)


def _local(fleet_file, *words: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "sgltui", "--fleet", str(fleet_file), *words],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own group: a signal to it is a terminal's to its job
    )


def _procs(uid: int) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["uids", "cmdline"]):
        if p.info["uids"] and p.info["uids"].real == uid and p.info["cmdline"]:
            out.append(p)
    return out


def _far_clis(uid: int) -> list[list[str]]:
    """The user's `python -m sgltui ...` processes (the far commands; not the agent, which is
    `-m sgltui.agent`)."""
    found = []
    for p in _procs(uid):
        cmd = p.info["cmdline"]
        if any(a == "-m" and b == "sgltui" for a, b in zip(cmd, cmd[1:], strict=False)):
            found.append(cmd)
    return found


def _wait_for(cond, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


@pytest.mark.parametrize("give_up", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_hung_far_command_ends_when_the_client_gives_up(hung_host, give_up):
    _, f, uid = hung_host
    local = _local(f, "--host", "h1", "status")
    try:
        # The far `sgltui status` runs, hung on the stopped agent's hello.
        assert _wait_for(lambda: any("status" in c for c in _far_clis(uid)), 60), _far_clis(uid)
        time.sleep(0.5)
        assert local.poll() is None, local.communicate()
        os.killpg(local.pid, give_up)
        out, err = local.communicate(timeout=15)
        ended = _wait_for(lambda: not _far_clis(uid), ENDS_WITHIN_S)
        assert ended, f"still running on the far host: {_far_clis(uid)}"
        # Ctrl-C says "interrupted" (not ssh's "Killed by signal"); a SIGTERM ends it quietly.
        if give_up == signal.SIGINT:
            assert local.returncode == 130 and "interrupted" in err, (local.returncode, err)
        else:
            assert local.returncode == 128 + give_up, (local.returncode, out, err)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(local.pid, signal.SIGKILL)
        local.wait()


def test_a_hung_far_bridge_ends_when_the_fleet_link_gives_up(hung_host):
    s, f, uid = hung_host
    fleet = fleet_config.load(f)

    async def connect() -> str:
        c = HostClient(fleet, fleet.hosts[0])
        try:
            await c.connect(timeout=5)  # the stopped agent never answers the hello
        except HostError as exc:
            return str(exc)
        finally:
            await c.close()
        return "connected"

    said = asyncio.run(connect())
    assert "no answer within 5s" in said, said
    ended = _wait_for(lambda: not _far_clis(uid), ENDS_WITHIN_S)
    assert ended, f"still running on the far host: {_far_clis(uid)}"
