"""Issue 51 item 14: the command palette found nothing for "standby", "report" or "job". Each
finds a command that does it, in the palette as a user types."""

from __future__ import annotations

from textual.command import CommandPalette

from .helpers import ScriptedSource, app_with, status_with, until

SIZE = (120, 40)
JOB = {"id": "j1", "name": "batch", "state": "running", "concurrency": 8, "slot": "0",
       "input": "/tmp/in.jsonl", "output": "/tmp/out.jsonl", "errors_output": "/tmp/e.jsonl",
       "concurrency_mode": "fixed", "total": 100, "answered": 10, "created": 1.0}  # fmt: skip


async def found(app, pilot, query: str) -> list[str]:
    await pilot.press("ctrl+p")
    await until(pilot, lambda: isinstance(app.screen, CommandPalette))
    await pilot.press(*query)
    results = app.screen.query_one("CommandList")
    await until(pilot, lambda: results.option_count and "No matches" not in str(
        results.get_option_at_index(0).prompt))  # fmt: skip
    await pilot.pause(0.5)  # the palette adds its matches as its providers yield them
    titles = [str(results.get_option_at_index(i).prompt) for i in range(results.option_count)]
    await pilot.press("escape")
    await until(pilot, lambda: not isinstance(app.screen, CommandPalette))
    return titles


async def test_the_palette_finds_standby_report_and_job(tmp_path):
    status = status_with()
    status["agent"]["session_dir"] = str(tmp_path)
    status["jobs"] = [JOB]
    app = app_with(ScriptedSource(status))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.model.connected and app.first_status.is_set())
        assert any("Keep warm" in t for t in await found(app, pilot, "standby"))
        assert any("Session report" in t for t in await found(app, pilot, "report"))
        jobs = await found(app, pilot, "job")
        assert any("Batch job: pause or resume" in t for t in jobs), jobs
