"""A call whose write fails after the read loop already failed its future (the peer went while
we wrote): the caller gets one ConnectionLost, and asyncio logs no 'Future exception was never
retrieved' (`fleet status` to 150 unreachable hosts printed one in CI)."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from sgltui.client import AgentClient
from sgltui.client.errors import ConnectionLost


class PeerGoneWriter:
    """A writer whose drain lets the reader see the end first, then fails as a closed pipe."""

    def __init__(self, reader: asyncio.StreamReader, client: AgentClient) -> None:
        self.reader = reader
        self.client = client

    def write(self, data: bytes) -> None:
        pass

    async def drain(self) -> None:
        self.reader.feed_eof()
        while self.client.connected:  # the read loop fails every pending call, then closes
            await asyncio.sleep(0)
        raise BrokenPipeError(32, "Broken pipe")

    def close(self) -> None:
        pass

    async def wait_closed(self) -> None:
        pass


def test_a_write_failing_after_the_read_loop_leaves_no_unretrieved_future(tmp_path):
    unretrieved: list[dict[str, Any]] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: unretrieved.append(ctx))
        client = AgentClient(tmp_path)
        reader = asyncio.StreamReader()
        writer: Any = PeerGoneWriter(reader, client)
        with pytest.raises(ConnectionLost):
            await client.attach(reader, writer, check_version=True)  # its hello meets the race
        assert not client.connected
        await client.close()
        gc.collect()  # a future with an exception nobody read says so when it is collected
        await asyncio.sleep(0)

    asyncio.run(main())
    gc.collect()
    assert [c.get("message") for c in unretrieved] == []
