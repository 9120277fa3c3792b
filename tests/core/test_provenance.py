"""core/provenance.py: what produced a number (issue 38), from a /server_info."""

from __future__ import annotations

import json

from sgltui.agent.slot import discovery
from sgltui.core import provenance
from tests.fixtures.cli import sgltui


def info(**args):
    base = {
        "model_path": "Qwen/Qwen3-8B",
        "served_model_name": "Qwen/Qwen3-8B",
        "port": 30000,
        "schedule_policy": "fcfs",
        "max_running_requests": 48,
        "chunked_prefill_size": 8192,
        "api_key": "sk-secret",
        "version": "0.5.23",
        "launch_command": "python -m sglang.launch_server --model-path Qwen/Qwen3-8B "
        "--api-key sk-secret",
        "max_total_num_tokens": 500000,
        "internal_states": [
            {"effective_max_running_requests_per_dp": 48, "last_gen_throughput": 1}
        ],
        "status": "ready",
    }
    base.update(args)
    return base


def test_record_keeps_args_and_decided_without_secrets_and_hashes_what_ran():
    rec = provenance.record(info(), {"name": "H100", "driver": "570.1", "cuda": "12.8"})
    assert "api_key" not in rec["args"] and "sk-secret" not in json.dumps(rec)
    assert rec["version"] == "0.5.23" and rec["model"] == "Qwen/Qwen3-8B"
    assert rec["decided"]["max_total_num_tokens"] == 500000
    assert rec["decided"]["effective_max_running_requests_per_dp"] == 48
    assert rec["gpu"] == {"name": "H100", "driver": "570.1", "cuda": "12.8"}
    # a figure that changes every second is not part of what ran
    again = provenance.record(
        info(
            internal_states=[
                {"last_gen_throughput": 99, "effective_max_running_requests_per_dp": 48}
            ],
            status="busy",
        )
    )
    assert again["hash"] == rec["hash"]
    assert provenance.record(info(max_running_requests=12))["hash"] != rec["hash"]


def test_non_default_flags_and_the_flags_two_servers_differ_in():
    catalog = provenance.catalog_of("0.5.23")
    flags = provenance.non_default(info(schedule_policy="lpm"), catalog)
    assert flags.get("schedule-policy") == "lpm" and "port" not in flags
    lines = provenance.flag_diff_lines(
        {"a": info(), "b": info(schedule_policy="lpm", max_running_requests=12, port=1)}
    )
    assert lines[0] == "a vs b: 2 flag(s) differ"
    assert "  --max-running-requests: 48 vs 12" in lines
    assert "  --schedule-policy: 'fcfs' vs 'lpm'" in lines


def test_a_server_as_a_profile_keeps_typed_and_non_default_flags_never_the_key():
    profile, _ = provenance.profile_from_info(
        info(
            schedule_policy="lpm",
            launch_command="python -m sglang.launch_server --model-path Qwen/Qwen3-8B "
            "--max-running-requests 48 --api-key sk-secret",
        ),
        "p",
    )
    assert profile.server["max-running-requests"] == 48  # typed, although SGLang decides it
    assert profile.server["schedule-policy"] == "lpm"  # off its default
    assert "chunked-prefill-size" not in profile.server  # decided by SGLang, not typed
    assert "api-key" not in profile.server and profile.server["model-path"] == "Qwen/Qwen3-8B"


def test_server_command_lines_are_recognised():
    kind = discovery.server_kind
    assert kind(["/usr/bin/python3", "-m", "sglang.launch_server", "--port", "1"]) == "sglang"
    assert kind(["/venv/bin/sglang", "serve", "Qwen/Qwen3-8B"]) == "sglang"
    assert kind(["python", "/venv/bin/sglang", "serve"]) == "sglang"
    assert kind(["python3.11", "-m", "sgltui.sim"]) == "sim"
    assert kind(["timeout", "1h", "python", "-m", "sglang.launch_server"]) is None
    assert kind(["python", "-m", "http.server"]) is None
    assert kind(["sglang", "version"]) is None
    assert discovery.flag(["x", "--port", "1", "--port=2"], "--port") == "2"
    assert discovery.model_of(None, ["sglang", "serve", "M", "--port", "1"]) == "M"


def test_bench_compare_of_two_runs_shows_the_flags_they_differ_in(tmp_path):
    def run(path, server):
        path.write_text(
            json.dumps(
                {
                    "run_id": path.stem,
                    "results": [],
                    "comparison": {"rows": [], "best": {}, "job": None},
                    "server_info": {"p": server},
                }
            )
        )

    run(tmp_path / "a.json", info())
    run(tmp_path / "b.json", info(chunked_prefill_size=4096, version="0.5.22"))
    r = sgltui("bench", "compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert "a:p vs b:p: SGLang 0.5.23 vs 0.5.22" in r.stdout, r.stdout + r.stderr
    assert "--chunked-prefill-size: 8192 vs 4096" in r.stdout


def test_attach_urls_and_the_refusals_that_say_the_way_forward():
    from types import SimpleNamespace

    import pytest

    from sgltui.agent.errors import OpError
    from sgltui.agent.slot import attach

    assert attach.split_url("http://127.0.0.1:30000/") == (
        "http://127.0.0.1:30000",
        "127.0.0.1",
        30000,
    )
    assert attach.split_url("http://[::1]:8000")[0] == "http://[::1]:8000"
    with pytest.raises(OpError, match="give http://HOST:PORT"):
        attach.split_url("127.0.0.1:30000")
    assert attach.is_local("127.0.0.1") and attach.is_local("localhost")
    assert not attach.is_local("192.0.2.1")  # TEST-NET-1: never this host

    def slot(pid):
        ext = SimpleNamespace(url="http://h:1", pid=pid)
        return SimpleNamespace(id="s", external=ext, state="ready")

    with pytest.raises(OpError, match=r"`sgltui adopt --slot s` takes it over \(then stop works\)"):
        attach.refuse(slot(42), "stop")
    with pytest.raises(OpError, match="a remote server sgltui did not start: it cannot swap"):
        attach.refuse(slot(None), "swap")
    attach.refuse(SimpleNamespace(id="s", external=None, state="ready"), "stop")  # ours: no-op
