"""The GPU holder child of the fake `sglang.launch_server` (not SGLang): it holds GPU_HOLD_GIB of
real GPU memory with torch, like a scheduler rank holds its weights, and obeys the launcher over
the socket whose fd is in FAKE_SGLANG_CTL_FD, one JSON object a line each way:

    {"op": "release", "backup": true}   GPU bytes -> pinned host memory, then free the GPU memory
    {"op": "resume", "backup": true}    allocate again, pinned host memory -> GPU
    {"op": "verify"}                    are the held bytes still the pattern written at start?
    {"op": "state"}                     nothing; every reply carries the whole state

It also sends {"event": "held", ...} once its memory is held, or {"event": "failed", ...}.
With backup false (SGLang without --enable-weights-cpu-backup) a release discards the bytes and a
resume brings back uninitialised memory, which `verify` then reports (sglang#6367).

The pinned copy is allocated on the first release and kept between cycles, as
TMS_RETAIN_CPU_BACKUP=1 keeps torch_memory_saver's: pinning costs far more than copying.
Like torch-memory-saver 0.0.10 (csrc/core.cpp), a release of held memory that is already
released, or a resume of memory that is not, prints TMS's line on stderr and ends the holder
with exit(1); the launcher then takes the server down, as a dead scheduler rank does.
Each GiB holds its own byte (index % 251 + 1), so a resume that brought back garbage or chunks
out of place fails `verify`. Without torch/CUDA it holds nothing, or, with
FAKE_SGLANG_CPU_HOLD=1 (the CPU dry run), the same bytes in plain host memory, so that the
protocol and the checks run end to end without a GPU. When the launcher goes away (end of file on
the socket) the holder exits: no orphan keeps GPU memory.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time

GIB = 2**30


def pattern(i: int) -> int:
    return i % 251 + 1


class TorchBlock:
    """The held bytes on the GPU; the backup in pinned host memory, one pinned tensor a GiB:
    torch's pinned allocator rounds each allocation up to a power of two (40 GiB would pin 64),
    and 1 GiB pieces copy at full speed."""

    def __init__(self, torch, nbytes: int):
        self.torch, self.n = torch, nbytes
        self.dev = None
        self.pinned: list = []

    def pieces(self):
        return [(start, min(start + GIB, self.n)) for start in range(0, self.n, GIB)]

    def hold(self) -> None:
        t = self.torch
        self.dev = t.empty(self.n, dtype=t.uint8, device="cuda")
        for i, (start, end) in enumerate(self.pieces()):
            self.dev[start:end].fill_(pattern(i))
        t.cuda.synchronize()

    def pin(self) -> None:
        if not self.pinned:
            t = self.torch
            self.pinned = [t.empty(e - s, dtype=t.uint8, pin_memory=True) for s, e in self.pieces()]

    def to_host(self) -> None:
        for (start, end), host in zip(self.pieces(), self.pinned):
            host.copy_(self.dev[start:end], non_blocking=True)
        self.torch.cuda.synchronize()

    def free(self) -> None:
        self.dev = None
        self.torch.cuda.empty_cache()  # back to the driver, so that NVML shows it free
        self.torch.cuda.synchronize()

    def alloc(self) -> None:
        self.dev = self.torch.empty(self.n, dtype=self.torch.uint8, device="cuda")

    def to_device(self) -> None:
        for (start, end), host in zip(self.pieces(), self.pinned):
            self.dev[start:end].copy_(host, non_blocking=True)
        self.torch.cuda.synchronize()

    def bad_gib(self) -> list[int]:
        bad = []
        for i, start in enumerate(range(0, self.n, GIB)):
            chunk = self.dev[start : start + GIB]
            v = pattern(i)
            if int(chunk.min()) != v or int(chunk.max()) != v:
                bad.append(i)
        return bad


class HostBlock:
    """FAKE_SGLANG_CPU_HOLD=1: the same steps on bytearrays (the CPU dry run). Where
    FAKE_NVML_DIR is set (warm_check --fake-nvml), the "device" bytes held are written to
    FAKE_NVML_DIR/<pid> for tools/gpucheck/fake_nvml's pynvml to add up."""

    def __init__(self, nbytes: int):
        self.n = nbytes
        self.dev: bytearray | None = None
        self.pinned: bytearray | None = None
        where = os.environ.get("FAKE_NVML_DIR")
        self.nvml = os.path.join(where, str(os.getpid())) if where else None

    def report(self) -> None:
        if self.nvml:
            with open(self.nvml, "w") as f:
                f.write(str(len(self.dev) if self.dev is not None else 0))

    def hold(self) -> None:
        self.dev = bytearray(self.n)
        self.report()
        for i, start in enumerate(range(0, self.n, GIB)):
            end = min(start + GIB, self.n)
            self.dev[start:end] = bytes([pattern(i)]) * (end - start)

    def pin(self) -> None:
        if self.pinned is None:
            self.pinned = bytearray(self.n)

    def to_host(self) -> None:
        self.pinned[:] = self.dev

    def free(self) -> None:
        self.dev = None
        self.report()

    def alloc(self) -> None:
        self.dev = bytearray(self.n)  # zeros: "uninitialised" for verify's purpose
        self.report()

    def to_device(self) -> None:
        self.dev[:] = self.pinned

    def bad_gib(self) -> list[int]:
        bad = []
        for i, start in enumerate(range(0, self.n, GIB)):
            end = min(start + GIB, self.n)
            if self.dev.count(pattern(i), start, end) != end - start:
                bad.append(i)
        return bad


def tms_exit(action: str, state: str) -> None:
    """torch-memory-saver's answer to an unpaired pause or resume: one line, then exit(1)."""
    print(
        f"[torch_memory_saver.cpp] Cannot {action} allocation that is not {state}. "
        f"tag=weights ptr=0 file=csrc/core.cpp func={action} (fake_sglang's GPU holder)",
        file=sys.stderr,
        flush=True,
    )
    os._exit(1)


def make_block(gib: float):
    """The block to hold and the line that says where, or (None, why) when nothing is held."""
    where = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    nbytes = int(gib * GIB)
    try:
        import torch

        ok = torch.cuda.is_available()
    except ImportError:
        torch, ok = None, False
    if ok:
        return TorchBlock(torch, nbytes), f"on CUDA_VISIBLE_DEVICES={where}"
    if os.environ.get("FAKE_SGLANG_CPU_HOLD") == "1":
        return HostBlock(nbytes), "in host memory (FAKE_SGLANG_CPU_HOLD=1, no torch/CUDA here)"
    return None, f"no torch/CUDA here, holding nothing (CUDA_VISIBLE_DEVICES={where})"


class Holder:
    def __init__(self, block, gib: float):
        self.block, self.gib = block, gib
        self.state: dict = {
            "pid": os.getpid(),
            "bytes": block.n if block else 0,
            "device": type(block).__name__ if block else "none",
            "held": False,
            "released": False,
            "pinned": False,
            "cycles": 0,
        }

    def timed(self, key: str, fn) -> float:
        t0 = time.perf_counter()
        fn()
        s = time.perf_counter() - t0
        self.state[key] = round(s, 4)
        if key.endswith("_copy_s") and s > 0 and self.block:
            self.state[key.replace("_s", "_gbps")] = round(self.block.n / s / 1e9, 2)
        return s

    def hold(self) -> None:
        if self.block:
            self.timed("hold_s", self.block.hold)
        self.state["held"] = True

    def release(self, backup: bool) -> None:
        if self.state["released"]:
            tms_exit("pause", "active")
        if not self.block:
            self.state["released"] = True
            return
        t0 = time.perf_counter()
        if backup:
            if not self.state["pinned"]:
                self.timed("pin_s", self.block.pin)
                self.state["pinned"] = True
            self.timed("release_copy_s", self.block.to_host)
        self.timed("release_free_s", self.block.free)
        self.state["release_s"] = round(time.perf_counter() - t0, 4)
        self.state["released"] = True
        self.state["backup"] = backup

    def resume(self, backup: bool) -> None:
        if not self.state["released"]:
            tms_exit("resume", "paused")
        if not self.block:
            self.state["released"] = False
            return
        t0 = time.perf_counter()
        self.timed("resume_alloc_s", self.block.alloc)
        if backup and self.state["pinned"]:
            self.timed("resume_copy_s", self.block.to_device)
        self.state["resume_s"] = round(time.perf_counter() - t0, 4)
        self.state["released"] = False
        self.state["cycles"] += 1

    def verify(self) -> None:
        if self.state["released"]:
            self.state["verify"] = "released: nothing on the device to check"
            return
        bad = self.block.bad_gib() if self.block else []
        self.state["verify"] = "ok" if not bad else f"{len(bad)} GiB not as written: {bad[:8]}"


def main() -> int:
    gib = float(os.environ.get("GPU_HOLD_GIB", "8"))
    block, where = make_block(gib)
    fd = os.environ.get("FAKE_SGLANG_CTL_FD")
    ctl = socket.socket(fileno=int(fd)) if fd else None
    wire = ctl.makefile("rwb") if ctl else None

    def send(msg: dict) -> None:
        if wire:
            wire.write(json.dumps(msg).encode() + b"\n")
            wire.flush()

    holder = Holder(block, gib)
    try:
        holder.hold()
    except Exception as e:  # noqa: BLE001 - said to the launcher, which ends the server
        print(f"gpu holder: could not hold {gib} GiB {where}: {e}", flush=True)
        send({"event": "failed", "error": f"{type(e).__name__}: {e}", **holder.state})
        return 1
    if block is None:
        print(f"gpu holder: {where}", flush=True)
    else:
        print(f"gpu holder: {block.n / GIB:.1f} GiB held by pid {os.getpid()} {where}", flush=True)
    send({"event": "held", **holder.state})
    if wire is None:
        while True:  # no launcher to obey: hold until killed, as before
            time.sleep(3600)
    for line in wire:
        try:
            cmd = json.loads(line)
            op = cmd.get("op")
            if op == "release":
                holder.release(bool(cmd.get("backup")))
            elif op == "resume":
                holder.resume(bool(cmd.get("backup")))
            elif op == "verify":
                holder.verify()
            elif op != "state":
                raise ValueError(f"unknown op {op!r}")
            send({"reply": op, **holder.state})
        except Exception as e:  # noqa: BLE001 - a failed step is answered, the holder lives on
            send({"reply": "error", "error": f"{type(e).__name__}: {e}", **holder.state})
    return 0  # the launcher went away


if __name__ == "__main__":
    sys.exit(main())
