"""agent/swap/sleeper.py's calls on one server, against a recording fake of SGLang's admin routes:
each step happens once and only after the one it undoes (torch-memory-saver exits on a second
release and on a resume of a server not released), the admin key, hicache's flush before the
pause, abort when the drain did not empty, and a release's timeout from its bytes."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from sgltui.agent.slot import http_probe
from sgltui.agent.swap import sleeper


def server(**flags):
    profile = SimpleNamespace(
        launcher="sim", server={"model-path": "meta-llama/Llama-3.1-8B-Instruct", **flags}
    )
    return SimpleNamespace(
        profile=profile,
        profile_name="t",
        server_host="127.0.0.1",
        port=1,
        api_key=flags.get("api-key"),
        tree=None,
        paused=False,
        released=False,
        pinned_once=False,
    )


@pytest.fixture
def calls(monkeypatch):
    seen: list[tuple[str, object, str | None, float]] = []
    answers: dict[str, int] = {}

    async def post(host, port, path, body, api_key=None, timeout=30.0):
        seen.append((path, body, api_key, timeout))
        return answers.get(path.split("?")[0], 200), None

    monkeypatch.setattr(http_probe, "post", post)
    seen_answers = SimpleNamespace(seen=seen, answers=answers)
    return seen_answers


def paths(calls) -> list[str]:
    return [c[0].split("?")[0] for c in calls.seen]


def test_each_step_once_and_only_what_happened_is_undone(calls):
    srv = server()
    asyncio.run(sleeper.wake(srv))  # nothing was paused or released: nothing to undo
    assert paths(calls) == []
    asyncio.run(sleeper.sleep(srv))
    asyncio.run(sleeper.sleep(srv))  # asleep already: no second pause, no second release
    assert paths(calls) == ["/pause_generation", "/release_memory_occupation"]
    assert srv.paused and srv.released
    asyncio.run(sleeper.wake(srv))
    asyncio.run(sleeper.wake(srv))
    assert paths(calls)[2:] == ["/resume_memory_occupation", "/continue_generation"]
    assert not srv.paused and not srv.released


def test_a_release_refused_is_not_resumed(calls):
    srv = server()
    calls.answers["/release_memory_occupation"] = 500
    with pytest.raises(sleeper.WakeError):
        asyncio.run(sleeper.sleep(srv))
    asyncio.run(sleeper.wake(srv))  # the rollback: continue only
    assert paths(calls) == [
        "/pause_generation",
        "/release_memory_occupation",
        "/continue_generation",
    ]


def test_admin_key_flush_before_pause_and_abort(calls):
    srv = server(**{"api-key": "u", "admin-api-key": "adm", "enable-hierarchical-cache": True})
    asyncio.run(sleeper.pause(srv, abort=True))
    assert paths(calls) == ["/abort_request", "/flush_cache", "/pause_generation"]
    assert {c[2] for c in calls.seen} == {"adm"}
    assert "timeout=" in calls.seen[1][0]
    assert calls.seen[2][1] == {"mode": "abort"}


def test_a_hicache_server_that_does_not_flush_is_not_paused(calls):
    srv = server(**{"enable-hierarchical-cache": True})
    calls.answers["/flush_cache"] = 400
    with pytest.raises(sleeper.WakeError, match="did not go idle"):
        asyncio.run(sleeper.pause(srv))
    assert paths(calls) == ["/flush_cache"] and not srv.paused


def test_release_timeout_grows_with_the_bytes():
    small, big = server(), server(**{"model-path": "org/Dense-300B"})
    assert sleeper.release_timeout(big) > 120.0 > sleeper.release_timeout(small)
    first = sleeper.release_timeout(big)
    big.pinned_once = True  # later releases copy at the pinned bandwidth, no pinning
    assert sleeper.release_timeout(big) < first / 5
