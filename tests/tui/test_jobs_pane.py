"""The Jobs tab renders the model: pushed job events fold into it (no polling from the widget),
the app reads the jobs in full only while the tab is on screen, and the pane's keys are
commands the app sends."""

from __future__ import annotations

from textual.widgets import Static

from sgltui.tui.widgets.jobs import JobsPane
from tests.support.scripted import T0

from .helpers import ScriptedSource, app_with, event, ops, status_with, until


def job(**extra):
    return {
        "id": "j1", "name": "big", "state": "running", "slot": "0", "input": "in.jsonl",
        "output": "out.jsonl", "errors_output": "err.jsonl", "concurrency": 4,
        "concurrency_mode": "fixed", "total": 1000, "answered": 10, "created": T0, **extra,
    }  # fmt: skip


async def test_job_events_reach_the_pane_and_its_keys_are_commands():
    st = status_with()
    st["jobs"] = [job()]

    def agent(op, args, source):  # the agent's word changes as its commands say
        view = source.status["jobs"][0]
        if op == "job_pause":
            view["state"] = "paused"
        elif op == "job_set":
            view["concurrency"] = args["concurrency"]
        return None

    src = ScriptedSource(st, on_call=agent)
    app = app_with(src)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.model.connected and "j1" in app.model.jobs)
        # The tab is hidden: a pushed event folds into the model, nobody asks the agent.
        src.feed(event("job.progress", job="j1", slot="0", answered=250, in_flight=4))
        await until(pilot, lambda: app.model.jobs["j1"].answered == 250)
        await pilot.pause(1.2)
        assert ops(src, "job_list") == [] and ops(src, "job_status") == []
        src.status["jobs"] = [job(answered=250)]  # what the agent now says, read once shown
        await pilot.press("j")
        body = app.query_one("#jobs-body", Static)
        await until(pilot, lambda: "250/1,000" in str(body.render()), show=lambda: body.render())
        pane = app.query_one(JobsPane)
        await until(pilot, lambda: app.focused is pane)
        await pilot.press("space")  # shown paused at once, then sent
        await until(pilot, lambda: ops(src, "job_pause") == [{"job": "j1"}])
        assert pane.job is not None and pane.job.state == "paused"
        await pilot.press("plus", "plus")  # builds on itself: 4 -> 8 -> 16
        await until(pilot, lambda: len(ops(src, "job_set")) == 2)
        assert [a["concurrency"] for a in ops(src, "job_set")] == [8, 16]
        src.status["jobs"] = [job(state="done", answered=990, failed=10, concurrency=16)]
        src.feed(event("job.done", job="j1", slot="0", state="done", answered=990, failed=10))
        await until(pilot, lambda: "1,000/1,000" in str(body.render()), show=lambda: body.render())
