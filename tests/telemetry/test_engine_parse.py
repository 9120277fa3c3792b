"""/metrics and /v1/loads into ENGINE: ranks, DP sums, no double counting."""

from sgltui.agent.telemetry.engine_parse import engine_from_loads, engine_from_metrics, merge_engine

METRICS_TP2 = """\
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 7.0
sglang:num_running_reqs{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="1"} 7.0
# HELP sglang:num_queue_reqs q
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 3.0
sglang:num_queue_reqs{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="1"} 3.0
# HELP sglang:gen_throughput g
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 812.5
sglang:gen_throughput{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="1"} 812.5
# HELP sglang:token_usage t
# TYPE sglang:token_usage gauge
sglang:token_usage{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 0.31
# HELP sglang:cache_hit_rate c
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 0.5
# HELP sglang:spec_accept_length a
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 0.0
# HELP sglang:max_total_num_tokens m
# TYPE sglang:max_total_num_tokens gauge
sglang:max_total_num_tokens{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 412160.0
sglang:max_total_num_tokens{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="1"} 412160.0
# HELP sglang:evicted_tokens_total e
# TYPE sglang:evicted_tokens_total counter
sglang:evicted_tokens_total{cache_type="HiRadixCache",dp_rank="0",pp_rank="0",tp_rank="0"} 100.0
sglang:evicted_tokens_total{cache_type="HiRadixCache",dp_rank="0",pp_rank="0",tp_rank="1"} 100.0
# HELP sglang:generation_tokens_total g
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{engine_type="unified",model_name="m",is_streaming="true"} 1000.0
sglang:generation_tokens_total{engine_type="unified",model_name="m",is_streaming="false"} 234.0
# HELP sglang:num_requests_total n
# TYPE sglang:num_requests_total counter
sglang:num_requests_total{engine_type="unified",model_name="m",is_streaming="true"} 10.0
"""


def test_metrics_rank0_only_counters_not_double_counted():
    e = engine_from_metrics(METRICS_TP2, 5.0)
    assert e["source"] == "metrics" and e["ts"] == 5.0
    assert e["num_running_reqs"] == 7  # not 14: every-rank publication is read from rank 0
    assert e["num_queue_reqs"] == 3
    assert e["gen_throughput"] == 812.5
    assert e["token_usage"] == 0.31
    assert e["cache_hit_rate"] == 0.5
    assert e["accept_length"] is None  # exported as 0 without speculative decoding
    assert e["max_total_num_tokens"] == 412160
    assert e["generation_tokens_total"] == 1234  # label sets of one rank add up
    assert e["requests_total"] == 10


def test_metrics_dp_groups_are_summed_and_priority_split_skipped():
    text = """\
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{dp_rank="0",tp_rank="0",priority=""} 4.0
sglang:num_running_reqs{dp_rank="0",tp_rank="0",priority="1"} 3.0
sglang:num_running_reqs{dp_rank="1",tp_rank="0",priority=""} 6.0
# TYPE sglang:token_usage gauge
sglang:token_usage{dp_rank="0",tp_rank="0"} 0.2
sglang:token_usage{dp_rank="1",tp_rank="0"} 0.6
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{dp_rank="0",tp_rank="0"} 3.0
sglang:spec_accept_length{dp_rank="1",tp_rank="0"} 2.0
"""
    e = engine_from_metrics(text, 0.0)
    assert e["num_running_reqs"] == 10
    assert e["token_usage"] == 0.6
    assert e["accept_length"] == 2.5
    assert e["num_queue_reqs"] is None  # missing series are tolerated


def test_loads_per_dp_rank():
    data = {
        "timestamp": "x",
        "version": "0.5.23",
        "loads": [
            {
                "dp_rank": 0,
                "num_running_reqs": 4,
                "num_waiting_reqs": 2,
                "token_usage": 0.4,
                "gen_throughput": 100.0,
                "cache_hit_rate": 0.2,
                "max_running_requests": 4,
                "max_total_num_tokens": 1000,
                "speculative": {"accept_length": 3.2, "accept_rate": 0.7},
            },
            {
                "dp_rank": 1,
                "num_running_reqs": 1,
                "num_waiting_reqs": 0,
                "token_usage": 0.1,
                "gen_throughput": 50.0,
                "cache_hit_rate": 0.4,
                "max_running_requests": 4,
                "max_total_num_tokens": 1000,
                "speculative": {"accept_length": 2.8, "accept_rate": 0.6},
            },
        ],
    }
    e = engine_from_loads(data, 1.0)
    assert e["source"] == "loads"
    assert e["num_running_reqs"] == 5 and e["num_queue_reqs"] == 2
    assert e["gen_throughput"] == 150.0 and e["token_usage"] == 0.4
    assert abs(e["cache_hit_rate"] - 0.3) < 1e-9 and abs(e["accept_length"] - 3.0) < 1e-9
    assert e["max_running_requests"] == 8 and e["max_total_num_tokens"] == 2000


def test_loads_garbage_gives_empty_reading():
    e = engine_from_loads({"loads": "nope"}, 1.0)
    assert e["num_running_reqs"] is None
    assert engine_from_loads([], 1.0)["gen_throughput"] is None


def test_merge_fills_gaps_from_log_but_keeps_primary_source():
    primary = {"source": "loads", "ts": 2.0, "accept_length": None, "num_running_reqs": 3}
    log = {"source": "log", "ts": 1.0, "accept_length": 3.1, "num_running_reqs": 9}
    m = merge_engine(primary, [log])
    assert m["source"] == "loads" and m["num_running_reqs"] == 3 and m["accept_length"] == 3.1
    assert merge_engine(None, [None, log])["source"] == "log"
    assert merge_engine(None, [None]) is None


METRICS_0_5_23_CACHE = """\
# HELP sglang:cached_tokens_total Number of cached prompt tokens by source (device/host/storage).
# TYPE sglang:cached_tokens_total counter
sglang:cached_tokens_total{cache_source="device",engine_type="unified",model_name="m"} 1200.0
sglang:cached_tokens_total{cache_source="host",engine_type="unified",model_name="m"} 300.0
# HELP sglang:prefill_effective_tokens_total p
# TYPE sglang:prefill_effective_tokens_total counter
sglang:prefill_effective_tokens_total{mode="input",engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 500.0
sglang:prefill_effective_tokens_total{mode="device_hit",engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 1200.0
sglang:prefill_effective_tokens_total{mode="device_hit",engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="1"} 1200.0
sglang:prefill_effective_tokens_total{mode="host_hit",engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 300.0
# HELP sglang:hicache_host_mamba_used_states u
# TYPE sglang:hicache_host_mamba_used_states gauge
sglang:hicache_host_mamba_used_states{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 7.0
# HELP sglang:hicache_host_mamba_total_states t
# TYPE sglang:hicache_host_mamba_total_states gauge
sglang:hicache_host_mamba_total_states{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 197.0
"""


def test_0_5_23_cache_counters_by_source_and_host_mamba_states():
    e = engine_from_metrics(METRICS_0_5_23_CACHE, 1.0)
    assert e["cached_tokens_by_source"] == {"device": 1200, "host": 300}
    # Rank 1's copy of the counter is not added to rank 0's.
    assert e["prefill_tokens_by_mode"] == {"input": 500, "device_hit": 1200, "host_hit": 300}
    assert (e["hicache_host_mamba_used_states"], e["hicache_host_mamba_total_states"]) == (7, 197)
    assert engine_from_metrics(METRICS_TP2, 1.0)["cached_tokens_by_source"] is None
