"""`fleet status` among many hosts (issue 49), on stand-in hosts (tests/support/standin.py)
reached through the usual ssh transport: each host's answer as it comes, a refused host among
the first, a hung one after its timeout, holding up no other."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sgltui.fleet import config as fleet_config
from sgltui.fleet import link
from tests.fixtures.cli import sgltui
from tests.support import standin

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # (the hung host: its 1 s timeout, then up to 3 s for ssh's exit code)
async def test_status_of_32_hosts_comes_as_each_answers_a_dead_and_a_hung_one_hold_up_none(
    tmp_path,
):
    sock = tmp_path / "s.sock"
    ready = asyncio.Event()
    server = asyncio.get_running_loop().create_task(standin.serve(sock, ready))
    await ready.wait()
    names = [f"h{i}" for i in range(1, 33)]
    path = standin.fleet_file(tmp_path, sock, names, dead={"h20"}, slow={"h31"})
    fleet = fleet_config.load(path)
    t0 = time.monotonic()
    got: list[tuple[str, float, object]] = []
    try:
        async for st in link.poll_each(fleet, timeout_s=1.0):
            got.append((st.name, time.monotonic() - t0, st))
    finally:
        server.cancel()
    order = [n for n, _, _ in got]
    assert sorted(order) == sorted(names)
    assert order[-1] == "h31"  # the hung host last, after its timeout; every other before it
    hung = got[-1][2]
    assert not hung.reachable and "no answer within 1s" in (hung.error or "")
    dead = next(st for n, _, st in got if n == "h20")
    assert not dead.reachable and "no ssh server answers" in (dead.error or "")
    live = [st for n, _, st in got if n not in ("h20", "h31")]
    assert all(st.reachable and len(st.status.slots) == 8 for st in live)
    # The others did not wait for the hung host: they were all in well before its timeout.
    assert got[-2][1] < got[-1][1] - 0.5, got[-2:]


@pytest.mark.slow
def test_fleet_status_json_lines_prints_a_line_per_host_and_exits_3_with_one_down(tmp_path):
    sock = tmp_path / "s.sock"
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "tests/support/standin.py"), "serve", "--socket", str(sock)],
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 10
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        names = [f"h{i}" for i in range(1, 10)]
        path = standin.fleet_file(tmp_path, sock, names, dead={"h5"})
        r = sgltui("--fleet", str(path), "fleet", "status", "--json-lines", timeout=60)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(10)
    assert r.returncode == 3, r.stderr
    lines = [json.loads(ln) for ln in r.stdout.splitlines()]
    assert sorted(h["name"] for h in lines) == sorted(names)
    down = [h for h in lines if not h["reachable"]]
    assert [h["name"] for h in down] == ["h5"] and "h5" in down[0]["error"]
    assert all(len(h["slots"]) == 8 and h["gpus"] == 8 for h in lines if h["reachable"])
