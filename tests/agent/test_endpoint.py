"""The agent's OpenAI endpoint (agent/endpoint/endpoint.py) with a real agent and real simulators: a
request's `model` (name, alias, served-model-name) starts, evicts and wakes profiles on one slot;
leases and unknown names answer 503 and 404; an idle profile is stopped and comes back."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from sgltui.client import AgentError
from tests.jobs.batch_input import write_input
from tests.ports import server_port

pytestmark = pytest.mark.slow


def profile(agent, name: str, top: str = "", **server) -> str:
    agent.write_profile(name, **server)
    path = agent.profiles_dir / f"{name}.toml"
    path.write_text(top + path.read_text())  # top-level keys come before [server]
    return name


@pytest.fixture
def endpoint(agent_handle, monkeypatch):
    port = server_port()
    monkeypatch.setenv("SGLTUI_ENDPOINT_PORT", str(port))
    monkeypatch.setenv("SGLTUI_ENDPOINT_LEASE_WAIT_S", "0.5")
    agent_handle.url = f"http://127.0.0.1:{port}"
    return agent_handle


def ask(url: str, model: str, timeout: float = 30.0, **headers: str) -> httpx.Response:
    body = {"model": model, "prompt": "hi", "max_tokens": 4}
    return httpx.post(f"{url}/v1/completions", json=body, timeout=timeout, headers=headers)


async def two_clients(url: str, models: list[str], n: int, **headers: str) -> list[int]:
    """One client per model, each sending `n` requests back to back."""
    codes: list[int] = []
    async with httpx.AsyncClient(timeout=30, headers=headers) as c:

        async def one(model: str) -> None:
            for _ in range(n):
                r = await c.post(
                    f"{url}/v1/completions", json={"model": model, "prompt": "hi", "max_tokens": 4}
                )
                codes.append(r.status_code)

        await asyncio.gather(*(one(m) for m in models))
    return codes


def states(url: str) -> dict[str, str]:
    data = httpx.get(f"{url}/v1/models", timeout=10).json()["data"]
    return {m["id"]: m["sgltui"]["state"] for m in data if m["id"].startswith("ep-")}


def test_model_names_start_evict_wake_and_leases(endpoint):
    agent = endpoint
    profile(agent, "ep-a", 'aliases = ["fast"]\n', served_model_name="model-a")
    profile(agent, "ep-b", served_model_name="model-b", api_key="sekret")
    agent.start()
    url = agent.url
    assert states(url) == {"ep-a": "cold", "ep-b": "cold"}

    # an alias: not loaded, the only slot is free -> started cold there
    r = ask(url, "fast")
    assert r.status_code == 200, r.text
    assert agent.slot()["profile"] == "ep-a"
    assert states(url) == {"ep-a": "serving", "ep-b": "cold"}

    # unknown: 404 naming the profiles; a keyed profile without its key: 401, nothing woken
    r = ask(url, "nope")
    assert r.status_code == 404 and {"ep-a", "ep-b"} <= set(r.json()["error"]["models"])
    assert ask(url, "ep-b").status_code == 401
    assert agent.slot()["profile"] == "ep-a"

    # a running job holds a lease on ep-a: ep-b waits, then 503 naming the job
    inp, out = agent.profiles_dir.parent / "in.jsonl", agent.profiles_dir.parent / "out.jsonl"
    write_input(inp, 2000, max_tokens=256)
    job = agent.call("job_run", input=str(inp), output=str(out), concurrency=4, name="nightly")
    r = ask(url, "model-b", Authorization="Bearer sekret")
    assert r.status_code == 503 and "leased by job nightly" in r.json()["error"]["message"]
    leases = agent.status()["endpoint"]["leases"]
    assert [(x["profile"], x["kind"]) for x in leases] == [("ep-a", "job")]
    agent.call("job_cancel", job=job["id"])
    assert agent.slot()["profile"] == "ep-a"

    # a lease by hand on ep-a: ep-b cannot have its slot -> 503 + Retry-After, the holder named
    agent.call("lease_add", profile="ep-a")
    r = ask(url, "model-b", Authorization="Bearer sekret")
    assert r.status_code == 503 and r.headers["Retry-After"]
    assert "leased" in r.json()["error"]["message"]
    st = agent.status()["endpoint"]
    assert [x["profile"] for x in st["leases"]] == ["ep-a"]
    # the operator's own swap of the leased slot asks first
    with pytest.raises(AgentError, match="leased by"):
        agent.call("swap", profile="ep-b", wait=True)
    agent.call("lease_drop", profile="ep-a")

    # by served-model-name: ep-a (least recently used) evicted to sleep, ep-b started
    r = ask(url, "model-b", Authorization="Bearer sekret")
    assert r.status_code == 200, r.text
    assert states(url) == {"ep-a": "asleep", "ep-b": "serving"}
    ev = agent.status()["endpoint"]["last_eviction"]
    assert ev["profile"] == "ep-a" and ev["for"] == "ep-b" and ev["to"] == "asleep"

    # by name: ep-a asleep -> woken (a warm swap), ep-b asleep in turn
    t0 = time.monotonic()
    r = ask(url, "ep-a")
    assert r.status_code == 200, r.text
    assert time.monotonic() - t0 < 10
    assert states(url) == {"ep-a": "serving", "ep-b": "asleep"}
    assert agent.slot()["last_swap"]["kind"] == "warm"
    said = [e["text"] for e in agent.events() if e.get("type") == "endpoint"]
    assert any("ep-a woken on slot 0 by a request for ep-a from 127.0.0.1" in t for t in said)

    # collation: two clients back to back, one per profile (ABAB arrivals): one switch once
    # ep-a's client is done (AABB), not one per request
    before = agent.status()["endpoint"]["swaps"]
    codes = asyncio.run(two_clients(url, ["ep-a", "model-b"], 6, Authorization="Bearer sekret"))
    assert codes == [200] * 12
    assert agent.status()["endpoint"]["swaps"] - before == 1


def test_idle_profile_is_stopped_and_the_next_request_starts_it(endpoint):
    agent = endpoint
    profile(agent, "ep-idle", "idle_s = 1\n")
    agent.start()
    assert ask(agent.url, "ep-idle").status_code == 200
    deadline = time.monotonic() + 10
    while agent.slot()["state"] != "stopped" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert agent.slot()["state"] == "stopped"
    assert states(agent.url) == {"ep-idle": "cold"}
    assert ask(agent.url, "ep-idle").status_code == 200
    assert agent.slot()["state"] == "ready"
