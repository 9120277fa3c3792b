"""The simulator follows SGLang 0.5.23 for deprecated flags: accepted, SGLang's own warning lines,
translated into their successors; --enable-hicache is an alias."""

from __future__ import annotations

import httpx

from sgltui.sim.deprecations import parse_time_lines


def test_deprecated_flags_warn_like_sglang_and_resolve_to_successors(sim_server):
    sim = sim_server(
        "--disable-cuda-graph",
        "--grpc-mode",
        "--enable-dp-attention",
        "--enable-hicache",
        "--cuda-graph-backend-prefill",
        "breakable",
    )
    text = sim.text()
    assert (
        "'--disable-cuda-graph' is deprecated and will be removed in a future release. "
        "Use '--cuda-graph-backend-{decode,prefill}=disabled' instead." in text
    )
    assert "'--enable-dp-attention' is deprecated and will be removed in a future release." in text
    assert (
        "--grpc-mode is deprecated and will be removed in a future version. Use --smg-grpc-mode"
        in text
    )
    info = httpx.get(sim.url + "/server_info", timeout=10).json()
    assert info["enable_hierarchical_cache"] is True  # the alias
    assert info["smg_grpc_mode"] is True and info["enable_dp_attention"] is False
    # The legacy flag sets only the phase the profile left open (explicit backends win).
    assert (info["cuda_graph_backend_decode"], info["cuda_graph_backend_prefill"]) == (
        "disabled",
        "breakable",
    )


def test_parse_time_lines_are_sglangs_bold_yellow_text():
    assert parse_time_lines(["--model-path", "m", "--disable-cuda-graph"]) == [
        "\033[1;33m'--disable-cuda-graph' is deprecated and will be removed in a future release. "
        "Use '--cuda-graph-backend-{decode,prefill}=disabled' instead.\033[0m"
    ]
    assert parse_time_lines(["--smg-grpc-mode"]) == []
