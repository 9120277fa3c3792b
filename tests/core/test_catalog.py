"""The flag catalog: bundled contents, argparse builder, and the live catalog read from an interpreter."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path

import pytest

from sgltui.core.flags import BUNDLED_PATH, human_int, load_bundled_catalog, load_live_catalog
from sgltui.core.profiles import load_profiles


def test_bundled_catalog_describes_sglang_0_5_23():
    cat = load_bundled_catalog()
    assert cat.version == "0.5.23" and cat.source == "bundled"
    assert len(cat.flags) > 400
    model = cat.lookup("--model")
    assert model is not None and model.name == "model-path" and "model" in model.aliases
    assert cat.lookup("enable-hicache").name == "enable-hierarchical-cache"
    assert cat.lookup("context-length").type == "human_int"
    assert cat.lookup("max-running-requests").type == "int"
    assert cat.lookup("mem-fraction-static").type == "float"
    assert cat.lookup("enable-metrics").action == "store_true"
    assert cat.lookup("uvicorn-access-log-exclude-prefixes").nargs == "*"
    assert "no_buffer" in cat.lookup("mamba-radix-cache-strategy").choices
    assert cat.lookup("dllm-fdfo").action == "boolean_optional" and cat.is_negation("no-dllm-fdfo")
    deprecated = cat.lookup("disable-cuda-graph")
    assert deprecated.deprecated and "cuda-graph-backend" in deprecated.replacement
    # Renamed 0.5.12 flags are gone from the parser, and sgltui knows where they went.
    assert cat.lookup("mamba-scheduler-strategy") is None
    assert cat.renamed("mamba-scheduler-strategy")[0] == "mamba-radix-cache-strategy"
    assert cat.renamed("cuda-graph-max-bs")[0] == "cuda-graph-max-bs-decode"
    assert "NEXTN" in cat.values["speculative-algorithm"]["values"]
    assert "MTP" not in cat.values["speculative-algorithm"]["values"]


def test_no_help_text_is_committed():
    data = json.loads(BUNDLED_PATH.read_text())

    def walk(node):
        if isinstance(node, dict):
            assert "help" not in node
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
        elif isinstance(node, str):
            # Help sentences are long prose; catalog strings are names, values and flag spellings.
            assert len(node) < 120 and ". " not in node, node

    walk(data)


@pytest.mark.parametrize(
    "text, value",
    [("32768", 32768), ("32k", 32000), ("32Ki", 32768), ("1.5M", 1500000), ("2Gi", 2 * 1024**3)],
)
def test_human_int_matches_sglangs_rules(text, value):
    assert human_int(text) == value


@pytest.mark.parametrize("text", ["32K", "32kb", "1.5Ki", "lots"])
def test_human_int_rejects_what_sglang_rejects(text):
    with pytest.raises(argparse.ArgumentTypeError):
        human_int(text)


def test_argparse_builder_accepts_every_bundled_profile():
    parser = argparse.ArgumentParser(exit_on_error=False)
    load_bundled_catalog().add_to_argparse(parser, include_sim=True)
    for name, profile in load_profiles().items():
        ns = parser.parse_args(profile.flag_argv())
        assert ns.model_path == "Qwen/Qwen3.6-27B", name
        assert ns.port == 30000
        assert ns.uvicorn_access_log_exclude_prefixes == ["/metrics", "/health", "/v1/loads"]
    ns = parser.parse_args(
        [
            "--model",
            "m",
            "--context-length",
            "32k",
            "--no-dllm-fdfo",
            "--cuda-graph-bs-decode",
            "1",
            "2",
            "--sim-gpu",
            "h200-141gb",
            "--sim-time-scale",
            "0",
        ]
    )
    assert (ns.model_path, ns.context_length, ns.dllm_fdfo, ns.cuda_graph_bs_decode) == (
        "m",
        32000,
        False,
        [1, 2],
    )
    assert (ns.sim_gpu, ns.sim_time_scale) == ("h200-141gb", 0.0)
    assert ns.max_running_requests is None and ns.schedule_policy == "fcfs", "defaults are SGLang's"
    with pytest.raises(argparse.ArgumentError):
        parser.parse_args(["--schedule-policy", "fastest"])


def test_argparse_builder_without_sim_flags_rejects_them():
    parser = argparse.ArgumentParser(exit_on_error=False)
    load_bundled_catalog().add_to_argparse(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--sim-gpu", "h200-141gb"])


def test_live_catalog_falls_back_to_bundled_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cat = load_live_catalog(sys.executable)  # the test interpreter has no sglang
    assert cat.source == "bundled"
    assert (
        cat.describe()
        == f"SGLang 0.5.23 flag catalog bundled with sgltui (SGLang is not importable by {sys.executable})"
    )
    assert load_live_catalog(str(tmp_path / "no-such-python")).source == "bundled"


FAKE_SERVER_ARGS = """
class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--model-path", "--model", type=str)
        parser.add_argument("--brand-new-flag", type=int, default=7)
        parser.add_argument("--shiny", action="store_true", help="(Deprecated, use --brand-new-flag) old")
"""


def _fake_sglang(root: Path, version: str) -> None:
    pkg = root / "sglang"
    (pkg / "srt").mkdir(parents=True)
    (pkg / "__init__.py").write_text(f"__version__ = {version!r}\n")
    (pkg / "srt" / "__init__.py").write_text("")
    (pkg / "srt" / "server_args.py").write_text(textwrap.dedent(FAKE_SERVER_ARGS))
    dist = root / f"sglang-{version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n")


def test_live_catalog_is_read_from_the_interpreter_and_cached_per_version(tmp_path, monkeypatch):
    site = tmp_path / "site"
    _fake_sglang(site, "9.9.9")
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    live = load_live_catalog(sys.executable)
    assert (live.source, live.version) == ("live", "9.9.9")
    assert live.describe() == f"SGLang 9.9.9 flag catalog read live from {sys.executable}"
    assert set(live.flags) == {"model-path", "brand-new-flag", "shiny"}
    assert live.lookup("brand-new-flag").default == 7 and live.lookup("model").name == "model-path"
    assert (
        live.lookup("shiny").deprecated and live.lookup("shiny").replacement == "--brand-new-flag"
    )
    cached = tmp_path / "cache" / "sgltui" / "flag-catalogs" / "sglang-9.9.9.json"
    assert cached.exists()
    # The second read comes from the cache: break the package, the catalog still loads.
    (site / "sglang" / "srt" / "server_args.py").write_text("raise ImportError('broken')\n")
    again = load_live_catalog(sys.executable)
    assert again.source == "cached" and set(again.flags) == set(live.flags)
    # Another version is another cache entry; a failing extraction falls back to bundled, saying why.
    (site / "sglang-9.9.9.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: sglang\nVersion: 9.9.10\n"
    )
    fallback = load_live_catalog(sys.executable)
    assert fallback.source == "bundled" and "broken" in fallback.describe()
