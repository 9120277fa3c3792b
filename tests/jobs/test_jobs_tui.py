"""The Jobs tab against a real agent running a real job: progress shown, space pauses and
resumes, + raises the concurrency live."""

from __future__ import annotations

import asyncio

from textual.widgets import Static

from sgltui.tui.source import LiveSource
from sgltui.tui.widgets.jobs import JobsPane
from tests.jobs.batch_input import write_input
from tests.tui.helpers import app_with, until

# Tokens 10x slower than the default, start-up as fast: at the default a 3,000-request job at
# concurrency 4 ends in seconds, and the pause (or the pinned swap's question) would find it done.
# These tests cancel their job: the slower tokens cost no time.
SLOW_TOKENS = {"time_scale": 0.1, "sim_slow_start": 0.1}


async def test_jobs_tab_shows_progress_and_pauses_with_space(agent, tmp_path):
    a = agent.write_profile("t-a", **SLOW_TOKENS)
    await asyncio.to_thread(agent.call, "start", profile=a, wait=True)
    inp = tmp_path / "tui.jsonl"
    write_input(inp, 3000, max_tokens=64)
    view = await asyncio.to_thread(
        agent.call, "job_run", input=str(inp), output=str(tmp_path / "o.jsonl"),
        concurrency=4, name="tui-job",
    )  # fmt: skip
    source = LiveSource(agent.state_dir, profiles_dirs=[agent.profiles_dir], autostart=False)
    app = app_with(source)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.model.connected, timeout=20)
        await pilot.press("j")
        pane = app.query_one(JobsPane)
        body = app.query_one("#jobs-body", Static)

        def text() -> str:
            return str(body.render())

        await until(pilot, lambda: "tui-job" in text() and "compl/s" in text(), timeout=20,
                    show=text)  # fmt: skip
        await until(pilot, lambda: app.focused is pane, timeout=5)
        await pilot.press("space")

        def state() -> str | None:  # what the pane last read from the agent (once a second)
            return pane.job.state if pane.job else None

        await until(pilot, lambda: state() == "paused", timeout=20, show=text)
        await until(pilot, lambda: "paused" in text(), timeout=20, show=text)
        st = await asyncio.to_thread(agent.call, "job_status", job=view["id"])
        assert st["state"] == "paused"  # the agent's word, not the pane's copy
        await pilot.press("plus")
        await until(pilot, lambda: pane.job is not None and pane.job.concurrency == 8, timeout=20)
        await pilot.press("minus", "minus")
        await until(pilot, lambda: pane.job is not None and pane.job.concurrency == 2, timeout=20)
        await pilot.press("plus", "plus")
        await pilot.press("space")
        await until(pilot, lambda: state() == "running", timeout=20, show=text)
    final = await asyncio.to_thread(agent.call, "job_status", job=view["id"])
    assert final["concurrency"] == 8 and final["state"] == "running"
    await asyncio.to_thread(agent.call, "job_cancel", job=view["id"])


async def test_swap_key_under_a_pinned_job_asks_first(agent, tmp_path):
    from sgltui.tui.screens import Confirm, DrainChoice

    a = agent.write_profile("t-a", key="7", **SLOW_TOKENS)
    b = agent.write_profile("t-b", key="8", **SLOW_TOKENS)
    await asyncio.to_thread(agent.call, "start", profile=a, wait=True)
    inp = tmp_path / "pin.jsonl"
    write_input(inp, 3000, max_tokens=64)
    view = await asyncio.to_thread(
        agent.call, "job_run", input=str(inp), output=str(tmp_path / "pin.out.jsonl"),
        concurrency=4, pinned=True,
    )  # fmt: skip
    source = LiveSource(agent.state_dir, profiles_dirs=[agent.profiles_dir], autostart=False)
    app = app_with(source)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.model.connected, timeout=20)
        await until(pilot, lambda: app.model.profile_for_key("8"), timeout=20)
        await pilot.press("8")
        if isinstance(app.screen, DrainChoice):  # requests are running: drain them
            await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, Confirm), timeout=20)
        assert (await asyncio.to_thread(agent.slot))["profile"] == a  # nothing happened yet
        await pilot.press("y")
        await until(
            pilot,
            lambda: (
                app.model.slot("0") is not None
                and app.model.slot("0").profile == b
                and app.model.slot("0").state == "ready"
            ),
            timeout=60,
        )
    final = await asyncio.to_thread(agent.call, "job_status", job=view["id"])
    assert final["state"] in ("running", "done") and final["failed"] == 0
    await asyncio.to_thread(agent.call, "job_cancel", job=view["id"])


async def test_jobs_tab_shows_a_choose_trial_live_and_its_decision(agent, tmp_path):
    sim = {"model": "Qwen/Qwen3-32B", "time_scale": 0.1, "sim_slow_start": 0.05}
    a = agent.write_profile("c-two", max_running_requests=2, **sim)
    b = agent.write_profile("c-eight", max_running_requests=8, **sim)
    await asyncio.to_thread(agent.call, "start", profile=a, wait=True)
    inp = tmp_path / "choose.jsonl"
    write_input(inp, 1500, max_tokens=16)
    view = await asyncio.to_thread(
        agent.call, "job_run", input=str(inp), output=str(tmp_path / "o.jsonl"),
        choose=f"{a},{b}", name="choose-job",
    )  # fmt: skip
    source = LiveSource(agent.state_dir, profiles_dirs=[agent.profiles_dir], autostart=False)
    app = app_with(source)
    async with app.run_test(size=(140, 40)) as pilot:
        await until(pilot, lambda: app.model.connected, timeout=20)
        await pilot.press("j")
        body = app.query_one("#jobs-body", Static)

        def text() -> str:
            return str(body.render())

        # live: the trial's line, the table's header, the candidate measured now marked
        await until(pilot, lambda: "choosing: trial" in text() and "projected finish" in text(),
                    timeout=30, show=text)  # fmt: skip
        await until(pilot, lambda: "▶ c-two" in text() or "▶ c-eight" in text(), timeout=30,
                    show=text)  # fmt: skip
        # decided: the winner named, each candidate with a projected finish
        await until(pilot, lambda: f"chose {b}" in text() and "WINNER" in text(), timeout=90,
                    show=text)  # fmt: skip
    final = await asyncio.to_thread(agent.call, "job_status", job=view["id"])
    assert final["decision"]["winner"] == b
