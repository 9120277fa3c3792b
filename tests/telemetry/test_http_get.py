"""The engine polls' keep-alive GET (agent/telemetry/http_get.py), against a raw server that
answers each way a server may: a length, chunks, the end of the connection, a closed kept
connection, nothing at all, or not HTTP."""

from __future__ import annotations

import asyncio
import socket

import pytest

from sgltui.agent.telemetry import http_get
from sgltui.agent.telemetry.engine import SlotWatch


class RawServer:
    """Answers each request with the next of `answers` (bytes; None: close without a word)."""

    def __init__(self, answers: list[bytes | None], close_after_each: bool = False) -> None:
        self.answers = list(answers)
        self.close_after_each = close_after_each
        self.accepted = 0
        self.requests: list[bytes] = []
        self.server: asyncio.base_events.Server | None = None

    async def __aenter__(self) -> RawServer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            while self.answers:
                head = await reader.readuntil(b"\r\n\r\n")
                self.requests.append(head)
                answer = self.answers.pop(0)
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
                if self.close_after_each:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()


def run(coro):
    return asyncio.run(coro)


def test_answers_by_length_chunks_and_connection_end_on_one_kept_connection():
    async def main() -> None:
        answers = [
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n",
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 2\r\n\r\n{}",
            b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nto the end",
        ]
        async with RawServer(answers) as srv:
            c = http_get.KeepAliveGet(f"http://127.0.0.1:{srv.port}")
            r = await c.get("/metrics", {"Authorization": "Bearer k"})
            assert (r.status_code, r.text) == (200, "hello")
            r = await c.get("/v1/loads")
            assert (r.status_code, r.content) == (200, b"abcde")
            r = await c.get("/x")
            assert r.status_code == 404 and r.json() == {}
            r = await c.get("/y")
            assert r.text == "to the end"
            assert srv.accepted == 1  # one connection for all four
            assert srv.requests[0].startswith(b"GET /metrics HTTP/1.1\r\n")
            assert b"\r\nAuthorization: Bearer k\r\n" in srv.requests[0]
            assert f"Host: 127.0.0.1:{srv.port}".encode() in srv.requests[0]
            c.close()

    run(main())


def test_a_kept_connection_the_server_closed_is_opened_again():
    async def main() -> None:
        ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        async with RawServer([ok, ok], close_after_each=True) as srv:
            c = http_get.KeepAliveGet(f"http://127.0.0.1:{srv.port}")
            assert (await c.get("/a")).text == "ok"
            await asyncio.sleep(0.05)  # the server closed it meanwhile
            assert (await c.get("/b")).text == "ok"
            assert srv.accepted == 2
            c.close()

    run(main())


def test_refused_silent_and_garbled_servers_are_errors():
    async def main() -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with pytest.raises(http_get.ConnectFailed):
            await http_get.KeepAliveGet(f"http://127.0.0.1:{port}").get("/metrics")

        async def silent(reader, writer):
            await asyncio.sleep(5)

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        with pytest.raises(http_get.Timeout):
            await http_get.KeepAliveGet(f"http://127.0.0.1:{port}", timeout=0.2).get("/metrics")
        server.close()

        async with RawServer([b"SSH-2.0-OpenSSH\r\n\r\n"]) as srv:
            with pytest.raises(http_get.BadAnswer):
                await http_get.KeepAliveGet(f"http://127.0.0.1:{srv.port}").get("/metrics")
        async with RawServer([b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"]) as srv:
            c = http_get.KeepAliveGet(f"http://127.0.0.1:{srv.port}", timeout=1.0)
            with pytest.raises((http_get.BadAnswer, http_get.Timeout)):
                await c.get("/metrics")
        with pytest.raises(ValueError):
            http_get.KeepAliveGet("https://example.org")

    run(main())


def test_a_slot_watch_polls_through_it_and_says_what_went_wrong():
    async def main() -> None:
        metrics = (
            b'sglang:num_running_reqs{tp_rank="0"} 2\nsglang:gen_throughput{tp_rank="0"} 40.5\n'
        )
        answers = [
            b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(metrics), metrics),
            b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n",
        ]
        async with RawServer(answers) as srv:
            w = SlotWatch("a", 1, f"http://127.0.0.1:{srv.port}/", "key")
            await w.poll(1.0)
            assert w.error is None and w.mode == "metrics" and w.polled is not None
            assert w.polled["num_running_reqs"] == 2 and w.polled["gen_throughput"] == 40.5
            assert w.answered_at > 0
            await w.poll(2.0)
            assert w.error == "/metrics answered HTTP 500"
            assert b"Authorization: Bearer key" in srv.requests[0]
            w.close()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        w = SlotWatch("b", 1, f"http://127.0.0.1:{port}", None)
        await w.poll(1.0)
        assert w.error == "server not answering yet (connection refused)"
        assert w.answered_at == 0.0

    run(main())


def test_busy_while_a_get_is_out():
    async def main() -> None:
        async def slow(reader, writer):
            await reader.readuntil(b"\r\n\r\n")
            await asyncio.sleep(0.2)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(slow, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        c = http_get.KeepAliveGet(f"http://127.0.0.1:{port}")
        assert not c.busy
        out = asyncio.ensure_future(c.get("/workers"))
        await asyncio.sleep(0.05)
        assert c.busy
        assert (await out).status_code == 200 and not c.busy
        c.close()
        server.close()

    run(main())
