"""`sgltui top`: the text view (pure) and the command end to end against a real agent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from sgltui import protocol
from sgltui.commands.top_text import render
from sgltui.core.units import GIB
from tests.fixtures.cli import sgltui

GB = 1_000_000_000


def status_fixture() -> dict:
    card = {
        "weights_gb": 51.78,
        "kv_pool_tokens": 180006,
        "kv_pool_gb": 10.98,
        "max_running_requests": 4,
        "requested_max_running_requests": 4,
        "mamba_state_slots": 51,
        "hicache_host_gb": 45.76,
        "cuda_graph_bs": [1, 2, 3, 4],
        "context_length": 262144,
        "draft_weights_gb": 0.79,
        "notes": ["KV pool holds 180006 tokens, fewer than --context-length 262144."],
    }
    return {
        "agent": {"pid": 4242},
        "slots": [
            {
                "id": "0",
                "profile": "demo-mtp-hicache",
                "state": "ready",
                "host": "127.0.0.1",
                "port": 30000,
                "pid": 999,
                "uptime_s": 125.0,
                "capacity": card,
            },
            {
                "id": "1",
                "profile": "demo-base",
                "state": "launching",
                "phase": "loading weights",
                "host": "127.0.0.1",
                "port": 30001,
                "pid": 1000,
                "uptime_s": 3.0,
                "capacity": None,
            },
        ],
        "telemetry": {
            "ts": 0.0,
            "gpu_source": {
                "kind": "sim",
                "message": "simulated GPUs published by 2 running simulators",
            },
            "gpus": [
                {
                    "index": 0,
                    "name": "NVIDIA RTX PRO 6000 (simulated)",
                    "uuid": None,
                    "simulated": True,
                    "total_bytes": 96 * GIB,
                    "used_bytes": 72 * GIB,
                    "free_bytes": 24 * GIB,
                    "utilization_pct": 64.0,
                    "power_w": 410.0,
                    "temperature_c": 61.0,
                    "pcie_rx_bytes_s": 2.5e9,
                    "pcie_tx_bytes_s": 1.5e6,
                    "server_bytes": {"0": 70 * GIB},
                    "breakdown_bytes": {"weights": 50 * GIB},
                    "processes": [
                        {
                            "pid": 77,
                            "used_bytes": 2 * GIB,
                            "slot": None,
                            "match": None,
                            "name": "other-job",
                        }
                    ],
                }
            ],
            "host": {
                "ram_total_bytes": 256 * GIB,
                "ram_used_bytes": 100 * GIB,
                "ram_available_bytes": 156 * GIB,
                "swap_total_bytes": 0,
                "swap_used_bytes": 0,
                "cpu_pct": 12.0,
                "server_rss_bytes": {"0": 48 * GIB},
                "server_cpu_pct": {"0": 103.0},
                "server_pinned_bytes": {"0": 45 * GIB},
            },
            "engine": {
                "0": {
                    "source": "metrics",
                    "ts": 99.5,
                    "gen_throughput": 312.4,
                    "num_running_reqs": 4,
                    "num_queue_reqs": 12,
                    "token_usage": 0.21,
                    "accept_length": 3.12,
                    "max_running_requests": 4,
                    "max_total_num_tokens": 180006,
                    "cache_hit_rate": 0.45,
                    "error": None,
                }
            },
        },
    }


def typed(st: dict) -> protocol.StatusReply:
    """A STATUS fixture as `sgltui top` reads the agent's reply (the agent's own fields filled)."""
    agent = {"version": "", "started": 0.0, "state_dir": "", "session_dir": "", **st["agent"]}
    return protocol.decode_reply("status", {**st, "agent": agent})


def test_render_shows_every_reading_and_labels_simulated():
    text = render(typed(status_fixture()), now=100.0)
    assert text.isascii()
    lines = text.splitlines()
    gpu = next(l for l in lines if l.startswith("  0  NVIDIA"))
    assert (
        "(simulated)" in gpu and "72.0/96.0 GiB 75%" in gpu and "util 64%" in gpu and "410 W" in gpu
    )
    assert "61 C" in gpu and "rx 2.3 GiB/s tx 1.4 MiB/s" in gpu  # binary, like every size
    assert lines[1].startswith("GPU (SIMULATED)")
    assert any("slot 0: 70.0 GiB" in l and "weights 50.0" in l for l in lines)
    assert any(
        "other pid 77: 2.0 GiB (other-job)" in l for l in lines
    )  # memory nobody accounted for
    host = next(l for l in lines if l.startswith("HOST"))
    assert "100.0/256.0 GiB used (156.0 available)" in host and "cpu 12%" in host
    assert any("rss 48.0 GiB" in l and "cpu 103%" in l and "pinned 45.0 GiB" in l for l in lines)
    eng = next(l for l in lines if "engine (metrics" in l)
    assert (
        "0.5 s ago" in eng
        and "running 4/4" in eng
        and "queued 12" in eng
        and "gen 312 tok/s" in eng  # three significant digits
    )
    assert "token usage 21%" in eng and "accept 3.12" in eng and "cache hit 45%" in eng
    cap = next(l for l in lines if "capacity:" in l)
    assert "weights 51.8 GiB + draft 0.8 GiB" in cap and "KV 180,006 tok (11.0 GiB)" in cap
    assert (
        "max running 4 (requested 4)" in cap
        and "mamba slots 51" in cap
        and "hicache host 42.6 GiB" in cap  # SGLang's 45.76 decimal GB
    )
    assert "graphs bs 1..4 (4 sizes)" in cap and "ctx 262144" in cap
    assert any(l.strip().startswith("note: KV pool holds") for l in lines)
    assert any("1  demo-base  launching (loading weights)" in l for l in lines)
    assert any(l.strip() == "engine: no reading yet" for l in lines)  # launching, no reading yet


def test_render_without_gpu_or_slots():
    st = {
        "agent": {"pid": 1},
        "slots": [],
        "telemetry": {
            "gpus": [],
            "gpu_source": {"kind": "none", "message": "no NVIDIA driver found: GPU pane disabled"},
            "host": None,
            "engine": {},
        },
    }
    text = render(typed(st))
    assert "GPU (none)  no NVIDIA driver found: GPU pane disabled" in text
    assert "HOST  (no reading yet)" in text and "SLOTS  (none" in text


@pytest.fixture
def agent_cleanup(isolated_env):
    """top starts the agent on demand (detached): stop it whatever the test did."""
    yield isolated_env
    subprocess.run(
        [sys.executable, "-m", "sgltui", "agent", "stop"], capture_output=True, timeout=90
    )
    pidfile = isolated_env / "agent.pid"
    if pidfile.exists():
        try:
            os.kill(int(pidfile.read_text().split()[0]), signal.SIGKILL)
        except (ValueError, ProcessLookupError, PermissionError):
            pass


@pytest.mark.slow
def test_top_once_and_json_against_the_agent(agent_cleanup):
    out = sgltui("top", "--once")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("sgltui top")
    assert any(l.startswith("GPU (") for l in lines) and any(l.startswith("HOST") for l in lines)
    out = sgltui("top", "--once", "--json")
    assert out.returncode == 0, out.stderr
    tel = json.loads(out.stdout)
    assert set(tel) >= {"ts", "gpus", "gpu_source", "host", "engine"}
    assert tel["gpu_source"]["kind"] in ("nvml", "sim", "none")


def test_top_refreshes_until_interrupted(agent_cleanup):
    proc = subprocess.Popen(
        [sys.executable, "-m", "sgltui", "top", "--interval", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        frames, deadline = 0, time.monotonic() + 60
        while frames < 3 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            frames += line.startswith("sgltui top")
        assert frames == 3
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130 and "interrupted" in err
    assert (
        "\x1b[" not in rest
    )  # not a terminal: no screen clearing, frames separated by blank lines


@pytest.mark.parametrize("bad", ["0", "-1", "abc", "nan", "inf"])
def test_bad_interval_is_refused(bad):
    from sgltui.cli import CliError
    from sgltui.commands.telemetry import parse_interval

    with pytest.raises(CliError, match="positive number of seconds"):
        parse_interval(bad)
    assert parse_interval("0.5") == 0.5


def test_bad_interval_is_one_clear_line_from_the_command():
    out = sgltui("top", "--interval", "fast", timeout=30)
    assert out.returncode == 1
    assert (
        out.stderr.strip().count("\n") == 0
        and "--interval 'fast'" in out.stderr
        and "try --interval 2" in out.stderr
    )
