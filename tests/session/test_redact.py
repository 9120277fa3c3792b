"""Redaction rules: every shape a secret takes in sgltui's inputs, and what must survive."""

from __future__ import annotations

import pytest

from sgltui.core.redact import MASK, Redactor, is_secret_env, is_secret_flag, redact_text

KEY = "sk-live-7f3a9c2e"


@pytest.mark.parametrize(
    "argv, hidden",
    [
        (["--api-key", KEY, "--port", "30000"], KEY),
        (["--admin-api-key", KEY], KEY),
        ([f"--api-key={KEY}"], KEY),
        (["--ssl-keyfile-password", KEY], KEY),
    ],
)
def test_argv_secret_values_are_masked_and_the_rest_kept(argv, hidden):
    out = Redactor().argv(argv)
    assert hidden not in " ".join(out)
    assert MASK in " ".join(out)
    assert len(out) == len(argv)  # same shape: a redacted command line is still readable


def test_size_flags_that_mention_tokens_are_not_secrets():
    argv = [
        "--max-total-tokens",
        "4096",
        "--bucket-time-to-first-token",
        "0.1",
        "--speculative-num-draft-tokens",
        "4",
    ]
    assert Redactor().argv(argv) == argv
    assert not is_secret_flag("--max-total-tokens")
    assert is_secret_flag("--api-key")


def test_sglang_server_args_log_line():
    line = (
        "[2026-10-01 12:00:00] server_args=ServerArgs(model_path='Qwen/Qwen3-8B', "
        f"api_key='{KEY}', admin_api_key=None, ssl_keyfile_password='pw-123456', port=30000)"
    )
    out = redact_text(line)
    assert KEY not in out and "pw-123456" not in out
    assert (
        "admin_api_key=None" in out and "port=30000" in out and "model_path='Qwen/Qwen3-8B'" in out
    )


def test_json_dump_fields():
    out = redact_text(f'{{"api_key": "{KEY}", "max_running_requests": 4}}')
    assert KEY not in out and '"max_running_requests": 4' in out


@pytest.mark.parametrize(
    "name, secret",
    [
        ("HF_TOKEN", True),
        ("OPENAI_API_KEY", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("DB_PASSWORD", True),
        ("TOKENIZERS_PARALLELISM", False),
        ("CUDA_VISIBLE_DEVICES", False),
        ("PWD", False),
        ("KEYBOARD", False),
    ],
)
def test_env_names(name, secret):
    assert is_secret_env(name) is secret


def test_env_mapping_and_text_dump():
    r = Redactor()
    env = r.env({"HF_TOKEN": "hf_abcdefgh", "CUDA_VISIBLE_DEVICES": "0"})
    assert env == {"HF_TOKEN": MASK, "CUDA_VISIBLE_DEVICES": "0"}
    assert "hf_abcdefgh" not in r.text("HF_TOKEN=hf_abcdefgh python -m sglang.launch_server")


def test_urls_and_headers():
    text = (
        'curl -H "Authorization: Bearer tok-998877" https://alice:s3cr3tpw@example.com/v1?token=qq11&model=x '
        "x-api-key: abcd1234"
    )
    out = redact_text(text)
    for secret in ("tok-998877", "s3cr3tpw", "qq11", "abcd1234"):
        assert secret not in out
    assert "Bearer" in out and "alice" in out and "model=x" in out and "example.com" in out


def test_learnt_secret_is_masked_in_later_free_text():
    r = Redactor()
    r.argv(["--api-key", KEY])
    assert r.text(f"Traceback: invalid key {KEY}!") == f"Traceback: invalid key {MASK}!"


def test_obj_walks_events_and_keeps_hot_swap_key():
    r = Redactor()
    ev = {
        "type": "launch",
        "key": "3",
        "api_key_set": True,
        "command": ["python", "--api-key", KEY],
        "env": {"HF_TOKEN": "hf_zzzzzz"},
        "nested": [{"authorization": "Bearer x-y-z-1"}],
    }
    out = r.obj(ev)
    flat = repr(out)
    assert KEY not in flat and "hf_zzzzzz" not in flat and "x-y-z-1" not in flat
    assert out["key"] == "3" and out["api_key_set"] is True


def test_secret_spans_are_exact_for_in_place_scrubbing():
    r = Redactor([KEY])
    text = f"a {KEY} b api_key='{KEY}'"
    spans = r.secret_spans(text)
    assert [text[a:b] for a, b in spans] == [KEY, KEY]


def test_short_literal_secret_is_not_replaced_everywhere():
    r = Redactor(["ab"])
    assert r.text("absolutely fabulous") == "absolutely fabulous"
    assert "ab" not in r.argv(["--api-key", "ab"])[1]


@pytest.mark.parametrize(
    "line",
    [
        "[2026-12-02 15:40:41] Decode batch, #running-req: 4, #token: 8000, token usage: 0.30, gen throughput (token/s): 181.20",
        "[2026-12-02 15:40:40] Prefill batch, #new-seq: 1, #new-token: 512, #cached-token: 0, token usage: 0.01",
        '[2026-12-02 15:40:09] INFO:     127.0.0.1:51234 - "GET /health HTTP/1.1" 200 OK',
        "max_total_num_tokens=412160, chunked_prefill_size=8192, max_prefill_tokens=16384",
    ],
)
def test_ordinary_sglang_lines_pass_unchanged(line):
    assert redact_text(line) == line
