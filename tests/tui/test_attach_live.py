"""Issue 51 item 8: `A` attaches a server started by hand while slot 0 serves (it becomes
ext-PORT, as --help and docs/attach.md promise; it was refused, "slot 0 is ready with ...;
name another with --slot", and the TUI had no way around it). The real agent and simulator."""

from __future__ import annotations

import asyncio

from sgltui.tui.source import LiveSource

from .helpers import app_with, notes_into, until

SIZE = (120, 40)


async def test_A_attaches_a_found_server_as_ext_port_while_slot_0_serves(agent, sim_server):
    name = agent.write_profile("t-serving")
    await asyncio.to_thread(agent.call, "start", profile=name, wait=True)
    sim = sim_server("--served-model-name", "by-hand")
    source = LiveSource(agent.state_dir, profiles_dirs=[agent.profiles_dir], autostart=False)
    app = app_with(source)
    said: list[str] = []
    async with app.run_test(size=SIZE, message_hook=notes_into(said)) as pilot:
        await until(pilot, lambda: app.model.connected, timeout=20)
        await until(pilot, lambda: [u for u in app.model.unmanaged if u.url == sim.url], timeout=20)
        await pilot.press("A")
        ext = f"ext-{sim.port}"
        await until(pilot, lambda: app.model.slot(ext) is not None, timeout=20, show=lambda: said)
        slot = app.model.slot(ext)
        assert slot.external is not None and slot.external.pid == sim.pid
        assert app.model.slot("0").profile == name  # slot 0 serves on
        assert not [s for s in said if "refused" in s or "name another" in s], said
