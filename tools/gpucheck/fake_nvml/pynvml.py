"""A stand-in `pynvml` for warm_check's CPU dry run (`--fake-nvml`), not NVIDIA's: one 80 GB GPU
whose used memory is 0.5 GiB plus what each fake holder says it holds on its "device" (the
holders write their byte count to FAKE_NVML_DIR/<pid> as they hold, free and allocate). It lets
the dry run exercise warm_check's NVML waits, sampler and checks without a GPU."""

import os
from pathlib import Path
from types import SimpleNamespace

GIB = 2**30
TOTAL = 80 * 10**9


class NVMLError(Exception):
    pass


def _dir() -> Path:
    return Path(os.environ["FAKE_NVML_DIR"])


def _alive(pid: int) -> bool:
    try:  # a zombie (killed, not yet reaped) holds no memory either
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _held() -> dict[int, int]:
    out = {}
    for f in _dir().iterdir():
        try:
            pid, n = int(f.name), int(f.read_text() or 0)
        except (ValueError, OSError):
            continue
        if _alive(pid):  # a killed holder's memory is free again
            out[pid] = n
    return out


def nvmlInit():
    if not os.environ.get("FAKE_NVML_DIR"):
        raise NVMLError("FAKE_NVML_DIR is not set")


def nvmlDeviceGetCount():
    return 1


def nvmlDeviceGetHandleByIndex(i):
    return i


def nvmlDeviceGetName(h):
    return "Fake NVML GPU (CPU dry run)"


def nvmlSystemGetDriverVersion():
    return "fake"


def nvmlDeviceGetCurrPcieLinkGeneration(h):
    raise NVMLError("not on the fake")


nvmlDeviceGetCurrPcieLinkWidth = nvmlDeviceGetCurrPcieLinkGeneration


def nvmlDeviceGetMemoryInfo(h):
    used = GIB // 2 + sum(_held().values())
    return SimpleNamespace(total=TOTAL, used=used, free=TOTAL - used)


def nvmlDeviceGetComputeRunningProcesses(h):
    return [SimpleNamespace(pid=p, usedGpuMemory=n) for p, n in _held().items()]
