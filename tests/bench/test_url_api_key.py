"""`sgltui bench --url` against a server with an API key (issue 18 #7): it could not send one,
and a 401 was reported as "no SGLang server answers". The key comes from $SGLTUI_BENCH_API_KEY
or --api-key-file (never a flag: ps shows every process's flags)."""

from __future__ import annotations

import os
import subprocess

import pytest

from sgltui.bench.loadgen import API_KEY_ENV
from sgltui.commands import bench as bench_command
from tests.fixtures.cli import sgltui as run_sgltui

pytestmark = pytest.mark.slow  # simulators and CLI processes: seconds each

KEY = "sk-bench-key-77"


def sgltui(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """Without the API key of this environment unless `env` sets one."""
    clean = {k: v for k, v in os.environ.items() if k != API_KEY_ENV}
    return run_sgltui(*args, env={**clean, **(env or {})})


ARGS = ("--concurrency", "1", "--requests", "2", "--input-len", "8", "--output-len", "4")


def test_bench_url_with_and_without_the_key(sim_server, tmp_path):
    cfg = tmp_path / "k.yaml"
    cfg.write_text(f'api-key: "{KEY}"\n')
    sim = sim_server("--config", str(cfg))

    r = sgltui("bench", "--url", sim.url, *ARGS)
    assert r.returncode != 0
    assert "no SGLang server answers" not in r.stdout + r.stderr
    assert f"the server at {sim.url} needs an API key (401 without one)" in r.stdout + r.stderr
    assert API_KEY_ENV in r.stdout + r.stderr and "--api-key-file" in r.stdout + r.stderr

    r = sgltui("bench", "--url", sim.url, *ARGS, env={API_KEY_ENV: "wrong"})
    assert "refused the API key (401); check the key" in r.stdout + r.stderr

    r = sgltui("bench", "--url", sim.url, *ARGS, env={API_KEY_ENV: KEY})
    assert r.returncode == 0, r.stdout + r.stderr

    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    r = sgltui("bench", "--url", sim.url, *ARGS, "--api-key-file", str(key_file))
    assert r.returncode == 0, r.stdout + r.stderr


def test_api_key_file_errors_are_one_line(tmp_path):
    r = sgltui(
        "bench",
        "--url",
        "http://127.0.0.1:9",
        "--requests",
        "1",
        "--api-key-file",
        str(tmp_path / "no"),
    )
    err = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(err) == 1 and "cannot read it" in err[0], r.stderr
    r = sgltui("bench", "--requests", "1", "--api-key-file", str(tmp_path / "no"))
    assert "--api-key-file goes with --url" in r.stderr


def test_the_cli_names_the_load_generators_variable():
    assert bench_command.API_KEY_ENV == API_KEY_ENV
