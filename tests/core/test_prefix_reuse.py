"""core/prefix_reuse.py: the shared prefixes of a job's prompts, and the hit rate an LRU cache
of a given size gets on them (checked against an LRU run request by request)."""

from __future__ import annotations

import random
from collections import OrderedDict

import pytest

from sgltui.core import prefix_reuse


def _prompts(contexts: int, per: int, ctx_chars: int, q_chars: int, seed: int = 1) -> list[str]:
    rnd = random.Random(seed)
    heads = [
        f"context {i}: " + "".join(rnd.choices("abcdefgh ", k=ctx_chars)) for i in range(contexts)
    ]
    out = [
        heads[c] + f" question {c}-{j}: " + "".join(rnd.choices("xyz ", k=q_chars))
        for c in range(contexts)
        for j in range(per)
    ]
    rnd.shuffle(out)
    return out


def test_shared_prefixes_and_their_working_set_are_measured():
    r = prefix_reuse.measure(_prompts(20, 5, 4000, 200), chars_per_token=4.0)
    assert r is not None and r.prompts == 100 and r.sharing == 1.0
    # each prompt shares its context (about 4,000 characters: 1,000 tokens) and no more
    assert r.prefix_tokens == pytest.approx(1000, rel=0.05)
    assert r.working_set_tokens == pytest.approx(20 * 1000, rel=0.05)
    assert r.contexts == pytest.approx(20, rel=0.1)


def test_prompts_that_share_nothing_have_no_reuse():
    rnd = random.Random(2)
    prompts = ["".join(rnd.choices("abcdefgh ", k=3000)) for _ in range(50)]
    r = prefix_reuse.measure(prompts)
    assert r is not None and r.sharing == 0.0 and r.working_set_tokens == 0.0
    assert prefix_reuse.measure(["one"]) is None


def _lru(contexts: int, length: int, tail: int, capacity: int, n: int, seed: int = 3) -> float:
    """Hits of requests in random order over `contexts` prefixes, each leaving `tail` tokens
    used once, in an LRU cache of `capacity` tokens."""
    rnd = random.Random(seed)
    cache: OrderedDict[object, int] = OrderedDict()
    used, hits = 0, 0
    for i in range(n):
        c = rnd.randrange(contexts)
        if c in cache:
            hits += i >= n // 5
            cache.move_to_end(c)
        else:
            cache[c] = length
            used += length
        cache[("tail", i)] = tail
        used += tail
        while used > capacity:
            _, size = cache.popitem(last=False)
            used -= size
    return hits / (n - n // 5)


@pytest.mark.parametrize("capacity", [20_000, 60_000, 150_000])
def test_hit_rate_agrees_with_an_lru_run(capacity):
    r = prefix_reuse.PrefixReuse(
        prompts=1000, shared_tokens=1000.0, working_set_tokens=200_000.0, sharing=1.0
    )
    est = prefix_reuse.hit_rate(r, capacity, tail_tokens=100)
    assert est == pytest.approx(_lru(200, 1000, 100, capacity, 20_000), abs=0.04)
    assert prefix_reuse.hit_rate(r, 10**9, 100) > 0.99


def test_a_cold_cache_warms_in_what_it_remembers_or_once_every_context_was_asked():
    r = prefix_reuse.PrefixReuse(
        prompts=1000, shared_tokens=1000.0, working_set_tokens=200_000.0, sharing=1.0
    )
    big = prefix_reuse.warm_requests(r, 10**7, tail_tokens=100)
    assert big == 461  # 200 contexts x ln 10: 90% of them asked once
    small = prefix_reuse.warm_requests(r, 60_000, tail_tokens=100)
    assert 0 < small < big  # it holds the last ~70 requests' prefixes: warm after about those
    assert prefix_reuse.warm_requests(r, 0, 100) == 0


def test_a_job_inputs_first_lines_give_its_lengths_and_shared_prefixes(tmp_path):
    """core/job_input.py: chat messages in order (a shared system prompt is a shared prefix),
    prompts as they are, max_tokens the output length."""
    import json

    from sgltui.core import job_input

    system = "You grade answers to the rubric below. " + "rubric line " * 100
    path = tmp_path / "in.jsonl"
    with path.open("w") as fh:
        for i in range(40):
            body = {"max_tokens": 32, "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": f"answer {i}: " + "word " * 20},
            ]}  # fmt: skip
            fh.write(json.dumps({"custom_id": str(i), "body": body}) + "\n")
    got = job_input.sample(path)
    assert got.output_tokens == 32 and got.prompt_tokens is not None
    assert got.prefix is not None and got.prefix.sharing == 1.0
    assert got.prefix.prefix_tokens == pytest.approx(len(system) / 4, rel=0.05)
    assert got.prefix.working_set_tokens == pytest.approx(len(system) / 4, rel=0.05)
    assert job_input.sample(tmp_path / "missing.jsonl").prefix is None


def test_the_prefix_key_tells_documents_apart_past_a_common_system_prompt():
    system = "You are a careful assistant; answer from the context only. " * 20  # 1,200 chars
    docs = [f"doc {i}: " + "".join(random.Random(i).choices("abcdefgh ", k=800 + 40 * i))
            for i in range(30)]  # fmt: skip
    rnd = random.Random(3)
    prompts = [system + rnd.choice(docs) + f" question {rnd.random()}" for _ in range(600)]
    found = prefix_reuse.prefix_key(prompts)
    assert found is not None
    k, distinct = found
    # past the system prompt (a key there would be one for all), not past the shortest document
    # (and what all its questions start with)
    assert len(system) + 100 < k <= len(system) + len(docs[0]) + len(" question 0.")
    assert distinct == 30
    assert len({p[:k] for p in prompts}) == 30  # every document one key, each key one document


def test_the_prefix_key_is_none_where_nothing_or_only_a_system_prompt_is_shared():
    assert prefix_reuse.prefix_key([f"question {i} " * 20 for i in range(200)]) is None
    system = "You are a careful assistant; answer from the context only. " * 20
    rnd = random.Random(4)
    lone = [system + "".join(rnd.choices("xyz ", k=300)) for _ in range(200)]
    assert prefix_reuse.prefix_key(lone) is None  # one shared start: nothing to tell apart
    assert prefix_reuse.prefix_key(["a" * 100]) is None
