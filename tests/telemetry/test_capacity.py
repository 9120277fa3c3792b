"""The capacity card from start-up lines and /server_info."""

from sgltui.core.capacity import CapacityBuilder, build_card

MTP_HYBRID_TP1 = """\
[2026-10-01 12:00:00] server_args=ServerArgs(model_path='Qwen/Qwen3.6-27B', tp_size=1, max_running_requests=None, context_length=None, speculative_algorithm='NEXTN', api_key='k')
[2026-10-01 12:00:00] Max running requests is reset to 48 for speculative decoding. You can override this by explicitly setting --max-running-requests.
[2026-10-01 12:00:01] Load weight begin. avail mem=94.50 GB
[2026-10-01 12:00:20] Load weight end. elapsed=19.00 s, type=Qwen3_5ForCausalLM, avail mem=38.90 GB, mem usage=55.60 GB.
[2026-10-01 12:00:21] Load weight begin. avail mem=38.90 GB
[2026-10-01 12:00:22] Load weight end. elapsed=1.00 s, type=Qwen3_5ForCausalLMMTP, avail mem=37.10 GB, mem usage=1.80 GB.
[2026-10-01 12:00:23] Mamba Cache is allocated. max_mamba_cache_size: 52, conv_state size: 0.18GB, ssm_state size: 7.20GB intermediate_ssm_state_cache size: 2.40GB intermediate_conv_window_cache size: 0.05GB
[2026-10-01 12:00:23] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 245000, K size: 7.48 GB, V size: 7.48 GB
[2026-10-01 12:00:23] Draft KV Cache is allocated. dtype: torch.bfloat16, #tokens: 245000, K size: 0.47 GB, V size: 0.47 GB
[2026-10-01 12:00:24] Memory pool end. avail mem=9.10 GB
[2026-10-01 12:00:24] Capture target verify CUDA graph begin. backend=full, num_tokens_per_req=4, avail mem=9.00 GB
[2026-10-01 12:00:30] Capture target verify CUDA graph end. bs=[1, 2, 3, 4], elapsed=6.00 s, mem usage=0.40 GB, avail mem=8.60 GB.
[2026-10-01 12:00:31] Capture draft decode CUDA graph end. bs=[1, 2, 3, 4], elapsed=1.00 s, mem usage=0.10 GB, avail mem=8.50 GB.
[2026-10-01 12:00:32] max_running_requests is capped to 4 by the mamba state cache (52 slots).
[2026-10-01 12:00:32] max_total_num_tokens=245000, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=4, context_len=262144, available_gpu_mem=8.50 GB
[2026-10-01 12:00:40] The server is fired up and ready to roll!
""".splitlines()


def test_mtp_card_from_log_shows_effective_concurrency_and_why():
    card = build_card(MTP_HYBRID_TP1)
    assert card["weights_gb"] == 55.60
    assert card["draft_weights_gb"] == 1.80
    assert card["kv_pool_tokens"] == 245000
    assert abs(card["kv_pool_gb"] - 14.96) < 1e-9  # target pool only; the draft pool is separate
    assert abs(card["draft_kv_gb"] - 0.94) < 1e-9
    assert card["max_running_requests"] == 4
    assert card["requested_max_running_requests"] is None  # not set by the profile
    assert card["mamba_state_slots"] == 52
    assert card["context_length"] == 262144
    assert card["cuda_graph_bs"] == [1, 2, 3, 4]  # target graphs, not the draft's
    assert card["hicache_host_gb"] is None
    assert any("reset to 48" in n for n in card["notes"])
    assert any("capped to 4" in n for n in card["notes"])
    assert card["speculative_algorithm"] == "NEXTN"
    assert card["sources"] == ["log"]


def test_hicache_pool_adds_host_gb_but_not_concurrency():
    lines = [
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 260000, K size: 7.9 GB, V size: 7.9 GB",
        "Allocating kv hierarchical KV host pool: 520000 tokens, 31.80 GB host memory.",
        "Allocating draft hierarchical KV host pool: 520000 tokens, 1.20 GB host memory.",
        "max_total_num_tokens=260000, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=19, context_len=262144, available_gpu_mem=8.0 GB",
    ]
    card = build_card(lines)
    assert card["hicache_host_gb"] == 33.0
    assert card["hicache_host_tokens"] == 1040000
    assert card["max_running_requests"] == 19


def test_only_rank0_lines_count_with_tensor_parallelism():
    lines = [
        "[2026-10-01 12:00:20 TP0] Load weight end. elapsed=9.0 s, type=X, avail mem=60.0 GB, mem usage=20.00 GB.",
        "[2026-10-01 12:00:20 TP1] Load weight end. elapsed=9.0 s, type=X, avail mem=60.0 GB, mem usage=20.00 GB.",
        "[2026-10-01 12:00:21 TP1] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 999, K size: 1 GB, V size: 1 GB",
        "[2026-10-01 12:00:21 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 500000, K size: 20 GB, V size: 20 GB",
    ]
    b = CapacityBuilder()
    for line in lines:
        b.feed_line(line)
    b.feed_server_info({"tp_size": 2})
    card = b.card()
    assert (
        card["weights_gb"] == 20.0 and card["draft_weights_gb"] is None
    )  # TP1's weights are not a draft
    assert card["kv_pool_tokens"] == 500000
    assert any("per GPU" in n for n in card["notes"])


def test_server_info_fills_the_card_and_effective_beats_requested():
    info = {
        "max_running_requests": 48,
        "context_length": 131072,
        "tp_size": 1,
        "max_total_num_tokens": 400000,
        "internal_states": [
            {
                "effective_max_running_requests_per_dp": 10,
                "memory_usage": {"weight": 55.6, "kvcache": 20.5, "graph": {"decode": 0.4}},
                "decode_cuda_graph_bs": [1, 2, 4, 8],
            }
        ],
    }
    card = build_card([], info)
    assert card["weights_gb"] == 55.6 and card["kv_pool_gb"] == 20.5
    assert card["kv_pool_tokens"] == 400000
    assert card["max_running_requests"] == 10
    assert card["requested_max_running_requests"] == 48
    assert card["cuda_graph_bs"] == [1, 2, 4, 8]
    assert card["context_length"] == 131072
    assert any("below the requested 48" in n for n in card["notes"])
    assert card["sources"] == ["server_info"]


def test_no_lines_no_card():
    assert build_card(["hello", "INFO: something"]) is None


def test_bound_names_what_limits_max_running_requests():
    from sgltui.core.capacity import bound

    hybrid = {"max_running_requests": 19, "mamba_state_slots": 98, "kv_pool_tokens": 260000}
    assert bound(hybrid) == {
        "by": "mamba",
        "text": "mamba state slots: 98 slots / 5 per request (extra_buffer) = 19 running",
    }
    no_buffer = dict(hybrid, max_running_requests=32)
    assert bound(no_buffer, {"mamba_radix_cache_strategy": "no_buffer"})["text"] == (
        "mamba state slots: 98 slots / 3 per request (no_buffer) = 32 running"
    )
    flag = dict(hybrid, max_running_requests=4, requested_max_running_requests=4)
    assert bound(flag)["by"] == "flag"
    spec = dict(hybrid, max_running_requests=48, requested_max_running_requests=48)
    assert bound(spec, speculative_default=True)["by"] == "speculative"
    dense = {"max_running_requests": 10246, "kv_pool_tokens": 20492}
    assert bound(dense)["text"] == "KV pool: 20492 tokens / 2 = 10246 running"
    assert bound({"max_running_requests": 2048, "kv_pool_tokens": 20492})["by"] == "pool"
