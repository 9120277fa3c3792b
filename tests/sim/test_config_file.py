"""The simulator reads `--config FILE.yaml` as SGLang 0.5.23 does (server_args_config_parser):
the file's flags first, the command line wins, one file only, .yaml/.yml only."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from sgltui.sim.cli import parse_args

KEY = "sk-sim-key-123"


def test_config_flags_merge_and_the_command_line_wins(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f'api-key: "{KEY}"\nport: 31000\nenable-metrics: true\ntrust-remote-code: false\n'
        "max-running-requests: 4\n"
    )
    args = parse_args(["--model-path", "m", "--config", str(cfg), "--port", "32000"])
    assert args.api_key == KEY and args.port == 32000 and args.enable_metrics is True
    assert args.trust_remote_code is False and args.max_running_requests == 4


@pytest.mark.parametrize(
    "name,body,message",
    [
        ("c.txt", "port: 1\n", "Config file must be YAML format, got: .txt"),
        ("missing.yaml", None, "Config file not found"),
        ("list.yaml", "- 1\n- 2\n", "must contain a dictionary at root level"),
    ],
)
def test_bad_config_files_fail_like_sglang(tmp_path, name, body, message):
    path = tmp_path / name
    if body is not None:
        path.write_text(body)
    proc = subprocess.run(
        [sys.executable, "-m", "sgltui.sim", "--model-path", "m", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_sim_started_with_a_config_key_enforces_it(sim_server, tmp_path):
    cfg = tmp_path / "k.yaml"
    cfg.write_text(f'api-key: "{KEY}"\n')
    cfg.chmod(0o600)
    sim = sim_server("--config", str(cfg))
    assert KEY not in " ".join(sim.argv)
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(f"{sim.url}/v1/models", timeout=10)
    assert exc.value.code == 401
    req = urllib.request.Request(f"{sim.url}/v1/models", headers={"Authorization": f"Bearer {KEY}"})
    assert urllib.request.urlopen(req, timeout=10).status == 200
