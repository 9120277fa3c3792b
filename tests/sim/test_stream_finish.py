"""A stream's last chunk: the finish that comes while a chunk is being written (a client that
reads slowly, a loaded machine) is still sent, with the tokens since. The stream ended with
[DONE] after a chunk without a finish reason and lost those tokens (CI, once, under load:
test_sigterm_drains_in_flight_requests_then_exits_zero)."""

from __future__ import annotations

from types import SimpleNamespace

from sgltui.sim.engine import ReqState
from sgltui.sim.http_api import Api


def _api() -> Api:
    args = SimpleNamespace(
        stream_interval=1,
        incremental_streaming_output=False,
        uvicorn_access_log_exclude_prefixes=None,
        log_level_http=None,
        log_level="info",
    )
    server = SimpleNamespace(engine=None, args=args, model_name="m", model=SimpleNamespace(vocab=0))
    return Api(server)


async def test_a_finish_that_comes_while_a_chunk_is_written_is_still_sent():
    st = ReqState(rid="r1", streaming=True, prompt_tokens=3)
    events = _api()._generate_events(None, st)
    st.output_ids.extend([11, 12])
    st.queue.put_nowait(1)
    first = await anext(events)  # the consumer now writes this chunk...
    assert first["meta_info"]["finish_reason"] is None
    assert first["output_ids"] == [11, 12]
    # ...and meanwhile the scheduler's last tokens and the finish arrive
    st.output_ids.extend([13, 14])
    st.finish = {"type": "length", "length": 4}
    st.queue.put_nowait(1)
    rest = [chunk async for chunk in events]
    assert len(rest) == 1
    assert rest[0]["output_ids"] == [11, 12, 13, 14]
    assert rest[0]["meta_info"]["finish_reason"] == {"type": "length", "length": 4}
