"""Importing an SGLang command line: exact round trip with `show --command`, spellings, errors."""

from __future__ import annotations

import shlex
import sys

import pytest

from sgltui.core.flags import load_bundled_catalog
from sgltui.core.profile_import import import_command, profile_to_toml
from sgltui.core.profiles import ProfileError, get_profile, load_profiles, read_raw

CATALOG = load_bundled_catalog()


@pytest.mark.parametrize("name", sorted(load_profiles()))
def test_round_trip_of_every_bundled_profile(tmp_path, name):
    original = get_profile(name)
    imported = import_command(original.command_line(), CATALOG, name=name)
    assert imported.launcher == original.launcher
    assert imported.python == original.python
    assert imported.server == original.server
    assert imported.env == original.env
    # ... and through the TOML file tomli-w writes.
    path = tmp_path / f"{name}.toml"
    path.write_text(profile_to_toml(imported))
    reloaded = get_profile(str(path))
    assert reloaded.server == original.server and reloaded.env == original.env
    assert reloaded.argv() == original.argv()
    assert reloaded.command_hash() == original.command_hash()


def test_round_trip_of_tricky_values(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text(
        'python = "/opt/sglang env/bin/python"\n'
        "[server]\n"
        'model-path = "/models/with space"\n'
        'context-length = "32Ki"\n'
        "mem-fraction-static = 0.875\n"
        "hicache-ratio = 2\n"
        "dllm-fdfo = false\n"
        "model-checksum = true\n"
        'served-model-name = "123"\n'
        'json-model-override-args = \'{"rope_scaling":{"factor":2}}\'\n'
        "cuda-graph-bs-decode = [1, 2, 8]\n"
        "[env]\n"
        'HF_HOME = "/data/hf cache"\n'
    )
    original = get_profile(str(path))
    imported = import_command(original.command_line(), CATALOG)
    assert imported.server == original.server
    assert imported.python == "/opt/sglang env/bin/python"
    assert imported.env == {"HF_HOME": "/data/hf cache"}


def test_sglang_serve_with_positional_model_env_and_equals():
    p = import_command(
        "CUDA_VISIBLE_DEVICES=1 sglang serve Qwen/Qwen3.6-27B --port=30001 --enable-metrics "
        "--uvicorn-access-log-exclude-prefixes /metrics /health --max-running-requests 4",
        CATALOG,
    )
    assert p.launcher == "sglang"
    assert p.env == {"CUDA_VISIBLE_DEVICES": "1"}
    assert p.server == {
        "model-path": "Qwen/Qwen3.6-27B",
        "port": 30001,
        "enable-metrics": True,
        "uvicorn-access-log-exclude-prefixes": ["/metrics", "/health"],
        "max-running-requests": 4,
    }


def test_python_dash_m_with_interpreter_options_and_aliases():
    p = import_command(
        [
            "env",
            "A=b",
            "/opt/venv/bin/python3",
            "-u",
            "-X",
            "dev",
            "-m",
            "sglang.launch_server",
            "--model",
            "m",
            "--enable-hicache",
            "--tp",
            "2",
            "--no-dllm-fdfo",
        ],
        CATALOG,
    )
    assert p.python == "/opt/venv/bin/python3"
    assert p.env == {"A": "b"}
    # Aliases are kept as written; abbreviations are expanded (argparse accepts unique prefixes).
    assert p.server == {"model": "m", "enable-hicache": True, "tp-size": 2, "dllm-fdfo": False}


def test_bare_interpreter_is_resolved_on_path(tmp_path, monkeypatch):
    fake = tmp_path / "bin" / "python3"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(fake.parent))
    p = import_command("python3 -m sglang.launch_server --model-path m", CATALOG)
    assert p.python == str(fake)


def test_own_interpreter_is_not_recorded_and_sim_is_recognised():
    p = import_command(
        [sys.executable, "-m", "sgltui.sim", "--model-path", "m", "--sim-gpu", "h200-141gb"],
        CATALOG,
    )
    assert p.launcher == "sim" and p.python is None
    assert p.server == {"model-path": "m", "sim-gpu": "h200-141gb"}


@pytest.mark.parametrize(
    "command, message",
    [
        (
            "python -m sglang.launch_server --model-path m --mamba-scheduler-strategy no_buffer",
            "--mamba-scheduler-strategy is not accepted by SGLang 0.5.23 (renamed after 0.5.12); use --mamba-radix-cache-strategy",
        ),
        (
            "python -m sglang.launch_server --model-path m --cuda-graph-max-bs 16",
            "use --cuda-graph-max-bs-decode",
        ),
        (
            "python -m sglang.launch_server --model-path m --mem-fracton-static 0.8",
            "unknown flag --mem-fracton-static for SGLang 0.5.23; did you mean --mem-fraction-static",
        ),
        (
            "python -m sglang.launch_server --model-path m --cuda-graph-max 16",
            "--cuda-graph-max is ambiguous (could be --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill",
        ),
        (
            "python -m sglang.launch_server --model-path m --sim-gpu h100-80gb",
            "unknown flag --sim-gpu",
        ),
        ("python -m vllm.entrypoints.openai.api_server --model m", "is not an SGLang server"),
        ("docker run sglang", "not an SGLang launch command"),
        ("sglang version", "only `sglang serve` starts a server"),
        ("python -m sglang.launch_server --model-path m stray", "unexpected argument 'stray'"),
        ("python -m sglang.launch_server --enable-metrics=yes", "--enable-metrics takes no value"),
        ("python -m sglang.launch_server --port", "--port needs a value"),
        (
            "python -m sglang.launch_server --model-path 'unterminated",
            "cannot split the command line",
        ),
    ],
)
def test_import_errors_are_one_line_with_a_fix(command, message):
    with pytest.raises(ProfileError) as err:
        import_command(command, CATALOG)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_written_toml_is_plain_and_loadable(tmp_path):
    p = import_command(
        shlex.split(
            "/opt/py/bin/python -m sglang.launch_server --model-path m --speculative-algorithm NEXTN "
            "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 "
            "--max-running-requests 4"
        ),
        CATALOG,
        name="mtp2",
        description="imported mtp",
    )
    text = profile_to_toml(p)
    assert text.startswith(
        'name = "mtp2"\ndescription = "imported mtp"\nlauncher = "sglang"\npython = "/opt/py/bin/python"\n\n[server]\n'
    )
    path = tmp_path / "mtp2.toml"
    path.write_text(text)
    raw = read_raw(path)
    assert raw.data["server"]["max-running-requests"] == 4
    assert (
        raw.line("server", "max-running-requests")
        == text.splitlines().index("max-running-requests = 4") + 1
    )
