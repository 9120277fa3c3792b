"""The memory pane as drawn at 80 and 100 columns: GPU utilization, power and temperature are
on screen, spelled out where there is room and abbreviated (never cut) where there is not; sizes
are GiB. Read from the lines the pane renders, not from the markup it was given."""

from __future__ import annotations

import asyncio
import re

import pytest
from textual.geometry import Region

from sgltui.tui.widgets.memory import MemoryPane
from tests.support.scripted import T0, ScriptedSource, make_sample, make_status

from .helpers import app_with, until


def drawn(pane: MemoryPane) -> list[str]:
    """The pane's lines as rendered, without the border (a top rule at 80 and 100 columns, a
    box at 160)."""
    region = Region(0, 0, pane.outer_size.width, pane.outer_size.height)
    lines = [strip.text for strip in pane.render_lines(region)]
    return [l.strip().strip("│").strip() for l in lines[1:] if l[:1] not in "╰"]


async def pane_text(size: tuple[int, int], simulated: bool = True) -> list[str]:
    status = make_status()
    samples = [{"push": "sample", "data": make_sample(t)} for t in range(1, 4)]
    for s in [status["telemetry"]] + [p["data"] for p in samples]:
        for g in s.get("gpus") or []:
            g["simulated"] = simulated
            g["name"] = "NVIDIA H200 (simulated)" if simulated else "NVIDIA H200"
    app = app_with(ScriptedSource(status, samples))
    async with app.run_test(size=size) as pilot:
        pane = app.query_one(MemoryPane)
        # one GPU: its bar and detail, the RAM bar and its detail, once laid out
        await until(
            pilot,
            lambda: len(drawn(pane)) == 4 and "GiB" in drawn(pane)[0],
            show=lambda: drawn(pane),
        )
        return drawn(pane)


@pytest.mark.parametrize(
    ("size", "detail"),
    [
        ((100, 30), "(sim) util 87% · 420 W · 61°C · █ slot 0 80.0 GiB"),
        ((80, 24), "(sim) 87% 420W 61°C · █ 80.0 GiB"),
    ],
)
async def test_gpu_util_power_and_temperature_fit_the_pane(size, detail):
    lines = await pane_text(size)
    assert lines[0].startswith("GPU0 ") and lines[0].endswith(" 82.0/140.4 GiB"), lines
    assert lines[1] == detail, lines
    assert "…" not in "".join(lines), lines  # abbreviated, never cut by the ellipsis
    assert lines[2].endswith(" 40.0/128.0 GiB") and "servers 9.0 GiB" in lines[3], lines


async def test_a_real_gpu_gives_up_its_name_first():
    lines = await pane_text((100, 30), simulated=False)
    assert lines[1] == "util 87% · 420 W · 61°C · █ slot 0 80.0 GiB", lines
    lines = await pane_text((160, 50), simulated=False)
    assert lines[1] == "NVIDIA H200 · util 87% · 420 W · 61°C · █ slot 0 80.0 GiB", lines


async def test_the_simulators_gpu_readings_reach_the_pane(agent):
    """A real agent and simulator: the published GPU's util, power and temperature are drawn."""
    from sgltui.tui.source import LiveSource

    agent.write_profile("mem-a", key="7")
    source = LiveSource(agent.state_dir, profiles_dirs=[agent.profiles_dir], autostart=False)
    app = app_with(source)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.model.profile_for_key("7"), timeout=20)
        await pilot.press("7")
        pane = app.query_one(MemoryPane)

        def detail() -> str:
            lines = drawn(pane)
            return lines[1] if len(lines) > 1 else ""

        pattern = re.compile(r"\(sim\) util \d+% · \d+ W · \d+°C · █ (slot 0 )?\d+\.\d GiB")
        await until(pilot, lambda: pattern.fullmatch(detail()), timeout=60, show=detail)
        await asyncio.to_thread(agent.status)  # lets the fixture note the server's process group


async def test_the_host_cpu_figure_is_each_3_s_mean_as_in_top():
    """Read every second, the host's CPU figure moves on every sample; the pane shows the
    first one, then the mean of each 3 s window (and repaints that line only then)."""
    status = make_status()
    app = app_with(ScriptedSource(status, []))
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(MemoryPane)

        def cpu() -> str:
            lines = drawn(pane)
            found = re.search(r"cpu (\d+)%", lines[3]) if len(lines) > 3 else None
            return found.group(1) if found else ""

        async def feed_seen(t: float, pct: float) -> None:
            sample = make_sample(t)
            sample["host"] = dict(sample["host"], cpu_pct=pct)
            app.source.feed({"push": "sample", "data": sample})
            await until(pilot, lambda: app.model.telemetry.ts == T0 + t)

        await until(pilot, lambda: cpu() == "12", show=cpu)  # the snapshot's, at T0
        await feed_seen(1, 10.0)
        await feed_seen(2, 70.0)
        await pilot.pause(0.2)
        assert cpu() == "12"  # inside the window: the figure holds
        await feed_seen(3, 4.0)
        await until(pilot, lambda: cpu() == "24", show=cpu)  # (12 + 10 + 70 + 4) / 4


@pytest.mark.parametrize("gpus", [1, 8])
async def test_lines_drawn_from_parts_are_the_whole_markup_drawn(gpus):
    """Issue 39: a line's styled parts are rendered once and its figures appended as plain
    text. The result must be what Content renders for the whole line (same text, styles and
    segment offsets), for the two-line form (1 GPU) and the compact one (8 GPUs: '(sim)' after
    the figures, swap in use after the CPU figure)."""
    from textual.content import Content
    from textual.visual import Visual

    from sgltui.tui import views
    from tests.support.scripted import make_host_status

    status = make_status() if gpus == 1 else make_host_status(gpus)
    status["telemetry"]["host"]["swap_used_bytes"] = 3 * 2**30
    app = app_with(ScriptedSource(status, []))
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.query_one(MemoryPane)
        await until(pilot, lambda: len(pane._telemetry.gpus) == gpus)
        await pilot.pause(0.3)
        width = pane.content_region.width
        lines = pane._bar_markup(width)
        assert pane.compact is (gpus > views.COMPACT_GPUS)
        assert any(tail for _, _, tail in lines)  # (sim) or swap: a styled part after figures
        for parts in lines:
            whole = Visual.to_strips(
                pane, Content.from_markup(views.joined(parts)), width, 1, pane.visual_style
            )[0]
            drawn = pane._line(parts, width)
            assert [(s.text, s.style) for s in drawn] == [(s.text, s.style) for s in whole]


async def test_a_standbys_line_is_made_again_for_a_status_not_for_a_sample(monkeypatch):
    """The memory pane makes its standbys' lines once per list of slots the model reads (the
    model keeps that list while its slots are the same): samples make none, a STATUS that puts
    a profile to sleep beside the slot shows its line, one that wakes it drops the line."""
    from sgltui.tui import views

    from .helpers import status_with

    made: list[int] = []
    real = views.standby_lines

    def standby_lines(slots):
        made.append(len(slots))
        return real(slots)

    monkeypatch.setattr(views, "standby_lines", standby_lines)
    asleep = {"profile": "demo-base", "state": "asleep", "host_bytes": 54 * 10**9,
              "gpu_bytes": 2 * 2**30, "port": 31000}  # fmt: skip
    status = status_with(running=0)
    app = app_with(ScriptedSource(status, []))
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(MemoryPane)
        await until(pilot, lambda: len(drawn(pane)) == 4, show=lambda: drawn(pane))
        made.clear()
        for t in (1, 2, 3):
            app.source.feed({"push": "sample", "data": make_sample(t)})
            await until(pilot, lambda t=t: app.model.telemetry.ts == T0 + t)
        await pilot.pause(0.1)
        assert made == []  # (the samples' draws read the same slots)
        status["slots"][0]["standbys"] = [asleep]
        app.refresh_status_soon()
        await until(pilot, lambda: any("demo-base beside" in line for line in drawn(pane)),
                    show=lambda: drawn(pane))  # fmt: skip
        assert made
        status["slots"][0]["standbys"] = []
        app.refresh_status_soon()
        await until(pilot, lambda: len(drawn(pane)) == 4, show=lambda: drawn(pane))
