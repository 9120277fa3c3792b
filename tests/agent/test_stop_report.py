"""A slot's stop report is protocol.StopReport end to end (agent/slot/slot.py Slot.stop): the stop's
outcome notes what a SIGKILL cut in it, and the stop op's reply carries it as it is."""

from __future__ import annotations

from sgltui import protocol
from sgltui.agent.slot.server_process import stop_outcome


def test_a_sigkill_notes_the_requests_it_cut_in_the_report_the_reply_carries():
    report = protocol.StopReport(timings_s={"drain": 0.1})
    sig, cause = stop_outcome({"signal": "SIGKILL", "requests": 3, "after_s": 10.0}, report)
    assert sig == "SIGKILL" and report.requests_at_sigkill == 3
    assert cause is not None and "3 requests still running were cut" in cause["summary"]
    wire = protocol.to_builtins(protocol.Outcome(report=report))
    assert wire["report"]["requests_at_sigkill"] == 3
    assert wire["report"]["timings_s"] == {"drain": 0.1}


def test_a_server_that_exited_on_sigterm_leaves_the_report_without_a_cut():
    report = protocol.StopReport()
    assert stop_outcome({"signal": "SIGTERM"}, report) == ("SIGTERM", None)
    assert stop_outcome(None, report) == ("SIGTERM", None)
    assert stop_outcome({"signal": "none"}, report) == (None, None)
    assert report.requests_at_sigkill is None
