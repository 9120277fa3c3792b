"""Every SGLang endpoint the simulator serves, against one real simulator process."""

from __future__ import annotations

import httpx
import pytest

from tests.fixtures.sim import start_sim, stop_sim
from tests.sim.helpers import gen_body, post_json, stream_events, stream_in_background

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    gpu_dir = tmp_path_factory.mktemp("simgpu")
    s = start_sim(
        "--model-path",
        MODEL,
        "--enable-metrics",
        "--enable-cache-report",
        time_scale="0.1",
        env={"SGLTUI_SIM_GPU_DIR": str(gpu_dir)},
    )
    yield s
    stop_sim(s)


def get(sim, path, **kw):
    return httpx.get(sim.url + path, timeout=30, **kw)


@pytest.mark.parametrize("path", ["/health", "/health_generate", "/ready", "/ping"])
def test_health_family_is_200_when_ready(sim, path):
    assert get(sim, path).status_code == 200


def test_model_info_and_deprecated_alias(sim):
    info = get(sim, "/model_info").json()
    assert info["model_path"] == MODEL and info["is_generation"] is True
    assert info["architectures"] == ["LlamaForCausalLM"]
    assert get(sim, "/get_model_info").json() == info
    sim.wait_for_line("'/get_model_info' is deprecated", timeout=5)


def test_server_info(sim):
    info = get(sim, "/server_info").json()
    assert info["version"] == "0.5.23" and info["frontend"] == "python"
    assert info["tp_size"] == 1 and info["model_path"] == MODEL
    assert info["mem_fraction_static"] == 0.835 and info["chunked_prefill_size"] == 8192
    state = info["internal_states"][0]
    assert state["effective_max_running_requests_per_dp"] >= 1
    assert state["memory_usage"]["token_capacity"] == info["max_total_num_tokens"] > 100_000
    assert state["memory_usage"]["weight"] == pytest.approx(16.06e9 / (1 << 30), abs=0.01)
    assert "avg_spec_accept_length" not in state
    assert info["status"] == "Up"
    assert not any(k.startswith("sim_") for k in info)
    assert (
        get(sim, "/get_server_info").json()["max_total_num_tokens"] == info["max_total_num_tokens"]
    )


def test_v1_loads_sections_and_prometheus(sim):
    body = get(sim, "/v1/loads").json()
    assert body["version"] == "0.5.23" and body["num_accelerators"] == 1
    load = body["loads"][0]
    for key in (
        "num_running_reqs",
        "num_waiting_reqs",
        "num_used_tokens",
        "max_total_num_tokens",
        "max_running_requests",
        "token_usage",
        "gen_throughput",
        "cache_hit_rate",
        "utilization",
    ):
        assert key in load
    full = get(sim, "/v1/loads", params={"include": "all"}).json()["loads"][0]
    assert full["memory"]["token_capacity"] == load["max_total_num_tokens"]
    assert "queues" in full
    text = get(sim, "/v1/loads", params={"format": "prometheus"}).text
    assert 'sglang_max_total_num_tokens{dp_rank="0"}' in text


def test_models_list_and_card(sim):
    data = get(sim, "/v1/models").json()
    assert data["object"] == "list"
    card = data["data"][0]
    assert card["id"] == MODEL and card["owned_by"] == "sglang" and card["max_model_len"] == 131072
    assert get(sim, f"/v1/models/{MODEL}").json()["id"] == MODEL
    missing = get(sim, "/v1/models/nope")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"


def test_removed_and_unknown_paths_are_404(sim):
    assert get(sim, "/get_load").status_code == 404


def test_completions_non_stream(sim):
    r = post_json(
        sim.url + "/v1/completions",
        {"model": MODEL, "prompt": "Say something", "max_tokens": 7, "ignore_eos": True},
    )
    body = r.json()
    assert r.status_code == 200 and body["object"] == "text_completion"
    choice = body["choices"][0]
    assert choice["finish_reason"] == "length" and len(choice["text"].split()) >= 3
    assert body["usage"]["completion_tokens"] == 7 and body["usage"]["prompt_tokens"] == 2
    assert body["usage"]["total_tokens"] == 9


def test_completions_stream_with_usage(sim):
    body = {"prompt": "Stream this", "max_tokens": 5, "ignore_eos": True}
    events = stream_events(
        sim.url + "/v1/completions", {**body, "stream_options": {"include_usage": True}}
    )
    assert events[-1] == "[DONE]"
    usage = events[-2]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 5
    streamed = "".join(e["choices"][0]["text"] for e in events[:-2])
    whole = post_json(
        sim.url + "/v1/completions", {"prompt": "Stream this", "max_tokens": 5, "ignore_eos": True}
    ).json()
    assert streamed == whole["choices"][0]["text"] != ""  # deltas add up to the same answer
    assert events[-3]["choices"][0]["finish_reason"] == "length"
    assert all(e["usage"] is None for e in events[:-2])


def test_completions_stream_without_usage_has_none(sim):
    events = stream_events(
        sim.url + "/v1/completions", {"prompt": "x", "max_tokens": 3, "ignore_eos": True}
    )
    assert all(e == "[DONE]" or e["choices"] for e in events)


def test_chat_completions(sim):
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Hello!"}],
        "max_tokens": 6,
        "ignore_eos": True,
    }
    r = post_json(sim.url + "/v1/chat/completions", body).json()
    assert r["object"] == "chat.completion"
    assert (
        r["choices"][0]["message"]["role"] == "assistant" and r["choices"][0]["message"]["content"]
    )
    assert r["usage"]["completion_tokens"] == 6
    events = stream_events(sim.url + "/v1/chat/completions", body)
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    assert events[0]["object"] == "chat.completion.chunk"
    content = "".join(e["choices"][0]["delta"].get("content") or "" for e in events[:-1])
    assert content == r["choices"][0]["message"]["content"]  # same seed, same prompt, same answer


def test_generate_native_and_meta_info(sim):
    r = post_json(
        sim.url + "/generate",
        {
            "text": "The capital of France is",
            "sampling_params": {"max_new_tokens": 9, "ignore_eos": True},
        },
    ).json()
    assert len(r["output_ids"]) == 9
    meta = r["meta_info"]
    assert meta["finish_reason"] == {"type": "length", "length": 9}
    assert meta["prompt_tokens"] == 5 and meta["completion_tokens"] == 9 and meta["e2e_latency"] > 0
    for key in ("id", "cached_tokens", "weight_version", "num_retractions"):
        assert key in meta


def test_generate_stream_is_cumulative_by_default(sim):
    events = stream_events(sim.url + "/generate", gen_body(40, input_ids=[5, 6, 7, 8]))
    chunks = events[:-1]
    # Tokens that arrive while the client is slow are coalesced, so count chunks loosely.
    assert events[-1] == "[DONE]" and 2 <= len(chunks) <= 40
    assert len(chunks[-1]["output_ids"]) == 40
    for a, b in zip(chunks, chunks[1:]):
        assert (
            b["text"].startswith(a["text"])
            and b["output_ids"][: len(a["output_ids"])] == a["output_ids"]
        )
        assert len(b["output_ids"]) > len(a["output_ids"])
    assert all(c["meta_info"]["finish_reason"] is None for c in chunks[:-1])
    assert chunks[-1]["meta_info"]["finish_reason"]["type"] == "length"


def test_generate_batch_returns_a_list(sim):
    r = post_json(
        sim.url + "/generate",
        {
            "input_ids": [[1, 2, 3], [4, 5, 6, 7]],
            "sampling_params": {"max_new_tokens": 3, "ignore_eos": True},
        },
    ).json()
    assert isinstance(r, list) and [x["meta_info"]["prompt_tokens"] for x in r] == [3, 4]


def test_stop_string_ends_and_is_not_returned(sim):
    base = post_json(
        sim.url + "/generate",
        {"text": "stop test", "sampling_params": {"max_new_tokens": 30, "ignore_eos": True}},
    ).json()
    words = base["text"].split()
    stop = " " + words[3]
    r = post_json(
        sim.url + "/generate",
        {
            "text": "stop test",
            "sampling_params": {"max_new_tokens": 30, "ignore_eos": True, "stop": [stop]},
        },
    ).json()
    assert r["meta_info"]["finish_reason"] == {"type": "stop", "matched": stop}
    assert stop not in r["text"] and base["text"].startswith(r["text"])


def test_eos_ends_answers_unless_ignored(sim):
    r = post_json(
        sim.url + "/generate",
        {"text": "tell me a long story", "sampling_params": {"max_new_tokens": 100000}},
    ).json()
    assert r["meta_info"]["finish_reason"]["type"] == "stop"
    assert 0 < r["meta_info"]["completion_tokens"] < 100000


def test_prefix_cache_is_reported(sim):
    prompt = list(range(100, 164))
    first = post_json(sim.url + "/v1/completions", {"prompt": prompt, "max_tokens": 2}).json()
    second = post_json(sim.url + "/v1/completions", {"prompt": prompt, "max_tokens": 2}).json()
    assert first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    # All 64 prompt tokens are cached, but one is always recomputed to produce the first token.
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] == 63


@pytest.mark.parametrize(
    "body,needle",
    [
        ({"sampling_params": {}}, "Either text or input_ids"),
        ({"text": "x", "sampling_params": {"max_new_tokens": -1}}, "max_new_tokens"),
        ({"text": 5}, "text must be"),
    ],
)
def test_bad_generate_bodies_are_400(sim, body, needle):
    r = post_json(sim.url + "/generate", body)
    assert r.status_code == 400
    err = r.json()
    assert err["object"] == "error" and err["code"] == 400 and needle in err["message"]


def test_prompt_longer_than_context_is_400(sim):
    r = post_json(sim.url + "/v1/completions", {"prompt": [1] * 131072, "max_tokens": 1})
    assert (
        r.status_code == 400
        and "longer than the model's context length (131072 tokens)" in r.json()["message"]
    )


def test_content_type_is_mandatory(sim):
    r = httpx.post(
        sim.url + "/v1/completions",
        content=b'{"prompt": "x"}',
        timeout=10,
        headers={"Content-Type": "text/plain"},
    )
    assert r.status_code == 400 and "application/json" in r.json()["message"]


def test_flush_cache_and_abort(sim):
    r = httpx.post(sim.url + "/flush_cache", timeout=10)
    assert r.status_code == 200 and r.text.startswith("Cache flushed.")
    assert (
        httpx.post(sim.url + "/abort_request", json={"rid": "unknown"}, timeout=10).status_code
        == 200
    )


def test_abort_request_ends_a_stream(sim):
    import time

    t, events = stream_in_background(
        sim.url + "/generate", gen_body(100000, text="long", rid="to-abort"), timeout=30
    )
    time.sleep(0.5)
    assert (
        httpx.post(sim.url + "/abort_request", json={"rid": "to-abort"}, timeout=10).status_code
        == 200
    )
    t.join(timeout=20)
    assert not t.is_alive()
    assert events[-1] == "[DONE]"
    assert events[-2]["meta_info"]["finish_reason"]["type"] == "abort"


def test_pause_makes_ready_503(sim):
    httpx.post(sim.url + "/pause_generation", timeout=10)
    try:
        assert get(sim, "/ready").status_code == 503
        assert get(sim, "/ping").status_code == 200
    finally:
        httpx.post(sim.url + "/continue_generation", timeout=10)
    assert get(sim, "/ready").status_code == 200
