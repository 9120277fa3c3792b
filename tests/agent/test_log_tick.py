"""subscribe logs="tick": every slot's log lines in one "logs" push per tick, sent just before
the sample (agent/logbatch.py); a subscriber of the default ("each") still gets a "log" push per
slot as the server prints. Issue 39: 8 idle servers' lines were a dozen pushes a second."""

from __future__ import annotations

import asyncio
import time

import pytest

from sgltui.agent.logbatch import LogBatch


async def test_a_batch_holds_each_slots_lines_in_order_until_the_tick():
    sent: list[list[dict]] = []
    batch = LogBatch(sent.append, tick_s=0.2)
    batch.add("a", "L1", ["a1"])
    batch.add("b", "L2", ["b1"])
    batch.add("a", "L1", ["a2", "a3"])
    batch.add("a", "L1", [])
    assert sent == []  # nothing before the tick
    batch.flush()  # the sample's tick
    assert sent == [
        [
            {"slot": "a", "launch_id": "L1", "lines": ["a1", "a2", "a3"]},
            {"slot": "b", "launch_id": "L2", "lines": ["b1"]},
        ]
    ]
    batch.flush()
    assert len(sent) == 1  # nothing waited: no push
    batch.add("a", "L3", ["a4"])  # no sample comes: the timer sends it within a tick
    await asyncio.sleep(0.4)
    assert sent[1] == [{"slot": "a", "launch_id": "L3", "lines": ["a4"]}]
    batch.add("a", "L3", ["a5"])
    batch.close()
    await asyncio.sleep(0.3)
    assert len(sent) == 2  # closed: the timer is gone


@pytest.mark.slow
async def test_a_tick_subscriber_gets_one_logs_push_a_tick_and_an_each_subscriber_a_log_push(
    agent,
):
    a = agent.write_profile("t-tick")
    async with (
        agent.client("tick") as tick,
        agent.client("each") as each,
        agent.client("driver") as driver,
    ):
        await tick.call("subscribe", logs="tick")
        await each.call("subscribe")
        started = time.monotonic()
        await driver.call("start", profile=a, wait=True)

        async def read(client, until_lines: int) -> tuple[list[dict], list[str]]:
            msgs: list[dict] = []
            lines: list[str] = []
            async for msg in client.pushes():
                msgs.append(msg)
                if msg["push"] == "log":
                    lines += msg["data"]["lines"]
                elif msg["push"] == "logs":
                    for part in msg["data"]:
                        assert part["slot"] == "0" and part["launch_id"]
                        lines += part["lines"]
                if len(lines) >= until_lines and msg["push"] == "sample":
                    return msgs, lines
            raise AssertionError("the pushes ended")

        each_msgs, each_lines = await asyncio.wait_for(read(each, 5), 30)
        tick_msgs, tick_lines = await asyncio.wait_for(read(tick, len(each_lines)), 30)
        elapsed = time.monotonic() - started

        async def batch_then_sample() -> None:
            # Once the sampler runs, a tick's lines go out just before its sample (the idle
            # server prints a line or two a second, so such a tick comes).
            last = None
            async for msg in tick.pushes():
                if msg["push"] == "sample" and last == "logs":
                    return
                last = msg["push"]

        await asyncio.wait_for(batch_then_sample(), 20)
    kinds = {m["push"] for m in tick_msgs}
    assert "log" not in kinds and "logs" in kinds, kinds
    assert "logs" not in {m["push"] for m in each_msgs}
    # The same lines, in the same order, in both ways.
    assert tick_lines[: len(each_lines)] == each_lines
    assert any("Load weight begin" in ln for ln in tick_lines)
    # One push a tick at most (each with the sample, or by the timer when none came).
    batches = sum(1 for m in tick_msgs if m["push"] == "logs")
    assert batches <= elapsed + 2, (batches, elapsed)


def test_subscribe_refuses_an_unknown_way_of_sending_logs(agent):
    from sgltui.client import AgentError

    with pytest.raises(AgentError, match="logs"):
        agent.call("subscribe", logs="sometimes")
