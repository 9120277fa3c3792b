"""Each op's handler, in one table made once when the agent starts: the op's name (the key of
protocol.OPS) -> the part's method that handles it, and whether that method takes its lock itself.
Nothing finds a handler by its name's text (no `getattr(..., f"op_{op}")`, no prefix rules): a
test checks that this table covers protocol.OPS exactly.

Adding an op: its arguments' Struct (protocol/args.py), its line in protocol.OPS (protocol/ops.py),
its handler in the part it belongs to, and its line here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sgltui import protocol
from sgltui.agent.errors import OpError
from sgltui.agent.jobs.jobs_host import JobError

if TYPE_CHECKING:
    from sgltui.agent.agent_ops import AgentOps
    from sgltui.agent.endpoint.leases import Leases
    from sgltui.agent.jobs.jobs_host import JobsHost
    from sgltui.agent.slot.attach import Attacher
    from sgltui.agent.swap.coordinator import Swaps
    from sgltui.agent.swap.operations import Operations
    from sgltui.agent.swap.standby_ops import StandbyOps

Handler = Callable[[Any, "str | None"], Awaitable[Any]]


@dataclass(frozen=True)
class Route:
    handler: Handler
    # A slot's lifecycle takes that slot's lock (agent/swap/operations.py); attach/adopt/detach take
    # the agent's once the server answered (agent/slot/attach.py). The others run under the agent's.
    own_lock: bool = False


def routes(
    *,
    agent: AgentOps,
    lifecycle: Operations,
    swaps: Swaps,
    jobs: JobsHost,
    standbys: StandbyOps,
    leases: Leases,
    attacher: Attacher,
) -> Mapping[str, Route]:
    """Every op of protocol.OPS and the method that handles it."""
    own = True
    return {
        # the agent itself (agent/agent_ops.py)
        "hello": Route(agent.op_hello),
        "ping": Route(agent.op_ping),
        "status": Route(agent.op_status),
        "profiles": Route(agent.op_profiles),
        "logs": Route(agent.op_logs),
        "timeline": Route(agent.op_timeline),
        "events": Route(agent.op_events),
        "subscribe": Route(agent.op_subscribe),
        "shutdown": Route(agent.op_shutdown),
        "slot_expose": Route(agent.op_slot_expose),
        "remote_pool": Route(agent.op_remote_pool),
        "bench_start": Route(agent.op_bench_start),
        "bench_progress": Route(agent.op_bench_progress),
        "bench_stop": Route(agent.op_bench_stop),
        "bench_list": Route(agent.op_bench_list),
        "demo_load": Route(agent.op_demo_load),
        # a slot's lifecycle (agent/swap/operations.py)
        "preflight": Route(lifecycle.op_preflight, own),
        "start": Route(lifecycle.op_start, own),
        "stop": Route(lifecycle.op_stop, own),
        # its swaps, cold or warm (agent/swap/coordinator.py)
        "restart": Route(swaps.op_restart, own),
        "swap": Route(swaps.op_swap, own),
        # batch jobs (agent/jobs/jobs_host.py): a JobError is the op's refusal
        "job_run": Route(_jobs(jobs.op_run)),
        "job_status": Route(_jobs(jobs.op_status)),
        "job_list": Route(_jobs(jobs.op_list)),
        "job_pause": Route(_jobs(jobs.op_pause)),
        "job_resume": Route(_jobs(jobs.op_resume)),
        "job_cancel": Route(_jobs(jobs.op_cancel)),
        "job_set": Route(_jobs(jobs.op_set)),
        # profiles kept warm (agent/swap/standby_ops.py)
        "standby_add": Route(standbys.op_add),
        "standby_remove": Route(standbys.op_remove),
        # what the endpoint must not evict (agent/endpoint/leases.py)
        "lease_add": Route(leases.op_add),
        "lease_drop": Route(leases.op_drop),
        "lease_list": Route(leases.op_list),
        # servers sgltui did not start (agent/slot/attach.py)
        "attach": Route(attacher.op_attach, own),
        "adopt": Route(attacher.op_adopt, own),
        "detach": Route(attacher.op_detach, own),
    }


def _jobs(fn: Handler) -> Handler:
    async def handler(args: protocol.Args, client: str | None) -> Any:
        try:
            return await fn(args, client)
        except JobError as exc:
            raise OpError(str(exc), exc.code) from None

    handler.__wrapped__ = fn  # type: ignore[attr-defined]  # what the test reads
    return handler
