"""`sgltui web`: a real `sgltui web` process in front of a real agent and simulator.

The browser tests drive Debian's chromium through Playwright (executable_path) and read the
terminal output the app sends over the websocket; they skip, saying why, where no chromium or
Playwright is installed (.ci/run installs both).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import psutil
import pytest

from tests.ports import server_port

pytest.importorskip("textual_serve", reason="sgltui[web] (textual-serve) is not installed")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class Web:
    """A running `sgltui web`: its process, URL, token and state dir."""

    def __init__(self, state_dir: Path, profiles_dir: Path, *extra: str) -> None:
        self.state_dir = state_dir
        self.port = server_port()
        argv = [sys.executable, "-m", "sgltui", "--state-dir", str(state_dir)]
        argv += ["--profiles", str(profiles_dir), "web", "--port", str(self.port), *extra]
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, text=True
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert "?token=" in line, f"no URL printed: {line!r} {self.proc.stderr.read()}"
        self.url = line.split(": ", 1)[1].strip()
        self.token = self.url.split("?token=", 1)[1]
        self.base = f"http://127.0.0.1:{self.port}"

    def app_processes(self) -> list[psutil.Process]:
        """The tabs' app processes (`sgltui ... tui --web-tab`) of this state dir."""
        found = []
        for p in psutil.process_iter(["cmdline"]):
            cmd = p.info["cmdline"] or []
            if "--web-tab" in cmd and str(self.state_dir) in cmd:
                found.append(p)
        return found

    def stop(self) -> subprocess.CompletedProcess:
        res = subprocess.run(
            [sys.executable, "-m", "sgltui", "--state-dir", str(self.state_dir), "web", "--stop"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        self.proc.wait(timeout=20)
        return res

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        for p in self.app_processes():
            with contextlib.suppress(psutil.Error):
                p.kill()


@pytest.fixture
def web_factory(agent):
    started: list[Web] = []

    def make(*extra: str) -> Web:
        w = Web(agent.state_dir, agent.profiles_dir, *extra)
        started.append(w)
        return w

    yield make
    for w in started:
        w.kill()


def _get(url: str, cookies: dict | None = None) -> tuple[int, str, dict]:
    async def go():
        async with aiohttp.ClientSession(cookies=cookies) as s:
            async with s.get(url, allow_redirects=False) as r:
                return r.status, await r.text(), dict(r.headers)

    return asyncio.run(go())


def test_token_required_on_every_route_and_no_app_started(web_factory):
    web = web_factory()
    for path in ("/", "/ws", "/static/js/textual.js", "/?token=wrong"):
        status, body, _ = _get(web.base + path)
        assert status == 403, (path, status)
        assert "token" in body
    # A wrong cookie is no better than none.
    assert _get(web.base + "/", cookies={"sgltui_web_token": "nope"})[0] == 403
    assert web.app_processes() == []
    token_file = web.state_dir / "web-token"
    assert token_file.read_text().strip() == web.token
    assert token_file.stat().st_mode & 0o777 == 0o600


def test_token_visit_sets_cookie_and_serves_the_app_page(web_factory):
    web = web_factory()
    status, _, headers = _get(web.url)
    assert status == 302
    assert headers["Location"] == "/", "the token must not stay in the address bar"
    assert "HttpOnly" in headers["Set-Cookie"] and "SameSite=Strict" in headers["Set-Cookie"]
    status, body, _ = _get(web.base + "/", cookies={"sgltui_web_token": web.token})
    assert status == 200
    assert f"ws://127.0.0.1:{web.port}/ws" in body and "textual.js" in body


def test_remote_host_refused_without_allow_remote(agent):
    res = subprocess.run(
        [sys.executable, "-m", "sgltui", "--state-dir", str(agent.state_dir), "web"]
        + ["--host", "0.0.0.0", "--port", str(server_port())],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert res.returncode == 1
    assert "ssh -L" in res.stderr and "--allow-remote" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_tab_limit_gives_a_page_saying_why(web_factory):
    web = web_factory("--max-tabs", "1")

    async def go():
        cookies = {"sgltui_web_token": web.token}
        async with aiohttp.ClientSession(cookies=cookies) as s:
            ws = await s.ws_connect(f"{web.base}/ws?width=80&height=24")
            # The first tab's app process starts and writes to its terminal.
            first = await asyncio.wait_for(ws.receive(), timeout=30)
            assert first.type in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT)
            async with s.get(web.base + "/") as r:
                page = (r.status, await r.text())
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await s.ws_connect(f"{web.base}/ws")
            await ws.close()
            return page, refused.value.status

    (status, body), ws_status = asyncio.run(go())
    assert status == 429 and "all 1 tabs are in use" in body
    assert ws_status == 429


def test_stop_leaves_no_process(web_factory):
    web = web_factory()

    async def open_tab():
        cookies = {"sgltui_web_token": web.token}
        async with aiohttp.ClientSession(cookies=cookies) as s:
            ws = await s.ws_connect(f"{web.base}/ws?width=80&height=24")
            await asyncio.wait_for(ws.receive(), timeout=30)
            deadline = time.monotonic() + 20
            while not web.app_processes() and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            assert web.app_processes(), "the tab's app process did not start"
            res = await asyncio.to_thread(web.stop)
            return res

    res = asyncio.run(open_tab())
    assert res.returncode == 0, res.stderr
    assert "stopped" in res.stdout
    assert web.proc.returncode == 0
    assert web.app_processes() == []
    assert not (web.state_dir / "web.pid").exists()


# -- in a real browser ---------------------------------------------------------------------------


def _browser_or_skip():
    if CHROMIUM is None:
        pytest.skip("no chromium installed (apt-get install chromium; .ci/run does it)")
    try:
        from playwright.async_api import async_playwright
    except ModuleNotFoundError:
        pytest.skip("playwright is not installed (pip install playwright; .ci/run does it)")
    return async_playwright


async def _open_in_browser(web: Web, screenshot: Path, keys: str = "", until: str = "connected"):
    """Open the URL in headless chromium, collect what the app writes to the terminal, wait
    until `until` shows, press `keys`, and return the terminal text."""
    async_playwright = _browser_or_skip()
    received: list[str] = []
    async with async_playwright() as p:
        browser = await p.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--headless=new"]
        )
        try:
            page = await browser.new_page(viewport={"width": 1400, "height": 900})

            def on_ws(ws):
                def frame(payload):
                    data = payload if isinstance(payload, bytes) else payload.encode()
                    received.append(data.decode("utf-8", "replace"))

                ws.on("framereceived", frame)

            page.on("websocket", on_ws)
            response = await page.goto(web.url)
            assert response is not None and response.status == 200
            deadline = time.monotonic() + 60
            while until not in "".join(received) and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            await page.wait_for_timeout(1000)
            await page.screenshot(path=str(screenshot))
            await page.mouse.click(700, 600)  # focus the terminal (xterm's hidden textarea)
            for key in keys:
                await page.keyboard.press(key)
                await page.wait_for_timeout(300)
            await page.wait_for_timeout(1500)
            await page.screenshot(path=str(screenshot.with_suffix(".after.png")))
        finally:
            await browser.close()
    return "".join(received)


def _events(agent) -> list[dict]:
    session = Path(agent.status()["agent"]["session_dir"])
    out = []
    for line in (session / "events.jsonl").read_text().splitlines():
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out


def _commands_from_web(agent) -> list[dict]:
    return [e for e in _events(agent) if str(e.get("client") or "").startswith("web:")]


def test_browser_renders_the_main_screen_and_a_swap_is_attributed(agent, web_factory, tmp_path):
    agent.write_profile("w-a", key="8")
    agent.write_profile("w-b", key="9")
    agent.call("start", profile="w-a", slot="0", wait=True)
    web = web_factory()
    shot = tmp_path / "web.png"
    text = asyncio.run(_open_in_browser(web, shot, keys="9", until="w-b"))
    assert "sgltui" in text and "connected" in text and "profiles" in text
    assert shot.stat().st_size > 10_000
    agent.wait_state("ready", timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and agent.slot()["profile"] != "w-b":
        time.sleep(0.2)
    assert agent.slot()["profile"] == "w-b"
    web_events = _commands_from_web(agent)
    assert web_events, "no event names a web client"
    assert any("swap" in json.dumps(e) for e in web_events)
    assert web.stop().returncode == 0
    assert web.app_processes() == []


def test_browser_read_only_tab_cannot_swap(agent, web_factory, tmp_path):
    agent.write_profile("r-a", key="8")
    agent.write_profile("r-b", key="9")
    agent.call("start", profile="r-a", slot="0", wait=True)
    web = web_factory("--read-only")
    text = asyncio.run(_open_in_browser(web, tmp_path / "ro.png", keys="9", until="r-b"))
    assert "READ-ONLY" in text
    time.sleep(1)
    assert agent.slot()["profile"] == "r-a"
    assert _commands_from_web(agent) == []


def test_without_the_web_extra_says_how_to_install(monkeypatch, capsys):
    from sgltui.cli import main

    monkeypatch.setitem(sys.modules, "textual_serve", None)  # as if sgltui[web] were absent
    assert main(["web", "--port", str(server_port())]) == 1
    err = capsys.readouterr().err.strip()
    assert err == "sgltui: error: sgltui web needs the web extra: pip install 'sgltui[web]'"
