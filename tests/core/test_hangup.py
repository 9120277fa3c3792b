"""core/hangup.py without sshd: a CLI whose agent never answers, run as sshd runs it (no pty,
SSH_CONNECTION set, stdout a pipe or a socket), ends once nothing can read its stdout; the
real-sshd version of this is tests/fleet/test_fleet_hangup.py."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time

import pytest

from sgltui.client.paths import paths


@pytest.fixture
def mute_agent(tmp_path):
    """A state dir whose agent socket accepts connections and never answers."""
    state = tmp_path / "state"
    state.mkdir()
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(paths(state)["socket"]))
    srv.listen(8)
    yield state
    srv.close()


FAR = {  # what marks the far end of a command: sshd's variable, or a pod's (kubectl exec)
    "ssh": ("SSH_CONNECTION", "127.0.0.1 50000 127.0.0.1 22"),
    "kubectl": ("KUBERNETES_SERVICE_HOST", "10.96.0.1"),
}


def _start(state, stdout, ssh: bool, far: str = "ssh") -> subprocess.Popen:
    drop = ("SSH_CONNECTION", "SSH_CLIENT", "KUBERNETES_SERVICE_HOST")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    if ssh:
        env[FAR[far][0]] = FAR[far][1]
    return subprocess.Popen(
        [sys.executable, "-m", "sgltui", "--state-dir", str(state), "status"],
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )


def _ends(proc: subprocess.Popen, timeout: float) -> bool:
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout)
    return proc.returncode is not None


@pytest.mark.parametrize(("kind", "far"), [("pipe", "ssh"), ("socket", "ssh"), ("pipe", "kubectl")])
def test_a_hung_command_under_sshd_ends_when_its_stdout_goes_away(mute_agent, kind, far):
    if kind == "pipe":
        ours, theirs = os.pipe()  # ours: the read end (sshd's side)
    else:
        a, b = socket.socketpair()
        ours, theirs = a.detach(), b.detach()
    proc = _start(mute_agent, theirs, ssh=True, far=far)
    os.close(theirs)
    try:
        time.sleep(1.5)  # it is up and waiting for the agent's hello, which never comes
        assert proc.poll() is None
        os.close(ours)  # the connection ends: sshd closes its side
        assert _ends(proc, 10), "still running after its stdout went away"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()


def test_without_sshd_it_is_left_alone(mute_agent):
    """A local command's stdout reader going away is SIGPIPE's business at the next write, as
    ever: the watcher runs only at the far end of an ssh command."""
    ours, theirs = os.pipe()
    proc = _start(mute_agent, theirs, ssh=False)
    os.close(theirs)
    try:
        time.sleep(1.5)
        os.close(ours)
        assert not _ends(proc, 2.0)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
        proc.wait()
