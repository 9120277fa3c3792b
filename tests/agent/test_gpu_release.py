"""issue 12 #6: the release wait after a stop, on a fake NVML (pynvml's functions patched).
With our pids in NVML's list, release is those pids holding nothing; where NVML's pids belong to
another PID namespace (a container) or it lists nobody, release is the GPU's used memory falling
back to the launch baseline. The method used is reported."""

from __future__ import annotations

import os

from sgltui.agent import gpu
from tests.telemetry.fake_nvml import FakeGpu, FakeNvml

GIB = 2**30
FOREIGN_PID = 4_000_000  # above pid_max: no process of this namespace has it


def test_our_pids_tell_what_is_still_held(monkeypatch):
    me = os.getpid()
    g = FakeGpu(used=30 * GIB, procs=[(me, 20 * GIB)])
    FakeNvml(monkeypatch, [g])
    assert gpu.release_state({me}, {0: 10 * GIB}, None, simulated=False) == gpu.Release(
        "pid", 20 * GIB
    )
    g.procs, g.used = [], 10 * GIB
    # Nobody listed and memory back at the baseline: released, told by used memory.
    assert gpu.release_state({me}, {0: 10 * GIB}, None, False) == gpu.Release("used-memory", 0)


def test_a_listed_rank_that_has_exited_is_still_ours(monkeypatch):
    # After a stop NVML goes on listing the dead rank until the driver frees its memory: that
    # pid exists no more, but it is the server's, not another namespace's.
    gone = FOREIGN_PID + 7
    g = FakeGpu(used=30 * GIB, procs=[(gone, 20 * GIB)])
    FakeNvml(monkeypatch, [g])
    r = gpu.release_state({gone}, {0: 10 * GIB}, None, False)
    assert r == gpu.Release("pid", 20 * GIB)
    g.procs = [(gone, 20 * GIB), (FOREIGN_PID, GIB)]  # a pid that is not ours does say container
    r = gpu.release_state({gone}, {0: 10 * GIB}, None, False)
    assert r == gpu.Release("used-memory", 20 * GIB) and "container" in r.why
    g.procs, g.used = [], 10 * GIB
    r = gpu.release_state({gone}, {0: 10 * GIB}, None, False)
    assert (
        r == gpu.Release("used-memory", 0) and r.why == "NVML lists no process on the target GPUs"
    )


def test_foreign_namespace_pids_fall_back_to_the_launch_baseline(monkeypatch):
    g = FakeGpu(used=50 * GIB, procs=[(FOREIGN_PID, 40 * GIB)])
    FakeNvml(monkeypatch, [g])
    baseline = gpu.used_bytes(None)
    assert baseline == {0: 50 * GIB}
    g.used += 16 * GIB  # our server, as NVML sees it: under a pid we cannot match
    g.procs.append((FOREIGN_PID + 1, 16 * GIB))
    r = gpu.release_state({os.getpid()}, baseline, None, False)
    assert r == gpu.Release("used-memory", 16 * GIB)
    g.used -= 16 * GIB - 100 * 2**20  # released, but for a context's worth of noise
    g.procs.pop()
    assert gpu.release_state({os.getpid()}, baseline, None, False) == gpu.Release("used-memory", 0)


def test_empty_process_list_without_baseline_is_pid_and_only_target_gpus_count(monkeypatch):
    a, b = FakeGpu(used=5 * GIB), FakeGpu(used=70 * GIB, procs=[(FOREIGN_PID, 70 * GIB)])
    FakeNvml(monkeypatch, [a, b])
    assert gpu.release_state({1}, None, "0", False) == gpu.Release("pid", 0)
    assert gpu.used_bytes("0") == {0: 5 * GIB}
    a.used = 20 * GIB
    assert gpu.release_state({1}, {0: 5 * GIB}, "0", False) == gpu.Release("used-memory", 15 * GIB)


def test_the_method_can_be_forced_and_no_nvml_is_none(monkeypatch):
    me = os.getpid()
    g = FakeGpu(used=30 * GIB, procs=[(me, 20 * GIB)])
    fake = FakeNvml(monkeypatch, [g])
    monkeypatch.setenv(gpu.RELEASE_METHOD_ENV, "used-memory")
    assert gpu.release_state({me}, {0: 10 * GIB}, None, False) == gpu.Release(
        "used-memory", 20 * GIB
    )
    assert fake.inits == fake.shutdowns
    fake.init_error = 9  # NVML_ERROR_DRIVER_NOT_LOADED
    assert gpu.release_state({me}, {0: 10 * GIB}, None, False) == gpu.Release("none", 0)
    assert gpu.used_bytes(None) is None
