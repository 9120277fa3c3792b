"""agent/gpu/'s release check on a real GPU without the agent (for hosts without sgltui's
dependencies): a child holds GPU memory with torch; release_state() is read while it holds, by
pid and by used memory against a baseline taken before it started, then after it is killed until
both methods say released. Prints what each method saw and how long release took."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from sgltui.agent import gpu  # noqa: E402

HOLD = (
    "import torch, time; x = torch.empty(int(8 * 2**30), dtype=torch.uint8, device='cuda');"
    "x.fill_(1); torch.cuda.synchronize(); print('held', flush=True); time.sleep(600)"
)
baseline = gpu.used_bytes(None)
print("baseline", baseline)
child = subprocess.Popen([sys.executable, "-c", HOLD], stdout=subprocess.PIPE, text=True)
assert child.stdout is not None and child.stdout.readline().strip() == "held"
pids = {child.pid}
for method in ("pid", "used-memory"):
    os.environ[gpu.RELEASE_METHOD_ENV] = method
    print("holding, forced", method, gpu.release_state(pids, baseline, None, False))
os.environ.pop(gpu.RELEASE_METHOD_ENV)
print("holding, auto", gpu.release_state(pids, baseline, None, False))
t0 = time.monotonic()
child.send_signal(signal.SIGKILL)
child.wait()
seen = {}
while time.monotonic() - t0 < 30 and len(seen) < 2:
    for method in ("pid", "used-memory"):
        os.environ[gpu.RELEASE_METHOD_ENV] = method
        r = gpu.release_state(pids, baseline, None, False)
        if r.held_bytes == 0 and method not in seen:
            seen[method] = round(time.monotonic() - t0, 3)
    time.sleep(0.05)
print("released after kill (s):", seen, "used now", gpu.used_bytes(None))
