"""The agent's wire protocol and the one reducer of its event stream (stdlib + msgspec only).

Everything that crosses the agent's unix socket is defined here, and encoded and decoded here:

- a request is one JSON object a line, ``{"id", "op", "args", "client"}``; ``OPS`` is the one
  list of ops, each with the Struct its arguments must match (so a wrong type is one clear error,
  never a traceback deep in the agent) and whether it only reads;
- a reply is ``{"id", "ok", "result"}`` or ``{"id", "ok": false, "error"}``, the error an
  ``Error`` (a code from ``ErrorCode``, the message, the fix): clients act on the code, never on
  the words (before a hello agrees it is the bare line, which every version reads);
- a push is ``{"push": "event" | "sample" | "log" | "logs", "data"}`` ("logs": one tick's
  lines of every slot, a list of ``LogLines``, for a subscriber that asked for them so);
- an event (what the agent records in ``events.jsonl`` and pushes) is one Struct per ``type``.

A client opens with ``hello``: agent and client of different versions refuse each other with one
line that says which versions and how to restart the agent (``version_mismatch``).

``apply(state, event) -> state`` is the only fold of the event stream: the TUI model, replay,
report and ``status`` all use it, so that they cannot disagree about what an event means.
"""

from sgltui.protocol.args import AdoptArgs as AdoptArgs
from sgltui.protocol.args import Args as Args
from sgltui.protocol.args import AttachArgs as AttachArgs
from sgltui.protocol.args import BenchSpec as BenchSpec
from sgltui.protocol.args import BenchStartArgs as BenchStartArgs
from sgltui.protocol.args import BenchStopArgs as BenchStopArgs
from sgltui.protocol.args import CheckName as CheckName
from sgltui.protocol.args import Concurrency as Concurrency
from sgltui.protocol.args import DemoLoadArgs as DemoLoadArgs
from sgltui.protocol.args import Dirs as Dirs
from sgltui.protocol.args import ExposeArgs as ExposeArgs
from sgltui.protocol.args import Force as Force
from sgltui.protocol.args import HelloArgs as HelloArgs
from sgltui.protocol.args import JobArgs as JobArgs
from sgltui.protocol.args import JobRef as JobRef
from sgltui.protocol.args import JobRunArgs as JobRunArgs
from sgltui.protocol.args import JobSetArgs as JobSetArgs
from sgltui.protocol.args import LaunchArgs as LaunchArgs
from sgltui.protocol.args import LeaseArgs as LeaseArgs
from sgltui.protocol.args import LogsArgs as LogsArgs
from sgltui.protocol.args import Name as Name
from sgltui.protocol.args import NonNegative as NonNegative
from sgltui.protocol.args import PreflightArgs as PreflightArgs
from sgltui.protocol.args import ProfileName as ProfileName
from sgltui.protocol.args import ProfilesArgs as ProfilesArgs
from sgltui.protocol.args import RemotePoolArgs as RemotePoolArgs
from sgltui.protocol.args import RemoteWorker as RemoteWorker
from sgltui.protocol.args import RestartArgs as RestartArgs
from sgltui.protocol.args import ShutdownArgs as ShutdownArgs
from sgltui.protocol.args import SlotArgs as SlotArgs
from sgltui.protocol.args import SlotId as SlotId
from sgltui.protocol.args import StandbyArgs as StandbyArgs
from sgltui.protocol.args import StartArgs as StartArgs
from sgltui.protocol.args import StopArgs as StopArgs
from sgltui.protocol.args import SubscribeArgs as SubscribeArgs
from sgltui.protocol.args import SwapArgs as SwapArgs
from sgltui.protocol.args import TimelineArgs as TimelineArgs
from sgltui.protocol.base import EVENT_SCHEMA as EVENT_SCHEMA
from sgltui.protocol.base import MAX_CLIENT_NAME as MAX_CLIENT_NAME
from sgltui.protocol.base import PROTOCOL_VERSION as PROTOCOL_VERSION
from sgltui.protocol.base import BenchState as BenchState
from sgltui.protocol.base import CauseKind as CauseKind
from sgltui.protocol.base import Drain as Drain
from sgltui.protocol.base import JobState as JobState
from sgltui.protocol.base import ProtocolError as ProtocolError
from sgltui.protocol.base import SlotState as SlotState
from sgltui.protocol.base import StrEnum as StrEnum
from sgltui.protocol.events import EVENT_TYPES as EVENT_TYPES
from sgltui.protocol.events import JOB_EVENTS as JOB_EVENTS
from sgltui.protocol.events import AgentAdopt as AgentAdopt
from sgltui.protocol.events import AgentStart as AgentStart
from sgltui.protocol.events import AgentStop as AgentStop
from sgltui.protocol.events import BenchDone as BenchDone
from sgltui.protocol.events import BenchProgress as BenchProgress
from sgltui.protocol.events import BenchProgressArgs as BenchProgressArgs
from sgltui.protocol.events import BenchStart as BenchStart
from sgltui.protocol.events import Capacity as Capacity
from sgltui.protocol.events import Cause as Cause
from sgltui.protocol.events import Command as Command
from sgltui.protocol.events import CommandRefused as CommandRefused
from sgltui.protocol.events import DiskError as DiskError
from sgltui.protocol.events import DiskOk as DiskOk
from sgltui.protocol.events import EndpointEvent as EndpointEvent
from sgltui.protocol.events import Event as Event
from sgltui.protocol.events import EventBase as EventBase
from sgltui.protocol.events import FrontHold as FrontHold
from sgltui.protocol.events import FrontLetGo as FrontLetGo
from sgltui.protocol.events import FrontRelease as FrontRelease
from sgltui.protocol.events import FrontRoute as FrontRoute
from sgltui.protocol.events import GatewayDied as GatewayDied
from sgltui.protocol.events import GatewayFailed as GatewayFailed
from sgltui.protocol.events import GatewayRestarted as GatewayRestarted
from sgltui.protocol.events import GatewayStart as GatewayStart
from sgltui.protocol.events import GatewayStopped as GatewayStopped
from sgltui.protocol.events import JobCancel as JobCancel
from sgltui.protocol.events import JobCandidate as JobCandidate
from sgltui.protocol.events import JobChecked as JobChecked
from sgltui.protocol.events import JobChoice as JobChoice
from sgltui.protocol.events import JobConcurrency as JobConcurrency
from sgltui.protocol.events import JobDecisionEvent as JobDecisionEvent
from sgltui.protocol.events import JobDiskError as JobDiskError
from sgltui.protocol.events import JobDiskOk as JobDiskOk
from sgltui.protocol.events import JobDone as JobDone
from sgltui.protocol.events import JobErrored as JobErrored
from sgltui.protocol.events import JobEvent as JobEvent
from sgltui.protocol.events import JobHeld as JobHeld
from sgltui.protocol.events import JobHold as JobHold
from sgltui.protocol.events import JobPause as JobPause
from sgltui.protocol.events import JobProgress as JobProgress
from sgltui.protocol.events import JobRelease as JobRelease
from sgltui.protocol.events import JobRepaired as JobRepaired
from sgltui.protocol.events import JobReplan as JobReplan
from sgltui.protocol.events import JobResume as JobResume
from sgltui.protocol.events import JobResumeAfterRestart as JobResumeAfterRestart
from sgltui.protocol.events import JobRunnerExit as JobRunnerExit
from sgltui.protocol.events import JobSegmentDone as JobSegmentDone
from sgltui.protocol.events import JobSegmentStart as JobSegmentStart
from sgltui.protocol.events import JobSet as JobSet
from sgltui.protocol.events import JobStalled as JobStalled
from sgltui.protocol.events import JobStallOver as JobStallOver
from sgltui.protocol.events import JobStart as JobStart
from sgltui.protocol.events import JobTarget as JobTarget
from sgltui.protocol.events import JobTrial as JobTrial
from sgltui.protocol.events import JobWatch as JobWatch
from sgltui.protocol.events import Launch as Launch
from sgltui.protocol.events import LogRotated as LogRotated
from sgltui.protocol.events import OtherEvent as OtherEvent
from sgltui.protocol.events import PoolEvent as PoolEvent
from sgltui.protocol.events import PoolRoll as PoolRoll
from sgltui.protocol.events import PoolWorkerChanged as PoolWorkerChanged
from sgltui.protocol.events import PreflightDone as PreflightDone
from sgltui.protocol.events import ProfileChanged as ProfileChanged
from sgltui.protocol.events import ServerProvenance as ServerProvenance
from sgltui.protocol.events import SlotAttached as SlotAttached
from sgltui.protocol.events import SlotDrain as SlotDrain
from sgltui.protocol.events import SlotExposed as SlotExposed
from sgltui.protocol.events import SlotPhase as SlotPhase
from sgltui.protocol.events import SlotRestart as SlotRestart
from sgltui.protocol.events import SlotStateChanged as SlotStateChanged
from sgltui.protocol.events import SwapDone as SwapDone
from sgltui.protocol.events import SwapEvent as SwapEvent
from sgltui.protocol.events import SwapFailure as SwapFailure
from sgltui.protocol.events import SwapStep as SwapStep
from sgltui.protocol.events import decode_event as decode_event
from sgltui.protocol.events import event_dict as event_dict
from sgltui.protocol.history import SECRETS_FILE_PREFIX as SECRETS_FILE_PREFIX
from sgltui.protocol.history import FailureRecord as FailureRecord
from sgltui.protocol.history import LaunchOutcome as LaunchOutcome
from sgltui.protocol.history import LaunchRecord as LaunchRecord
from sgltui.protocol.history import SessionState as SessionState
from sgltui.protocol.history import SwapRecord as SwapRecord
from sgltui.protocol.history import apply as apply
from sgltui.protocol.history import apply_to_status_slot as apply_to_status_slot
from sgltui.protocol.history import fold as fold
from sgltui.protocol.history import slot_dict as slot_dict
from sgltui.protocol.history import slot_from_status as slot_from_status
from sgltui.protocol.history import to_builtins as to_builtins
from sgltui.protocol.ops import OP_OF_ARGS as OP_OF_ARGS
from sgltui.protocol.ops import OPS as OPS
from sgltui.protocol.ops import READ_ONLY_OPS as READ_ONLY_OPS
from sgltui.protocol.ops import VERSIONLESS_OPS as VERSIONLESS_OPS
from sgltui.protocol.ops import Op as Op
from sgltui.protocol.ops import R as R
from sgltui.protocol.ops import W as W
from sgltui.protocol.ops import decode_reply as decode_reply
from sgltui.protocol.ops import op_for as op_for
from sgltui.protocol.replies import Accepted as Accepted
from sgltui.protocol.replies import AgentInfo as AgentInfo
from sgltui.protocol.replies import Attached as Attached
from sgltui.protocol.replies import BenchRun as BenchRun
from sgltui.protocol.replies import BenchStarted as BenchStarted
from sgltui.protocol.replies import DemoLoadReply as DemoLoadReply
from sgltui.protocol.replies import DrainView as DrainView
from sgltui.protocol.replies import EndpointView as EndpointView
from sgltui.protocol.replies import Exposed as Exposed
from sgltui.protocol.replies import ExternalView as ExternalView
from sgltui.protocol.replies import GpuProcess as GpuProcess
from sgltui.protocol.replies import GpuSourceView as GpuSourceView
from sgltui.protocol.replies import GpuView as GpuView
from sgltui.protocol.replies import HelloReply as HelloReply
from sgltui.protocol.replies import HostView as HostView
from sgltui.protocol.replies import JobSegment as JobSegment
from sgltui.protocol.replies import JobView as JobView
from sgltui.protocol.replies import JobWarmFirst as JobWarmFirst
from sgltui.protocol.replies import KeeperView as KeeperView
from sgltui.protocol.replies import LeaseView as LeaseView
from sgltui.protocol.replies import LogsReply as LogsReply
from sgltui.protocol.replies import Noted as Noted
from sgltui.protocol.replies import Outcome as Outcome
from sgltui.protocol.replies import Pin as Pin
from sgltui.protocol.replies import PingReply as PingReply
from sgltui.protocol.replies import PoolGateway as PoolGateway
from sgltui.protocol.replies import PoolResult as PoolResult
from sgltui.protocol.replies import PoolStatus as PoolStatus
from sgltui.protocol.replies import PoolWorker as PoolWorker
from sgltui.protocol.replies import PreflightCheck as PreflightCheck
from sgltui.protocol.replies import PreflightReply as PreflightReply
from sgltui.protocol.replies import ProfileRow as ProfileRow
from sgltui.protocol.replies import RollView as RollView
from sgltui.protocol.replies import ShutdownReply as ShutdownReply
from sgltui.protocol.replies import SlotStatus as SlotStatus
from sgltui.protocol.replies import StandbyView as StandbyView
from sgltui.protocol.replies import StatusReply as StatusReply
from sgltui.protocol.replies import StopReport as StopReport
from sgltui.protocol.replies import Subscribed as Subscribed
from sgltui.protocol.replies import TelemetryView as TelemetryView
from sgltui.protocol.replies import TimelineReply as TimelineReply
from sgltui.protocol.replies import Unmanaged as Unmanaged
from sgltui.protocol.replies import telemetry_view as telemetry_view
from sgltui.protocol.views import AgentView as AgentView
from sgltui.protocol.views import BenchProgressView as BenchProgressView
from sgltui.protocol.views import BenchView as BenchView
from sgltui.protocol.views import CapacityBound as CapacityBound
from sgltui.protocol.views import CapacityCard as CapacityCard
from sgltui.protocol.views import DiskView as DiskView
from sgltui.protocol.views import FromTo as FromTo
from sgltui.protocol.views import FrontView as FrontView
from sgltui.protocol.views import LastSwap as LastSwap
from sgltui.protocol.views import ProfileSeen as ProfileSeen
from sgltui.protocol.views import ResolvedView as ResolvedView
from sgltui.protocol.views import SlotView as SlotView
from sgltui.protocol.views import StopView as StopView
from sgltui.protocol.views import SwapView as SwapView
from sgltui.protocol.views import bench_progress_view as bench_progress_view
from sgltui.protocol.views import capacity_card as capacity_card
from sgltui.protocol.wire import ERROR_CODES as ERROR_CODES
from sgltui.protocol.wire import Error as Error
from sgltui.protocol.wire import ErrorCode as ErrorCode
from sgltui.protocol.wire import LogLines as LogLines
from sgltui.protocol.wire import Push as Push
from sgltui.protocol.wire import Reply as Reply
from sgltui.protocol.wire import Request as Request
from sgltui.protocol.wire import RequestId as RequestId
from sgltui.protocol.wire import args_dict as args_dict
from sgltui.protocol.wire import decode_message as decode_message
from sgltui.protocol.wire import decode_request as decode_request
from sgltui.protocol.wire import encode as encode
from sgltui.protocol.wire import parse_args as parse_args
from sgltui.protocol.wire import version_mismatch as version_mismatch

# What `from sgltui.protocol import *` and a reader get: every name re-exported above.
__all__ = [
    "Accepted",
    "AdoptArgs",
    "AgentAdopt",
    "AgentInfo",
    "AgentStart",
    "AgentStop",
    "AgentView",
    "Args",
    "AttachArgs",
    "Attached",
    "BenchDone",
    "BenchProgress",
    "BenchProgressArgs",
    "BenchProgressView",
    "BenchRun",
    "BenchSpec",
    "BenchStart",
    "BenchStartArgs",
    "BenchStarted",
    "BenchState",
    "BenchStopArgs",
    "BenchView",
    "Capacity",
    "CapacityBound",
    "CapacityCard",
    "Cause",
    "CauseKind",
    "CheckName",
    "Command",
    "CommandRefused",
    "Concurrency",
    "DemoLoadArgs",
    "DemoLoadReply",
    "Dirs",
    "DiskError",
    "DiskOk",
    "DiskView",
    "Drain",
    "DrainView",
    "ERROR_CODES",
    "EVENT_SCHEMA",
    "EVENT_TYPES",
    "EndpointEvent",
    "EndpointView",
    "Error",
    "ErrorCode",
    "Event",
    "EventBase",
    "ExposeArgs",
    "Exposed",
    "ExternalView",
    "FailureRecord",
    "Force",
    "FromTo",
    "FrontHold",
    "FrontLetGo",
    "FrontRelease",
    "FrontRoute",
    "FrontView",
    "GatewayDied",
    "GatewayFailed",
    "GatewayRestarted",
    "GatewayStart",
    "GatewayStopped",
    "GpuProcess",
    "GpuSourceView",
    "GpuView",
    "HelloArgs",
    "HelloReply",
    "HostView",
    "JOB_EVENTS",
    "JobArgs",
    "JobCancel",
    "JobCandidate",
    "JobChecked",
    "JobChoice",
    "JobConcurrency",
    "JobDecisionEvent",
    "JobDiskError",
    "JobDiskOk",
    "JobDone",
    "JobErrored",
    "JobEvent",
    "JobHeld",
    "JobHold",
    "JobPause",
    "JobProgress",
    "JobRef",
    "JobRelease",
    "JobRepaired",
    "JobReplan",
    "JobResume",
    "JobResumeAfterRestart",
    "JobRunArgs",
    "JobRunnerExit",
    "JobSegment",
    "JobSegmentDone",
    "JobSegmentStart",
    "JobSet",
    "JobSetArgs",
    "JobStallOver",
    "JobStalled",
    "JobStart",
    "JobState",
    "JobTarget",
    "JobTrial",
    "JobView",
    "JobWarmFirst",
    "JobWatch",
    "KeeperView",
    "LastSwap",
    "Launch",
    "LaunchArgs",
    "LaunchOutcome",
    "LaunchRecord",
    "LeaseArgs",
    "LeaseView",
    "LogLines",
    "LogRotated",
    "LogsArgs",
    "LogsReply",
    "MAX_CLIENT_NAME",
    "Name",
    "NonNegative",
    "Noted",
    "OPS",
    "OP_OF_ARGS",
    "Op",
    "OtherEvent",
    "Outcome",
    "PROTOCOL_VERSION",
    "Pin",
    "PingReply",
    "PoolEvent",
    "PoolGateway",
    "PoolResult",
    "PoolRoll",
    "PoolStatus",
    "PoolWorker",
    "PoolWorkerChanged",
    "PreflightArgs",
    "PreflightCheck",
    "PreflightDone",
    "PreflightReply",
    "ProfileChanged",
    "ProfileName",
    "ProfileRow",
    "ProfileSeen",
    "ProfilesArgs",
    "ProtocolError",
    "Push",
    "R",
    "READ_ONLY_OPS",
    "RemotePoolArgs",
    "RemoteWorker",
    "Reply",
    "Request",
    "RequestId",
    "ResolvedView",
    "RestartArgs",
    "RollView",
    "SECRETS_FILE_PREFIX",
    "ServerProvenance",
    "SessionState",
    "ShutdownArgs",
    "ShutdownReply",
    "SlotArgs",
    "SlotAttached",
    "SlotDrain",
    "SlotExposed",
    "SlotId",
    "SlotPhase",
    "SlotRestart",
    "SlotState",
    "SlotStateChanged",
    "SlotStatus",
    "SlotView",
    "StandbyArgs",
    "StandbyView",
    "StartArgs",
    "StatusReply",
    "StopArgs",
    "StopReport",
    "StopView",
    "StrEnum",
    "SubscribeArgs",
    "Subscribed",
    "SwapArgs",
    "SwapDone",
    "SwapEvent",
    "SwapFailure",
    "SwapRecord",
    "SwapStep",
    "SwapView",
    "TelemetryView",
    "TimelineArgs",
    "TimelineReply",
    "Unmanaged",
    "VERSIONLESS_OPS",
    "W",
    "apply",
    "apply_to_status_slot",
    "args_dict",
    "bench_progress_view",
    "capacity_card",
    "decode_event",
    "decode_message",
    "decode_reply",
    "decode_request",
    "encode",
    "event_dict",
    "fold",
    "op_for",
    "parse_args",
    "slot_dict",
    "slot_from_status",
    "telemetry_view",
    "to_builtins",
    "version_mismatch",
]
