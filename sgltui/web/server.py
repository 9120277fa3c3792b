"""`sgltui web`: the TUI served to browser tabs through textual-serve, behind a token.

textual-serve runs one app process per browser tab and has no authentication, so this module
builds the aiohttp application itself and puts every route behind one middleware:

* a token (random, or read from --token-file) is required on every HTTP and websocket request:
  `?token=` on the first visit sets an HttpOnly, SameSite=Strict cookie and redirects to the
  same URL without the token (so it does not linger in the address bar or in history); a wrong
  or missing token answers 403 and starts no app process;
* a websocket whose Origin is not this server's own host is refused (a page on another site
  cannot drive the panel through a visitor's cookie);
* at most `max_tabs` app processes run at once; the next tab gets a page saying why.

Only public pieces of textual-serve are used: `Server.handle_websocket` (it starts and stops the
tab's app process) and its shipped template and static folder. The index page is rendered here,
with URLs taken from the request's own Host, so that it works behind an SSH tunnel.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import html
import secrets
import shlex
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

import psutil
from aiohttp import web

from sgltui.core.files import write_atomic

TOKEN_COOKIE = "sgltui_web_token"
TOKEN_FILE = "web-token"
PID_FILE = "web.pid"
DEFAULT_PORT = 8765
DEFAULT_MAX_TABS = 4
# How long a stopping server waits for its tabs' app processes to quit before killing them.
STOP_GRACE_S = 5.0
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class WebError(Exception):
    """An expected failure of `sgltui web`: one line for the user."""


def is_loopback(host: str) -> bool:
    return host in LOOPBACK_HOSTS or host.startswith("127.")


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path`, created 0600 (never readable by others, not even briefly)."""
    # A folder it creates is private; an existing one (a --token-file in $HOME) is left as it is.
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_atomic(path, text)


def load_or_create_token(state_dir: Path, token_file: Path | None) -> tuple[str, Path]:
    """The token and the file that holds it.

    With --token-file, a token already in that file is kept (a bookmark keeps working across
    restarts); without it, a new random token is written to the state dir on every start.
    """
    if token_file is not None:
        with contextlib.suppress(FileNotFoundError):
            text = token_file.read_text().strip()
            if text:
                if token_file.stat().st_mode & 0o077:
                    raise WebError(
                        f"{token_file} is readable by other users: chmod 600 {token_file}"
                    )
                return text, token_file
    path = token_file or state_dir / TOKEN_FILE
    token = secrets.token_urlsafe(24)
    write_private(path, token + "\n")
    return token, path


def app_command(
    state_dir: Path, profiles_dirs: Sequence[str], read_only: bool, python: str = sys.executable
) -> str:
    """The command textual-serve runs for each tab: the same TUI, as a client of the same agent.

    textual-serve starts it through a shell, so every part is quoted here; it is built only from
    our own values (no request data ever reaches it).
    """
    argv = [python, "-m", "sgltui", "--state-dir", str(state_dir)]
    for d in profiles_dirs:
        argv += ["--profiles", str(d)]
    argv += ["tui", "--web-tab"]
    if read_only:
        argv.append("--read-only")
    return " ".join(shlex.quote(a) for a in argv)


@dataclass
class WebServer:
    """The aiohttp application around textual-serve's websocket handler."""

    token: str
    command: str
    max_tabs: int = DEFAULT_MAX_TABS
    title: str = "sgltui"
    tabs: int = 0
    _stopping: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        # Imported here so that `sgltui web` without the extra says how to install it.
        from textual_serve.server import Server

        self.serve = Server(self.command, title=self.title)

    # -- auth --------------------------------------------------------------------------------
    def _token_ok(self, supplied: str | None) -> bool:
        return supplied is not None and hmac.compare_digest(supplied.encode(), self.token.encode())

    @web.middleware
    async def auth(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        supplied = request.query.get("token")
        if supplied is not None:
            if not self._token_ok(supplied):
                return _forbidden("wrong token")
            rest = {k: v for k, v in request.query.items() if k != "token"}
            target = request.path + (f"?{urlencode(rest)}" if rest else "")
            response = web.HTTPFound(location=target)
            response.set_cookie(
                TOKEN_COOKIE, self.token, httponly=True, samesite="Strict", path="/"
            )
            return response
        if not self._token_ok(request.cookies.get(TOKEN_COOKIE)):
            return _forbidden("no token")
        return await handler(request)

    # -- routes ------------------------------------------------------------------------------
    async def index(self, request: web.Request) -> web.StreamResponse:
        import aiohttp_jinja2

        if self.tabs >= self.max_tabs:
            return self._full_page()
        base = f"{request.scheme}://{request.host}"
        ws_scheme = "wss" if request.scheme == "https" else "ws"
        context = {
            "font_size": _to_int(request.query.get("fontsize"), 16),
            "app_websocket_url": f"{ws_scheme}://{request.host}/ws",
            "config": {"static": {"url": f"{base}/static/"}},
            "application": {"name": self.title},
        }
        return aiohttp_jinja2.render_template("app_index.html", request, context)

    async def websocket(self, request: web.Request) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if origin is not None and origin.split("://", 1)[-1] != request.host:
            return _forbidden("websocket from another origin")
        if self._stopping:
            return web.Response(status=503, text="sgltui web is stopping\n")
        if self.tabs >= self.max_tabs:
            return self._full_page()
        self.tabs += 1
        try:
            return await self.serve.handle_websocket(request)
        finally:
            self.tabs -= 1

    def _full_page(self) -> web.Response:
        body = (
            f"<!doctype html><title>sgltui: all tabs in use</title>"
            f"<h1>sgltui: all {self.max_tabs} tabs are in use</h1>"
            f"<p>Each browser tab runs its own copy of the control panel, and this server allows "
            f"{self.max_tabs} at once. Close another sgltui tab and reload this page, or restart "
            f"<code>sgltui web</code> with <code>--max-tabs N</code>.</p>"
        )
        return web.Response(status=429, text=body, content_type="text/html")

    def make_app(self) -> web.Application:
        import aiohttp_jinja2
        import jinja2

        app = web.Application(middlewares=[self.auth])
        aiohttp_jinja2.setup(app, loader=jinja2.FileSystemLoader(self.serve.templates_path))
        app.add_routes(
            [
                web.get("/", self.index, name="index"),
                web.get("/ws", self.websocket, name="websocket"),
                web.static("/static", self.serve.statics_path, name="static"),
            ]
        )
        return app

    async def run(self, host: str, port: int, on_ready: Callable[[], None]) -> None:
        """Serve until SIGTERM/SIGINT, then stop every tab's app process."""
        runner = web.AppRunner(self.make_app(), shutdown_timeout=STOP_GRACE_S)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise WebError(
                f"cannot listen on {host}:{port} ({exc.strerror or exc}): "
                f"pick another port with --port, or stop the other server (sgltui web --stop)"
            ) from None
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.add_signal_handler(sig, stop.set)
        on_ready()
        try:
            await stop.wait()
        finally:
            self._stopping = True
            await runner.cleanup()
            await asyncio.to_thread(reap_children, STOP_GRACE_S)


def reap_children(grace_s: float) -> None:
    """Stop whatever app processes are left (textual-serve asks each to quit; this is the
    backstop): SIGTERM, then SIGKILL after `grace_s`, and reap them."""
    children = psutil.Process().children(recursive=True)
    for child in children:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.terminate()
    _, alive = psutil.wait_procs(children, timeout=grace_s)
    for child in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
    psutil.wait_procs(alive, timeout=grace_s)


def _forbidden(why: str) -> web.Response:
    body = (
        f"403 forbidden ({html.escape(why)}): open the URL that `sgltui web` printed "
        f"(it ends in ?token=...); the token is also in the state dir's {TOKEN_FILE}\n"
    )
    return web.Response(status=403, text=body)


def _to_int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default
