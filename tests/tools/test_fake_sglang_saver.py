"""tools/gpucheck/fake_sglang's memory saver, on the CPU (its holder keeps the bytes in host
memory with FAKE_SGLANG_CPU_HOLD=1): release/resume move them as SGLang 0.5.23's flags say,
answer `200 null`, hold generation back while released, and the holder dies with its server; a
second release or a resume of memory not released ends the server, as torch-memory-saver does."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.ports import server_port

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tools" / "gpucheck" / "fake_sglang"
BOTH = ["--enable-memory-saver", "--enable-weights-cpu-backup"]


def call(port: int, path: str, body=None, timeout: float = 30.0):
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=None if body is None else json.dumps(body).encode(),
        method="GET" if body is None else "POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, json.loads(r.read() or b"null")


class Fake:
    def __init__(self, flags: list[str], tmp: Path):
        self.port = server_port()
        self.log = open(tmp / f"fake-{self.port}.log", "wb")  # noqa: SIM115 - closed in stop
        env = dict(
            os.environ,
            PYTHONPATH=f"{FAKE}:{ROOT}",
            FAKE_SGLANG_CPU_HOLD="1",
            GPU_HOLD_GIB="0.01",
            SIM_TIME_SCALE="0",
        )
        argv = [sys.executable, "-m", "sglang.launch_server", "--model-path"]
        argv += ["meta-llama/Llama-3.1-8B-Instruct", "--port", str(self.port), *flags]
        self.proc = subprocess.Popen(
            argv, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def wait_held(self) -> None:
        end = time.monotonic() + 60
        while True:
            try:
                if call(self.port, "/fake_sglang/holder", timeout=5)[1]["held"]:
                    break
            except urllib.error.HTTPError:
                raise  # the server is up and does not know the endpoint
            except (urllib.error.URLError, ConnectionError):
                pass
            assert self.proc.poll() is None and time.monotonic() < end, self.tail()
            time.sleep(0.05)
        # ... and until the server's warm-up request is over: a release while it runs dies on
        # SGLang's idle assertion, as the simulator models (the test saw that under load)
        while b"ready to roll" not in Path(self.log.name).read_bytes():
            assert self.proc.poll() is None and time.monotonic() < end, self.tail()
            time.sleep(0.05)

    def holder(self, verify: bool = False) -> dict:
        return call(self.port, "/fake_sglang/holder" + ("?verify=1" if verify else ""))[1]

    def tail(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_bytes()[-2000:].decode(errors="replace")

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)
        self.log.close()


@pytest.fixture
def fake(tmp_path):
    started: list[Fake] = []

    def start(flags: list[str]) -> Fake:
        f = Fake(flags, tmp_path)
        started.append(f)  # stopped at the end, also when it never came up
        f.wait_held()
        return f

    yield start
    for f in started:
        f.stop()


def test_release_and_resume_move_the_bytes_and_hold_generation_back(fake):
    f = fake(BOTH)
    assert call(f.port, "/pause_generation", {"mode": "retract"}) == (
        200,
        {"message": "Generation paused successfully.", "status": "ok"},
    )
    assert call(f.port, "/release_memory_occupation", {"tags": ["weights"]}) == (200, None)
    state = f.holder()
    assert state["released"] and state["pinned"] and state["backup"], state
    assert call(f.port, "/continue_generation", {"torch_empty_cache": True})[1]["status"] == "ok"
    got: list = []
    body = {"text": "hi", "sampling_params": {"max_new_tokens": 1}}
    t = threading.Thread(target=lambda: got.append(call(f.port, "/generate", body)))
    t.start()
    t.join(0.5)
    assert not got, "a generation ran while the memory was released"
    # The tags released, no more: all three would be a KeyError for the two never released.
    assert call(f.port, "/resume_memory_occupation", {"tags": ["weights"]}) == (200, None)
    t.join(10)
    assert got and got[0][0] == 200
    state = f.holder(verify=True)
    assert not state["released"] and state["cycles"] == 1 and state["verify"] == "ok", state
    # Kept pinned between cycles (TMS_RETAIN_CPU_BACKUP=1): a second release pins nothing new.
    pin_s = state["pin_s"]
    call(f.port, "/release_memory_occupation", {})
    call(f.port, "/resume_memory_occupation", {})
    again = f.holder(verify=True)
    assert again["cycles"] == 2 and again["pin_s"] == pin_s and again["verify"] == "ok"


def test_without_cpu_backup_the_bytes_come_back_as_garbage(fake):
    f = fake(["--enable-memory-saver"])
    call(f.port, "/release_memory_occupation", {})
    assert not f.holder()["pinned"]
    call(f.port, "/resume_memory_occupation", {})
    assert f.holder(verify=True)["verify"].startswith("1 GiB not as written"), f.tail()


def test_without_the_memory_saver_release_does_nothing(fake):
    f = fake(["--enable-weights-cpu-backup"])
    assert call(f.port, "/release_memory_occupation", {}) == (200, None)
    assert not f.holder()["released"]
    # Other tags than weights release nothing of the held block either.
    g = fake(BOTH)
    call(g.port, "/release_memory_occupation", {"tags": ["kv_cache"]})
    assert not g.holder()["released"]


def test_the_holder_ends_with_its_server(fake):
    f = fake(BOTH)
    pid = f.holder()["pid"]
    os.kill(f.proc.pid, signal.SIGKILL)  # the launcher alone, not its group
    f.proc.wait(10)
    end = time.monotonic() + 15
    while Path(f"/proc/{pid}").exists():
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            break  # exited, not reaped yet
        assert time.monotonic() < end, "the holder outlived its server"
        time.sleep(0.1)


@pytest.mark.parametrize(
    "calls,line",
    [
        (["/release_memory_occupation", "/release_memory_occupation"], "pause"),
        (["/resume_memory_occupation"], "resume"),
    ],
)
def test_an_unpaired_release_or_resume_ends_the_server(fake, calls, line):
    f = fake(BOTH)
    call(f.port, "/pause_generation", {"mode": "retract"})
    for path in calls:
        try:
            call(f.port, path, {"tags": ["weights"]}, timeout=10)
        except (urllib.error.URLError, ConnectionError):
            pass  # the server went down under the request (or answered 500: the holder is gone)
    assert f.proc.wait(20) != 0, f.tail()
    said = f"[torch_memory_saver.cpp] Cannot {line} allocation that is not"
    assert said in f.tail() and "(fake_sglang's GPU holder)" in f.tail(), f.tail()
