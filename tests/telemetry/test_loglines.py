"""Batch and start-up line parsing, against lines SGLang 0.5.23 (and 0.5.12) print."""

from sgltui.core.loglines import parse_batch_line, parse_startup_line, split_prefix

PREFILL_TP2 = (
    "[2026-10-01 12:00:41 TP0] Prefill batch, #new-seq: 4, #new-token: 8192, #cached-token: 1536, "
    "token usage: 0.07, #running-req: 12, #queue-req: 3, #pending-token: 2048, cuda graph: False, "
    "input throughput (token/s): 41532.77"
)
DECODE_TP2 = (
    "[2026-10-01 12:00:43 TP0] Decode batch, #running-req: 16, #token: 31488, token usage: 0.09, "
    "cuda graph: True, gen throughput (token/s): 1874.20, #queue-req: 0"
)
DECODE_EAGLE_MAMBA = (
    "[2026-10-01 12:05:10] Decode batch, #running-req: 32, #full token: 90112, full token usage: 0.21, "
    "mamba num: 64, mamba usage: 0.40, accept len: 3.12, accept rate: 0.71, cuda graph: True, "
    "gen throughput (token/s): 3312.45, #queue-req: 0"
)


def test_prefix_ranks():
    ll = split_prefix("[2026-10-01 12:00:03 DP1 TP3 EP2] Decode batch, #running-req: 1")
    assert ll.ranks == {"DP": 1, "TP": 3, "EP": 2}
    assert ll.time_text == "2026-10-01 12:00:03"
    assert ll.message.startswith("Decode batch")
    assert split_prefix("[2026-10-01 12:00:03.123] hello").message == "hello"
    assert split_prefix("no prefix at all").ranks == {}


def test_prefill_line():
    b = parse_batch_line(PREFILL_TP2)
    assert b.kind == "prefill"
    assert b.ranks == {"TP": 0}
    assert b.num_running_reqs == 12 and b.num_queue_reqs == 3
    assert b.token_usage == 0.07
    assert b.input_throughput == 41532.77
    assert b.gen_throughput is None
    assert b.fields["cuda graph"] is False
    assert abs(b.cache_hit_rate - 1536 / (8192 + 1536)) < 1e-9


def test_decode_line_plain():
    b = parse_batch_line(DECODE_TP2)
    assert b.kind == "decode"
    assert b.num_running_reqs == 16 and b.num_queue_reqs == 0
    assert b.fields["#token"] == 31488
    assert b.token_usage == 0.09
    assert b.gen_throughput == 1874.20
    assert b.accept_length is None


def test_decode_line_speculative_hybrid_uses_bottleneck_pool():
    b = parse_batch_line(DECODE_EAGLE_MAMBA)
    assert b.ranks == {}
    assert b.accept_length == 3.12 and b.accept_rate == 0.71
    assert b.token_usage == 0.40  # max(full 0.21, mamba 0.40): the pool that binds
    assert b.fields["mamba num"] == 64


def test_batch_line_tolerates_iter_unknown_keys_and_other_graph_labels():
    line = (
        "[2026-10-01 12:00:43.500 DP1] Decode batch [1234], #running-req: 2, #token: 10, token usage: 0.01, "
        "brand new field: 7, npu graph: False, gen throughput (token/s): 12.5, #queue-req: 1, "
        "est. decode TFLOPS/s (per GPU): 1.5"
    )
    b = parse_batch_line(line)
    assert b.dp_rank == 1
    assert b.num_running_reqs == 2 and b.num_queue_reqs == 1 and b.gen_throughput == 12.5
    assert b.fields["brand new field"] == 7


def test_non_batch_lines_are_ignored():
    assert (
        parse_batch_line(
            '[2026-10-01 12:00:09] INFO:     127.0.0.1:51234 - "GET /health HTTP/1.1" 200 OK'
        )
        is None
    )
    assert parse_batch_line("The server is fired up and ready to roll!") is None
    assert parse_batch_line("Prefill batch") is None
    assert parse_batch_line("") is None


def test_startup_lines_0_5_23():
    w = parse_startup_line(
        "[2026-10-01 12:00:01] Load weight end. elapsed=12.34 s, type=LlamaForCausalLM, "
        "avail mem=63.40 GB, mem usage=15.12 GB."
    )
    assert w.kind == "weights_end" and w.values["mem_gb"] == 15.12 and w.values["avail_gb"] == 63.40
    assert w.values["type"] == "LlamaForCausalLM"
    kv = parse_startup_line(
        "[2026-10-01 12:00:02 TP0] KV Cache is allocated. dtype: torch.bfloat16, "
        "#tokens: 412160, K size: 25.16 GB, V size: 25.16 GB"
    )
    assert kv.kind == "kv_cache" and kv.values["tokens"] == 412160
    assert abs(kv.values["kv_gb"] - 50.32) < 1e-9 and kv.values["dtype"] == "torch.bfloat16"
    assert kv.is_rank0
    kv1 = parse_startup_line(
        "[2026-10-01 12:00:02 TP1] KV Cache is allocated. dtype: torch.bfloat16, "
        "#tokens: 412160, K size: 25.16 GB, V size: 25.16 GB"
    )
    assert not kv1.is_rank0
    mamba = parse_startup_line(
        "Mamba Cache is allocated. max_mamba_cache_size: 256, conv_state size: 0.35GB, "
        "ssm_state size: 11.25GB intermediate_ssm_state_cache size: 4.00GB "
        "intermediate_conv_window_cache size: 0.50GB "
    )
    assert mamba.kind == "mamba_cache" and mamba.values["slots"] == 256
    assert mamba.values["ssm_gb"] == 11.25 and mamba.values["intermediate_ssm_gb"] == 4.0
    host = parse_startup_line(
        "Allocating kv hierarchical KV host pool: 824320 tokens, 101.32 GB host memory."
    )
    assert host.kind == "hicache_host" and host.values == {
        "label": "kv",
        "tokens": 824320,
        "gb": 101.32,
    }
    state = parse_startup_line("Allocating mamba hierarchical host pool: 22.17 GB host memory.")
    assert state.values == {"label": "mamba", "tokens": None, "gb": 22.17}
    g = parse_startup_line(
        "Capture target decode CUDA graph end. bs=[1, 2, 4, 8], elapsed=21.30 s, "
        "mem usage=1.05 GB, avail mem=7.05 GB."
    )
    assert (
        g.kind == "graph_end"
        and g.values["bs"] == [1, 2, 4, 8]
        and g.values["which"] == "target decode"
    )
    s = parse_startup_line(
        "max_total_num_tokens=412160, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=2048, context_len=131072, available_gpu_mem=7.05 GB"
    )
    assert s.kind == "summary"
    assert s.values["max_total_num_tokens"] == 412160 and s.values["max_running_requests"] == 2048
    assert s.values["context_len"] == 131072 and s.values["available_gpu_mem_gb"] == 7.05
    assert parse_startup_line("Memory pool end. avail mem=8.21 GB").values["avail_gb"] == 8.21
    t = parse_startup_line(
        "Engine startup timings (s): load_weight=12.34, kv_cache_allocation=1.02, "
        "scheduler_e2e=48.70, cuda_graph={decode=21.30}, tokenizer_e2e=55.10"
    )
    assert t.values["load_weight"] == 12.34 and t.values["decode"] == 21.30


def test_startup_lines_0_5_12_and_labelled_pools():
    kv = parse_startup_line(
        "KV Cache is allocated. #tokens: 1000, K size: 1.00 GB, V size: 1.50 GB"
    )
    assert kv.values["tokens"] == 1000 and kv.values["kv_gb"] == 2.5 and kv.values["dtype"] is None
    mla = parse_startup_line(
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 5000, KV size: 3.25 GB"
    )
    assert mla.values["kv_gb"] == 3.25
    draft = parse_startup_line(
        "Draft KV Cache is allocated. dtype: torch.bfloat16, #tokens: 5000, K size: 0.1 GB, V size: 0.1 GB"
    )
    assert draft.values["label"] == "Draft"
    old_host = parse_startup_line("Allocating 12.50 GB host memory for hierarchical KV cache.")
    assert (
        old_host.kind == "hicache_host"
        and old_host.values["gb"] == 12.5
        and old_host.values["label"] is None
    )
    mamba_host = parse_startup_line(
        "Allocating 22.17 GB host memory for hierarchical Mamba cache "
        "(102 state slots, layout=page_first)."
    )
    assert mamba_host.values["label"] == "mamba" and mamba_host.values["gb"] == 22.17
    assert mamba_host.values["state_slots"] == 102
    packed = parse_startup_line(
        "Allocating kv hierarchical KV host pool: 1000 tokens, 2.00 GB host memory, "
        "packed MTP KV layers: target_layers=16, draft_layers=1, total_layers=17."
    )
    assert packed.values == {"label": "kv", "tokens": 1000, "gb": 2.0}
    old_graph = parse_startup_line(
        "Capture cuda graph end. Time elapsed: 12.3 s. mem usage=1.05 GB. avail mem=7.05 GB."
    )
    assert old_graph.kind == "graph_end" and old_graph.values["mem_gb"] == 1.05


def test_unified_kv_sizing_counts_only_the_post_capture_figure():
    assert (
        parse_startup_line(
            "KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 900000, KV size: 99.00 GB"
        )
        is None
    )
    kv = parse_startup_line(
        "Post-capture KV sizing: KV cache allocated. dtype: torch.bfloat16, #tokens: 412160, "
        "KV size: 50.31 GB, avail mem=7.00 GB"
    )
    assert kv.kind == "kv_cache" and kv.values["label"] is None and kv.values["tokens"] == 412160
    draft = parse_startup_line(
        "Post-capture KV sizing: draft KV cache allocated. dtype: torch.bfloat16, "
        "#tokens: 412160, KV size: 1.20 GB"
    )
    assert draft.values["label"] == "draft" and draft.values["kv_gb"] == 1.2
    assert parse_startup_line("Post-capture KV sizing: decode CUDA graph max_bs=8 < 16") is None
    note = parse_startup_line("Post-capture KV sizing: max_running_requests 48 -> 12")
    assert note.kind == "note"


def test_server_args_echo_and_notes():
    sa = parse_startup_line(
        "server_args=ServerArgs(model_path='Qwen/Qwen3.6-27B', tp_size=1, "
        "max_running_requests=None, context_length=None, speculative_algorithm='NEXTN', "
        "enable_hierarchical_cache=True, api_key='secret')"
    )
    assert sa.kind == "server_args"
    assert (
        sa.values["max_running_requests"] is None and sa.values["speculative_algorithm"] == "NEXTN"
    )
    assert sa.values["enable_hierarchical_cache"] is True and sa.values["tp_size"] == 1
    assert "api_key" not in sa.values  # never carried into the card
    n = parse_startup_line(
        "[2026-10-01 12:00:00] Max running requests is reset to 48 for speculative decoding. "
        "You can override this by explicitly setting --max-running-requests."
    )
    assert n.kind == "note" and n.values["text"].startswith("Max running requests is reset to 48")
    assert (
        parse_startup_line("Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)")
        is None
    )
